"""Write tests/slow.txt, the tests left out of the quick tier, from a whole run's timings.

    python -m pytest --durations=0 > run.log; python tests/slow_tests.py run.log

A test (all the cases of a parametrized one together) is slow when its setup, call and teardown took more than
``--limit`` seconds in all; the default model's tests are out of the quick tier anyway (their marker). Not collected
by pytest."""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
LINE = re.compile(r"([0-9.]+)s (setup|call|teardown)\s+(\S+)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path, help="the output of python -m pytest --durations=0")
    ap.add_argument("--limit", type=float, default=1.0, help="seconds a test may take in the quick tier (default 1)")
    args = ap.parse_args()
    took: dict[str, float] = defaultdict(float)
    for line in args.log.read_text(encoding="utf-8", errors="replace").splitlines():
        m = LINE.match(line.strip())
        if m:
            took[m.group(3).split("[")[0]] += float(m.group(1))
    slow = sorted(n for n, t in took.items() if t > args.limit)
    quick = sum(t for n, t in took.items() if n not in slow)
    (HERE / "slow.txt").write_text(
        f"# Left out of the quick tier: more than {args.limit:g} s each (setup, call and teardown) in a whole run; "
        f"the rest took {quick:.0f} s of {sum(took.values()):.0f} s. Written by tests/slow_tests.py.\n"
        + "".join(f"{n}\n" for n in slow), encoding="utf-8")
    print(f"{len(slow)} slow tests listed; the quick tier's tests took {quick:.0f} s of {sum(took.values()):.0f} s")


if __name__ == "__main__":
    main()
