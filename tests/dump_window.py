"""Every action, shortcut, enabled state, dock and status line of the window, as JSON (maintainers; not a test):
``python tests/dump_window.py OUT.json``.

A restructuring of the window must leave this dump unchanged (issue 43): run it before and after and diff the two.
It walks the window offscreen through the states a user sees first: a fresh window, the bundled demo session opened
at its first and its last cycle, presentation mode on and off again.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
_TMP = Path(tempfile.mkdtemp(prefix="specviz-dump-"))
os.environ["SPECVIZ_CONFIG"] = str(_TMP / "gui.ini")
os.environ["SPECVIZ_DATA"] = str(_TMP / "data")
os.environ["SPECVIZ_CACHE"] = str(_TMP / "cache")


def snapshot(window) -> dict:
    """What a user can see and press: menus and their actions, toolbars, docks, the status bar."""
    from PySide6.QtWidgets import QApplication, QDockWidget, QMenu, QToolBar

    def action(a) -> dict:
        return {"text": a.text(), "shortcuts": [s.toString() for s in a.shortcuts()], "enabled": a.isEnabled(),
                "checkable": a.isCheckable(), "checked": a.isChecked(), "visible": a.isVisible(),
                "tooltip": a.toolTip(), "status_tip": a.statusTip()}

    def menu(m: QMenu) -> dict:
        return {"title": m.title(), "actions": [menu(a.menu()) if a.menu() is not None else action(a)
                                                for a in m.actions() if not a.isSeparator()]}

    QApplication.processEvents()
    bar = window.menuBar()
    return {
        "menus": [menu(a.menu()) for a in bar.actions() if a.menu() is not None],
        "toolbars": [{"name": t.objectName(), "visible": t.isVisible(),
                      "actions": [action(a) for a in t.actions() if not a.isSeparator()]}
                     for t in window.findChildren(QToolBar)],
        "docks": sorted(({"title": d.windowTitle(), "visible": d.isVisible(),
                          "area": window.dockWidgetArea(d).name} for d in window.findChildren(QDockWidget)),
                        key=lambda d: d["title"]),
        "status": window.state_label.text(),
        "message": window.statusBar().currentMessage(),
    }


def main(out: Path) -> None:
    from specviz_app.demo import copy_demo
    from specviz_app.gui import make_app
    from specviz_app.shell.window import MainWindow

    app = make_app(theme="light")
    db = copy_demo(_TMP / "demo")
    window = MainWindow(db, restore_layout=False)
    window.resize(1500, 940)
    window.show()
    states = {"fresh": snapshot(window)}
    assert window.controller.open_session(str(db), None)
    window.model.set_cycle(0)
    states["demo, first cycle"] = snapshot(window)
    window.model.set_cycle(len(window.model.source) - 1)
    states["demo, last cycle"] = snapshot(window)
    window.presentation_action.trigger()
    states["presentation"] = snapshot(window)
    window.presentation_action.trigger()
    states["presentation off"] = snapshot(window)
    window.close()
    app.processEvents()
    text = json.dumps(states, indent=1, ensure_ascii=False).replace(str(_TMP), "$TMP")  # the same on every run
    out.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("window-dump.json"))
