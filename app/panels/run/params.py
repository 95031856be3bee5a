"""The Run panel's parameter editors: one widget per method parameter, with the CLI's bounds, read and set."""

from __future__ import annotations

import dataclasses
from typing import Any

from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QLineEdit, QSpinBox, QStyle, QWidget

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
    if isinstance(default, int):
        w = QSpinBox()
        w.setRange(int(lo) if lo is not None else -(2**31), int(hi) if hi is not None else 2**31 - 1)
        w.setValue(default)
        if f.name == "budget":  # budget=auto, the default: below the minimum, the spin box reads "auto"
            w.setMinimum(int(lo if lo is not None else 1) - 1)
            w.setSpecialValueText("auto")
            w.setValue(w.minimum())
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
        return w.currentText()
    if isinstance(w, QCheckBox):
        return w.isChecked()
    if isinstance(w, QSpinBox) and w.specialValueText() and w.value() == w.minimum():
        return "auto"
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
        w.setValue(w.minimum() if value == "auto" and w.specialValueText() else int(value))
    elif isinstance(w, QDoubleSpinBox):
        w.setValue(float(value))
    elif isinstance(w, QLineEdit):
        w.setText("" if value is None else str(value))
