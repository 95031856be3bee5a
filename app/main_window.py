"""The main window: panels in docks around the draft tree, one session model, one engine thread."""

from __future__ import annotations

import csv
from pathlib import Path

from PySide6.QtCore import QByteArray, Qt, QTimer, Signal
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
    QWidget,
)

from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.records import SessionInfo
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import LiveSource, RecordingSource
from specviz_core.vocab import TokenText, load_token_text

from .gc_guard import UiThreadGC
from .panels.base import export_widget
from .panels.charts import ChartsPanel
from .panels.kv_view import KVView
from .panels.mask_view import MaskView
from .panels.output_view import OutputView
from .panels.run_panel import RunPanel
from .panels.sessions_view import SessionsView
from .panels.spine_panel import SpinePanel
from .panels.timeline import TimelinePanel
from .panels.tree_view import TreeView
from .settings import settings
from .worker import WorkerThread

AUTOPLAY_SPEEDS = {"0.5 cycles/s": 2000, "1 cycle/s": 1000, "2 cycles/s": 500, "5 cycles/s": 200, "10 cycles/s": 100}
#: Live cycles arriving faster than this are shown at most this often (ms), so a fast GPU cannot flood the UI.
LIVE_REFRESH_MS = 40
LAYOUT_VERSION = 1


