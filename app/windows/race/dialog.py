"""Run → Race…: choose two to four recorded sessions of one prompt, or record AR and the Run panel's method on its
prompt (one after the other), then race them (docs/compare-race.md).

The dialog only chooses and shows progress; :mod:`specviz_app.shell.actions.race` records and opens the race window.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from specviz_app.theme import set_role
from specviz_core.analysis.compare import fork_label
from specviz_core.records import SessionInfo
from specviz_core.session.spec import SessionSpec

COLUMNS = ("Session", "Model", "Method", "Tokens", "τ (tok/fwd)", "tok/s", "Speed-up", "Prompt")
SPEEDUP_TIP = "tokens/s over the latest AR session of the same prompt and model in this recording"


def prompt_excerpt(info: SessionInfo, n: int = 48) -> str:
    text = " ".join(info.prompt_text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def ar_baselines(sessions: Sequence[SessionInfo]) -> dict[tuple, SessionInfo]:
    """Per (model, prompt ids): the latest AR session with tokens (sessions come newest first)."""
    out: dict[tuple, SessionInfo] = {}
    for s in sessions:
        if s.method == "ar" and s.n_tokens:
            out.setdefault((s.model, s.prompt_ids), s)
    return out


def check_choice(chosen: Sequence[SessionInfo]) -> str:
    """Why these sessions cannot race ('' when they can)."""
    if not 2 <= len(chosen) <= 4:
        return f"Tick two to four sessions to race ({len(chosen)} ticked)."
    prompts = {s.prompt_ids for s in chosen}
    if len(prompts) > 1:
        which = "; ".join(f"{s.id} ({s.method}): “{prompt_excerpt(s, 30)}”" for s in chosen)
        return (f"These sessions decode {len(prompts)} different prompts; a race needs one prompt, so the same "
                f"answer is written side by side. {which}")
    return ""


class RaceDialog(QDialog):
    """Two tabs: recorded sessions (Race) and record-then-race; ``race_requested`` / ``record_requested`` say which."""

    race_requested = Signal(object)
    """The session ids to race, the baseline (AR, if ticked) first."""
    record_requested = Signal()
    cancel_requested = Signal()

    def __init__(self, sessions: Sequence[SessionInfo], db: Path | None, current: SessionInfo | None,
                 request: SessionSpec | None, request_error: str, record_db: Path,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Race")
        self.setMinimumSize(760, 420)
        self.sessions = [s for s in sessions if s.n_tokens]
        self.db = db
        self.recording = False
        layout = QVBoxLayout(self)
        self.tabs = QTabWidget()
        self.tabs.addTab(self._sessions_tab(current), "Recorded sessions")
        self.tabs.addTab(self._record_tab(request, request_error, record_db), "Record AR and this method")
        self.tabs.currentChanged.connect(self._tab_changed)
        layout.addWidget(self.tabs)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setVisible(False)
        layout.addWidget(self.message)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.buttons.accepted.connect(self._go)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        if not self.sessions:
            self.tabs.setCurrentIndex(1)
        self._tab_changed(self.tabs.currentIndex())

    # -- the two tabs -----------------------------------------------------------------------------------------------
    def _sessions_tab(self, current: SessionInfo | None) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
        where = f" of {self.db.name}" if self.db is not None else ""
        intro = QLabel(f"Tick two to four sessions{where} that decode the same prompt. They play side by side at "
                       "their recorded pace; the first ticked AR session is the baseline every speed-up is measured "
                       "against." if self.sessions else
                       f"No recorded sessions{where} yet: record AR and this method on the next tab.")
        intro.setWordWrap(True)
        lay.addWidget(intro)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(list(COLUMNS))
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.headerItem().setToolTip(6, SPEEDUP_TIP)
        self.tree.headerItem().setToolTip(4, "tokens committed per target forward")
        base = ar_baselines(self.sessions)
        ticked_ar = False
        for s in self.sessions:
            ar = base.get((s.model, s.prompt_ids))
            speed = f"{s.tokens_per_s / ar.tokens_per_s:.2f}×" if ar is not None and ar.tokens_per_s > 0 else "—"
            item = QTreeWidgetItem([s.id, Path(s.model).name or s.model, s.method, str(s.n_tokens),
                                    f"{s.tokens_per_forward:.2f}", f"{s.tokens_per_s:.1f}", speed,
                                    fork_label(s) or prompt_excerpt(s)])
            item.setData(0, Qt.ItemDataRole.UserRole, s.id)
            item.setToolTip(7, s.prompt_text[:500])
            item.setToolTip(1, s.model)
            for col in (3, 4, 5, 6):
                item.setTextAlignment(col, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            tick = current is not None and (s.id == current.id or (
                not ticked_ar and ar is s and s.prompt_ids == current.prompt_ids and current.method != "ar"))
            ticked_ar = ticked_ar or (tick and s.method == "ar")
            item.setCheckState(0, Qt.CheckState.Checked if tick else Qt.CheckState.Unchecked)
            self.tree.addTopLevelItem(item)
        header = self.tree.header()
        for col in range(len(COLUMNS) - 1):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        on, off = Qt.CheckState.Checked, Qt.CheckState.Unchecked
        self.tree.itemDoubleClicked.connect(
            lambda item, _c: item.setCheckState(0, off if item.checkState(0) == on else on))
        lay.addWidget(self.tree)
        return w

    def _record_tab(self, request: SessionSpec | None, request_error: str, record_db: Path) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
        self.record_problem = request_error
        if request is not None and request.method == "ar":
            self.record_problem = ("The Run panel's method is AR: choose a speculative method there to race it "
                                   "against plain decoding.")
        if request is not None and not self.record_problem:
            r = request
            defaults = vars(request.choice.card.params_cls())
            changed = ", ".join(f"{k}={v}" for k, v in sorted(request.choice.recorded_params.items())
                                if defaults.get(k) != v and not (k == "budget" and v == "auto"))  # auto: the default
            if request.choice.auto:
                changed = ", ".join(x for x in (changed, "its budget chosen for this device") if x)
            sampling = "greedy" if r.temperature == 0 else f"temperature {r.temperature:g}, seed {r.seed}"
            prompt = " ".join(r.prompt.split())
            text = (f"Records plain decoding (<b>AR</b>), then <b>{r.method}</b> "
                    f"({changed or 'default parameters'}), on the Run panel's prompt, then races them.<br><br>"
                    f"Prompt: “{html.escape(prompt[:160])}{'…' if len(prompt) > 160 else ''}”<br>"
                    f"Model: {html.escape(Path(r.model).name if r.model else 'the default model')} · {sampling} · up "
                    f"to {r.max_new_tokens} tokens each · recorded to {html.escape(record_db.name)}<br><br>"
                    "Both take every setting but the method from the Run panel, so they answer the same prompt "
                    "under the same sampling. They run one after the other on the engine thread, never at the same "
                    "time, so neither's timings include the other's work.")
        else:
            text = f"Cannot record from the Run panel's settings: {html.escape(self.record_problem)}"
        intro = QLabel(text)
        intro.setWordWrap(True)
        intro.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(intro)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.stage = QLabel()
        self.cancel_button = QPushButton("Cancel recording")
        self.cancel_button.setToolTip("Stop after the cycle in flight; the session in progress stays recorded as "
                                      "interrupted")
        self.cancel_button.setVisible(False)
        self.cancel_button.clicked.connect(self.cancel_requested)
        lay.addWidget(self.progress)
        lay.addWidget(self.stage)
        lay.addWidget(self.cancel_button, 0, Qt.AlignmentFlag.AlignLeft)
        lay.addStretch(1)
        return w

    def _tab_changed(self, index: int) -> None:
        self.ok.setText("Race" if index == 0 else "Record and race")
        self.ok.setEnabled(not self.recording and (index == 0 or not self.record_problem))
        self.show_message("")

    # -- choosing -------------------------------------------------------------------------------------------------
    def ticked(self) -> list[SessionInfo]:
        """The ticked sessions, AR first (the baseline), otherwise in list order."""
        by_id = {s.id: s for s in self.sessions}
        ids = [self.tree.topLevelItem(i).data(0, Qt.ItemDataRole.UserRole) for i in range(self.tree.topLevelItemCount())
               if self.tree.topLevelItem(i).checkState(0) == Qt.CheckState.Checked]
        return sorted((by_id[i] for i in ids), key=lambda s: s.method != "ar")

    def set_ticked(self, ids: Sequence[str]) -> None:
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            on = item.data(0, Qt.ItemDataRole.UserRole) in ids
            item.setCheckState(0, Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)

    def _go(self) -> None:
        if self.tabs.currentIndex() == 0:
            chosen = self.ticked()
            problem = check_choice(chosen)
            if problem:
                self.show_message(problem)
                return
            self.race_requested.emit([s.id for s in chosen])
            self.accept()
        elif not self.record_problem:
            self.record_requested.emit()

    def show_message(self, text: str, error: bool = True) -> None:
        self.message.setText(text)
        self.message.setVisible(bool(text))
        set_role(self.message, "error" if error else "message")

    # -- recording ------------------------------------------------------------------------------------------------
    def set_recording(self, on: bool) -> None:
        self.recording = on
        self.tabs.tabBar().setEnabled(not on)
        self.progress.setVisible(on)
        self.cancel_button.setVisible(on)
        self.cancel_button.setEnabled(True)
        self.ok.setEnabled(not on)
        if on:
            self.show_message("")
            self.set_progress("starting", -1.0)

    def set_progress(self, stage: str, fraction: float) -> None:
        if fraction < 0:
            self.progress.setRange(0, 0)
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(fraction * 1000))
        self.stage.setText(stage[:1].upper() + stage[1:] + "…")

    def cancelling(self) -> None:
        self.cancel_button.setEnabled(False)
        self.stage.setText("Cancelling after the cycle in flight…")

    def reject(self) -> None:
        """Closing while recording cancels the recording (after the cycle in flight)."""
        if self.recording:
            self.cancel_requested.emit()
        super().reject()
