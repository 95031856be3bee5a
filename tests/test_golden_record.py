"""``specviz record`` output is byte-identical to a golden export recorded before a refactor.

Every method, greedy and sampled, on the default model (a random model accepts almost nothing, so it
would pin little but AR cycles), recorded through the command line and exported as JSON lines. Fields that depend on the clock, the machine or
the temporary folder (timings, ids, paths, tokens/s) are dropped; everything else must match byte for
byte. After a deliberate change of behaviour, regenerate with ``SPECVIZ_UPDATE_GOLDEN=1 pytest
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


def normalize(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        d = json.loads(line)
        if d["type"] == "session":
            d = {k: v for k, v in d.items() if k not in VOLATILE_SESSION}
        else:
            d.pop("timings_ms", None)
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
        assert g == w, f"line {i} ({'session' if i == 0 else f'cycle {i - 1}'}) differs from the golden export"