class MainWindow(QMainWindow):
    """One window: run controls, the draft tree in the middle, mask / KV / output / charts around it."""

    # Requests to the engine thread (queued: the worker lives there).
    _begin = Signal(object, str)
    _step = Signal(int)
    _run = Signal(object)
    _reset = Signal()
    _baseline = Signal()

    def __init__(self, db_path: Path, restore_layout: bool = True) -> None:
        super().__init__()
        self.setWindowTitle("SpecViz")
        self.model = SessionModel()
        self.db_path = Path(db_path)
        self._worker: WorkerThread | None = None
        self._busy = False
        self._live_info: SessionInfo | None = None
        self._live_done = True
        self._inflight = 0
        """Requests sent to the engine thread and not yet done."""
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
        self.panels: dict[str, QWidget] = {
            "tree": self.tree, "output": self.output, "spine": self.spine, "mask": self.mask, "kv": self.kv,
            "charts": self.charts, "run": self.run_panel, "sessions": self.sessions, "timeline": self.timeline,
        }
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
        self.statusBar().showMessage("Press F10 to decode the first cycle of the demo prompt, or open a recording (Ctrl+O).")

        # Wiring: panels talk through the model; the window connects the rest.
        self.run_panel.step_requested.connect(self.step)
        self.run_panel.run_requested.connect(self.run)
        self.run_panel.run_to_breakpoint_requested.connect(self.run_to_breakpoint)
        self.run_panel.pause_requested.connect(self.pause)
        self.run_panel.reset_requested.connect(self.reset)
        self.sessions.open_requested.connect(self.open_session)
        if hasattr(self.spine, "span_changed"):
            self.spine.span_changed.connect(self.output.set_matched_span)
        self.model.session_opened.connect(lambda src: self._update_title())
        self.model.cycle_changed.connect(lambda rec: self._update_title())
        self._live_timer = QTimer(self)
        self._live_timer.setSingleShot(True)
        self._live_timer.setInterval(LIVE_REFRESH_MS)
        self._live_timer.timeout.connect(self._show_latest)
        self._autoplay_timer = QTimer(self)
        self._autoplay_timer.timeout.connect(self._autoplay_tick)

        self.sessions.set_file(self.db_path)
        self.run_panel.set_running(False, False)
        self.resize(1500, 940)
        self.proportion_docks()
        self._default_state = self.saveState(LAYOUT_VERSION)
        self._persist_layout = restore_layout
        if restore_layout:
            self._restore_layout()

    # -- construction --------------------------------------------------------------------------------
    def _dock(self, name: str, widget: QWidget, area: Qt.DockWidgetArea) -> None:
        dock = QDockWidget(getattr(widget, "title", name.title()), self)
        dock.setObjectName(f"dock_{name}")
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        self.docks[name] = dock

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
        self.step_action = self._action("&Step", "F10", self.step, "Decode one cycle")
        self.run_action = self._action("&Run", "F5", self.run, "Decode until the end or Pause")
        self.pause_action = self._action("&Pause", "F6", self.pause, "Stop after the cycle in flight")
        self.bp_action = self._action("Run to &breakpoint", "F8", self.run_to_breakpoint,
                                      "Decode until a cycle matches the breakpoint set in the Run panel")
        self.reset_action = self._action("Rese&t", "Ctrl+R", self.reset, "End the session; it stays recorded")
        for a in (self.step_action, self.run_action, self.pause_action, self.bp_action, self.reset_action):
            r.addAction(a)

        g = m.addMenu("&Go")
        self.prev_action = self._action("&Previous cycle", "Left", lambda: self.model.step(-1))
        self.next_action = self._action("&Next cycle", "Right", lambda: self.model.step(1))
        self.first_action = self._action("&First cycle", "Home", lambda: self.model.set_cycle(0))
        self.last_action = self._action("&Last cycle", "End", lambda: self.model.set_cycle(self.model.n_cycles - 1))
        self.autoplay_action = self._action("&Autoplay", "Space", self.toggle_autoplay,
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
        self.speed.setCurrentText("2 cycles/s")
        self.speed.setToolTip("Autoplay speed")
        self.speed.currentTextChanged.connect(lambda t: self._autoplay_timer.setInterval(AUTOPLAY_SPEEDS[t]))
        tb.addWidget(self.speed)
        tb.addSeparator()
        tb.addAction(self.presentation_action)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, tb)
        self.controls_toolbar = tb
        tl = QToolBar("Timeline")
        tl.setObjectName("toolbar_timeline")
        tl.setMovable(False)
        tl.addWidget(self.timeline)
        self.addToolBar(Qt.ToolBarArea.BottomToolBarArea, tl)
        self.info_label = QLabel()
        self.statusBar().addPermanentWidget(self.info_label)

    def proportion_docks(self) -> None:
        """Share the window so the draft tree keeps about half its width at any size."""
        w, h = self.width(), self.height()
        self.resizeDocks([self.docks["run"]], [max(250, int(w * 0.2))], Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["mask"]], [max(300, int(w * 0.27))], Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["output"]], [max(160, int(h * 0.26))], Qt.Orientation.Vertical)
        self.resizeDocks([self.docks["mask"], self.docks["kv"]], [int(h * 0.36), int(h * 0.24)], Qt.Orientation.Vertical)

    # -- layout persistence --------------------------------------------------------------------------
    def _restore_layout(self) -> None:
        s = settings()
        geom, state = s.value("window/geometry"), s.value("window/state")
        if isinstance(geom, QByteArray):
            self.restoreGeometry(geom)
        if isinstance(state, QByteArray):
            self.restoreState(state, LAYOUT_VERSION)

    def save_layout(self) -> None:
        s = settings()
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self._normal_state if self._normal_state is not None else self.saveState(LAYOUT_VERSION))
        s.sync()

    def reset_layout(self) -> None:
        if self.presentation_action.isChecked():
            self.toggle_presentation()
        self.restoreState(self._default_state, LAYOUT_VERSION)

    # -- the engine thread ------------------------------------------------------------------------------
    def worker(self) -> WorkerThread:
        if self._worker is None:
            self._worker = WorkerThread()
            w = self._worker.worker
            self._begin.connect(w.begin)
            self._step.connect(w.step)
            self._run.connect(w.run)
            self._reset.connect(w.reset)
            self._baseline.connect(w.measure_baseline)
            w.progress.connect(self._on_progress)
            w.session_started.connect(self._on_session_started)
            w.cycle_ready.connect(self._on_cycle_ready)
            w.session_finished.connect(self._on_session_finished)
            w.baseline_ready.connect(self._on_baseline)
            w.busy_changed.connect(self._on_busy)
            w.error.connect(self.show_error)
            w.request_done.connect(self._on_request_done)
            for sig in (self._begin, self._step, self._run, self._reset, self._baseline):
                sig.connect(self._on_request_sent)
        return self._worker

    def _on_request_sent(self, *args) -> None:
        self._inflight += 1

    def _on_request_done(self) -> None:
        self._inflight -= 1

    @property
    def idle(self) -> bool:
        """No request is waiting for or running on the engine thread."""
        return self._inflight == 0

    def _ensure_session(self) -> bool:
        """Start a live session from the run panel if none is open; False (with a message) on bad input."""
        if self._live_info is not None and not self._live_done:
            return True
        if self._busy:
            return False
        try:
            req = self.run_panel.request()
        except SpecVizError as e:
            self.show_error(str(e))
            return False
        self.run_panel.show_message("")
        self._stop_autoplay_if_replay()
        self.worker()
        self._live_info = None
        self._live_done = False
        self.run_panel.set_locked(True)
        self._begin.emit(req, str(self.run_panel.db_path()))
        return True

    def step(self) -> None:
        if self._busy:
            return
        if self._ensure_session():
            self.model.follow_live = True
            self._step.emit(1)

    def run(self) -> None:
        if self._busy:
            return
        if self._ensure_session():
            self.model.follow_live = False
            self._run.emit(None)

    def run_to_breakpoint(self) -> None:
        if self._busy:
            return
        bp = self.run_panel.breakpoint()
        if self._ensure_session():
            self.model.follow_live = False
            self._run.emit(bp)
            self.statusBar().showMessage(f"Running to the first cycle where: {bp.label()}")

    def pause(self) -> None:
        if self._worker is not None:
            self._worker.worker.pause()
        self._autoplay_timer.stop()
        self.autoplay_action.setChecked(False)

    def reset(self) -> None:
        self.pause()
        if self._worker is not None and self._live_info is not None and not self._live_done:
            self._reset.emit()
        self._live_done = True
        self._live_info = None
        self.model.close()
        self.run_panel.set_locked(False)
        self.run_panel.set_running(self._busy, False)
        self.run_panel.set_status("No session: press Step (F10) to start one.")
        self.charts.set_ar_baseline(None, "")

    # -- worker callbacks (UI thread) ------------------------------------------------------------------------
    def _on_progress(self, stage: str, fraction: float) -> None:
        self.progress.setVisible(stage != "ready")
        if fraction < 0:
            self.progress.setRange(0, 0)
        else:
            self.progress.setRange(0, 100)
            self.progress.setValue(int(fraction * 100))
        self.progress.setFormat(stage)
        self.statusBar().showMessage(stage[:1].upper() + stage[1:] + "…" if stage != "ready" else "Model ready")

    def _on_session_started(self, info: SessionInfo, tokenizer) -> None:
        self._live_info = info
        self._live_done = False
        self.model.open(LiveSource(info), TokenText(tokenizer))
        self.run_panel.set_status(f"Live session {info.id}: {info.method} on {info.device}, recorded to "
                                  f"{self.run_panel.db_path().name}")
        self.sessions.refresh()

    def _on_cycle_ready(self, cycle) -> None:
        if not isinstance(self.model.source, LiveSource):
            return
        record = cycle.record
        follow = self.model.follow_live
        self.model.follow_live = False
        self.model.append(record, cycle.summary)
        self.model.follow_live = follow
        if follow:
            self.model.set_cycle(record.index)
        elif not self._live_timer.isActive():
            self._live_timer.start()
        if record.index == 0:
            self._baseline.emit()

    def _show_latest(self) -> None:
        if isinstance(self.model.source, LiveSource):
            self.model.set_cycle(self.model.n_cycles - 1)

    def _on_session_finished(self, info: SessionInfo) -> None:
        if self._live_info is not None and info.id == self._live_info.id:
            self._live_done = True
            self._show_latest()
            self.run_panel.set_status(f"Session {info.id} {info.status}"
                                      f"{' (' + info.stop_reason + ')' if info.stop_reason else ''}: "
                                      f"{info.n_tokens} tokens in {info.n_forward} forwards, "
                                      f"{info.mean_accepted:.2f} tokens/forward. Reset to start another.")
            self._autoplay_timer.stop()
            self.autoplay_action.setChecked(False)
        self.sessions.refresh()

    def _on_baseline(self, tokens_per_s: float, note: str) -> None:
        self.charts.set_ar_baseline(tokens_per_s, note)

    def _on_busy(self, busy: bool) -> None:
        self._busy = busy
        self.run_panel.set_running(busy, self._live_info is not None)
        for a in (self.step_action, self.run_action, self.bp_action):
            a.setEnabled(not busy)
        self.pause_action.setEnabled(busy)
        if not busy:
            self._live_timer.stop()
            self._show_latest()
            self.progress.setVisible(False)

    def show_error(self, text: str) -> None:
        """Bad input or a failed run: a message in the window, never a traceback."""
        self.run_panel.show_message(text)
        self.docks["run"].raise_()
        self.statusBar().showMessage(text, 10000)
        if self._live_info is None:
            self.run_panel.set_locked(False)
            self._live_done = True

    # -- replay ---------------------------------------------------------------------------------------------------
    def choose_recording(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a SpecViz recording", str(self.db_path.parent),
                                              "SpecViz recordings (*.db *.sqlite);;All files (*)")
        if path:
            self.sessions.set_file(path)
            self.docks["sessions"].raise_()

    def open_session(self, db: str, session_id: str | None = None) -> bool:
        """Replay a recorded session (the live one, if any, keeps decoding in the background)."""
        if self._busy:
            self.show_error("Pause the running session before opening another one.")
            return False
        try:
            source = RecordingSource(Recording(db), session_id)
        except SpecVizError as e:
            self.show_error(str(e))
            return False
        if self._live_info is not None and not self._live_done:
            self.reset()
        self.model.open(source, load_token_text(source.info.tokenizer))
        self.charts.set_ar_baseline(*_recorded_baseline(source))
        info = source.info
        self.run_panel.set_status(f"Replaying session {info.id}: {info.method} on {info.device}, "
                                  f"{self.model.n_cycles} cycles, from {Path(db).name}. Step (F10) starts a new "
                                  "live session with the settings below.")
        self.statusBar().showMessage(f"Replaying session {info.id} from {db}", 5000)
        return True

    # -- demo -------------------------------------------------------------------------------------------------------
    def toggle_autoplay(self) -> None:
        if self._autoplay_timer.isActive():
            self._autoplay_timer.stop()
            self.autoplay_action.setChecked(False)
        else:
            self._autoplay_timer.start(AUTOPLAY_SPEEDS[self.speed.currentText()])
            self.autoplay_action.setChecked(True)

    def _autoplay_tick(self) -> None:
        if isinstance(self.model.source, LiveSource) or self.model.source is None:
            if self._live_done and self.model.source is not None:
                self.toggle_autoplay()
            elif not self._busy:
                self.step()
        elif self.model.index >= self.model.n_cycles - 1:
            self.toggle_autoplay()
        else:
            self.model.step(1)

    def _stop_autoplay_if_replay(self) -> None:
        if self._autoplay_timer.isActive() and not isinstance(self.model.source, LiveSource):
            self.toggle_autoplay()

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
        if hasattr(self.tree, "fit"):
            self.tree.fit()

    # -- export -------------------------------------------------------------------------------------------------------
    def export_panel(self, name: str, path: str | Path) -> Path:
        widget = self if name == "window" else self.panels[name]
        target = widget.export_target() if hasattr(widget, "export_target") else widget
        return export_widget(target, path)

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
        rows = self.model.summaries()
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["cycle", "mode", "verified", "accepted", "committed", "tokens", "cycle_ms", "spine_broke_at",
                        "spine_continued", "spine_ratio", "ema_p_s"])
            for s in rows:
                w.writerow([s.index, s.mode, s.n_verified, s.n_accepted, s.n_committed,
                            self.model.vocab.text(s.committed_ids), f"{s.cycle_ms:.3f}",
                            "" if s.spine_broke_at is None else s.spine_broke_at, int(s.spine_continued),
                            s.state.get("spine_ratio", ""), s.state.get("ema_p_s", "")])
        return len(rows)

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
        if rec is not None:
            self.info_label.setText(f"{info.method} · cycle {rec.index} · {rec.mode} · {rec.n_verified} verified · "
                                    f"{rec.n_accepted} accepted + bonus · cache {rec.cache_len}")

    def show_shortcuts(self) -> None:
        rows = [(a.text().replace("&", ""), a.shortcut().toString()) for a in self.actions() if not a.shortcut().isEmpty()]
        html = "<table>" + "".join(f"<tr><td><b>{k}</b>&nbsp;&nbsp;</td><td>{t}</td></tr>" for t, k in rows) + "</table>"
        QMessageBox.information(self, "Keyboard shortcuts", html)

    def show_about(self) -> None:
        QMessageBox.about(self, "About SpecViz", "SpecViz: a visual debugger for tree-based speculative decoding.")

    def closeEvent(self, e: QCloseEvent) -> None:
        """Closing mid-run is safe: the cycle in flight finishes, the session is marked interrupted."""
        self._autoplay_timer.stop()
        if self._persist_layout:
            self.save_layout()
        if self._worker is not None:
            self.statusBar().showMessage("Finishing the cycle in flight…")
            QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
            try:
                self._worker.stop()
            finally:
                QApplication.restoreOverrideCursor()
            self._worker = None
        self._gc.stop()
        super().closeEvent(e)


def _recorded_baseline(source: RecordingSource) -> tuple[float | None, str]:
    """An AR session on the same prompt, model and device in the same file: its speed is the baseline."""
    info = source.info
    if info.method == "ar":
        return info.tokens_per_s or None, "this session is AR"
    best = None
    for s in source.recording.sessions():
        if (s.method == "ar" and s.prompt_ids == info.prompt_ids and s.model == info.model and s.device == info.device
                and s.n_tokens >= 8):
            best = s
    if best is None:
        return None, ""
    return best.tokens_per_s, f"AR session {best.id} on the same prompt ({best.n_tokens} tokens)"
