"""Render a recorded cycle headless: the same window and panels as on screen, saved to a file."""

from __future__ import annotations

from pathlib import Path

from specviz_core.errors import SpecVizError


def render(db: Path, session: str | None, cycle: int, panel: str, out: Path, size: tuple[int, int] = (1500, 940)) -> Path:
    from PySide6.QtWidgets import QApplication

    from .gui import make_app
    from .main_window import MainWindow

    if not Path(db).exists():
        raise SpecVizError(f"no recording at {db}")
    app = make_app()
    window = MainWindow(Path(db), restore_layout=False)
    try:
        window.resize(*size)
        if not window.open_session(str(db), session):
            raise SpecVizError(window.run_panel.message.text())
        n = window.model.n_cycles
        if n == 0:
            raise SpecVizError("that session has no cycles")
        index = cycle if cycle >= 0 else n + cycle
        if not 0 <= index < n:
            raise SpecVizError(f"cycle {cycle} is out of range: the session has {n} cycles (0-{n - 1})")
        window.show()
        window.model.set_cycle(index)
        for _ in range(3):
            app.processEvents()
        if panel != "window":
            dock = window.docks.get(panel)
            if dock is not None:
                dock.show()
                dock.raise_()
                app.processEvents()
        return window.export_panel(panel, out)
    finally:
        window.close()
        window.deleteLater()
        QApplication.processEvents()
