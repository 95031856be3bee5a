"""Train a draft head from the window: what ``specviz train-head`` does, on a thread of its own, with a progress
bar and Stop. The Run panel offers it where TALON or EAGLE would otherwise draft from n-gram tables."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QThread, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from specviz_core.crash import one_line
from specviz_core.errors import SpecVizError
from specviz_core.methods import CARDS
from specviz_core.runtime.head_files import DEFAULT_FEATURES

#: Minutes offered by default: the run the docs measured (about 30% top-1 on the default model, 2-core CPU).
DEFAULT_MINUTES = 10
#: Seconds a closing window waits for a run to stop (it stops between tokens and steps, within a second or two).
STOP_WAIT_S = 15

_RUNNING: set[HeadTrainer] = set()


class HeadTrainer(QThread):
    """Load the model, train its head, save it. Stop is asked between generated tokens, answers read and steps."""

    progress = Signal(str, float)
    """Stage and fraction done (below 0: not known)."""
    trained = Signal(object)
    """The saved head's description (:func:`specviz_core.runtime.head_files.head_info`)."""
    failed = Signal(str)

    def __init__(self, model: str | None, device: str | None, dtype: str | None, minutes: float, seed: int = 0,
                 **train_args: Any) -> None:
        super().__init__()
        self.model, self.device, self.dtype = model, device, dtype
        self.minutes, self.seed, self.train_args = minutes, seed, train_args
        self._stop = False

    def stop(self) -> None:
        self._stop = True

    def start(self, *args: Any) -> None:
        _RUNNING.add(self)
        self.finished.connect(self._forget)
        super().start(*args)

    def _forget(self) -> None:
        """The run ended: let the object go. ``finished`` is emitted just before the thread itself ends, and a
        QThread destroyed in that moment (its last reference dropped here, or by the garbage collector of a later
        event loop) aborts the process ("Destroyed while thread is still running"): wait for the end first."""
        self.wait()
        _RUNNING.discard(self)

    def run(self) -> None:
        from specviz_core.drafters.talon.head import save_head
        from specviz_core.session.factory import load_checked_model
        from specviz_core.training.train import train_head

        def say(stage: str, fraction: float | None) -> None:
            self.progress.emit(stage, -1.0 if fraction is None else float(fraction))

        try:
            target = load_checked_model(self.model, self.device, self.dtype, progress=say)
            head, info = train_head(target, minutes=self.minutes, seed=self.seed, progress=say,
                                    stop=lambda: self._stop, **self.train_args)
            save_head(target, head, info)
            self.trained.emit(info)
        except SpecVizError as e:
            self.failed.emit(str(e))
        except Exception as e:  # out of memory, a model that cannot be trained on: a message, not a crash
            self.failed.emit(f"training failed: {one_line(e)}")


def stop_all(wait_s: float = STOP_WAIT_S) -> None:
    """Stop every run (the window is closing) and wait for each a little; nothing half-written is kept."""
    for t in list(_RUNNING):
        t.stop()
    for t in list(_RUNNING):
        t.wait(int(wait_s * 1000))


