"""A replay needs no torch (issue 34): opening a recording, in the window or headless, imports neither torch nor
transformers. Each case runs in a fresh interpreter (this test process has torch loaded already) and reports the
heavy modules it ended with; the engine is imported only when a live session starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HEAVY = ("torch", "transformers")

PRELUDE = textwrap.dedent("""
    import atexit, json, sys
    def _report():
        heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "transformers"})
        with open(sys.argv[1], "w") as fh:
            json.dump(heavy, fh)
    atexit.register(_report)
""")


def run_fresh(tmp_path: Path, body: str) -> list[str]:
    """Run ``body`` after the prelude in a new interpreter; the heavy packages it imported."""
    report = tmp_path / "heavy.json"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    p = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body), str(report)], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(report.read_text())


def test_the_reporter_sees_torch(tmp_path):
    """The check itself can fail: a body that imports torch is reported."""
    assert run_fresh(tmp_path, "import torch") == ["torch"]


def test_headless_replays_import_no_torch(tmp_path):
    """``screenshot`` of the demo (a cycle, the whole window in presentation mode), ``compare --out`` and ``race
    --out`` of its two sessions, ``sessions`` and ``--help``: each works, and none loads torch or transformers."""
    heavy = run_fresh(tmp_path, """
        from pathlib import Path
        from specviz_app.cli import main
        from specviz_app.demo import copy_demo
        from specviz_core.recording.store import Recording

        db = copy_demo(Path("copy"))
        with Recording(db, read_only=True) as rec:
            ids = [s.id for s in rec.sessions()]
        assert len(ids) == 2, ids
        for argv in (["screenshot", "--demo", "--cycle", "2", "--panel", "tree", "--out", "tree.png"],
                     ["screenshot", "--db", str(db), "--presentation", "--out", "window.png"],
                     ["compare", "--db", str(db), *ids, "--out", "compare.png"],
                     ["race", "--db", str(db), *ids, "--out", "race.gif", "--fps", "2", "--slowdown", "0.25"],
                     ["sessions", "--db", str(db)]):
            assert main(argv) == 0, argv
            assert not argv[-1].endswith(("png", "gif")) or Path(argv[-1]).stat().st_size > 1000, argv
        try:
            main(["--help"])
        except SystemExit as e:
            assert e.code == 0
    """)
    assert heavy == []


def test_the_window_replays_without_torch_and_loads_it_for_a_live_session(tmp_path):
    """The window opened on a recording (``gui --demo``'s path) steps through every cycle with no torch; the Run
    panel lists every method and its parameters from the torch-free cards; asking which GPUs there are (opening
    the Device list) is what loads torch."""
    heavy = run_fresh(tmp_path, """
        import sys
        from pathlib import Path
        from specviz_app.demo import copy_demo
        from specviz_app.gui import dispose, make_app, open_window
        from specviz_core.methods import CARDS

        app = make_app()
        window = open_window(copy_demo(Path("copy")), None, replay=True)
        window.show()
        app.processEvents()
        model = window.controller.model
        assert model.n_cycles > 3
        for i in range(model.n_cycles):
            assert model.set_cycle(i) or i == model.index
            app.processEvents()
        panel = window.run_panel
        assert [panel.method.itemData(i) for i in range(panel.method.count())] == list(CARDS)
        panel.method.setCurrentIndex(panel.method.findData("talon"))
        assert "mu" in panel.param_widgets
        app.processEvents()
        assert not {"torch", "transformers"} & set(sys.modules)
        panel.device.fill_devices()
        assert "torch" in sys.modules and panel.device.findText("cpu") >= 0
        dispose(window)
    """)
    assert "torch" in heavy


@pytest.mark.parametrize("command", [["gui", "--demo"], ["screenshot", "--demo", "--out", "x.png"]])
def test_the_installed_command_replays_without_torch(tmp_path, command):
    """As a user starts it: ``python -m specviz_app.cli``, a fresh process, the bundled demo. The window's event
    loop is ended by a timer, as a user closing it."""
    quit_after = "" if command[0] == "screenshot" else textwrap.dedent("""
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QApplication
        import specviz_app.gui as gui
        _make = gui.make_app
        def make_app(*a, **k):
            app = _make(*a, **k)
            QTimer.singleShot(1500, QApplication.quit)
            return app
        gui.make_app = make_app
    """)
    heavy = run_fresh(tmp_path, quit_after + f"from specviz_app.cli import main\nassert main({command!r}) == 0\n")
    assert heavy == []
