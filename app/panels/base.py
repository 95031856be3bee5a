"""What every panel does: follow the session model, and export itself as PNG or SVG."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsView, QWidget

from specviz_core.files import new_file_mode
from specviz_core.records import CycleRecord
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import CycleSource

HINT = "Step a cycle (F10) or open a recording"
"""What a panel shows with no cycle to draw."""


def placeholder(model: SessionModel) -> str:
    """What a panel shows in place of the current cycle: why it is damaged, or the hint when there is none."""
    return model.damage_text or HINT


class PanelMixin:
    """What the window may ask of any panel; every callback has a default, so a panel overrides what it needs.

    A panel that follows the session calls ``connect_model`` and is told of its changes through the ``on_*``
    methods; it never keeps its own copy of the current cycle: it reads ``self.model.record``. The Run and
    Sessions panels follow no model and only have a title.
    """

    title = "Panel"
    """The dock's title and the export menu's entry."""

    @classmethod
    def create(cls, model: SessionModel, recording: Path) -> PanelMixin:
        """The panel as the window builds it (:mod:`specviz_app.panels.registry`): on the session model, by default;
        a panel that follows something else says what it takes."""
        return cls(model)  # type: ignore[call-arg]

    def connect_model(self, model: SessionModel) -> None:
        self.model = model
        model.session_opened.connect(self.on_session_opened)
        model.session_closed.connect(self.on_session_closed)
        model.cycle_changed.connect(self.on_cycle_changed)
        model.cycles_appended.connect(self.on_cycles_appended)
        model.node_selected.connect(self.on_node_selected)

    def on_session_opened(self, source: CycleSource) -> None: ...

    def on_session_closed(self) -> None: ...

    def on_cycle_changed(self, record: CycleRecord | None) -> None:
        """The current cycle changed; ``record`` is None when it is damaged (``self.model.damage_text`` says why)."""

    def on_cycles_appended(self, summaries: list) -> None: ...

    def on_node_selected(self, node_id: int | None) -> None: ...

    # -- from the window --------------------------------------------------------------------------------------------
    def on_presentation_changed(self, on: bool) -> None:
        """Presentation mode was switched (the application font has already changed)."""

    def export_target(self) -> QWidget:
        """The widget that "Export panel" saves: the panel itself unless it draws into a child."""
        return self  # type: ignore[return-value]

    def export(self, path: Path) -> Path:
        """Save the panel as PNG or SVG (by the suffix): the widget as shown, unless a panel draws more than it
        shows (the draft tree saves the whole tree)."""
        return export_widget(self.export_target(), path, self.title)


def write_atomically(path: Path, write: Callable[[str], None]) -> Path:
    """``write(tmp)`` into a temporary file beside ``path`` (same suffix, so Qt picks the format), then rename it
    into place: a crash or a failed write never leaves half an image, nor spoils a file already there."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent if str(path.parent) else ".")
    except OSError as e:
        raise OSError(f"cannot write {path}: {e.strerror}") from None
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, new_file_mode())  # mkstemp makes it private; a plain save would not have
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def export_widget(widget: QWidget, path: str | Path, title: str = "SpecViz panel") -> Path:
    """Save a widget as PNG (pixels, at screen resolution x2) or SVG (vector), by the file's suffix (atomically)."""
    path = Path(path)
    return write_atomically(path, lambda tmp: _export(widget, path.suffix.lower(), tmp, title))


def _export(widget: QWidget, suffix: str, path: str, title: str) -> None:
    if suffix == ".svg":
        gen = QSvgGenerator()
        gen.setFileName(path)
        gen.setSize(widget.size())
        gen.setViewBox(QRect(0, 0, widget.width(), widget.height()))
        gen.setTitle(title)
        painter = QPainter(gen)
        try:
            if isinstance(widget, QGraphicsView):  # its own render(painter, target, source)
                widget.render(painter)
            else:  # QWidget's painter overload needs its offset spelled out, or PySide6 takes it for render(device)
                widget.render(painter, QPoint(0, 0))
        finally:
            painter.end()  # a painter left active on a destroyed device crashes the process
    else:
        pixmap = widget.grab()
        if not pixmap.save(path):
            raise OSError(f"could not write {path}")