class TrainHeadDialog(QDialog):
    """Minutes, text and seed, Train, a progress bar, Stop; emits ``trained`` with the head's description when saved."""

    trained = Signal(object)

    def __init__(self, model: str | None, device: str | None, dtype: str | None, method: str,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Train a draft head")
        self.model, self.device, self.dtype = model, device, dtype
        self.trainer: HeadTrainer | None = None
        self._running = False  # until the run's last message is shown (the thread ends before it arrives)
        lay = QVBoxLayout(self)
        name = CARDS[method].display_name if method in CARDS else method
        about = QLabel(
            f"{name} drafts with a trained draft head in its paper. This model has none yet, so it drafts from "
            "n-gram tables of its own output.<br><br>Training reads the shipped answers to 350 seed prompts (or has "
            "the model write its own), reads the model's features over them and fits one decoder layer to predict "
            "them (EAGLE's layout). Nothing is downloaded; "
            "the head is kept in your user cache, and <i>drafter=auto</i> uses it from the next session on. "
            "The same as <tt>specviz train-head</tt>.")
        about.setWordWrap(True)
        lay.addWidget(about)
        form = QFormLayout()
        self.minutes = QSpinBox()
        self.minutes.setRange(1, 240)
        self.minutes.setValue(DEFAULT_MINUTES)
        self.minutes.setSuffix(" min")
        self.minutes.setToolTip("Time for the whole run: half reading the text (60% writing it, for the model's "
                                "own answers), the rest training. More minutes, more text and more steps")
        self.text = QComboBox()
        self.text.addItem("Shipped answers (the most text per minute)", "shipped")
        self.text.addItem("The model's own answers, written now", "own")
        self.text.setToolTip("Shipped: the embedded model's answers to the seed prompts, read about 4x faster than "
                             "written, so the head sees more text. Own: this model writes its answers first (its own "
                             "words, for a model unlike the embedded one)")
        self.features = QComboBox()
        self.features.addItem("The last layer (EAGLE-1)", "last")
        self.features.addItem("Three layers, fused (EAGLE-3)", "eagle3")
        self.features.setCurrentIndex(self.features.findData(DEFAULT_FEATURES))
        self.features.setToolTip("What the head reads of the model. EAGLE-1: the last hidden state, which the head "
                                 "also learns to predict. EAGLE-3: the inputs of a low, a middle and a high layer, "
                                 "fused, trained over 3 unrolled draft steps (in 10 minutes on a CPU it drafted no "
                                 "better: docs/talon-stand.md)")
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.seed.setToolTip("Seed of the text and the training")
        form.addRow("Time", self.minutes)
        form.addRow("Text", self.text)
        form.addRow("Reads", self.features)
        form.addRow("Seed", self.seed)
        lay.addLayout(form)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setValue(0)
        self.stage = QLabel("Not started.")
        self.stage.setWordWrap(True)
        lay.addWidget(self.bar)
        lay.addWidget(self.stage)
        buttons = QDialogButtonBox()
        self.train_button = QPushButton("Train")
        self.train_button.setToolTip("Start training (the window stays usable; Step works meanwhile, more slowly)")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop training: nothing is saved")
        self.stop_button.setEnabled(False)
        self.close_button = buttons.addButton(QDialogButtonBox.StandardButton.Close)
        buttons.addButton(self.train_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.stop_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.train_button.clicked.connect(self.start)
        self.stop_button.clicked.connect(self.stop)
        self.close_button.clicked.connect(self.close)
        lay.addWidget(buttons)
        self.resize(520, self.sizeHint().height())

    @property
    def running(self) -> bool:
        return self._running

    def start(self, **train_args: Any) -> None:
        """Train with the minutes, text and seed shown (``train_args``: :func:`train_head`'s others, for tests)."""
        if self.running:
            return
        train_args.setdefault("text", self.text.currentData())
        train_args.setdefault("features", self.features.currentData())
        self.trainer = HeadTrainer(self.model, self.device, self.dtype, float(self.minutes.value()),
                                   self.seed.value(), **train_args)
        self.trainer.progress.connect(self._progress)
        self.trainer.trained.connect(self._trained)
        self.trainer.failed.connect(self._failed)
        self.trainer.finished.connect(self._finished)
        self.train_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        for w in (self.minutes, self.text, self.features, self.seed):
            w.setEnabled(False)
        self.stage.setText("Starting…")
        self._running = True
        self.trainer.start()

    def stop(self) -> None:
        if self.running:
            self.trainer.stop()
            self.stage.setText("Stopping…")
            self.stop_button.setEnabled(False)

    def _progress(self, stage: str, fraction: float) -> None:
        self.stage.setText(stage)
        if fraction < 0:
            self.bar.setRange(0, 0)  # busy, no fraction known
        else:
            self.bar.setRange(0, 1000)
            self.bar.setValue(round(1000 * fraction))

    def _trained(self, info: dict) -> None:
        a = info.get("agreement", {})
        self.bar.setRange(0, 1000)
        self.bar.setValue(1000)
        self.stage.setText(f"Saved. Held-out agreement with the model: top-1 {a.get('top1', 0):.1%}, top-5 "
                           f"{a.get('top5', 0):.1%} ({info.get('steps', 0):,} steps on "
                           f"{info.get('answer_tokens', 0):,} answer tokens, {info.get('minutes', 0):.1f} min). "
                           "drafter=auto uses it from the next session on.")
        self.trained.emit(info)

    def _failed(self, message: str) -> None:
        self.bar.setRange(0, 1000)
        self.bar.setValue(0)
        self.stage.setText(message)

    def _finished(self) -> None:
        self._running = False
        self.train_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        for w in (self.minutes, self.text, self.features, self.seed):
            w.setEnabled(True)

    def closeEvent(self, e) -> None:
        """Closing stops a run (nothing is saved) and waits for it briefly."""
        if self.running:
            self.trainer.stop()
            self.trainer.wait(STOP_WAIT_S * 1000)
        super().closeEvent(e)
