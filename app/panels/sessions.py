"""The session browser: every session in a recording file; double-click (or Enter) opens one."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from specviz_app.panels.base import PanelMixin
from specviz_core.analysis.compare import fork_label, fork_tree
from specviz_core.errors import DamagedRecording, SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.records import SessionInfo
from specviz_core.viewer.session_model import SessionModel

COLUMNS = ("Method", "Model", "Prompt", "Tokens", "Tokens/fwd", "Tokens/s", "Status", "Date")


class SessionsView(PanelMixin, QWidget):
    """Lists the sessions of one recording file, newest first."""

    title = "Sessions"
    open_requested = Signal(str, str)
    """(db path, session id)"""

    @classmethod
    def create(cls, model: SessionModel, recording: Path) -> SessionsView:
        """Filled by the window with the sessions of the open recording."""
        return cls()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.path: Path | None = None
        self.sessions: list[SessionInfo] = []
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        top = QHBoxLayout()
        self.file_label = QLabel("No recording open")
        self.file_label.setWordWrap(True)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setToolTip("Read the file again (sessions recorded elsewhere appear)")
        self.refresh_button.clicked.connect(self.refresh)
        self.open_button = QPushButton("Open")
        self.open_button.setToolTip("Open the selected session for replay (Enter or double-click)")
        self.open_button.clicked.connect(self._open_selected)
        top.addWidget(self.file_label, 1)
        top.addWidget(self.refresh_button)
        top.addWidget(self.open_button)
        layout.addLayout(top)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setSortingEnabled(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.table.doubleClicked.connect(lambda _: self._open_selected())
        self.table.activated.connect(lambda _: self._open_selected())
        layout.addWidget(self.table, 1)
        self.message = QLabel()
        self.message.setWordWrap(True)
        layout.addWidget(self.message)

    def set_file(self, path: str | Path) -> None:
        self.path = Path(path)
        self.refresh()

    def refresh(self) -> None:
        self.message.setText("")
        if self.path is None:
            return
        self.file_label.setText(str(self.path))
        self.file_label.setToolTip(str(self.path))
        if not self.path.exists():
            self.sessions = []
            self.table.setRowCount(0)
            self.message.setText("No sessions recorded here yet.")
            return
        damaged: list[DamagedRecording] = []
        try:
            with Recording(self.path, read_only=True) as rec:  # listing never writes
                tree = fork_tree(list(reversed(rec.sessions(damaged=damaged))))  # newest first, forks under parents
                self.sessions = [s for s, _ in tree]
        except SpecVizError as e:
            self.sessions = []
            self.table.setRowCount(0)
            self.message.setText(f"<span style='color:#c62828'>{e}</span>")
            return
        self.table.setRowCount(len(self.sessions))
        for row, (s, depth) in enumerate(tree):
            prompt = fork_label(s) or " ".join(s.prompt_text.split())
            method = "    " * (depth - 1) + "  └ " + s.method if depth else s.method  # a fork: its parent's child
            values = (method, Path(s.model).name if s.model else "", prompt[:60], str(s.n_tokens),
                      f"{s.tokens_per_forward:.2f}", f"{s.tokens_per_s:.1f}", s.status, s.created[:16].replace("T", " "))
            for col, v in enumerate(values):
                item = QTableWidgetItem(v)
                if col in (3, 4, 5):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                item.setToolTip(f"{s.id} · {s.method} {s.params}\n{prompt[:300]}"
                                + (f"\nFork of {s.parent_session}: cycles before {s.fork_cycle} re-ran its settings"
                                   if s.parent_session else ""))
                self.table.setItem(row, col, item)
        if damaged:  # listed apart: they cannot be opened
            self.message.setText("<span style='color:#c62828'>" + "<br>".join(
                html.escape(f"Session {d.session_id} is damaged: {d.reason}") for d in damaged) + "</span>")
        elif not self.sessions:
            self.message.setText("No sessions recorded here yet.")

    def _open_selected(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if rows and self.path is not None:
            self.open_requested.emit(str(self.path), self.sessions[rows[0].row()].id)
