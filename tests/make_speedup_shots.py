"""The docs' speed-up pictures and numbers (maintainers; not a test): ``python tests/make_speedup_shots.py``.

Records, on the default model and the CPU, one after the other on a quiet machine: plain decoding (AR), PLD,
Goose with its default budget (``auto``, chosen for this device) and Goose at the paper's budget, on a code-editing
prompt of the bench (``code_editing/rename_prefix``, 96 new tokens). Then writes what ``docs/compare-race.md``
shows: the ``specviz compare`` table (printed, for the page), the Compare view at 1100x700 and in presentation
mode, and the end of the race of AR against Goose (``race-end.png``, 960x540, as ``specviz race --out`` draws it).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
SUITE, PROMPT, TOKENS = "code_editing", "rename_prefix", 96
RUNS = (("ar", []), ("pld", []), ("goose", []), ("goose", ["--budget", "paper"]))


def record(db: Path, prompt_file: Path) -> list[str]:
    from specviz_core.cli.commands import main
    from specviz_core.recording.store import Recording

    for method, extra in RUNS:
        code = main(["record", "--method", method, "--prompt-file", str(prompt_file), "--device", "cpu",
                     "--max-new-tokens", str(TOKENS), "--db", str(db), "--quiet", *extra])
        if code:
            raise SystemExit(code)
    with Recording(db, read_only=True) as rec:
        return [s.id for s in sorted(rec.sessions(), key=lambda s: s.created)]


def main() -> None:
    from specviz_core.bench.suites import load_suite
    from specviz_core.cli.commands import main as cli

    prompt = next(p for p in load_suite(SUITE).prompts if p.id == PROMPT)
    work = Path(tempfile.mkdtemp())
    prompt_file = work / "prompt.txt"
    prompt_file.write_text(prompt.text, encoding="utf-8")
    db = work / "runs.db"
    ids = record(db, prompt_file)
    ar, pld, goose, paper = ids
    cli(["compare", "--db", str(db), ar, pld, goose, paper])
    from specviz_app.cli import main as app_cli  # the Qt commands' options (--out a picture)

    app_cli(["compare", "--db", str(db), ar, pld, goose, paper, "--out", str(OUT / "compare-1100.png")])
    app_cli(["compare", "--db", str(db), ar, pld, goose, paper, "--presentation", "--size", "1920x1080",
             "--out", str(OUT / "compare-presentation.png")])

    from specviz_app.gui import make_app
    from specviz_app.windows.race.view import RaceView, render_frame
    from specviz_core.analysis.race import make_race
    from specviz_core.viewer.comparison import load_comparison, stored_curve_of

    make_app(theme="light")
    comparison, vocab = load_comparison(db, [ar, goose])
    race = make_race(comparison.sessions, curve_of=stored_curve_of)
    view = RaceView(race, vocab, base_pt=12.0)
    render_frame(view.offscreen_painter(), race.duration_ms + 1, (960, 540)).save(str(OUT / "race-end.png"))
    for lane, note in zip(race.lanes, race.notes):
        print(f"{lane.label}: {lane.finish_ms / 1000:.2f} s{'; ' + note if note else ''}")
    print("\n".join(str(OUT / n) for n in ("compare-1100.png", "compare-presentation.png", "race-end.png")))


if __name__ == "__main__":
    main()
