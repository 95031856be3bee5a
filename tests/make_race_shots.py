"""The GUI race's screenshots in docs/screenshots (maintainers; not a test): ``python tests/make_race_shots.py [GIF]``.

Through Run → Race… → "Record AR and this method", records plain decoding and PLD on the demo prompt with the
default model (64 tokens each, one after the other), then saves the race window half-way at its default size
(1100x700) and in presentation mode at 1920x1080, and the dialog listing the two sessions. A fake clock stops the
race exactly half-way.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SPECVIZ_CONFIG", str(Path(tempfile.mkdtemp()) / "gui.ini"))


def wait(app, until, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        app.processEvents()
        time.sleep(0.02)


def main() -> None:
    import torch

    torch.set_num_threads(1)  # on a shared CPU a second intra-op thread spins against the other load: 10x slower
    from specviz_app.gui import make_app
    from specviz_app.shell.window import MainWindow

    app = make_app(theme="light")
    w = MainWindow(Path(tempfile.mkdtemp()) / "sessions.db", restore_layout=False)
    w.show()
    rp = w.run_panel
    rp.method.setCurrentIndex(rp.method.findData("pld"))
    rp.max_new_tokens.setValue(64)
    dialog = w.race.dialog()
    dialog.tabs.setCurrentIndex(1)
    dialog.ok.click()
    wait(app, lambda: w.race.windows and w.race.windows[-1].isVisible(), 600)
    rw = w.race.windows[-1]
    t = [0.0]
    rw.clock = lambda: t[0]
    rw.restart()
    t[0] = 0.75 * min(lane.finish_ms for lane in rw.view.race.lanes) / 1000  # both lanes still running
    rw.pause()
    rw.resize(1100, 700)
    for _ in range(5):
        app.processEvents()
    rw.grab().save(str(OUT / "race-window-1100.png"))
    rw.set_presentation(True, full_screen=False)
    rw.resize(1920, 1080)
    for _ in range(5):
        app.processEvents()
    rw.grab().save(str(OUT / "race-midway-presentation.png"))
    if len(sys.argv) > 1:  # also export the GIF there, the way Ctrl+E does (to look at its frames)
        rw.export_gif(Path(sys.argv[1]))
        wait(app, lambda: rw.export is None, 600)
        print(rw.message.text())
    rw.close()
    dialog = w.race.dialog()  # now listing the two sessions, both ticked
    dialog.set_ticked([s.id for s in dialog.sessions])
    for _ in range(5):
        app.processEvents()
    dialog.grab().save(str(OUT / "race-dialog.png"))
    dialog.reject()
    w.close()
    print("\n".join(str(OUT / n) for n in ("race-window-1100.png", "race-midway-presentation.png", "race-dialog.png")))


if __name__ == "__main__":
    main()
