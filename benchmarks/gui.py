"""GUI speed: redraw every panel for a 60-node tree cycle; open a 10,000-cycle recording; jump to a random cycle.

Targets (issue 5): redraw < 30 ms, open < 1 s, jump < 50 ms. Prints medians.

    QT_QPA_PLATFORM=offscreen python benchmarks/gui.py [--cycles 10000] [--repeats 5]

The recording is 24 real Token Recycling cycles of the default model (61-node trees, budget 60)
repeated with new indices up to --cycles: replay does not care how a cycle was made.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:7.1f} ms (min {min(samples) * 1000:.1f}, n={len(samples)})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=10000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--jumps", type=int, default=50)
    args = ap.parse_args()

    from specviz_core.models import load_model
    from specviz_core.recording.store import Recording
    from specviz_core.session.factory import SessionRequest, prepare

    tmp = Path(tempfile.mkdtemp(prefix="specviz-bench-gui-"))
    os.environ["SPECVIZ_CONFIG"] = str(tmp / "gui.ini")
    target = load_model(device="cpu")
    prompt = "Write a Python function that returns the n-th Fibonacci number, with a docstring and tests."
    prepared = prepare(SessionRequest(method="tr", prompt=prompt, max_new_tokens=400, params={"budget": 60}), target)
    engine = prepared.engine
    engine.prefill()
    real = [engine.step() for _ in range(24)]
    db = tmp / "long.db"
    t0 = time.perf_counter()
    with Recording(db, create=True) as rec:
        writer = rec.new_session(prepared.info)
        for i in range(args.cycles):
            writer.append(real[i % len(real)].replace(index=i))
        writer.finish("complete", "benchmark")
    print(f"wrote {args.cycles} cycles in {time.perf_counter() - t0:.1f} s ({db.stat().st_size / 1e6:.1f} MB)")

    from PySide6.QtWidgets import QApplication

    from app.gui import make_app
    from app.main_window import MainWindow

    app = make_app()
    window = MainWindow(tmp / "sessions.db", restore_layout=False)
    window.resize(1500, 940)
    window.show()
    app.processEvents()

    opens = []
    for _ in range(args.repeats):
        window.model.close()
        app.processEvents()
        t0 = time.perf_counter()
        window.open_session(str(db), prepared.info.id)
        window.repaint()  # paint synchronously: the user sees it
        app.processEvents()
        opens.append(time.perf_counter() - t0)

    most = max(r.n_verified for r in real)
    big = [i for i, r in enumerate(real) if r.n_verified == most]
    redraws = []
    for k in range(args.repeats * 8):
        i = big[k % len(big)] + len(real) * (k + 1)
        t0 = time.perf_counter()
        window.model.set_cycle(i)
        window.repaint()
        app.processEvents()
        redraws.append(time.perf_counter() - t0)

    rng = random.Random(0)
    jumps = []
    for _ in range(args.jumps):
        i = rng.randrange(args.cycles)
        t0 = time.perf_counter()
        window.model.set_cycle(i)
        window.repaint()
        app.processEvents()
        jumps.append(time.perf_counter() - t0)

    n_nodes = real[big[0]].n_verified
    print(f"machine: {os.cpu_count()} CPUs, Qt platform {QApplication.platformName()}, window 1500x940")
    print(f"redraw all panels, {n_nodes}-node tree cycle : {median_ms(redraws)}   target < 30 ms")
    print(f"open a {args.cycles}-cycle recording       : {median_ms(opens)}   target < 1000 ms")
    print(f"jump to a random cycle (read + draw)   : {median_ms(jumps)}   target < 50 ms")
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
