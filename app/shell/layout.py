"""Where the main window's docks go, from a 1100 x 700 laptop to a 2560 x 1440 screen, and a workaround for the tab
bars Qt leaves behind when docks are tabbed."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QPoint, Qt, QTimer
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import QTabBar

from specviz_app.settings import settings

LAYOUT_VERSION = 1
COMPACT_SIZE = (1300, 800)
"""Below this window size, the laptop layout (:meth:`DockLayout.proportion_docks`)."""


class DockLayout:
    """Mixed into :class:`~specviz_app.shell.window.MainWindow` (its ``docks`` and ``compact``)."""

    def hide_stray_tab_bars(self) -> None:
        """Qt 6 leaves a second tab bar behind when a second group of docks is tabified: both show, the stale one
        at its first place (over the output at 1100 x 700). Hide every tab bar that is not under its docks."""
        kept: dict[frozenset[str], QTabBar] = {}
        for bar in self.findChildren(QTabBar, options=Qt.FindChildOption.FindDirectChildrenOnly):
            if not bar.isVisible() or not bar.count():
                continue
            titles = frozenset(bar.tabText(i) for i in range(bar.count()))
            group = [d.geometry() for d in self.docks.values() if d.windowTitle() in titles and d.isVisible()
                     and not d.isFloating()]
            b = bar.geometry()
            under = any(abs(b.top() - g.bottom()) <= 8 and g.left() - 8 <= b.left() and b.right() <= g.right() + 8
                        for g in group)
            if under and titles in kept:  # two under the same docks: the stale one has an old font's height
                other = kept[titles]
                stale = bar if b.height() != bar.sizeHint().height() else other
                kept[titles] = other if stale is bar else bar
                stale.hide()
            elif under:
                kept[titles] = bar
            else:
                bar.hide()

    def _later_hide_stray_tab_bars(self) -> None:
        QTimer.singleShot(0, self.hide_stray_tab_bars)  # once Qt has laid the docks out

    def showEvent(self, e: QShowEvent) -> None:
        super().showEvent(e)
        self._later_hide_stray_tab_bars()

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        self._later_hide_stray_tab_bars()

    def proportion_docks(self) -> None:
        """Share the window so the draft tree keeps about half its width at any size, from a 1100 x 700 laptop up:
        Run on the left, the mask over the KV cache on the right, output and charts below. Below 1300 x 800 Run
        is tabbed with the output and the mask with the KV cache, so each has room to be read."""
        w, h = self.width(), self.height()
        self._arrange(w < COMPACT_SIZE[0] or h < COMPACT_SIZE[1])
        if not self.compact:
            self.resizeDocks([self.docks["run"]], [max(250, int(w * 0.19))], Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["mask"]], [max(340, int(w * 0.27))], Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["output"]], [max(150, int(h * (0.27 if self.compact else 0.25)))],
                         Qt.Orientation.Vertical)
        if not self.compact:
            self.resizeDocks([self.docks["mask"], self.docks["kv"]], [int(h * 0.38), int(h * 0.26)],
                             Qt.Orientation.Vertical)
        self._later_hide_stray_tab_bars()

    def _arrange(self, compact: bool) -> None:
        if compact == self.compact:
            return
        run, sessions, output = self.docks["run"], self.docks["sessions"], self.docks["output"]
        mask, kv = self.docks["mask"], self.docks["kv"]
        if compact:
            self.tabifyDockWidget(output, run)
            self.tabifyDockWidget(run, sessions)
            self.tabifyDockWidget(mask, kv)
        else:
            self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, run)
            self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, sessions)
            self.tabifyDockWidget(run, sessions)
            self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, kv, Qt.Orientation.Vertical)
        for dock in (output, mask) if compact else (run,):
            dock.raise_()
        self.compact = compact

    # -- layout persistence --------------------------------------------------------------------------
    def _restore_layout(self) -> None:
        s = settings()
        geom, state = s.value("window/geometry"), s.value("window/state")
        if isinstance(geom, QByteArray):
            self.restoreGeometry(geom)
        if isinstance(state, QByteArray):
            self.restoreState(state, LAYOUT_VERSION)
        self._later_hide_stray_tab_bars()

    def save_layout(self) -> None:
        s = settings()
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self._normal_state if self._normal_state is not None else self.saveState(LAYOUT_VERSION))
        s.sync()

    def reset_layout(self) -> None:
        if self.presentation_action.isChecked():
            self.toggle_presentation()
        self.restoreState(self._default_state, LAYOUT_VERSION)
        self._later_hide_stray_tab_bars()

    def pop_out_charts(self) -> None:
        """The charts in their own window, most of the main window's size (dock it back with its title bar)."""
        dock = self.docks["charts"]
        dock.show()
        dock.setFloating(True)
        dock.resize(max(900, int(self.width() * 0.85)), max(600, int(self.height() * 0.85)))
        dock.move(self.geometry().topLeft() + QPoint(40, 40))
        dock.raise_()

