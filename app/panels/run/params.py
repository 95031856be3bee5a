"""The editors of a session's settings, for the Run panel and the fork dialog: one widget per method parameter and
per decode setting, bounded by the same fields and :data:`~specviz_core.session.spec.LIMITS` the command line checks
against, read and set."""

from __future__ import annotations

import dataclasses
from typing import Any

from PySide6.QtCore import QRegularExpression
from PySide6.QtGui import QRegularExpressionValidator
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QLineEdit, QSpinBox, QStyle, QWidget

from specviz_core.session.spec import BUDGET_WORDS, Limit

#: The largest number a QSpinBox holds; a setting whose bound is past it is typed into a line edit instead.
SPIN_MAX = 2**31 - 1


class WholeNumberEdit(QLineEdit):
    """A whole number past a spin box's reach (a seed up to 2**63 - 1), with a spin box's ``value``/``setValue``."""

    def __init__(self, lo: int, hi: int) -> None:
        super().__init__()
        self.lo, self.hi = lo, hi
        self.setValidator(QRegularExpressionValidator(QRegularExpression(r"\d{1,19}"), self))

    def value(self) -> int | str:
        """The number typed (its text when it is none: the spec's check says what is wrong)."""
        text = self.text().strip()
        return int(text) if text.isdigit() else text

    def setValue(self, value: int) -> None:  # noqa: N802 - a spin box's name
        self.setText(str(int(value)))

    def maximum(self) -> int:
        return self.hi


def limit_widget(limit: Limit) -> QSpinBox | QDoubleSpinBox | WholeNumberEdit:
    """An editor for one of the session's numbers, bounded as the command line bounds it, at its default."""
    w: QSpinBox | QDoubleSpinBox | WholeNumberEdit
    if limit.kind is float:
        w = QDoubleSpinBox()
        w.setDecimals(2)
        w.setSingleStep(0.1)
        w.setRange(float(limit.lo), float(limit.hi))
    elif limit.hi <= SPIN_MAX:
        w = QSpinBox()
        w.setRange(int(limit.lo), int(limit.hi))
    else:
        w = WholeNumberEdit(int(limit.lo), int(limit.hi))
    w.setToolTip(f"{limit.help[0].upper()}{limit.help[1:]}.\n{limit.words[0].upper()}{limit.words[1:]}; "
                 f"default {limit.default:g}.")
    w.setValue(limit.default)  # type: ignore[arg-type]
    return w


HEAD_PLACEHOLDER = "the model's own (train-head), or an EAGLE head folder"


def param_widget(f: dataclasses.Field) -> QWidget:
    default = f.default
    choices = f.metadata.get("choices")
    lo, hi = f.metadata.get("minimum"), f.metadata.get("maximum")  # the bounds the CLI checks too
    if choices:
        w = QComboBox()
        w.addItems([str(c) for c in choices])
        w.setCurrentText(str(default))
        return w
    if isinstance(default, bool):
        w = QCheckBox()
        w.setChecked(default)
        return w
    if f.name == "budget":  # auto (the default), paper, or a number typed in
        w = QComboBox()
        w.setEditable(True)
        w.addItems(list(BUDGET_WORDS))
        w.setValidator(QRegularExpressionValidator(QRegularExpression(r"auto|paper|\d{1,4}"), w))
        w.setCurrentText("auto")
        return w
    if isinstance(default, int):
        w = QSpinBox()
        w.setRange(int(lo) if lo is not None else -(2**31), int(hi) if hi is not None else 2**31 - 1)
        w.setValue(default)
        return w
    if isinstance(default, float):
        w = QDoubleSpinBox()
        w.setDecimals(4)
        w.setRange(float(lo) if lo is not None else -1e9, float(hi) if hi is not None else 1e9)
        w.setSingleStep(0.05 if abs(default) < 2 else 1.0)
        w.setValue(default)
        return w
    w = QLineEdit("" if default is None else str(default))
    if f.name == "head":  # a folder: typed, pasted, or chosen
        w.setPlaceholderText(HEAD_PLACEHOLDER)
        browse = w.addAction(w.style().standardIcon(QStyle.StandardPixmap.SP_DirOpenIcon),
                             QLineEdit.ActionPosition.TrailingPosition)
        browse.setToolTip("Choose a folder holding an EAGLE head (EAGLE-1/2 or EAGLE-3 layout: config.json and "
                          "pytorch_model.bin or model.safetensors)")
        browse.triggered.connect(lambda: _choose_head(w))
    return w


def _choose_head(w: QLineEdit) -> None:
    folder = QFileDialog.getExistingDirectory(w, "EAGLE head folder", w.text() or "")
    if folder:
        w.setText(folder)


def param_value(w: QWidget):
    if isinstance(w, QComboBox):
        text = w.currentText().strip()
        return int(text) if w.isEditable() and text.isdigit() else text  # the budget: a word or a number
    if isinstance(w, QCheckBox):
        return w.isChecked()
    if isinstance(w, (QSpinBox, QDoubleSpinBox)):
        return w.value()
    return w.text()


def set_param_value(w: QWidget, value: Any) -> None:
    """Show ``value`` (as a session recorded it) in the editor ``w``."""
    if isinstance(w, QComboBox):
        if w.findText(str(value)) < 0:
            w.addItem(str(value))
        w.setCurrentText(str(value))
    elif isinstance(w, QCheckBox):
        w.setChecked(bool(value))
    elif isinstance(w, QSpinBox):
        w.setValue(int(value))
    elif isinstance(w, QDoubleSpinBox):
        w.setValue(float(value))
    elif isinstance(w, QLineEdit):
        w.setText("" if value is None else str(value))
