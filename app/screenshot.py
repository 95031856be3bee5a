"""Render the window headless: a recorded cycle (replay), or a few cycles decoded live; saved to a file."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from specviz_core.errors import SpecVizError


def render(db: Path, session: str | None, cycle: int, panel: str, out: Path, size: tuple[int, int] = (1500, 940),
           theme: str = "system", presentation: bool = False, live: int = 0, method: str = "goose",
           prompt: str | None = None, model: str | None = None, timeout_s: float = 600.0) -> Path:
    from PySide6.QtWidgets import QApplication

    from specviz_app.gui import make_app
    from specviz_app.shell.window import MainWindow

    if not live and not Path(db).exists():
        raise SpecVizError(f"no recording at {db}")
    app = make_app(theme=theme)
    window = MainWindow(Path(db), restore_layout=False)
    try:
        window.resize(*size)
        window.show()
        app.processEvents()
        window.dock_layout.proportion_docks()
        if live:
            _decode_live(app, window, live, method, prompt, model, timeout_s)
        else:
            if not window.controller.open_session(str(db), session):
                raise SpecVizError(window.run_panel.message.text())
            n = window.model.n_cycles
            if n == 0:
                raise SpecVizError("that session has no cycles")
            index = cycle if cycle >= 0 else n + cycle
            if not 0 <= index < n:
                raise SpecVizError(f"cycle {cycle} is out of range: the session has {n} cycles (0-{n - 1})")
            window.model.set_cycle(index)
            if window.model.damage_text:  # drawn as the window shows it: the message in place of the cycle
                print(f"specviz: {window.model.damage_text[0].lower()}{window.model.damage_text[1:]}", file=sys.stderr)
        if presentation:
            window.dock_layout.toggle_presentation()
        for _ in range(3):
            app.processEvents()
        if panel != "window":
            dock = window.docks.get(panel)
            if dock is not None:
                dock.show()
                dock.raise_()
                app.processEvents()
        return window.export.panel(panel, out)
    finally:
        window.close()
        window.deleteLater()
        QApplication.processEvents()


def _decode_live(app, window, cycles: int, method: str, prompt: str | None, model: str | None, timeout_s: float) -> None:
    rp = window.run_panel
    i = rp.method.findData(method)
    if i < 0:
        raise SpecVizError(f"unknown method {method!r}")
    rp.method.setCurrentIndex(i)
    if prompt is not None:
        rp.prompt.setPlainText(prompt)
    if model is not None:
        rp.model.setEditText(model)
    deadline = time.monotonic() + timeout_s
    for _ in range(cycles):
        window.controller.step()
        while not window.controller.idle:
            if time.monotonic() > deadline:
                raise SpecVizError("the live session took too long")
            app.processEvents()
            time.sleep(0.01)
        if rp.message.isVisible():
            raise SpecVizError(rp.message.text())
        if window.controller.live_done:
            break
    # The AR baseline is measured after the first cycle: wait for it so the charts show the speed-up.
    while not window.controller.idle and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.01)
