"""What the window's menu actions share: how an action is made (its shortcut in its tooltip, known to the window so
its shortcut works anywhere in it) and which recording a session shown belongs to."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QWidget

from specviz_core.viewer.session_model import SessionModel


def window_action(window: QWidget, text: str, shortcut: str | QKeySequence | None, slot: Callable,
                  tip: str = "") -> QAction:
    """An action of ``window`` (its shortcut works anywhere in it), calling ``slot``; the tooltip names the
    shortcut."""
    a = QAction(text, window)
    if shortcut:
        a.setShortcut(QKeySequence(shortcut))
        a.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
    words = tip or text.replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip("…")  # no mnemonic marks
    a.setToolTip(f"{words} ({QKeySequence(shortcut).toString()})" if shortcut else words)
    a.setStatusTip(words)
    a.triggered.connect(slot)
    window.addAction(a)
    return a


def session_file(model: SessionModel) -> Path | None:
    """The open recording, when a session of it is shown (a live one is recorded there)."""
    return model.recording_path if model.source is not None else None
