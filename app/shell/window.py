"""The main window: panels in docks around the draft tree, one session model, one engine thread.

The window owns its parts, each given what it needs: the :class:`SessionController` (the session shown, the engine
thread), the :class:`~specviz_app.shell.layout.DockLayout` (where docks go, presentation mode, the saved layout) and
the menu actions that are more than one call (:mod:`specviz_app.shell.actions`: export, what-if, race, audit)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QStyle,
    QToolBar,
)

from specviz_app.icons import action_icon
from specviz_app.panels.base import PanelMixin
from specviz_app.panels.charts.panel import ChartsPanel
from specviz_app.panels.kv.view import KVView
from specviz_app.panels.mask.view import MaskView
from specviz_app.panels.output import OutputView
from specviz_app.panels.registry import PANELS, PanelEntry, docked
from specviz_app.panels.run.panel import RunPanel
from specviz_app.panels.sessions import SessionsView
from specviz_app.panels.stop_cause import StopCausePanel
from specviz_app.panels.timeline import TimelinePanel
from specviz_app.panels.tree.view import TreeView
from specviz_app.session.controller import AUTOPLAY_SPEEDS, DEFAULT_SPEED, SessionController
from specviz_app.session.gc_guard import UiThreadGC
from specviz_app.shell.actions.audit import AuditActions
from specviz_app.shell.actions.common import window_action
from specviz_app.shell.actions.export import ExportActions
from specviz_app.shell.actions.race import RaceActions
from specviz_app.shell.actions.whatif import WhatIfActions
from specviz_app.shell.elided_label import ElidedLabel, ElidingStatusBar
from specviz_app.shell.layout import DockLayout
from specviz_app.windows.train_head import stop_all as stop_head_training
from specviz_core.viewer.lifecycle import Activity, SessionState, enabled_actions, status_text
from specviz_core.viewer.session_model import SessionModel

#: The registry's areas as Qt's.
_AREAS = {"left": Qt.DockWidgetArea.LeftDockWidgetArea, "right": Qt.DockWidgetArea.RightDockWidgetArea,
          "bottom": Qt.DockWidgetArea.BottomDockWidgetArea}

class MainWindow(QMainWindow):
    """The shell: the draft tree in the middle, panels in docks around it, menus, toolbars, presentation, export.

    What is shown is the :class:`SessionModel`'s; which session it holds is the :class:`SessionController`'s.
    """

    def __init__(self, db_path: Path, restore_layout: bool = True) -> None:
        super().__init__()
        self.setWindowTitle("SpecViz")
        self.model = SessionModel()
        self.db_path = Path(db_path)
        self._gc = UiThreadGC(self)
        self._gc.start()

        self.panels: dict[str, PanelMixin] = {e.key: e.load().create(self.model, self.db_path) for e in PANELS}
        """Every panel by its key (:mod:`specviz_app.panels.registry`); the ones the window wires are named below."""
        self.tree = cast(TreeView, self.panels["tree"])
        self.run_panel = cast(RunPanel, self.panels["run"])
        self.sessions = cast(SessionsView, self.panels["sessions"])
        self.output = cast(OutputView, self.panels["output"])
        self.stop_cause = cast(StopCausePanel, self.panels["stop_cause"])
        self.mask = cast(MaskView, self.panels["mask"])
        self.kv = cast(KVView, self.panels["kv"])
        self.charts = cast(ChartsPanel, self.panels["charts"])
        self.timeline = cast(TimelinePanel, self.panels["timeline"])
        self.setCentralWidget(self.tree)
        self.controller = SessionController(self.model, self.run_panel, self)
        self.docks: dict[str, QDockWidget] = {}
        self.dock_layout = DockLayout(self, self.docks)
        """Where the docks go at any size, presentation mode, the layout kept between runs."""
        for entry in docked():
            self._dock(entry)
        for entry in docked():
            if entry.tab_with is not None:
                self.tabifyDockWidget(self.docks[entry.tab_with], self.docks[entry.key])
        for entry in docked():
            if entry.raised:
                self.docks[entry.key].raise_()
        self.setStatusBar(ElidingStatusBar())  # before the toolbars add the cycle's facts to it
        self._build_actions()
        self._build_toolbars()
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(220)
        self.progress.setVisible(False)
        self.statusBar().addPermanentWidget(self.progress)
        self.state_label = ElidedLabel()
        """The lifecycle's line (a passing message from :meth:`QStatusBar.showMessage` covers it for a while)."""
        self.statusBar().addWidget(self.state_label, 1)
        # One line at a time: a passing message hides the lifecycle's line until it goes (Qt's own hiding of normal
        # widgets did not survive a change of font, and presentation mode drew both, one over the other).
        self.statusBar().messageChanged.connect(lambda text: self.state_label.setVisible(not text))
        self._connect()

        self.model.set_recording(self.db_path)
        self._on_recording(self.model.recording_path)
        self._on_state(self.controller.state)
        screen = QApplication.primaryScreen()
        avail = screen.availableGeometry().size() if screen is not None else QSize(1500, 940)
        self.resize(min(1500, avail.width()), min(940, avail.height()))
        self.dock_layout.proportion_docks()
        self.dock_layout.keep_default()
        self._persist_layout = restore_layout
        if restore_layout:
            self.dock_layout.restore()

    # -- construction --------------------------------------------------------------------------------
    def _dock(self, entry: PanelEntry) -> None:
        """``entry``'s panel in a dock of its area."""
        panel = self.panels[entry.key]
        dock = QDockWidget(panel.title, self)
        dock.setObjectName(f"dock_{entry.key}")
        dock.setWidget(panel)
        self.addDockWidget(_AREAS[entry.place], dock)
        self.docks[entry.key] = dock

    def _connect(self) -> None:
        """Panels talk through the model; the controller's reports go to the widgets that show them."""
        c, rp = self.controller, self.run_panel
        rp.step_requested.connect(c.step)
        rp.run_requested.connect(c.run)
        rp.run_to_breakpoint_requested.connect(c.run_to_breakpoint)
        rp.pause_requested.connect(c.pause)
        rp.reset_requested.connect(c.reset)
        self.sessions.open_requested.connect(c.open_session)
        self.stop_cause.span_changed.connect(self.output.set_matched_span)
        c.state_changed.connect(self._on_state)
        c.settings_locked.connect(rp.set_locked)
        c.session_status.connect(rp.set_status)
        c.notice.connect(self.statusBar().showMessage)
        c.error.connect(self.show_error)
        rp.recording_edited.connect(self.model.set_recording)
        self.model.recording_changed.connect(self._on_recording)
        self.charts.actions.measure_baseline.connect(c.measurements.record_ar_baseline)
        self.charts.actions.measure_curve.connect(c.measurements.measure_cost_curve)
        self.charts.pop_out_requested.connect(self.dock_layout.pop_out_charts)
        self.dock_layout.presentation_changed.connect(self._on_presentation)
        c.autoplay_changed.connect(self.autoplay_action.setChecked)
        c.sessions_changed.connect(self.sessions.refresh)
        self.model.session_opened.connect(self._on_session_opened)
        self.model.cycle_changed.connect(lambda rec: self._update_title())
        self.model.session_closed.connect(self._update_title)  # Ctrl+R: no old cycle left in the status bar

    def _action(self, text: str, shortcut: str | QKeySequence | None, slot, tip: str = "") -> QAction:
        return window_action(self, text, shortcut, slot, tip)

    def _build_actions(self) -> None:
        m = self.menuBar()
        f = m.addMenu("&File")
        self.open_action = self._action("&Open recording…", QKeySequence.StandardKey.Open, self.choose_recording,
                                        "Open a SpecViz recording (.db) to replay its sessions")
        f.addAction(self.open_action)
        self.export = ExportActions(self, f, self.panels, self.model, self.show_error)
        """File → Export panel (PNG, SVG) and Export cycles to CSV."""
        f.addSeparator()
        f.addAction(self._action("&Quit", QKeySequence.StandardKey.Quit, self.close))

        r = m.addMenu("&Run")
        self.step_action = self._action("&Step", "F10", self.controller.step, "Decode one cycle")
        self.run_action = self._action("&Run", "F5", self.controller.run, "Decode until the end or Pause")
        self.pause_action = self._action("&Pause", "F6", self.controller.pause, "Stop after the cycle in flight")
        self.bp_action = self._action("Run to &breakpoint", "F8", self.controller.run_to_breakpoint,
                                      "Decode until a cycle matches the breakpoint set in the Run panel")
        self.reset_action = self._action("Rese&t", "Ctrl+R", self.controller.reset, "End the session; it stays recorded")
        for a in (self.step_action, self.run_action, self.pause_action, self.bp_action, self.reset_action):
            r.addAction(a)
        args = (self.model, self.controller)
        self.whatif = WhatIfActions(self, r, *args, self.run_panel, self.timeline, self.show_error)
        """Run → Fork from this cycle… and Compare sessions…"""
        self.race = RaceActions(self, r, *args, self.run_panel, self.sessions, self.show_error)
        """Run → Race…"""
        self.audit = AuditActions(self, r, *args, self.show_error)
        """Run → Audit against plain decoding."""

        g = m.addMenu("&Go")
        self.prev_action = self._action("&Previous cycle", "Left", lambda: self.model.move(-1))
        self.next_action = self._action("&Next cycle", "Right", lambda: self.model.move(1))
        self.first_action = self._action("&First cycle", "Home", lambda: self.model.set_cycle(0))
        self.last_action = self._action("&Last cycle", "End", lambda: self.model.set_cycle(self.model.n_cycles - 1))
        self.autoplay_action = self._action("&Autoplay", "Space", self.controller.toggle_autoplay,
                                            "Step through cycles at the chosen speed (decodes when live)")
        self.autoplay_action.setCheckable(True)
        for a in (self.prev_action, self.next_action, self.first_action, self.last_action, self.autoplay_action):
            g.addAction(a)

        v = m.addMenu("&View")
        self.presentation_action = self._action("&Presentation mode", "F11", self.dock_layout.toggle_presentation,
                                                "Large fonts and only the panels that tell the story")
        self.presentation_action.setCheckable(True)
        v.addAction(self.presentation_action)
        v.addAction(self._action("&Reset layout", None, self.dock_layout.reset,
                                 "Put every panel back where it started"))
        v.addSeparator()
        for dock in self.docks.values():
            v.addAction(dock.toggleViewAction())

        h = m.addMenu("&Help")
        h.addAction(self._action("&Keyboard shortcuts", "F1", self.show_shortcuts))
        h.addAction(self._action("&About SpecViz", None, self.show_about))

    def _build_toolbars(self) -> None:
        tb = QToolBar("Controls")
        tb.setObjectName("toolbar_controls")
        for a in (self.step_action, self.run_action, self.pause_action, self.bp_action, self.reset_action):
            tb.addAction(a)
        tb.addSeparator()
        tb.addAction(self.prev_action)
        tb.addAction(self.next_action)
        tb.addSeparator()
        tb.addAction(self.autoplay_action)
        self.speed = QComboBox()
        self.speed.addItems(list(AUTOPLAY_SPEEDS))
        self.speed.setCurrentText(DEFAULT_SPEED)
        self.speed.setToolTip("Autoplay speed")
        self._fit_speed()
        self.speed.currentTextChanged.connect(self.controller.set_autoplay_speed)
        tb.addWidget(self.speed)
        tb.addSeparator()
        tb.addAction(self.presentation_action)
        for a, icon in ((self.step_action, "step"), (self.run_action, "run"), (self.pause_action, "pause"),
                        (self.bp_action, "run-to-breakpoint"), (self.reset_action, "reset"),
                        (self.open_action, "open"), (self.presentation_action, "presentation")):
            a.setIcon(action_icon(icon))
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        tb.setIconSize(QSize(18, 18))
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, tb)
        self.controls_toolbar = tb
        self._dropped: list[tuple[QAction, QAction | None]] = []
        """Toolbar buttons presentation mode took out, with the action each went before."""
        tl = QToolBar("Timeline")
        tl.setObjectName("toolbar_timeline")
        tl.setMovable(False)
        tl.addWidget(self.timeline)
        self.addToolBar(Qt.ToolBarArea.BottomToolBarArea, tl)
        self.info_label = QLabel()
        self.statusBar().addPermanentWidget(self.info_label)

    # -- controller reports ------------------------------------------------------------------------------------
    def lifecycle_actions(self) -> dict[str, QAction]:
        """The actions whose enabled state the lifecycle decides, by their names in
        :data:`~specviz_core.viewer.lifecycle.ACTIONS`."""
        return {"step": self.step_action, "run": self.run_action, "pause": self.pause_action,
                "run_to_breakpoint": self.bp_action, "reset": self.reset_action, "open": self.open_action,
                "fork": self.whatif.fork_action, "compare": self.whatif.compare_action, "race": self.race.action,
                "audit": self.audit.action}

    def _on_state(self, state: SessionState) -> None:
        """Everything the window says about the lifecycle follows from the state alone."""
        enabled = enabled_actions(state)
        for name, action in self.lifecycle_actions().items():
            action.setEnabled(enabled[name])
        self.run_panel.apply_actions(enabled)
        self.state_label.setText(status_text(state))
        shows_progress = state.activity in (Activity.LOADING, Activity.MEASURING, Activity.MEASURING_BASELINE)
        self.progress.setVisible(shows_progress)
        if shows_progress:
            if state.progress is None:
                self.progress.setRange(0, 0)
            else:
                self.progress.setRange(0, 100)
                self.progress.setValue(int(state.progress * 100))
            # The bar's own text fits the bar (a long stage ran out of it); the status line and tooltip say it all.
            room = max(40, self.progress.maximumWidth() - 16)
            self.progress.setFormat(self.progress.fontMetrics().elidedText(
                (state.detail or state.phase).replace("%", "%%"), Qt.TextElideMode.ElideRight, room))
            self.progress.setToolTip(status_text(state))

    def _on_recording(self, path: Path | None) -> None:
        """The open recording changed (a replay, a fork, File → Open, the Run panel's field): every view of it
        follows."""
        self.run_panel.show_recording(path)
        if path is not None:
            self.sessions.set_file(path)

    def show_error(self, text: str) -> None:
        """Bad input or a failed run or export: a message in the window, never a traceback ('' clears it)."""
        self.run_panel.show_message(text)
        if text:
            self.docks["run"].raise_()
            self.statusBar().showMessage(text, 10000)

    # -- replay ---------------------------------------------------------------------------------------------------
    def choose_recording(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a SpecViz recording", str(self.db_path.parent),
                                              "SpecViz recordings (*.db *.sqlite);;All files (*)")
        if path:
            self.model.set_recording(path)
            self.docks["sessions"].raise_()

    # -- layout ----------------------------------------------------------------------------------------------------
    def _fit_speed(self) -> None:
        """The autoplay speed box as wide as its longest choice in the font now (presentation mode's larger font cut
        "2 cycles/s" to "2 cycles/")."""
        fm = self.speed.fontMetrics()
        arrow = self.speed.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        self.speed.setMinimumWidth(max(fm.horizontalAdvance(s) for s in AUTOPLAY_SPEEDS) + arrow + 2 * fm.height())

    def _on_presentation(self, on: bool) -> None:
        self.presentation_action.setChecked(on)
        self._present_toolbar(on)
        self._fit_speed()
        for panel in self.panels.values():
            panel.on_presentation_changed(on)

    def _present_toolbar(self, on: bool) -> None:
        """In presentation mode the toolbar drops the buttons least needed in a demo (Run to breakpoint, Reset), so
        that it fits a projector's 1280 pixels; their menu items and shortcuts stay. Back in place afterwards."""
        tb = self.controls_toolbar
        if on and not self._dropped:
            for a in (self.reset_action, self.bp_action):
                actions = tb.actions()
                before = actions[actions.index(a) + 1] if actions.index(a) + 1 < len(actions) else None
                tb.removeAction(a)
                self._dropped.append((a, before))
        elif not on:
            while self._dropped:
                a, before = self._dropped.pop()
                tb.insertAction(before, a)

    def showEvent(self, e: QShowEvent) -> None:
        super().showEvent(e)
        self.dock_layout.later_hide_stray_tab_bars()

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        self.dock_layout.later_hide_stray_tab_bars()

    def _on_session_opened(self, source) -> None:
        """The Run panel tells the truth: a replay shows the replayed session's settings, read-only."""
        if source.live:
            self.run_panel.show_live()
        else:
            self.run_panel.show_replay(source.info)
        # "Why did this cycle stop" answers for every method, so it opens in front.
        if not self.dock_layout.presenting:
            self.docks["stop_cause"].raise_()
        self._update_title()

    # -- misc ---------------------------------------------------------------------------------------------------------
    def _update_title(self) -> None:
        src = self.model.source
        if src is None:
            self.setWindowTitle("SpecViz")
            self.info_label.setText("")
            return
        info = src.info
        kind = "live" if src.live else "replay"
        self.setWindowTitle(f"SpecViz — {info.method} · {kind} · cycle {max(self.model.index, 0)}")
        rec = self.model.record
        self.info_label.setToolTip(self.model.damage_text)
        if rec is None:  # damaged: the full reason in the panels and the tooltip, not in the status bar's width
            self.info_label.setText(f"{info.method} · cycle {self.model.index} is damaged" if self.model.damage_text
                                    else "")
        else:
            self.info_label.setText(f"{info.method} · cycle {rec.index} · {rec.mode} · {rec.n_verified} verified · "
                                    f"{rec.n_accepted} accepted + bonus · cache {rec.cache_len}")

    def show_shortcuts(self) -> None:
        rows = [(a.text().replace("&", ""), a.shortcut().toString()) for a in self.actions() if not a.shortcut().isEmpty()]
        html = "<table>" + "".join(f"<tr><td><b>{k}</b>&nbsp;&nbsp;</td><td>{t}</td></tr>" for t, k in rows) + "</table>"
        QMessageBox.information(self, "Keyboard shortcuts", html)

    def show_about(self) -> None:
        QMessageBox.about(self, "About SpecViz", "SpecViz: a visual debugger for tree-based speculative decoding.")

    def closeEvent(self, e: QCloseEvent) -> None:
        """Closing mid-run is safe: queued work is dropped, the forward in flight finishes, the session is marked
        interrupted; the wait is a few seconds at most."""
        if self._persist_layout:
            self.dock_layout.save()
        engine = self.controller.worker is not None
        if engine:
            self.statusBar().showMessage("Finishing the cycle in flight…")
            QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            self.controller.shutdown()
            stop_head_training()  # a draft head in training stops, unsaved
        finally:
            if engine:
                QApplication.restoreOverrideCursor()
        self._gc.stop()
        super().closeEvent(e)
