"""The app's options on ``specviz bench`` (they need Qt, so the core cannot have them): ``--chart-png``
draws the benchmark chart, ``--gui`` times the window instead of the methods."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from specviz_core.cli.bench import cmd_bench as core_cmd_bench
from specviz_core.cli.bench import set_threads
from specviz_core.errors import SpecVizError

#: ``--gui`` defaults (``--repeats`` is shared with the methods' benchmark).
GUI_CYCLES, GUI_REPEATS, GUI_JUMPS = 10000, 5, 50


def add_options(bench: argparse.ArgumentParser) -> None:
    g = bench.add_argument_group("chart and window (drawn with Qt)")
    g.add_argument("--chart-png", type=Path, default=None, metavar="FILE",
                   help="draw the speed-up and verify-cost chart into this PNG (with --markdown, linked above the tables)")
    g.add_argument("--gui", action="store_true",
                   help="time the window instead: redraw all panels, open a long recording, jump to a random cycle "
                   f"(--repeats: window opens, default {GUI_REPEATS})")
    g.add_argument("--cycles", type=int, default=GUI_CYCLES, help=f"with --gui: cycles in the recording (default {GUI_CYCLES})")
    g.add_argument("--jumps", type=int, default=GUI_JUMPS, help=f"with --gui: random jumps timed (default {GUI_JUMPS})")


def cmd_bench(args: argparse.Namespace) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    if args.gui:
        return _gui(args)
    if args.chart_png is not None:
        if args.chart_png.suffix.lower() != ".png":
            raise SpecVizError(f"--chart-png must end in .png, got {args.chart_png.name}")
        if args.markdown is not None and args.chart is None:
            args.chart = Path(os.path.relpath(args.chart_png, args.markdown.parent)).as_posix()
    code = core_cmd_bench(args)
    if code == 0 and args.chart_png is not None:
        from specviz_app.bench.chart import draw

        draw(json.loads((args.report or args.out).read_text(encoding="utf-8")), args.chart_png)
        print(f"chart: {args.chart_png}")
    return code


def _gui(args: argparse.Namespace) -> int:
    from specviz_app.bench.window_speed import REAL_CYCLES, run_gui_bench

    if any(x is not None for x in (args.out, args.report, args.markdown, args.chart_png)):
        raise SpecVizError("--gui times the window and writes no results: leave out --out, --report, --markdown, --chart-png")
    repeats = GUI_REPEATS if args.repeats is None else args.repeats
    if args.cycles < REAL_CYCLES or repeats < 1 or args.jumps < 1:
        raise SpecVizError(f"--gui needs --cycles >= {REAL_CYCLES}, --repeats >= 1 and --jumps >= 1")
    set_threads(args.threads)
    return run_gui_bench(args.cycles, repeats, args.jumps, args.model, args.device, args.dtype)
