"""The fork dialog: the settings a fork continues with, pre-filled from the session it forks (docs/fork.md)."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from specviz_app.panels.run.params import limit_widget, param_value, param_widget, set_param_value
from specviz_core.methods import CARDS, param_specs
from specviz_core.records import SessionInfo
from specviz_core.session.spec import MAX_NEW_TOKENS, SEED, TEMPERATURE


class ForkDialog(QDialog):
    """Cycle, method, every parameter, temperature, seed and max new tokens; ``changes()`` gives what
    :func:`specviz_core.session.fork.fork_request` takes."""

    def __init__(self, parent_info: SessionInfo, cycle: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.info = parent_info
        self.setWindowTitle(f"Fork session {parent_info.id}")
        self.setMinimumWidth(460)
        layout = QVBoxLayout(self)
        intro = QLabel(f"A new session continues <b>{parent_info.method}</b> session {parent_info.id} from the cycle "
                       "below with these settings. The cycles before it are first re-run with the session's own "
                       "settings and checked against the recording. Another method or parameter starts a new "
                       "drafter as if the tokens committed so far were its prompt.")
        intro.setWordWrap(True)
        layout.addWidget(intro)
        form = QFormLayout()
        self.cycle = QSpinBox()
        self.cycle.setRange(0, max(0, parent_info.n_cycles))
        self.cycle.setValue(min(cycle, parent_info.n_cycles))
        self.cycle.setToolTip("The first cycle decoded with the new settings (0: from the prompt)")
        form.addRow("From cycle", self.cycle)
        self.method = QComboBox()
        for mid, cls in CARDS.items():
            self.method.addItem(mid, mid)
            self.method.setItemData(self.method.count() - 1, cls.description, 3)  # 3: Qt.ToolTipRole
        self.method.setToolTip("The method from the fork cycle on")
        form.addRow("Method", self.method)
        self.temperature = limit_widget(TEMPERATURE)
        self.temperature.setValue(parent_info.temperature)
        self.seed = limit_widget(SEED)
        self.seed.setValue(parent_info.seed)
        self.seed.setToolTip("The same seed keeps the session's random stream; another starts a new one at the fork")
        self.max_new_tokens = limit_widget(MAX_NEW_TOKENS)
        self.max_new_tokens.setValue(parent_info.max_new_tokens or MAX_NEW_TOKENS.default)
        self.max_new_tokens.setToolTip("The fork's token limit, counting the tokens before the fork")
        form.addRow("Temperature", self.temperature)
        form.addRow("Seed", self.seed)
        form.addRow("Max new tokens", self.max_new_tokens)
        layout.addLayout(form)
        self._decoding = {"temperature": self.temperature.value(), "seed": self.seed.value(),
                          "max_new_tokens": self.max_new_tokens.value()}
        self.params_box = QGroupBox("Parameters")
        self.params_form = QFormLayout(self.params_box)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.params_box)
        scroll.setMinimumHeight(180)
        layout.addWidget(scroll, 1)
        self.param_widgets: dict[str, QWidget] = {}
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Start fork")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.method.currentIndexChanged.connect(self._rebuild)
        i = self.method.findData(parent_info.method)
        self.method.setCurrentIndex(max(i, 0))
        self._rebuild()

    def _rebuild(self) -> None:
        """The chosen method's editors: the session's values for its own method, the defaults for another."""
        while self.params_form.rowCount():
            self.params_form.removeRow(0)
        self.param_widgets = {}
        method = self.method.currentData()
        cls = CARDS.get(method)
        if cls is None:
            return
        for f in param_specs(cls.params_cls):
            w = param_widget(f)
            w.setToolTip(f.metadata.get("help", ""))
            if method == self.info.method and f.name in self.info.params:
                set_param_value(w, self.info.params[f.name])
            self.param_widgets[f.name] = w
            self.params_form.addRow(f.name, w)
        if not self.param_widgets:
            self.params_form.addRow(QLabel("This method has no parameters."))
        self._shown = {k: param_value(w) for k, w in self.param_widgets.items()}

    def changes(self) -> dict[str, Any]:
        """Keyword arguments of ``fork_request`` (the cycle apart)."""
        # Only what the user changed: the session's own values stay exactly as recorded (an editor may round them).
        params = {k: v for k, w in self.param_widgets.items() if (v := param_value(w)) != self._shown.get(k)}
        out: dict[str, Any] = {"method": self.method.currentData(), "params": params}
        for key, w in (("temperature", self.temperature), ("seed", self.seed), ("max_new_tokens", self.max_new_tokens)):
            if w.value() != self._decoding[key]:
                out[key] = w.value()
        return out
