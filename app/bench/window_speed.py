"""``specviz bench --gui``: how fast the window is. Redraw every panel for a ~60-node tree cycle and for a
~200-node TALON cycle, open a long recording, jump to a random cycle; prints medians against the targets
(redraw < 16 ms and < 30 ms, open < 1 s, jump < 50 ms).

A redraw is timed from the change of cycle until Qt has painted what changed: every panel that shows the
cycle, not the toolbars and buttons that stay as they were. The whole window forced to repaint is printed
too, for comparison with figures taken that way before.

The long recording is 24 real Token Recycling cycles (61-node trees, budget 60) repeated with new
indices up to ``cycles``: replay does not care how a cycle was made. The TALON session is 12 real
cycles (61 verified nodes and up to 20 gated ones per layer) repeated ten times.
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from specviz_core.records import CycleRecord, SessionInfo

PROMPT = "Write a Python function that returns the n-th Fibonacci number, with a docstring and tests."
REAL_CYCLES = 24
TALON_CYCLES, TALON_ROUNDS = 12, 10
TALON_PARAMS = {"budget": 60, "gated_shown": 20}


def _median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:7.1f} ms (min {min(samples) * 1000:.1f}, n={len(samples)})"


def _long_recording(db: Path, cycles: int, model: str | None, device: str | None, dtype: str | None
                    ) -> tuple[SessionInfo, list[CycleRecord], SessionInfo, list[CycleRecord]]:
    """Record ``cycles`` Token Recycling cycles to ``db`` (real ones, repeated) and a TALON session; returns
    each session and its real cycles."""
    from specviz_core.recording.store import Recording
    from specviz_core.runtime.models import load_model
    from specviz_core.session.spec import SessionRequest
    from specviz_core.session.session import Session

    target = load_model(model, device=device or "cpu", dtype=dtype)
    request = SessionRequest(method="tr", prompt=PROMPT, max_new_tokens=400, params={"budget": 60})
    prepared = Session(request.check(), target)
    real = [prepared.step().record for _ in range(REAL_CYCLES)]
    t0 = time.perf_counter()
    with Recording(db, create=True) as rec:
        writer = rec.new_session(prepared.info)
        for i in range(cycles):
            writer.append(real[i % len(real)].replace(index=i))
        writer.finish("complete", "benchmark")
    print(f"wrote {cycles} cycles in {time.perf_counter() - t0:.1f} s ({db.stat().st_size / 1e6:.1f} MB)")
    talon = Session(SessionRequest(method="talon", prompt=PROMPT, max_new_tokens=400, params=TALON_PARAMS).check(),
                    target)
    talon_real = [talon.step().record for _ in range(TALON_CYCLES)]
    with Recording(db) as rec:
        writer = rec.new_session(talon.info)
        for i in range(TALON_CYCLES * TALON_ROUNDS):
            writer.append(talon_real[i % TALON_CYCLES].replace(index=i))
        writer.finish("complete", "benchmark")
    return prepared.info, real, talon.info, talon_real


def run_gui_bench(cycles: int = 10000, repeats: int = 5, jumps: int = 50, model: str | None = None,
                  device: str | None = None, dtype: str | None = None) -> int:
    """Time the window on a ``cycles``-cycle recording: ``repeats`` opens, 8 x ``repeats`` redraws, ``jumps`` jumps."""
    tmp = Path(tempfile.mkdtemp(prefix="specviz-bench-gui-"))
    os.environ["SPECVIZ_CONFIG"] = str(tmp / "gui.ini")  # leave the user's window settings alone
    db = tmp / "long.db"
    info, real, talon_info, talon_real = _long_recording(db, cycles, model, device, dtype)

    from PySide6.QtWidgets import QApplication

    from specviz_app.gui import make_app
    from specviz_app.shell.window import MainWindow

    app = make_app()
    window = MainWindow(tmp / "sessions.db", restore_layout=False)
    window.resize(1500, 940)
    window.show()
    window.dock_layout.proportion_docks()  # the 1500 x 940 layout, whatever the (offscreen) screen's size
    app.processEvents()

    def timed(action: Callable[[], object], whole: bool = False) -> float:
        """Seconds from ``action`` until Qt has painted what it changed (the panels that show the cycle);
        ``whole``: the whole window repainted instead, toolbars and buttons included, as no user action does."""
        t0 = time.perf_counter()
        action()
        if whole:
            window.repaint()
        app.processEvents()  # delivers the panels' update requests: Qt paints them now
        return time.perf_counter() - t0

    opens = []
    for _ in range(repeats):
        window.model.close()
        app.processEvents()
        opens.append(timed(lambda: window.controller.open_session(str(db), info.id)))
    most = max(r.n_verified for r in real)
    big = [i for i, r in enumerate(real) if r.n_verified == most]
    rounds = cycles // len(real)  # a big cycle from a different round each time, so nothing is cached
    def big_cycle(k: int) -> Callable[[], object]:
        return lambda: window.model.set_cycle(big[k % len(big)] + len(real) * ((k + 1) % rounds))
    redraws = [timed(big_cycle(k)) for k in range(repeats * 8)]
    whole = [timed(big_cycle(k), whole=True) for k in range(repeats * 8)]
    rng = random.Random(0)
    jump_times = [timed(lambda: window.model.set_cycle(rng.randrange(cycles))) for _ in range(jumps)]

    window.controller.open_session(str(db), talon_info.id)
    app.processEvents()
    size = [len(r.nodes) for r in talon_real]
    big = sorted(range(TALON_CYCLES), key=lambda i: -size[i])[:3]  # the three largest trees, from other rounds
    def talon_cycle(k: int) -> Callable[[], object]:
        return lambda: window.model.set_cycle(big[k % 3] + TALON_CYCLES * ((k + 1) % TALON_ROUNDS))
    talon_redraws = [timed(talon_cycle(k)) for k in range(repeats * 8)]
    talon_whole = [timed(talon_cycle(k), whole=True) for k in range(repeats * 8)]
    shown = " / ".join(str(size[i]) for i in big)

    print(f"machine: {os.cpu_count()} CPUs, Qt platform {QApplication.platformName()}, window 1500x940")
    print(f"redraw all panels, {most}-node tree cycle : {_median_ms(redraws)}   target < 16 ms")
    print(f"redraw all panels, TALON {shown}-node cycles: {_median_ms(talon_redraws)}   target < 30 ms")
    print(f"  the same, whole window repainted: {most}-node {_median_ms(whole)}; TALON {_median_ms(talon_whole)}")
    print(f"open a {cycles}-cycle recording       : {_median_ms(opens)}   target < 1000 ms")
    print(f"jump to a random cycle (read + draw)   : {_median_ms(jump_times)}   target < 50 ms")
    window.close()
    return 0
