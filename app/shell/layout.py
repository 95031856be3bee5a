"""Where the main window's docks go, from a 1100 x 700 laptop to a 2560 x 1440 screen, presentation mode, the layout
kept between runs, and a workaround for the tab bars Qt leaves behind when docks are tabbed.

:class:`DockLayout` is a part the window owns, given the window and its docks."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QObject, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow, QTabBar

from specviz_app.panels.registry import PANELS
from specviz_app.settings import settings

LAYOUT_VERSION = 2
COMPACT_SIZE = (1300, 800)
"""Below this window size, the laptop layout (:meth:`DockLayout.proportion_docks`)."""



def presentation_scale(height: int) -> float:
    """Presentation mode's font scale for a window ``height`` px tall: 1.5 on a large screen, less on a projector's
    720 lines, where 1.5 would leave the charts and the toolbar no room."""
    return min(1.5, max(1.15, 1.15 * height / 720))

class DockLayout(QObject):
    """The window's docks: their sizes at any window size, presentation mode, the layout saved and restored."""

    presentation_changed = Signal(bool)
    """Presentation mode went on or off."""

    def __init__(self, window: QMainWindow, docks: dict[str, QDockWidget]) -> None:
        super().__init__(window)
        self.window = window
        self.docks = docks
        """The docks by panel key (:mod:`specviz_app.panels.registry`)."""
        self.compact = False
        """The laptop layout: Run and Sessions tabbed with the output, so the tree keeps its width."""
        self._base_font = QApplication.font()
        self._normal_state: QByteArray | None = None
        """The layout to go back to when presentation mode ends (None: not presenting)."""
        self._default_state: QByteArray | None = None

    @property
    def presenting(self) -> bool:
        return self._normal_state is not None

    def hide_stray_tab_bars(self) -> None:
        """Qt 6 leaves a second tab bar behind when a second group of docks is tabified: both show, the stale one
        at its first place (over the output at 1100 x 700). Hide every tab bar that is not under its docks."""
        kept: dict[frozenset[str], QTabBar] = {}
        for bar in self.window.findChildren(QTabBar, options=Qt.FindChildOption.FindDirectChildrenOnly):
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

    def later_hide_stray_tab_bars(self) -> None:
        """:meth:`hide_stray_tab_bars` once Qt has laid the docks out (after a show, a resize, a new layout)."""
        QTimer.singleShot(0, self.hide_stray_tab_bars)

    def proportion_docks(self) -> None:
        """Share the window so the draft tree keeps about half its width at any size, from a 1100 x 700 laptop up:
        Run on the left, the mask over the KV cache on the right, output and charts below. Below 1300 x 800 Run
        is tabbed with the output and the mask with the KV cache, so each has room to be read."""
        w, h = self.window.width(), self.window.height()
        self._arrange(w < COMPACT_SIZE[0] or h < COMPACT_SIZE[1])
        if not self.compact:
            self.window.resizeDocks([self.docks["run"]], [max(250, int(w * 0.19))], Qt.Orientation.Horizontal)
        self.window.resizeDocks([self.docks["mask"]], [max(340, int(w * 0.27))], Qt.Orientation.Horizontal)
        self.window.resizeDocks([self.docks["output"]], [max(150, int(h * (0.27 if self.compact else 0.25)))],
                         Qt.Orientation.Vertical)
        if not self.compact:
            self.window.resizeDocks([self.docks["mask"], self.docks["kv"]], [int(h * 0.38), int(h * 0.26)],
                             Qt.Orientation.Vertical)
        self.later_hide_stray_tab_bars()

    def _arrange(self, compact: bool) -> None:
        if compact == self.compact:
            return
        run, sessions, output = self.docks["run"], self.docks["sessions"], self.docks["output"]
        mask, kv = self.docks["mask"], self.docks["kv"]
        if compact:
            self.window.tabifyDockWidget(output, run)
            self.window.tabifyDockWidget(run, sessions)
            self.window.tabifyDockWidget(mask, kv)
        else:
            self.window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, run)
            self.window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, sessions)
            self.window.tabifyDockWidget(run, sessions)
            self.window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, kv, Qt.Orientation.Vertical)
        for dock in (output, mask) if compact else (run,):
            dock.raise_()
        self.compact = compact

    # -- presentation -------------------------------------------------------------------------------
    def toggle_presentation(self) -> None:
        """Large fonts; only the panels the registry keeps in presentation mode (the tree, output, charts, why the cycle
        stopped)."""
        on = self._normal_state is None
        window = self.window
        if on:
            self._normal_state = window.saveState(LAYOUT_VERSION)
            for entry in PANELS:
                if entry.key in self.docks and not entry.presenting:
                    self.docks[entry.key].hide()
            font = QFont(self._base_font)
            font.setPointSizeF(self._base_font.pointSizeF() * presentation_scale(window.height()))
            QApplication.setFont(font)
            self.docks["charts"].raise_()
            window.resizeDocks([self.docks["output"]], [int(window.height() * 0.45)], Qt.Orientation.Vertical)
            window.resizeDocks([self.docks["output"], self.docks["charts"]],
                               [int(window.width() * 0.4), int(window.width() * 0.6)], Qt.Orientation.Horizontal)
        else:
            QApplication.setFont(self._base_font)
            window.restoreState(self._normal_state, LAYOUT_VERSION)
            self._normal_state = None
        self.presentation_changed.emit(on)
        self.later_hide_stray_tab_bars()

    # -- layout persistence --------------------------------------------------------------------------
    def keep_default(self) -> None:
        """The layout now is the one Reset layout goes back to."""
        self._default_state = self.window.saveState(LAYOUT_VERSION)

    def restore(self) -> None:
        """The layout saved by the last window closed."""
        s = settings()
        geom, state = s.value("window/geometry"), s.value("window/state")
        if isinstance(geom, QByteArray):
            self.window.restoreGeometry(geom)
        if isinstance(state, QByteArray):
            self.window.restoreState(state, LAYOUT_VERSION)
        self.later_hide_stray_tab_bars()

    def save(self) -> None:
        """Keep the layout for the next window (the one before presentation mode, if it is on)."""
        s = settings()
        s.setValue("window/geometry", self.window.saveGeometry())
        s.setValue("window/state", self._normal_state if self._normal_state is not None
                   else self.window.saveState(LAYOUT_VERSION))
        s.sync()

    def reset(self) -> None:
        """Every panel back where it started (presentation mode ends)."""
        if self.presenting:
            self.toggle_presentation()
        self.window.restoreState(self._default_state, LAYOUT_VERSION)
        self.later_hide_stray_tab_bars()

    def pop_out_charts(self) -> None:
        """The charts in their own window, most of the main window's size (dock it back with its title bar)."""
        dock = self.docks["charts"]
        dock.show()
        dock.setFloating(True)
        dock.resize(max(900, int(self.window.width() * 0.85)), max(600, int(self.window.height() * 0.85)))
        dock.move(self.window.geometry().topLeft() + QPoint(40, 40))
        dock.raise_()
