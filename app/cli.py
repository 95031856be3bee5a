"""The ``specviz`` console command: the core's commands plus ``gui`` and ``screenshot`` (which need Qt)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import specviz_core.cli.commands as core_cli
from specviz_app.bench import options as bench_cli
from specviz_app.panels.registry import EXPORTED, panel_key
from specviz_core.cli.options import bounded_int, check_writable, finite_float, progress_bar, refuse_overwriting
from specviz_core.errors import SpecVizError
from specviz_core.viewer.comparison import load_comparison, stored_curve_of

#: What ``screenshot --panel`` renders: a panel that draws the cycle, or the whole window.
PANELS = (*EXPORTED, "window")
DEMO_HELP = "replay the bundled demo recording (a Goose session on the default model; loads no model)"


def add_commands(sub) -> None:
    bench_cli.add_options(sub.choices["bench"])  # --chart-png and --gui on the core's bench command
    g = sub.add_parser("gui", help="open the window (on a recording with --db, or the bundled demo with --demo)",
                       description="Open the SpecViz window. With --db, replay a session from that recording "
                       "(the latest, or --session); live sessions are recorded to the same file. With --demo, "
                       "replay a copy of the bundled demo recording (live sessions go to that copy, deleted "
                       "on exit).")
    src = g.add_mutually_exclusive_group()
    src.add_argument("--db", type=Path, default=None, help="recording to open (default: your sessions.db, not opened)")
    src.add_argument("--demo", action="store_true", help=DEMO_HELP)
    g.add_argument("--session", default=None, help="session id to replay (default: the latest)")
    g.add_argument("--threads", type=int, default=None, metavar="N",
                   help="CPU threads for live sessions' forwards (default: the cores other processes leave free)")

    s = sub.add_parser("screenshot", help="render one panel of a recorded cycle to a PNG or SVG, headless",
                       description="Render a recorded cycle the way the window shows it, without a screen.")
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--db", type=Path, help="the recording")
    src.add_argument("--demo", action="store_true", help=DEMO_HELP)
    s.add_argument("--session", default=None, help="session id (default: the latest)")
    s.add_argument("--cycle", type=int, default=0, help="cycle index (default 0; negative counts from the end)")
    s.add_argument("--panel", type=panel_key, choices=PANELS, default="window",
                   help="what to render (default: the whole window)")
    s.add_argument("--size", default="1500x940", help="window size WxH (default 1500x940)")
    s.add_argument("--out", type=Path, required=True, help="output file, .png or .svg")
    s.add_argument("--theme", choices=("system", "light", "dark"), default="system", help="colour theme (default: system)")
    s.add_argument("--presentation", action="store_true", help="in presentation mode (large fonts, fewer panels)")
    s.add_argument("--live", type=int, default=0, metavar="N",
                   help="instead of replaying, decode N cycles live in the window (recorded to --db) and render "
                   "the last; --method, --prompt and --model choose the session")
    s.add_argument("--method", default="goose", help="method for --live (default goose)")
    s.add_argument("--prompt", default=None, help="prompt for --live (default: the window's demo prompt)")
    s.add_argument("--model", default=None, help="model folder for --live (default: the embedded model)")
    add_race_parser(sub)
    c = sub.choices["compare"]  # the core's compare, plus a picture of the Compare view
    c.add_argument("--out", type=Path, default=None, help="write the Compare view as a PNG here")
    c.add_argument("--size", default="1100x700", help="PNG size WxH (default 1100x700)")
    c.add_argument("--presentation", action="store_true", help="the PNG in presentation mode (large fonts)")
    c.add_argument("--theme", choices=("system", "light", "dark"), default="light", help="colour theme (default light)")


def cmd_compare(args: argparse.Namespace) -> int:
    if args.out is None:
        return core_cli.cmd_compare(args)
    size = parse_size(args.size, ((640, 400), (7680, 4320)))
    if args.out.suffix.lower() != ".png":
        raise SpecVizError(f"--out must end in .png, got {args.out.name}")
    check_writable(args.out)
    refuse_overwriting(args.out, [args.db])
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    comparison, vocab = load_comparison(args.db, args.sessions)
    from specviz_app.gui import make_app
    from specviz_app.windows.compare.view import render_png

    make_app(theme=args.theme)
    try:
        render_png(comparison, vocab, args.out, size, args.presentation)
    except OSError as e:
        raise SpecVizError(str(e)) from None
    print(args.out)
    return 0


def add_race_parser(sub) -> None:
    r = sub.add_parser("race", help="play sessions of one prompt side by side at their recorded pace (a demo)",
                       description="Replay two to four sessions of the same prompt side by side, each at its recorded "
                       "wall-clock pace (the prefill included): text appears as each cycle commits, accepted draft "
                       "tokens tinted by their source, live tokens/s and speed-up against the first session, a "
                       "finish line. Opens a window (Space pause, R restart, +/- slow motion, F11 full screen, "
                       "Ctrl+E GIF), or with --out writes an animated GIF for slides.")
    r.add_argument("--db", type=Path, required=True, help="the recording")
    r.add_argument("sessions", nargs="*", metavar="SESSION",
                   help="two to four session ids, the baseline (AR) first (default: the latest complete session's "
                        "prompt: its AR session first, then the latest others of that prompt and model)")
    r.add_argument("--out", type=Path, default=None, help="write an animated GIF here instead of opening a window")
    r.add_argument("--fps", type=bounded_int(1, 30), default=10, help="GIF frames per second (default 10)")
    r.add_argument("--slowdown", type=finite_float(1 / 16, 64), default=1.0,
                   help="play this many times slower than recorded (default 1: real time)")
    r.add_argument("--size", default="960x540", help="GIF size WxH (default 960x540)")
    r.add_argument("--theme", choices=("system", "light", "dark"), default="light", help="colour theme (default light)")


def cmd_race(args: argparse.Namespace) -> int:
    if not args.sessions:
        from specviz_core.viewer.comparison import race_sessions

        args.sessions = race_sessions(args.db)
    if not 2 <= len(args.sessions) <= 4:
        raise SpecVizError(f"a race has two to four sessions, got {len(args.sessions)}")
    size = parse_size(args.size, ((320, 180), (3840, 2160)))
    if args.out is not None:
        if args.out.suffix.lower() != ".gif":
            raise SpecVizError(f"--out must end in .gif, got {args.out.name}")
        check_writable(args.out)
        refuse_overwriting(args.out, [args.db])
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from specviz_core.analysis.race import make_race

    comparison, vocab = load_comparison(args.db, args.sessions)
    if not comparison.same_prompt():
        raise SpecVizError("the sessions decode different prompts: race sessions of one prompt")
    race = make_race(comparison.sessions, curve_of=stored_curve_of)
    from specviz_app.gui import make_app
    from specviz_app.windows.race.view import RaceView, write_gif
    from specviz_app.windows.race.window import RaceWindow

    app = make_app(theme=args.theme)
    if args.out is None:
        window = RaceWindow(race, vocab, slowdown=args.slowdown)
        window.show()
        window.start()
        return app.exec()
    view = RaceView(race, vocab, base_pt=max(9.0, size[1] / 45))
    # The bar counts the moments rendered; the file holds fewer frames (an unchanged picture is one longer frame).
    with progress_bar(unit="moment", desc="rendering the race") as bar:
        def progress(i: int, total: int) -> None:
            bar.total = total
            bar.update(i - bar.n)

        n = write_gif(view, args.out, size, fps=args.fps, slowdown=args.slowdown, progress=progress)
    print(f"{args.out} ({n} frames, {race.duration_ms * args.slowdown / 1000:.1f} s of race)")
    for lane, note in zip(race.lanes, race.notes):
        if note:
            print(f"{lane.label}: {note}")
    return 0


def parse_size(text: str, bounds: tuple[tuple[int, int], tuple[int, int]]) -> tuple[int, int]:
    """WIDTHxHEIGHT within ``bounds`` ((min w, min h), (max w, max h))."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise SpecVizError(f"--size takes WIDTHxHEIGHT, got {text!r}") from None
    (w_min, h_min), (w_max, h_max) = bounds
    if not (w_min <= w <= w_max and h_min <= h <= h_max):
        raise SpecVizError(f"--size must be from {w_min}x{h_min} to {w_max}x{h_max}, got {text}")
    return w, h


