"""Paste your generate call: a dialog that maps the arguments of ``model.generate(...)`` to a SpecViz method.

The text may be a JSON object, Python keyword arguments as they appear in code, or the whole call. As the user
types, the dialog shows what it becomes (method, parameters, draft model, max new tokens, temperature), the notes
on what ``generate`` does that one may not expect, or, in one red line, why it cannot be reproduced. Apply fills
the Run panel; it is the same mapping as ``specviz record --generate-kwargs``
(:func:`~specviz_core.session.generate_kwargs.from_generate_kwargs`).
"""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from specviz_app.theme import set_role
from specviz_core.errors import SpecVizError
from specviz_core.session.generate_call import parse_call, resolve_call
from specviz_core.session.generate_kwargs import GenerateCall

EXAMPLE = "model.generate(**inputs, assistant_model=assistant_model, max_new_tokens=64, do_sample=False)"
INTRO = ("Paste the arguments of your <code>generate</code> call: Python (<code>prompt_lookup_num_tokens=10, "
         "max_new_tokens=64</code>), the whole call, or a JSON object. An <code>assistant_model</code> given as a "
         "variable is the draft model chosen in the Run panel.")


def describe(call: GenerateCall) -> str:
    """What a mapped call becomes, in one line."""
    parts = [f"method {call.method}"]
    parts += [f"{k}={v}" for k, v in call.params.items()]
    if call.draft_model:
        parts.append(f"draft model {call.draft_model}")
    if call.max_new_tokens:
        parts.append(f"max new tokens {call.max_new_tokens}")
    parts.append(f"temperature {call.temperature:g}" if call.temperature else "greedy")
    return "→ " + ", ".join(parts)


class GenerateCallDialog(QDialog):
    """``call`` holds the mapped call while the text maps; Apply is enabled only then."""

    def __init__(self, draft_model: str | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Paste your generate() call")
        self.draft_model = draft_model
        self.call: GenerateCall | None = None
        self.error = ""
        lay = QVBoxLayout(self)
        intro = QLabel(INTRO)
        intro.setWordWrap(True)
        lay.addWidget(intro)
        self.text = QPlainTextEdit()
        self.text.setPlaceholderText(EXAMPLE)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setToolTip("The keyword arguments of model.generate(...); literal values are read, nothing is run")
        self.text.setMinimumHeight(90)
        lay.addWidget(self.text, 1)
        self.result = QLabel()
        self.result.setWordWrap(True)
        lay.addWidget(self.result)
        self.notes = QLabel()
        self.notes.setWordWrap(True)
        set_role(self.notes, "hint")
        lay.addWidget(self.notes)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.apply = QPushButton("Apply")
        self.apply.setToolTip("Fill the Run panel with this method and its settings (Ctrl+Enter)")
        self.apply.setShortcut("Ctrl+Return")
        self.buttons.addButton(self.apply, QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        lay.addWidget(self.buttons)
        self._timer = QTimer(self, singleShot=True, interval=150)
        self._timer.timeout.connect(self.map_text)
        self.text.textChanged.connect(self._timer.start)
        self.resize(640, 360)
        self.map_text()

    def set_text(self, text: str) -> None:
        """Put ``text`` in the box and map it now."""
        self.text.setPlainText(text)
        self.map_text()

    def map_text(self) -> None:
        """Map the text as it stands: the result and notes, or the refusal in one line."""
        self._timer.stop()
        text = self.text.toPlainText()
        self.call, self.error = None, ""
        if not text.strip():
            self.result.setText("")
            self.notes.setText("")
            self.apply.setEnabled(False)
            return
        try:
            self.call = resolve_call(parse_call(text), self.draft_model)
        except SpecVizError as e:
            self.error = str(e).splitlines()[0] if str(e) else "cannot be reproduced"
        self.apply.setEnabled(self.call is not None)
        if self.call is None:
            self.result.setText(f"✗ {self.error}")
            set_role(self.result, "error")
            self.notes.setText("")
            return
        self.result.setText(describe(self.call))
        set_role(self.result, "message")
        self.notes.setText("\n".join(f"• {n}" for n in self.call.notes))
