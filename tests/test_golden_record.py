"""``specviz record`` output matches a golden export recorded before a refactor.

Every method, greedy and sampled, on the default model (a random model accepts almost nothing, so it
would pin little but AR cycles), recorded through the command line and exported as JSON lines. Fields that depend on the clock, the machine or
the temporary folder (timings, ids, paths, tokens/s) are dropped; everything else must match: tokens, trees,
masks, paths and every other integer, string and flag exactly, and floating-point numbers (probabilities,
scores) to a relative 1e-3, because a new transformers release may reorder a kernel's sums (5.24 moved
probabilities in their seventh digit, and the candidate lists store four digits, so their last one flips) while
every decision stays the same. After a deliberate change of behaviour, regenerate with ``SPECVIZ_UPDATE_GOLDEN=1 pytest
tests/test_golden_record.py`` and say why in the commit.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
import torch

from specviz_core.cli.commands import main

GOLDEN = Path(__file__).parent / "golden"
PROMPT = "Rename x to total:\n\ndef f(x):\n    x = x + 1\n    x = x * 2\n    return x\n"
CASES = [
    ("ar", []), ("pld", []), ("tr", []), ("draft_tree", ["--draft-model", "default"]), ("goose", []),
    ("isotropic", []), ("talon", []), ("eagle_static", []), ("stand", []),
]
#: Session fields that depend on the clock, the host or the temporary folder.
VOLATILE_SESSION = {"id", "created", "decode_ms", "prefill_ms", "tokens_per_s", "group_id"}
#: Session metrics computed from the clock: TALON's c (a draft step's time over a forward's) and R from it.
VOLATILE_METRICS = {"step_cost", "r"}


def normalize(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        d = json.loads(line)
        if d["type"] == "session":
            d = {k: v for k, v in d.items() if k not in VOLATILE_SESSION}
            if isinstance(d.get("metrics"), dict):
                d["metrics"] = {k: v for k, v in d["metrics"].items() if k not in VOLATILE_METRICS}
        else:
            d.pop("timings_ms", None)
            d.pop("stop_cause", None)  # derived from the recorded fields by the analysis (its own tests check it)
            if isinstance(d.get("state"), dict):
                d["state"].pop("draft_step_ms", None)
            d.pop("session", None)
        out.append(json.dumps(d, sort_keys=True, allow_nan=False))
    return out


@pytest.mark.parametrize("temperature", [0.0, 0.7])
@pytest.mark.parametrize("method,extra", CASES, ids=[c[0] for c in CASES])
@pytest.mark.default_model
def test_record_matches_golden(method, extra, temperature, tmp_path, capsys):
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the same kernels, so the same bits, on any core count
    try:
        db = tmp_path / "g.db"
        rc = main(["record", "--method", method, "--prompt", PROMPT, "--max-new-tokens", "32", "--temperature", str(temperature), "--seed", "3",
                   "--device", "cpu", "--db", str(db), "--quiet", *extra])
        assert rc == 0
        out = tmp_path / "g.jsonl"
        assert main(["export", "--db", str(db), "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(n)
    capsys.readouterr()
    got = normalize(out.read_text(encoding="utf-8").splitlines())
    path = GOLDEN / f"{method}-T{temperature}.jsonl.gz"
    if os.environ.get("SPECVIZ_UPDATE_GOLDEN"):
        with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as fh:
            fh.write("\n".join(got) + "\n")
    want = gzip.open(path, "rt", encoding="utf-8").read().splitlines()
    assert len(got) == len(want), f"{len(got) - 1} cycles recorded, {len(want) - 1} in the golden export"
    for i, (g, w) in enumerate(zip(got, want)):
        where = "session" if i == 0 else f"cycle {i - 1}"
        diff = first_difference(json.loads(g), json.loads(w))
        assert diff is None, f"line {i} ({where}) differs from the golden export at {diff}"


def first_difference(got, want, path: str = "") -> str | None:
    """Where ``got`` and ``want`` differ (floats to a relative 1e-3), or None."""
    if isinstance(want, float) or isinstance(got, float):
        ok = (isinstance(got, (int, float)) and isinstance(want, (int, float)) and not isinstance(got, bool)
              and abs(got - want) <= 1e-3 * max(abs(got), abs(want)) + 2e-6)
        return None if ok else f"{path or '.'}: {got!r} != {want!r}"
    if type(got) is not type(want):
        return f"{path or '.'}: {got!r} != {want!r}"
    if isinstance(want, dict):
        if got.keys() != want.keys():
            return f"{path or '.'}: keys {sorted(got.keys() ^ want.keys())} differ"
        return next((d for k in want if (d := first_difference(got[k], want[k], f"{path}.{k}")) is not None), None)
    if isinstance(want, list):
        if len(got) != len(want):
            return f"{path or '.'}: {len(got)} items != {len(want)}"
        return next((d for j, (a, b) in enumerate(zip(got, want))
                     if (d := first_difference(a, b, f"{path}[{j}]")) is not None), None)
    return None if got == want else f"{path or '.'}: {got!r} != {want!r}"


def test_first_difference_is_exact_on_tokens_and_close_on_floats():
    assert first_difference({"t": [1, 2], "p": 0.1421572, "q": 0.001533}, {"t": [1, 2], "p": 0.1421580, "q": 0.001534}) is None
    assert first_difference({"t": [1, 3]}, {"t": [1, 2]}) == ".t[1]: 3 != 2"
    assert first_difference({"p": 0.15}, {"p": 0.14}) == ".p: 0.15 != 0.14"
    assert first_difference({"a": True}, {"a": 1}) is not None
