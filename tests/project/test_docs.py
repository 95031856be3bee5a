"""The README's commands run as written, and exports keep the invariants docs/record-format.md promises."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from specviz_core.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]


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
    # One forward a cycle, but none for a cycle 0 that took its token from the prefill's last row: that cycle
    # verified its root alone, and no other cycle says so.
    from_prefill = [c["index"] for c in cycles if c["state"].get("from_prefill")]
    assert from_prefill in ([], [0]) and all(len(cycles[i]["verify_order"]) == 1 for i in from_prefill)
    assert session["n_forward"] == len(cycles) - len(from_prefill)


@pytest.mark.default_model
def test_readme_recording_commands(smol, tmp_path):
    outputs = []
    for line in readme_block("## Recording and replaying sessions"):
        argv = shlex.split(line.split(">")[0])
        assert argv[0] == "specviz"
        p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        outputs.append(p.stdout)
    assert "tokens/forward" in outputs[0] and "pld" in outputs[1] and "mean acceptance length" in outputs[1]
    assert "Identical: all" in outputs[2] and "equal plain greedy decoding" in outputs[2]
    check_invariants([json.loads(x) for x in outputs[3].splitlines()])


# AR and prompt lookup (no budget) are checked by tests/recording/test_golden_record.py, whose exports of every method
# at the paper's budget, greedy and sampled, pass check_invariants too; here every tree method at its default budget
# (auto, the budget=auto of the command line: "--param budget=auto" asks for the same session).
@pytest.mark.default_model
@pytest.mark.parametrize("method,extra", [("tr", []), ("draft_tree", ["--draft-model", "default"]),
                                          ("goose", []), ("isotropic", []), ("talon", []),
                                          ("talon", ["--param", "drafter=model", "--draft-model", "default"]),
                                          ("eagle_static", []), ("stand", [])])
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


def documented_commands(prefix: str) -> list[str]:
    """Every command starting with ``prefix`` quoted in the README and docs/: in ``sh`` blocks (with
    backslash continuations joined) and in inline code, outside HTML comments."""
    found = []
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = re.sub(r"<!--.*?-->", "", md.read_text(), flags=re.S)
        for block in re.findall(r"```sh\n(.*?)```", text, re.S):
            found += [line for line in block.replace("\\\n", " ").splitlines() if line.startswith(prefix)]
        found += [" ".join(span.split()) for span in re.findall(rf"(?<!`)`({re.escape(prefix)}[^`]*)`", text)]
    return found


def test_every_documented_record_command_parses():
    """The documented ``specviz record`` commands name real options, methods and dtypes."""
    import torch

    from specviz_core.cli.commands import build_parser
    from specviz_core.drafters import METHODS
    from specviz_core.runtime.models import pick_dtype

    commands = [c for c in documented_commands("specviz record") if "--db" in c]  # whole commands, not fragments
    assert any("--dtype" in c for c in commands)
    for command in commands:
        args = build_parser().parse_args(shlex.split(command)[1:])
        method = args.method
        if args.fork is not None and method is None:  # a fork runs its parent's method
            continue
        if args.generate_kwargs is not None:  # a pasted generate call names its method by its arguments
            from specviz_core.session.generate_kwargs import from_generate_kwargs, parse_generate_kwargs

            method = from_generate_kwargs(parse_generate_kwargs(args.generate_kwargs)).method
        assert method in METHODS
        if args.dtype:
            pick_dtype(torch.device("cpu"), args.dtype)


def test_every_documented_bench_command_parses():
    """The documented ``specviz bench`` commands name real options, methods (with their parameters) and suites."""
    from specviz_app.cli import add_commands
    from specviz_core.bench.specs import parse_method_specs
    from specviz_core.bench.suites import load_suites
    from specviz_core.cli.commands import build_parser

    commands = [c for c in documented_commands("specviz bench") if "--help" not in c]
    assert any("--gui" in c for c in commands) and any("--chart-png" in c for c in commands)
    parser = build_parser(add_commands)
    for command in commands:
        args = parser.parse_args(shlex.split(command)[1:])
        if args.methods:
            parse_method_specs(args.methods)
        if args.suite:
            load_suites(args.suite)


def test_bench_report_command_redraws_the_published_tables_and_chart(tmp_path, monkeypatch, capsys, qapp):
    """The documented refresh from the stored results reproduces docs/benchmarks.md's tables as they are."""
    from PySide6.QtGui import QImage

    from specviz_app.cli import main as app_main

    (command,) = [c for c in documented_commands("specviz bench --report") if "--chart-png" in c]
    docs = tmp_path / "docs"
    (docs / "bench").mkdir(parents=True)
    (docs / "bench" / "results.json").write_bytes((ROOT / "docs" / "bench" / "results.json").read_bytes())
    (docs / "benchmarks.md").write_text((ROOT / "docs" / "benchmarks.md").read_text())
    monkeypatch.chdir(tmp_path)
    assert app_main(shlex.split(command)[1:]) == 0
    assert "chart: docs/bench/speedup.png" in capsys.readouterr().out
    assert (docs / "benchmarks.md").read_text() == (ROOT / "docs" / "benchmarks.md").read_text()
    drawn, published = QImage(str(docs / "bench" / "speedup.png")), QImage(str(ROOT / "docs" / "bench" / "speedup.png"))
    assert not drawn.isNull() and drawn.size() == published.size()


@pytest.mark.default_model
def test_gui_bench_command(smol, tmp_path):
    """``specviz bench --gui`` (docs/gui.md) prints its three medians; run small."""
    (command,) = documented_commands("specviz bench --gui")
    argv = shlex.split(command)[2:] + ["--cycles", "48", "--repeats", "1", "--jumps", "2", "--threads", "1"]
    p = subprocess.run([sys.executable, "-c", "import sys; from specviz_app.cli import main; sys.exit(main(sys.argv[1:]))",
                        "bench", *argv], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    for line in ("redraw all panels", "open a 48-cycle recording", "jump to a random cycle"):
        assert line in p.stdout and "target <" in p.stdout


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


@pytest.mark.parametrize("prefix", ["specviz train-head", "specviz reproduce"])
def test_every_documented_train_head_and_reproduce_command_parses(prefix):
    """The documented ``train-head`` and ``reproduce`` commands name real options and papers."""
    from specviz_core.cli.commands import build_parser

    commands = documented_commands(prefix)
    assert commands, f"no {prefix} command is documented"
    for command in commands:
        build_parser().parse_args(shlex.split(command.split("#")[0])[1:])


def test_the_record_format_lists_every_state_fact_as_its_type_says():
    """docs/record-format.md's table of a cycle's ``state`` is the one ``python -m specviz_core.cycle_state`` prints,
    run as documented."""
    import subprocess
    import sys

    doc = (ROOT / "docs" / "record-format.md").read_text(encoding="utf-8")
    generated = doc.split("<!-- state:begin -->", 1)[1].split("<!-- state:end -->", 1)[0]
    generated = re.sub(r"<!--.*?-->", "", generated, flags=re.S).strip()
    printed = subprocess.run([sys.executable, "-m", "specviz_core.cycle_state"], capture_output=True, text=True,
                             check=True, cwd=ROOT).stdout.strip()
    assert generated == printed
    assert printed.count("\n") > 40 and "`padded_to` |" in printed and "*Host-dependent.*" in printed
