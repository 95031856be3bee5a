"""Filling the Run panel from a description made elsewhere: a recorded session (replay, "New session from these
settings") or a pasted ``generate()`` call. ``panel`` is the :class:`~specviz_app.panels.run.panel.RunPanel` (not imported:
the panel imports this module)."""

from __future__ import annotations

from typing import Any

from specviz_app.panels.run.model_picker import DEFAULT_MODEL_LABEL, NO_DRAFT_LABEL, SAME_AS_TARGET
from specviz_app.panels.run.params import set_param_value
from specviz_core.methods import CARDS
from specviz_core.records import SessionInfo


def fill_from_session(panel: Any, info: SessionInfo) -> None:
    """Fill every field from a recorded session: model, method and every parameter, prompt, decoding."""
    panel.model.setEditText(DEFAULT_MODEL_LABEL if info.model == "default" else info.model)
    panel.draft_model.setEditText(NO_DRAFT_LABEL if not info.draft_model
                                  else SAME_AS_TARGET if info.draft_model == "default" else info.draft_model)
    for combo in (panel.model, panel.draft_model):
        combo.lineEdit().setCursorPosition(0)  # a long path shows its beginning
    for combo, value in ((panel.device, info.device), (panel.dtype, info.dtype)):
        if combo.findText(value) < 0:
            combo.addItem(value)  # a GPU this machine lacks still shows what the session ran on
        combo.setCurrentText(value)
    i = panel.method.findData(info.method)
    if i < 0:
        panel.method.addItem(info.method, info.method)
        i = panel.method.count() - 1
    if i != panel.method.currentIndex():
        panel.method.setCurrentIndex(i)  # rebuilds the editors, at their defaults
    elif info.method in CARDS:
        panel.rebuild_params()
    if info.method in CARDS:
        for name, value in info.params.items():
            w = panel.param_widgets.get(name)
            if w is not None:
                set_param_value(w, value)
    panel.prompt.setPlainText(info.prompt_text)
    panel.chat_template.setChecked(info.chat_template)
    panel.temperature.setValue(info.temperature)
    panel.seed.setValue(info.seed)
    if info.max_new_tokens:
        panel.max_new_tokens.setValue(info.max_new_tokens)


def fill_from_generate_call(panel: Any, call: Any) -> None:
    """Show a mapped generate() call: method (parameters at their defaults, then the call's), draft, decoding."""
    panel.method.setCurrentIndex(panel.method.findData(call.method))
    panel.rebuild_params()
    for name, value in call.params.items():
        set_param_value(panel.param_widgets[name], value)
    if call.draft_model:
        panel.draft_model.setEditText(SAME_AS_TARGET if call.draft_model == "default" else call.draft_model)
    if call.max_new_tokens:
        panel.max_new_tokens.setValue(call.max_new_tokens)
    panel.temperature.setValue(call.temperature)
    panel.status.setText(f"From your generate() call: {call.method}. Step (F10) decodes it.")
