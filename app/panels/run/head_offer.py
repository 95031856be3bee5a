"""The Run panel's line about TALON's and EAGLE's drafter: which one a session will use, and, when the model has no
draft head, the offer to train one (:mod:`specviz_app.windows.train_head`)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget

from specviz_app.theme import set_role
from specviz_core.methods import CARDS


def drafts_with_head(method: str | None) -> bool:
    """Whether ``method`` takes ``drafter=auto|head|table|model`` (TALON and its EAGLE baseline)."""
    cls = CARDS.get(method or "")
    return cls is not None and "drafter" in getattr(cls.params_cls, "__dataclass_fields__", {}) \
        and "head" in (cls.params_cls.__dataclass_fields__["drafter"].metadata.get("choices") or ())


def offer_text(method: str, drafter: str, info: dict | None) -> str:
    """What the line says for this method, drafter setting and saved head (None: none for the model)."""
    method = CARDS[method].display_name if method in CARDS else method
    if drafter in ("table", "model"):  # the user chose: nothing to say
        return ""
    if info is not None:
        a = info.get("agreement", {})
        return (f"{method} drafts with this model's draft head (trained {info.get('created', '?')}, held-out top-1 "
                f"{a.get('top1', 0):.0%}).")
    if drafter == "head":
        return "drafter=head: this model has no draft head yet, so a session would stop at once. Train one first."
    return (f"{method} will draft from n-gram tables: this model has no draft head (the paper drafts with one). "
            "Training one takes about 10 minutes.")


def given_head_text(method: str, head: str) -> str:
    """What the line says of a head folder given as ``head=`` (read without loading it)."""
    from pathlib import Path

    from specviz_core.runtime.head_files import describe_head_folder
    from specviz_core.runtime.locations import is_hub_id, resolve_model_path

    folder = Path(head).expanduser()
    if not folder.is_dir() and is_hub_id(head):
        try:  # a hub id already in the local cache (nothing is downloaded)
            folder = resolve_model_path(head)
        except Exception:
            pass
    d = describe_head_folder(folder) if folder.is_dir() else None
    if d is None:
        return (f"head={head} is not an EAGLE head folder here (config.json and pytorch_model.bin or "
                "model.safetensors in EAGLE-1/2's or EAGLE-3's layout): a session would be refused.")
    name = {"eagle": "EAGLE-1/2", "eagle3": "EAGLE-3"}[d["layout"]]
    vocab = (f", a draft vocabulary of {d['draft_vocab_size']:,}" if d["draft_vocab_size"] != d["vocab_size"] else "")
    return (f"{method} drafts with the {name} head in {Path(head).name or head} (reads features {d['reads_width']} wide, "
            f"{d['vocab_size']:,} tokens{vocab}); the target must match.")


class HeadOffer(QWidget):
    """A hint and, when the model has no head, "Train a draft head…"."""

    train_requested = Signal()

    def __init__(self, lookup: Callable[[str | None], dict | None] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        if lookup is None:
            from specviz_core.runtime.head_files import head_info_for as lookup
        self._lookup = lookup
        lay = QVBoxLayout(self)  # the panel is narrow: the text wraps above its button
        lay.setContentsMargins(0, 0, 0, 0)
        self.text = QLabel()
        self.text.setWordWrap(True)
        set_role(self.text, "hint")
        self.button = QPushButton("Train a draft head…")
        self.button.setToolTip("Train a draft head for this model here, with a progress bar (specviz train-head)")
        self.button.clicked.connect(self.train_requested.emit)
        lay.addWidget(self.text)
        lay.addWidget(self.button, 0, Qt.AlignmentFlag.AlignLeft)
        self.setVisible(False)

    def show_for(self, method: str | None, drafter: str | None, model: str | None, head: str = "") -> None:
        """Say what ``method`` will draft with on ``model`` (None: the default model), or with the EAGLE head in the
        folder ``head``; hidden for other methods."""
        if not drafts_with_head(method):
            self.setVisible(False)
            return
        if head.strip() and drafter in ("auto", "head"):
            self.text.setText(given_head_text(CARDS[method].display_name if method in CARDS else str(method),
                                              head.strip()))
            self.button.setVisible(False)
            self.setVisible(True)
            return
        info = self._lookup(model)
        text = offer_text(method or "", drafter or "auto", info)
        self.text.setText(text)
        self.button.setVisible(info is None and drafter in ("auto", "head"))
        self.setVisible(bool(text))
