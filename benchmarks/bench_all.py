"""The published benchmark, in one command: run ``specviz bench --suite all``, draw the chart, refresh the docs.

    python benchmarks/bench_all.py                 # measure (about 13 minutes on a 2-core CPU), then refresh
    python benchmarks/bench_all.py --report-only   # refresh docs/benchmarks.md and the chart from the stored results

Writes ``docs/bench/results.json`` and ``docs/bench/speedup.png`` and rewrites the tables in
``docs/benchmarks.md`` (between its bench markers; the text around them is kept). Any other
arguments go to ``specviz bench`` (e.g. ``--repeats 5``, ``--device cuda``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "bench" / "results.json"
CHART = ROOT / "docs" / "bench" / "speedup.png"
DOC = ROOT / "docs" / "benchmarks.md"


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from specviz_core.cli.commands import main as specviz

    report_only = "--report-only" in argv
    extra = [a for a in argv if a != "--report-only"]
    if not report_only:
        code = specviz(["bench", "--suite", "all", "--out", str(RESULTS), *extra])
        if code:
            return code
    from chart import draw

    draw(json.loads(RESULTS.read_text(encoding="utf-8")), CHART)
    return specviz(["bench", "--report", str(RESULTS), "--markdown", str(DOC),
                    "--chart", CHART.relative_to(DOC.parent).as_posix()])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
