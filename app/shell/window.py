"""The main window: panels in docks around the draft tree, one session model, one engine thread."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QSize, Qt
from PySide6.QtGui import QAction, QCloseEvent, QFont, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QToolBar,
)

from specviz_app.icons import action_icon
from specviz_app.panels.base import PanelMixin, export_widget
from specviz_app.panels.charts.panel import ChartsPanel
from specviz_app.panels.kv.view import KVView
from specviz_app.panels.mask.view import MaskView
from specviz_app.panels.output import OutputView
from specviz_app.panels.run.panel import RunPanel
from specviz_app.panels.sessions import SessionsView
from specviz_app.panels.stop_cause import SpinePanel
from specviz_app.panels.timeline import TimelinePanel
from specviz_app.panels.tree.view import TreeView
from specviz_app.session.controller import AUTOPLAY_SPEEDS, DEFAULT_SPEED, SessionController
from specviz_app.session.gc_guard import UiThreadGC
from specviz_app.shell.actions.audit import AuditActions
from specviz_app.shell.actions.race import RaceActions
from specviz_app.shell.actions.whatif import WhatIfActions
from specviz_app.shell.layout import LAYOUT_VERSION, DockLayout
from specviz_app.windows.train_head import stop_all as stop_head_training
from specviz_core.viewer.cycle_table import write_cycles_csv
from specviz_core.viewer.lifecycle import Activity, SessionState, enabled_actions, status_text
from specviz_core.viewer.session_model import SessionModel

"""Methods whose cycles have a context-copied spine to explain."""


class MainWindow(WhatIfActions, RaceActions, AuditActions, DockLayout, QMainWindow):
    """The shell: the draft tree in the middle, panels in docks around it, menus, toolbars, presentation, export.

    What is shown is the :class:`SessionModel`'s; which session it holds is the :class:`SessionController`'s.
    """

    def __init__(self, db_path: Path, restore_layout: bool = True) -> None:
        super().__init__()
        self.setWindowTitle("SpecViz")
        self.model = SessionModel()
        self.db_path = Path(db_path)
        self._normal_state: QByteArray | None = None
        self._base_font = QApplication.font()
        self._gc = UiThreadGC(self)
        self._gc.start()

        self.tree = TreeView(self.model)
        self.setCentralWidget(self.tree)
        self.run_panel = RunPanel(self.db_path)
        self.sessions = SessionsView()
        self.output = OutputView(self.model)
        self.spine = SpinePanel(self.model)
        self.mask = MaskView(self.model)
        self.kv = KVView(self.model)
        self.charts = ChartsPanel(self.model)
        self.timeline = TimelinePanel(self.model)
        self.panels: dict[str, PanelMixin] = {
            "tree": self.tree, "output": self.output, "spine": self.spine, "mask": self.mask, "kv": self.kv,
            "charts": self.charts, "run": self.run_panel, "sessions": self.sessions, "timeline": self.timeline,
        }
        self.controller = SessionController(self.model, self.run_panel, self)
        self.docks: dict[str, QDockWidget] = {}
        left = Qt.DockWidgetArea.LeftDockWidgetArea
        right = Qt.DockWidgetArea.RightDockWidgetArea
        bottom = Qt.DockWidgetArea.BottomDockWidgetArea
        self._dock("run", self.run_panel, left)
        self._dock("sessions", self.sessions, left)
        self.tabifyDockWidget(self.docks["run"], self.docks["sessions"])
        self.docks["run"].raise_()
        self._dock("mask", self.mask, right)
        self._dock("kv", self.kv, right)
        self._dock("output", self.output, bottom)
        self._dock("spine", self.spine, bottom)
        self._dock("charts", self.charts, bottom)
        self.tabifyDockWidget(self.docks["spine"], self.docks["charts"])
        self.docks["spine"].raise_()
        self._build_actions()
        self._build_toolbars()
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(220)
        self.progress.setVisible(False)
        self.statusBar().addPermanentWidget(self.progress)
        self.state_label = QLabel()
        """The lifecycle's line (a passing message from :meth:`QStatusBar.showMessage` covers it for a while)."""
        self.statusBar().addWidget(self.state_label, 1)
        # One line at a time: a passing message hides the lifecycle's line until it goes (Qt's own hiding of normal
        # widgets did not survive a change of font, and presentation mode drew both, one over the other).
        self.statusBar().messageChanged.connect(lambda text: self.state_label.setVisible(not text))
        self._connect()

        self.model.set_recording(self.db_path)
        self._on_recording(self.model.recording_path)
        self._on_state(self.controller.state)
        self.compact = False
        """The laptop layout: Run and Sessions tabbed with the output, so the tree keeps its width."""
        screen = QApplication.primaryScreen()
        avail = screen.availableGeometry().size() if screen is not None else QSize(1500, 940)
        self.resize(min(1500, avail.width()), min(940, avail.height()))
        self.proportion_docks()
        self._default_state = self.saveState(LAYOUT_VERSION)
        self._persist_layout = restore_layout
        if restore_layout:
            self._restore_layout()

    # -- construction --------------------------------------------------------------------------------
    def _dock(self, name: str, panel: PanelMixin, area: Qt.DockWidgetArea) -> None:
        dock = QDockWidget(panel.title, self)
        dock.setObjectName(f"dock_{name}")
        dock.setWidget(panel)
        self.addDockWidget(area, dock)
        self.docks[name] = dock

    def _connect(self) -> None:
        """Panels talk through the model; the controller's reports go to the widgets that show them."""
        c, rp = self.controller, self.run_panel
        rp.step_requested.connect(c.step)
        rp.run_requested.connect(c.run)
        rp.run_to_breakpoint_requested.connect(c.run_to_breakpoint)
        rp.pause_requested.connect(c.pause)
        rp.reset_requested.connect(c.reset)
        self.sessions.open_requested.connect(c.open_session)
        self.spine.span_changed.connect(self.output.set_matched_span)
        c.state_changed.connect(self._on_state)
        c.settings_locked.connect(rp.set_locked)
        c.session_status.connect(rp.set_status)
        c.notice.connect(self.statusBar().showMessage)
        c.error.connect(self.show_error)
        rp.recording_edited.connect(self.model.set_recording)
        self.model.recording_changed.connect(self._on_recording)
        self.charts.actions.measure_baseline.connect(c.record_ar_baseline)
        self.charts.actions.measure_curve.connect(c.measure_cost_curve)
        self.charts.pop_out_requested.connect(self.pop_out_charts)
        c.autoplay_changed.connect(self.autoplay_action.setChecked)
        c.sessions_changed.connect(self.sessions.refresh)
        self.model.session_opened.connect(self._on_session_opened)
        self.model.cycle_changed.connect(lambda rec: self._update_title())

    def _action(self, text: str, shortcut: str | QKeySequence | None, slot, tip: str = "") -> QAction:
        a = QAction(text, self)
        if shortcut:
            a.setShortcut(QKeySequence(shortcut))
            a.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        a.setToolTip(f"{tip or text} ({QKeySequence(shortcut).toString()})" if shortcut else (tip or text))
        a.setStatusTip(tip or text)
        a.triggered.connect(slot)
        self.addAction(a)
        return a

    def _build_actions(self) -> None:
        m = self.menuBar()
        f = m.addMenu("&File")
        self.open_action = self._action("&Open recording…", QKeySequence.StandardKey.Open, self.choose_recording,
                                        "Open a SpecViz recording (.db) to replay its sessions")
        f.addAction(self.open_action)
        export = f.addMenu("&Export panel")
        for name in ("tree", "mask", "kv", "charts", "output", "spine"):
            export.addAction(self._action(f"{self.panels[name].title}…", None,
                                          lambda _=False, n=name: self.export_panel_dialog(n),
                                          "Save the panel as PNG or SVG"))
        export.addAction(self._action("Whole window…", None, lambda: self.export_panel_dialog("window"),
                                      "Save the whole window as PNG or SVG"))
        f.addAction(self._action("Export cycles to &CSV…", "Ctrl+Shift+E", self.export_csv_dialog,
                                 "One row per cycle of the current session"))
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
        self._build_whatif(r)
        self._build_race(r)
        self._build_audit(r)

        g = m.addMenu("&Go")
        self.prev_action = self._action("&Previous cycle", "Left", lambda: self.model.step(-1))
        self.next_action = self._action("&Next cycle", "Right", lambda: self.model.step(1))
        self.first_action = self._action("&First cycle", "Home", lambda: self.model.set_cycle(0))
        self.last_action = self._action("&Last cycle", "End", lambda: self.model.set_cycle(self.model.n_cycles - 1))
        self.autoplay_action = self._action("&Autoplay", "Space", self.controller.toggle_autoplay,
                                            "Step through cycles at the chosen speed (decodes when live)")
        self.autoplay_action.setCheckable(True)
        for a in (self.prev_action, self.next_action, self.first_action, self.last_action, self.autoplay_action):
            g.addAction(a)

        v = m.addMenu("&View")
        self.presentation_action = self._action("&Presentation mode", "F11", self.toggle_presentation,
                                                "Large fonts and only the panels that tell the story")
        self.presentation_action.setCheckable(True)
        v.addAction(self.presentation_action)
        v.addAction(self._action("&Reset layout", None, self.reset_layout, "Put every panel back where it started"))
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
                "fork": self.fork_action, "compare": self.compare_action, "race": self.race_action,
                "audit": self.audit_action}

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
            self.progress.setFormat(state.detail or state.phase)
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

    # -- presentation ----------------------------------------------------------------------------------------------
    def toggle_presentation(self) -> None:
        """Large fonts; only tree, output, charts and the spine explanation."""
        on = self._normal_state is None
        if on:
            self._normal_state = self.saveState(LAYOUT_VERSION)
            for name in ("run", "sessions", "mask", "kv"):
                self.docks[name].hide()
            font = QFont(self._base_font)
            font.setPointSizeF(self._base_font.pointSizeF() * 1.5)
            QApplication.setFont(font)
            self.docks["charts"].raise_()
            self.resizeDocks([self.docks["output"]], [int(self.height() * 0.4)], Qt.Orientation.Vertical)
            self.resizeDocks([self.docks["output"], self.docks["charts"]],
                             [int(self.width() * 0.4), int(self.width() * 0.6)], Qt.Orientation.Horizontal)
        else:
            QApplication.setFont(self._base_font)
            self.restoreState(self._normal_state, LAYOUT_VERSION)
            self._normal_state = None
        self.presentation_action.setChecked(on)
        for panel in self.panels.values():
            panel.on_presentation_changed(on)
        self._later_hide_stray_tab_bars()

    # -- export -------------------------------------------------------------------------------------------------------
    def export_panel(self, name: str, path: str | Path) -> Path:
        """Save a panel (by its name in ``panels``) or the whole ``window`` as PNG or SVG."""
        if name == "window":
            return export_widget(self, path, "SpecViz")
        return self.panels[name].export(Path(path))

    def export_panel_dialog(self, name: str) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export panel", str(Path.home() / f"specviz-{name}.png"),
                                              "PNG image (*.png);;SVG drawing (*.svg)")
        if path:
            try:
                self.export_panel(name, path)
                self.statusBar().showMessage(f"Saved {path}", 5000)
            except OSError as e:
                self.show_error(str(e))

    def export_csv(self, path: str | Path) -> int:
        """One row per cycle of the current session; returns the number of rows."""
        return write_cycles_csv(path, self.model.summaries(), self.model.vocab)

    def export_csv_dialog(self) -> None:
        if self.model.source is None:
            self.show_error("No session open: step a cycle or open a recording first.")
            return
        path, _ = QFileDialog.getSaveFileName(self, "Export cycles", str(Path.home() / "specviz-cycles.csv"),
                                              "CSV (*.csv)")
        if path:
            try:
                n = self.export_csv(path)
                self.statusBar().showMessage(f"Saved {n} cycles to {path}", 5000)
            except OSError as e:
                self.show_error(f"cannot write {path}: {e.strerror}")

    def _on_session_opened(self, source) -> None:
        """The Run panel tells the truth: a replay shows the replayed session's settings, read-only."""
        if source.live:
            self.run_panel.show_live()
        else:
            self.run_panel.show_replay(source.info)
        # "Why did this cycle stop" answers for every method, so it opens in front.
        if self._normal_state is None:
            self.docks["spine"].raise_()
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
            self.save_layout()
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
