"""The README's commands run as written, and exports keep the invariants docs/record-format.md promises."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from specviz_core.cli.commands import main

ROOT = Path(__file__).resolve().parents[1]


def readme_block(after_heading: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split(after_heading, 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def check_invariants(lines: list[dict]) -> None:
    session, cycles = lines[0], lines[1:]
    assert session["type"] == "session" and all(c["type"] == "cycle" for c in cycles)
    out = []
    for k, c in enumerate(cycles):
        nodes = {n["id"]: n for n in c["nodes"]}
        order = c["verify_order"]
        assert order[0] == 0 and c["index"] == k
        row = {nid: i for i, nid in enumerate(order)}
        for i, nid in enumerate(order):
            assert nodes[nid]["parent"] == -1 or row[nodes[nid]["parent"]] < i
            anc, a = set(), nid
            while a != -1:
                anc.add(row[a])
                a = nodes[a]["parent"]
            assert c["mask"][i] == "".join("1" if j in anc else "0" for j in range(len(order)))
            assert c["positions"][i] == c["cache_len"] + nodes[nid]["depth"]
        if session["temperature"] == 0:
            walk, cur = [], 0
            for nid in c["accepted_path"]:
                assert nodes[nid]["parent"] == cur and nodes[nid]["token"] == nodes[cur]["target_token"]
                walk.append(nodes[nid]["token"])
                cur = nid
            assert c["bonus_token"] == nodes[cur]["target_token"]
            full = walk + [c["bonus_token"]]
            assert full[: len(c["committed_ids"])] == c["committed_ids"]
        assert c["kv_keep"] == [0] + [row[n] for n in c["accepted_path"]]
        if k + 1 < len(cycles):
            assert cycles[k + 1]["cache_len"] == c["cache_len"] + len(c["kv_keep"])
        out += c["committed_ids"]
    assert out == session["output_ids"]
    assert session["n_forward"] == len(cycles)


@pytest.mark.default_model
def test_readme_recording_commands(smol, tmp_path):
    outputs = []
    for line in readme_block("## Recording and replaying sessions"):
        argv = shlex.split(line.split(">")[0])
        assert argv[0] == "specviz"
        p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        outputs.append(p.stdout)
    assert "tokens/forward" in outputs[0] and "pld" in outputs[1]
    check_invariants([json.loads(x) for x in outputs[2].splitlines()])


@pytest.mark.default_model
@pytest.mark.parametrize("method,extra", [("ar", []), ("pld", []), ("tr", []),
                                          ("draft_tree", ["--draft-model", "default"]),
                                          ("goose", []), ("isotropic", []), ("talon", []),
                                          ("talon", ["--param", "drafter=model", "--draft-model", "default"]),
                                          ("eagle_static", []), ("stand", []), ("goose", ["--param", "budget=auto"])])
def test_every_method_exports_valid_sessions_default_model(smol, tmp_path, capsys, method, extra):
    db = str(tmp_path / "m.db")
    prompt = "Write the numbers one to ten as words, then write them again in the same way."
    for temp in ("0", "0.7"):
        assert main(["record", "--method", method, *extra, "--prompt", prompt, "--max-new-tokens", "24",
                     "--temperature", temp, "--db", db, "--quiet"]) == 0
        capsys.readouterr()
        assert main(["export", "--db", db]) == 0
        lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        assert lines[0]["method"] == method and lines[0]["status"] == "complete"
        check_invariants(lines)


def test_every_relative_link_in_the_docs_exists():
    """A link or image in the README or docs/ that points into the repository names a tracked file."""
    tracked = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split())
    if not tracked:
        pytest.skip("not a git checkout")
    broken = []
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", md.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path = (md.parent / target).resolve().relative_to(ROOT).as_posix()
            if path not in tracked and not any(t.startswith(path + "/") for t in tracked):
                broken.append(f"{md.relative_to(ROOT)} -> {target}")
    assert not broken, broken
