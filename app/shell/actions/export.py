"""The window's exports: File → Export panel (a panel, or the whole window, as PNG or SVG), File → Export cycles
to CSV (one row per cycle of the session shown) and File → Share as web page (the session shown as one HTML page
that replays it in any browser, as ``specviz share`` writes it). A part of
:class:`~specviz_app.shell.window.MainWindow`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMainWindow, QMenu

from specviz_app.panels.base import PanelMixin, export_widget
from specviz_app.panels.registry import EXPORTED
from specviz_app.shell.actions.common import session_file, window_action
from specviz_core.errors import SpecVizError
from specviz_core.share.page import SharedPage, share
from specviz_core.viewer.cycle_table import write_cycles_csv
from specviz_core.viewer.session_model import SessionModel


class ExportActions:
    """File → Export panel and File → Export cycles to CSV, added to ``file_menu``: ``panels`` (by name) or the whole
    ``window`` as pictures, ``model``'s session as rows."""

    def __init__(self, window: QMainWindow, file_menu: QMenu, panels: dict[str, PanelMixin], model: SessionModel,
                 show_error: Callable[[str], None]) -> None:
        self.window, self.panels, self.model, self.show_error = window, panels, model, show_error
        export = file_menu.addMenu("&Export panel")
        for name in EXPORTED:
            export.addAction(window_action(window, f"{panels[name].title}…", None,
                                           lambda _=False, n=name: self.panel_dialog(n), "Save the panel as PNG or SVG"))
        export.addAction(window_action(window, "Whole window…", None, lambda: self.panel_dialog("window"),
                                       "Save the whole window as PNG or SVG"))
        file_menu.addAction(window_action(window, "Export cycles to &CSV…", "Ctrl+Shift+E", self.csv_dialog,
                                          "One row per cycle of the current session"))
        file_menu.addAction(window_action(window, "S&hare as web page…", "Ctrl+Shift+H", self.share_dialog,
                                          "The session shown as one HTML file that replays it in any browser, no "
                                          "SpecViz or network needed (as specviz share writes it)"))

    def panel(self, name: str, path: str | Path) -> Path:
        """Save a panel (by its name in ``panels``) or the whole ``window`` as PNG or SVG."""
        if name == "window":
            return export_widget(self.window, path, "SpecViz")
        return self.panels[name].export(Path(path))

    def panel_dialog(self, name: str) -> None:
        path, _ = QFileDialog.getSaveFileName(self.window, "Export panel", str(Path.home() / f"specviz-{name}.png"),
                                              "PNG image (*.png);;SVG drawing (*.svg)")
        if path:
            try:
                self.panel(name, path)
                self.window.statusBar().showMessage(f"Saved {path}", 5000)
            except OSError as e:
                self.show_error(str(e))

    def csv(self, path: str | Path) -> int:
        """One row per cycle of the current session; returns the number of rows."""
        return write_cycles_csv(path, self.model.summaries(), self.model.vocab)

    def csv_dialog(self) -> None:
        if self.model.source is None:
            self.show_error("No session open: step a cycle or open a recording first.")
            return
        path, _ = QFileDialog.getSaveFileName(self.window, "Export cycles", str(Path.home() / "specviz-cycles.csv"),
                                              "CSV (*.csv)")
        if path:
            try:
                n = self.csv(path)
                self.window.statusBar().showMessage(f"Saved {n} cycles to {path}", 5000)
            except OSError as e:
                self.show_error(f"cannot write {path}: {e.strerror}")

    def share(self, path: str | Path) -> SharedPage:
        """Write the session shown (as recorded so far) as a web page."""
        db = session_file(self.model)
        if db is None or self.model.source is None:
            raise SpecVizError("No recorded session open: step a cycle or open a recording first.")
        return share(db, path, self.model.source.info.id)

    def share_dialog(self) -> None:
        if session_file(self.model) is None:
            self.show_error("No recorded session open: step a cycle or open a recording first.")
            return
        info = self.model.source.info
        path, _ = QFileDialog.getSaveFileName(self.window, "Share as web page",
                                              str(Path.home() / f"specviz-{info.method}-{info.id}.html"),
                                              "Web page (*.html)")
        if path:
            try:
                page = self.share(path)
                self.window.statusBar().showMessage(
                    f"Saved {page.path} ({page.n_cycles} cycles, {page.size_bytes / 1e6:.1f} MB): open it in any "
                    "browser", 8000)
            except SpecVizError as e:
                self.show_error(str(e))