def cmd_gui(args: argparse.Namespace) -> int:
    from specviz_app.gui import run_gui

    if args is not None and getattr(args, "demo", False):
        from specviz_app.demo import demo_recording

        with demo_recording() as db:
            return run_gui(db, args.session, replay=True)
    if args is None or getattr(args, "db", None) is None:
        return run_gui(core_cli.default_db())
    return run_gui(args.db, args.session, replay=True)


#: Smallest and largest window a screenshot renders (below the smallest, Qt silently draws a larger window).
SCREENSHOT_SIZES = ((900, 600), (7680, 4320))


def cmd_screenshot(args: argparse.Namespace) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    try:
        w, h = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        raise SpecVizError(f"--size takes WIDTHxHEIGHT, got {args.size!r}") from None
    (w_min, h_min), (w_max, h_max) = SCREENSHOT_SIZES
    if not (w_min <= w <= w_max and h_min <= h <= h_max):
        raise SpecVizError(f"--size must be from {w_min}x{h_min} (the window's smallest layout) to {w_max}x{h_max}, "
                           f"got {args.size}")
    if args.out.suffix.lower() not in (".png", ".svg"):
        raise SpecVizError(f"--out must end in .png or .svg, got {args.out.name}")
    check_writable(args.out)
    if not args.demo:
        refuse_overwriting(args.out, [args.db])
    from specviz_app.screenshot import render

    if args.live < 0:
        raise SpecVizError("--live takes a number of cycles >= 1")
    if args.demo and args.live:
        raise SpecVizError("--demo replays the bundled recording; --live decodes into --db: pick one")

    def shot(db: Path) -> None:
        try:
            render(db, args.session, args.cycle, args.panel, args.out, (w, h), theme=args.theme,
                   presentation=args.presentation, live=args.live, method=args.method, prompt=args.prompt,
                   model=args.model)
        except OSError as e:  # a full disk, a folder gone since the check
            raise SpecVizError(f"cannot write {args.out}: {e.strerror or e}") from None

    if args.demo:
        from specviz_app.demo import demo_recording

        with demo_recording() as db:
            shot(db)
    else:
        shot(args.db)
    print(args.out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    handlers = {"gui": cmd_gui, "screenshot": cmd_screenshot, "bench": bench_cli.cmd_bench, "race": cmd_race,
                "compare": cmd_compare, None: cmd_gui}
    return core_cli.main(argv, extra=add_commands, extra_handlers=handlers)


if __name__ == "__main__":
    sys.exit(main())
