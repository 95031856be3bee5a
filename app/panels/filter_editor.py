"""One editor for a cycle condition: the Run panel's breakpoint and the timeline's filter are both made of it."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSpinBox, QWidget

from specviz_core.records import MODES
from specviz_core.viewer.filters import K_KINDS, KINDS, MODE_KINDS, CycleFilter


class FilterEditor(QWidget):
    """A kind from :data:`KINDS`, with a ``k`` spin box or a mode box shown only where the kind takes one.

    ``changed`` is emitted with the new :class:`CycleFilter` whenever any part of it is edited.
    """

    changed = Signal(object)

    def __init__(self, label: str, kind_tip: str, *, with_all: bool = True, stretch: bool = False,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.kind = QComboBox()
        for kind, text in KINDS.items():
            if with_all or kind != "all":
                self.kind.addItem(text, kind)
        self.kind.setToolTip(kind_tip)
        self.k = QSpinBox()
        self.k.setRange(0, 64)
        self.k.setToolTip("k, for the 'accepted' conditions")
        self.mode = QComboBox()
        self.mode.addItems(list(MODES))
        self.mode.setToolTip("The mode, for 'Mode is …'")
        row.addWidget(QLabel(label))
        row.addWidget(self.kind, 1 if stretch else 0)
        row.addWidget(self.k)
        row.addWidget(self.mode)
        self._sync()
        self.kind.currentIndexChanged.connect(self._edited)
        self.k.valueChanged.connect(self._edited)
        self.mode.currentIndexChanged.connect(self._edited)

    def value(self) -> CycleFilter:
        return CycleFilter(self.kind.currentData(), k=self.k.value(), mode=self.mode.currentText())

    def _sync(self) -> None:
        kind = self.kind.currentData()
        self.k.setVisible(kind in K_KINDS)
        self.mode.setVisible(kind in MODE_KINDS)

    def _edited(self) -> None:
        self._sync()
        self.changed.emit(self.value())
