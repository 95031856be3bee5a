"""The run panel: what to decode (model, method, every parameter, prompt) and the step/run controls.

Replaying a recording, it shows that session's model, method, parameters and prompt, read-only; "New session
from these settings" makes them editable for a live session. Live, the settings are fixed from the first cycle
until Reset (the controller locks them)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from specviz_app.panels.base import PanelMixin
from specviz_app.panels.filter_editor import FilterEditor
from specviz_app.panels.run.device import DeviceCombo
from specviz_app.panels.run.fill import fill_from_generate_call, fill_from_session
from specviz_app.panels.run.generate_dialog import GenerateCallDialog
from specviz_app.panels.run.head_offer import HeadOffer
from specviz_app.panels.run.model_picker import (
    DEFAULT_MODEL_LABEL,
    NO_DRAFT_LABEL,
    SAME_AS_TARGET,
    ModelPicker,
    model_combo,
    with_browse,
)
from specviz_app.panels.run.params import limit_widget, param_value, param_widget
from specviz_app.theme import readable_when_locked, set_role
from specviz_core.errors import SpecVizError
from specviz_core.methods import CARDS
from specviz_core.methods.params import budget_words
from specviz_core.records import SessionInfo
from specviz_core.runtime.choices import DTYPES
from specviz_core.session.spec import MAX_NEW_TOKENS, SEED, TEMPERATURE, SessionRequest, SessionSpec
from specviz_core.viewer.filters import CycleFilter
from specviz_core.viewer.session_model import SessionModel
from specviz_resources import demo_prompt

DEFAULT_METHOD = "goose"


class RunPanel(PanelMixin, QWidget):
    """Session settings and the controls. Emits requests; the window decides what to do with them."""

    title = "Run"
    step_requested = Signal()
    run_requested = Signal()
    run_to_breakpoint_requested = Signal()
    pause_requested = Signal()
    reset_requested = Signal()
    fork_requested = Signal()
    recording_edited = Signal(str)
    """The user typed or chose another recording file ('' when cleared)."""

    @classmethod
    def create(cls, model: SessionModel, recording: Path) -> RunPanel:
        """On the recording live sessions are written to (it follows the controller, not the model)."""
        return cls(recording)

    def __init__(self, db_path: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.param_widgets: dict[str, QWidget] = {}
        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 6)

        # -- controls first: they are what a user reaches for most -----------------------
        buttons = QGridLayout()
        self.step_button = self._button("Step", "Decode one cycle (F10)", self.step_requested)
        self.run_button = self._button("Run", "Decode until the end or Pause (F5)", self.run_requested)
        self.pause_button = self._button("Pause", "Stop after the cycle in flight (F6)", self.pause_requested)
        self.bp_button = self._button("Run to breakpoint", "Decode until a cycle matches the breakpoint (F8)",
                                      self.run_to_breakpoint_requested)
        self.reset_button = self._button("Reset", "End this session (it stays recorded) and unlock the settings (Ctrl+R)",
                                         self.reset_requested)
        self.fork_button = self._button("Fork…", "Continue the session shown from its current cycle with other "
                                        "settings (its cycles before are re-run and checked first)", self.fork_requested)
        for i, b in enumerate((self.step_button, self.run_button, self.pause_button, self.bp_button, self.fork_button,
                               self.reset_button)):
            buttons.addWidget(b, i // 3, i % 3)
        outer.addLayout(buttons)

        self.breakpoint_editor = FilterEditor(
            "Breakpoint:", "Run to breakpoint stops after the first cycle that matches this condition",
            with_all=False, stretch=True)
        outer.addWidget(self.breakpoint_editor)

        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setVisible(False)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.message)
        self.status = QLabel("No session yet: press Step (F10) to start one.")
        self.status.setWordWrap(True)
        set_role(self.status, "hint")
        outer.addWidget(self.status)
        self.from_replay = QPushButton("New session from these settings")
        self.from_replay.setToolTip("Make the replayed session's settings editable: change what you like, then Step "
                                    "(F10) decodes a new live session with them")
        self.from_replay.clicked.connect(self.edit_replayed)
        self.from_replay.setVisible(False)
        outer.addWidget(self.from_replay)
        self.replayed: SessionInfo | None = None
        """The session whose settings are shown read-only (None: the settings are the user's)."""

        # -- settings, scrollable ------------------------------------------------------------
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget()
        readable_when_locked(body)
        self.settings = QVBoxLayout(body)
        self.settings.setContentsMargins(0, 0, 0, 0)
        scroll.setWidget(body)
        outer.addWidget(scroll, 1)

        model_box = QGroupBox("Model")
        form = QFormLayout(model_box)
        self.model = model_combo(DEFAULT_MODEL_LABEL, "The target model: the embedded default, a model found on this "
                                 "machine (parameters, size on disk), or type a folder or cached hub id; … browses")
        form.addRow("Target", with_browse(self, self.model))
        self.draft_model = model_combo(NO_DRAFT_LABEL, "The draft model, for hf_assisted, hf_universal and draft-model "
                                       "methods (draft_tree, TALON drafter=model); the list marks which share the "
                                       "target's tokenizer and which need universal decoding (hf_universal)")
        self.draft_model.addItem(SAME_AS_TARGET)
        form.addRow("Draft", with_browse(self, self.draft_model))
        self.draft_hint = QLabel()
        rescan = QToolButton(text="↻")
        rescan.setToolTip("Look for models again (the Hugging Face cache, folders used before)")
        hint_row = QHBoxLayout()
        hint_row.addWidget(self.draft_hint, 1)
        hint_row.addWidget(rescan, 0, Qt.AlignmentFlag.AlignTop)
        form.addRow(hint_row)
        self.picker = ModelPicker(self.model, self.draft_model, self.draft_hint, self)
        rescan.clicked.connect(lambda: self.picker.refresh(force=True))
        self.device = DeviceCombo()
        self.dtype = QComboBox()
        self.dtype.addItems(list(DTYPES))
        self.dtype.setToolTip("auto: float16 on a GPU, float32 on the CPU (where half precision is slow and makes "
                              "near-ties common)")
        self.threads = QSpinBox()
        self.threads.setRange(0, 1024)
        self.threads.setSpecialValueText("auto")
        self.threads.setToolTip("CPU threads for the model's forwards. auto: the cores other processes leave free "
                                "when the session starts (on a busy machine, fewer threads are much faster)")
        form.addRow("Device", self.device)
        form.addRow("Dtype", self.dtype)
        form.addRow("Threads", self.threads)
        self.settings.addWidget(model_box)

        method_box = QGroupBox("Method")
        mform = QVBoxLayout(method_box)
        self.paste_call = QPushButton("Paste generate() call…")
        self.paste_call.setToolTip("Paste the arguments of your model.generate(...) call: SpecViz picks the method, "
                                   "its parameters, the draft model, max new tokens and temperature (Ctrl+Shift+G)")
        self.paste_call.setShortcut("Ctrl+Shift+G")
        self.paste_call.clicked.connect(self.open_generate_dialog)
        self.method = QComboBox()
        self.method.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.method.setMinimumContentsLength(10)
        for mid, cls in CARDS.items():
            self.method.addItem(mid, mid)
            self.method.setItemData(self.method.count() - 1, cls.description, Qt.ItemDataRole.ToolTipRole)
        self.method_help = QLabel()
        self.method_help.setWordWrap(True)
        set_role(self.method_help, "hint")
        mform.addWidget(self.paste_call)
        mform.addWidget(self.method)
        mform.addWidget(self.method_help)
        self.params_form = QFormLayout()
        self.params_form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)  # long names: editor below
        self.head_offer = HeadOffer()  # under the method's description: seen before its parameters
        self.head_offer.train_requested.connect(self.open_train_head_dialog)
        mform.addWidget(self.head_offer)
        mform.addLayout(self.params_form)
        self._offer_timer = QTimer(self, singleShot=True, interval=300)  # typing a model path: look once it rests
        self._offer_timer.timeout.connect(self._refresh_head_offer)
        self.model.currentTextChanged.connect(self._offer_timer.start)
        defaults = QPushButton("Defaults")
        defaults.setToolTip("Put every parameter of this method back to its published default")
        defaults.clicked.connect(self.rebuild_params)
        mform.addWidget(defaults, 0, Qt.AlignmentFlag.AlignRight)
        self.settings.addWidget(method_box)

        prompt_box = QGroupBox("Prompt")
        pform = QVBoxLayout(prompt_box)
        self.prompt = QPlainTextEdit(demo_prompt())
        self.prompt.setToolTip("The prompt to decode from")
        self.prompt.setMinimumHeight(110)
        self.chat_template = QCheckBox("Use the model's chat template")
        self.chat_template.setChecked(True)
        self.chat_template.setToolTip("Wrap the prompt as a user message with the model's chat template")
        pform.addWidget(self.prompt)
        pform.addWidget(self.chat_template)
        self.settings.addWidget(prompt_box)

        dec_box = QGroupBox("Decoding")
        dform = QFormLayout(dec_box)
        self.temperature = limit_widget(TEMPERATURE)
        self.seed = limit_widget(SEED)
        self.max_new_tokens = limit_widget(MAX_NEW_TOKENS)
        dform.addRow("Temperature", self.temperature)
        dform.addRow("Seed", self.seed)
        dform.addRow("Max new tokens", self.max_new_tokens)
        self.db = QLineEdit(str(db_path))
        self.db.setToolTip("The open recording: live sessions are recorded to this SQLite file, and replays, forks "
                           "and comparisons read it")
        self.db.editingFinished.connect(lambda: self.recording_edited.emit(self.db.text().strip()))
        dform.addRow("Record to", with_browse(self, self.db, save=True))
        self.settings.addWidget(dec_box)
        self.settings.addStretch(1)

        self.method.currentIndexChanged.connect(self.rebuild_params)
        self.method.setCurrentIndex(max(0, self.method.findData(DEFAULT_METHOD)))
        self._locked = True
        self.rebuild_params()
        self.set_locked(False)

    # -- building -----------------------------------------------------------------
    def _button(self, text: str, tip: str, signal) -> QPushButton:
        b = QPushButton(text)
        b.setToolTip(tip)
        b.clicked.connect(signal.emit)
        return b

    def rebuild_params(self) -> None:
        while self.params_form.rowCount():
            self.params_form.removeRow(0)
        self.param_widgets.clear()
        cls = CARDS.get(self.method.currentData())
        self.picker.set_method(self.method.currentData())
        if cls is None:  # a replayed session's method this version does not have
            self.method_help.setText("A method this version of SpecViz does not know.")
            return
        self.method_help.setText(cls.description)
        for f in dataclasses.fields(cls.params_cls):
            help_text = f.metadata.get("help", "")
            w = param_widget(f)
            tip = f"{help_text}\nDefault: {f.default}"
            if f.name == "budget":
                tip = (f"{help_text}\nDefault: auto, chosen for this device each cycle: the budget that maximises "
                       "expected tokens/s from the measured verify-cost curve and the session's acceptance (the "
                       "paper's tree where a bigger tree costs nothing more; the paper's budget while the curve is "
                       f"first measured).\npaper: the paper's own budget, {f.default}. Type a number for a fixed "
                       f"budget ({budget_words(f.name, cls.params_cls)}).")
            w.setToolTip(tip)
            label = QLabel(f.name)
            label.setToolTip(tip)
            self.params_form.addRow(label, w)
            self.param_widgets[f.name] = w
        if not self.param_widgets:
            self.params_form.addRow(QLabel("This method has no parameters."))
        drafter = self.param_widgets.get("drafter")
        if isinstance(drafter, QComboBox):
            drafter.currentTextChanged.connect(self._refresh_head_offer)
        head = self.param_widgets.get("head")
        if isinstance(head, QLineEdit):
            head.textChanged.connect(self._refresh_head_offer)
        self._refresh_head_offer()

    # -- reading ------------------------------------------------------------------------
    def model_name(self) -> str | None:
        """The target as the settings name it (None: the default model)."""
        model = self.model.currentText().strip()
        return None if model in ("", DEFAULT_MODEL_LABEL) else model

    def request(self) -> SessionSpec:
        """The session the settings describe; raises SpecVizError with a message for the user."""
        draft = self.draft_model.currentText().strip()
        params = {name: param_value(w) for name, w in self.param_widgets.items()}
        req = SessionRequest(
            method=self.method.currentData(), prompt=self.prompt.toPlainText(),
            model=self.model_name(),
            draft_model=None if draft in ("", NO_DRAFT_LABEL) else ("default" if draft == SAME_AS_TARGET else draft),
            params=params, max_new_tokens=self.max_new_tokens.value(), temperature=self.temperature.value(),
            seed=self.seed.value(), chat_template=None if self.chat_template.isChecked() else False,
            device=None if self.device.currentText() == "auto" else self.device.currentText(),
            dtype=None if self.dtype.currentText() == "auto" else self.dtype.currentText(),
            threads=self.threads.value() or None,
        )
        if req.model is not None and not Path(req.model).expanduser().exists() and "/" not in req.model:
            raise SpecVizError(f"no model folder {req.model!r}: choose a local folder with Browse…")
        checked = req.check()
        # The field's text is the open recording, even mid-edit (the session model holds it; the controller refuses
        # a session with none).
        self.recording_edited.emit(self.db.text().strip())
        return checked

    def db_path(self) -> Path:
        """The recording file the field shows (the window's open recording is the session model's)."""
        return Path(self.db.text().strip()).expanduser()

    def show_recording(self, path: Path | None) -> None:
        """Show the window's open recording (set elsewhere: a replay, a fork, File → Open)."""
        text = str(path) if path is not None else ""
        if self.db.text().strip() != text:
            self.db.setText(text)

    def breakpoint(self) -> CycleFilter:
        return self.breakpoint_editor.value()

    # -- showing --------------------------------------------------------------------------
    def show_message(self, text: str, error: bool = True) -> None:
        """A message in the panel (red for errors); empty text hides it."""
        self.message.setVisible(bool(text))
        self.message.setText(text)
        set_role(self.message, "error" if error else "message")

    def set_status(self, text: str) -> None:
        self.status.setText(text)

    def set_locked(self, locked: bool) -> None:
        """While a session is open its settings are fixed; Reset unlocks them."""
        if not locked:
            self.replayed = None
            self.from_replay.setVisible(False)
            if self._locked and self.picker.entries:  # a session ended (it may have used a new folder): list again
                self.picker.refresh(force=True)
        self._locked = locked
        for w in (self.model, self.draft_model, self.device, self.dtype, self.threads, self.method, self.prompt,
                  self.chat_template, self.temperature, self.seed, self.max_new_tokens, self.db, self.paste_call,
                  *self.param_widgets.values()):
            w.setEnabled(not locked)

    def show_replay(self, info: SessionInfo) -> None:
        """Show a replayed session's settings, read-only, with the action that starts a new session from them."""
        self.show_settings(info)
        self.set_locked(True)
        self.replayed = info
        self.from_replay.setVisible(True)

    def show_live(self) -> None:
        """A live session opened: its settings are the ones shown (the controller has locked them)."""
        self.replayed = None
        self.from_replay.setVisible(False)

    def edit_replayed(self) -> None:
        """The replayed session's settings become the user's, editable; Step starts a live session with them."""
        info = self.replayed
        self.set_locked(False)
        if info is not None:
            self.status.setText(f"Settings of session {info.id} ({info.method}): edit them, then Step (F10) "
                                "decodes a new live session.")

    def show_settings(self, info: SessionInfo) -> None:
        """Fill every field from a recorded session: model, method and every parameter, prompt, decoding."""
        fill_from_session(self, info)

    def open_generate_dialog(self) -> None:
        """Paste a generate() call: on Apply its method, parameters, draft and decoding settings fill the panel."""
        draft = self.draft_model.currentText().strip()
        dialog = GenerateCallDialog(None if draft in ("", NO_DRAFT_LABEL) else
                                    "default" if draft == SAME_AS_TARGET else draft, self)
        if dialog.exec() and dialog.call is not None:
            self.apply_generate_call(dialog.call)

    def apply_generate_call(self, call) -> None:
        """Show a mapped generate() call: method (parameters at their defaults, then the call's), draft, decoding."""
        fill_from_generate_call(self, call)

    def _refresh_head_offer(self) -> None:
        if hasattr(self, "head_offer"):  # the editors are built before it
            values = self.param_values()
            self.head_offer.show_for(self.method.currentData(), values.get("drafter"), self.model_name(),
                                     str(values.get("head") or ""))

    def open_train_head_dialog(self) -> None:
        """Train a draft head for the target shown (on its device and dtype), in a window of its own."""
        from specviz_app.windows.train_head import TrainHeadDialog

        dialog = TrainHeadDialog(self.model_name(), None if self.device.currentText() == "auto" else
                                 self.device.currentText(), None if self.dtype.currentText() == "auto" else
                                 self.dtype.currentText(), self.method.currentData(), self)
        dialog.trained.connect(lambda info: self._refresh_head_offer())
        self.train_dialog = dialog
        dialog.show()

    def param_values(self) -> dict[str, object]:
        """The parameters as the editors show them."""
        return {name: param_value(w) for name, w in self.param_widgets.items()}

    def apply_actions(self, enabled: dict[str, bool]) -> None:
        """The buttons' enabled states, as the session's lifecycle decides them
        (:func:`~specviz_core.viewer.lifecycle.enabled_actions`)."""
        for button, name in ((self.step_button, "step"), (self.run_button, "run"), (self.bp_button, "run_to_breakpoint"),
                             (self.pause_button, "pause"), (self.reset_button, "reset"), (self.fork_button, "fork")):
            button.setEnabled(enabled[name])
