"""The Run panel's model picker: the target and draft lists, filled from :func:`specviz_core.runtime.catalog.list_models`.

The lists hold the embedded default, folders used before and the causal LMs in the local Hugging Face cache, each
with its parameter count and size on disk (read from the files: nothing is loaded). The scan runs on a thread of
its own (importing transformers and hashing tokenizers takes seconds the first time) and its result is kept for
the process; the lists stay editable, so a folder or hub id can still be typed, and "…" browses for a folder. The
draft list marks each entry against the chosen target: the same tokenizer (hf_assisted, draft_tree, TALON's
drafter=model) or another one (hf_universal).
"""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QModelIndex, QObject, QRect, Qt, QTimer, Signal
from PySide6.QtGui import QPainter, QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolButton,
    QWidget,
)

from specviz_app.theme import set_role
from specviz_core.runtime.catalog import ModelEntry, describe_folder, draft_relation, list_models
from specviz_core.runtime.locations import DEFAULT_MODEL

DEFAULT_MODEL_LABEL = "default: SmolLM2-135M-Instruct (embedded)"
NO_DRAFT_LABEL = "none"
SAME_AS_TARGET = "default: the embedded model"

NAME_ROLE = Qt.ItemDataRole.UserRole + 1
"""An item's model name, as ``--model`` takes it."""
DETAILS_ROLE = Qt.ItemDataRole.UserRole + 2
"""The grey text drawn after the name in the open list: parameters, size, where it was found, tokenizer mark."""

DRAFT_MARKS = {"same": "✓ same tokenizer", "universal": "⇄ other tokenizer: hf_universal",
               "target": "the target itself", "unknown": "tokenizer not known yet"}
SCANNING = "looking for models (the Hugging Face cache, folders used before)…"
SOURCES = {"embedded": "embedded", "recent": "used before", "hf-cache": "HF cache"}

_cache: list[ModelEntry] | None = None
_cache_lock = threading.Lock()


def count_text(n: int | None) -> str:
    if n is None:
        return "? params"
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M" if n >= 1e6 else f"{n / 1e3:.0f}K"


def size_text(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"


def details(e: ModelEntry, relation: str = "") -> str:
    parts = [count_text(e.n_params), size_text(e.size_bytes), SOURCES.get(e.source, e.source)]
    return " · ".join(parts + ([DRAFT_MARKS.get(relation, relation)] if relation else []))


def entry_tip(e: ModelEntry, relation: str = "") -> str:
    lines = [e.name, f"{e.architecture} · {count_text(e.n_params)} parameters · {size_text(e.size_bytes)} on disk"
             f" · vocabulary {e.vocab_size if e.vocab_size is not None else '?'}",
             f"found: {SOURCES.get(e.source, e.source)}" + (f" ({e.path})" if e.path and e.path != e.name else "")]
    if relation:
        lines.append(f"as a draft for the target: {DRAFT_MARKS.get(relation, relation)}")
    return "\n".join(lines)


class DetailsDelegate(QStyledItemDelegate):
    """Draws an item's name, then its details in the placeholder colour, in a column ``name_column`` px in."""

    name_column = 0

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        extra = index.data(DETAILS_ROLE)
        if not extra:
            super().paint(painter, option, index)
            return
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        name = opt.text
        opt.text = ""
        style = opt.widget.style() if opt.widget else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        r = opt.rect.adjusted(6, 0, -4, 0)
        fm = opt.fontMetrics
        painter.save()
        painter.setFont(opt.font)
        painter.setPen(opt.palette.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text))
        name_w = min(max(self.name_column, fm.horizontalAdvance(name)), int(r.width() * 0.65))
        painter.drawText(QRect(r.left(), r.top(), name_w, r.height()), Qt.AlignmentFlag.AlignVCenter,
                         fm.elidedText(name, Qt.TextElideMode.ElideMiddle, name_w))
        if not selected:
            painter.setPen(opt.palette.color(QPalette.ColorRole.PlaceholderText))
        rest = QRect(r.left() + name_w + 14, r.top(), r.width() - name_w - 14, r.height())
        painter.drawText(rest, Qt.AlignmentFlag.AlignVCenter, fm.elidedText(extra, Qt.TextElideMode.ElideRight,
                                                                             rest.width()))
        painter.restore()


def fit_popup(combo: QComboBox) -> None:
    """Make the open list wide enough for every item's name and details (the closed list keeps its width)."""
    fm = combo.view().fontMetrics()  # the open list's font
    names = 8 + max(fm.horizontalAdvance(combo.itemText(i)) for i in range(combo.count()))
    extra = max(fm.horizontalAdvance(combo.itemData(i, DETAILS_ROLE) or "") for i in range(combo.count()))
    delegate = combo.itemDelegate()
    if isinstance(delegate, DetailsDelegate):
        delegate.name_column = names
    combo.view().setMinimumWidth(min(names + extra + 60, 900))


class CatalogScan(QObject):
    """Runs ``list_models`` on a thread; ``done`` brings the entries (or an error's text) to the UI thread.

    The thread touches no Qt object: it leaves its result in a plain slot that a timer of this object reads on the UI
    thread, so a panel closed while a scan runs leaves the thread nothing of Qt's to reach (an emit from the thread
    raced the object's deletion and, now and then, the garbage collector)."""

    done = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.running = False
        self._result: list[object] = []  # the scan's result, put there by its thread
        self._poll = QTimer(self)
        self._poll.setInterval(50)
        self._poll.timeout.connect(self._collect)

    def start(self, force: bool = False) -> bool:
        """Scan (``force``: even if a scan of this process is kept); False if one is running already."""
        if self.running:
            return False
        if _cache is not None and not force:
            QTimer.singleShot(0, lambda: self.done.emit(list(_cache)))
            return True
        self.running = True
        self._result = []
        threading.Thread(target=_scan, args=(self._result,), name="specviz-model-scan", daemon=True).start()
        self._poll.start()
        return True

    def _collect(self) -> None:
        if not self._result:
            return
        self._poll.stop()
        self.running = False
        self.done.emit(self._result[0])


def _scan(out: list[object]) -> None:
    """The scan, on its thread: the entries (kept for the process) or why there are none, into ``out``."""
    global _cache
    try:
        entries: object = list_models()
        with _cache_lock:
            _cache = list(entries)  # type: ignore[call-overload]
    except Exception as e:  # noqa: BLE001 - a failed scan leaves the lists editable, and says why
        entries = f"could not list the models here: {e}"
    out.append(entries)


class ModelCombo(QComboBox):
    """A model list that says when it is about to open (the picker lists the models then, the first time)."""

    opening = Signal()

    def showPopup(self) -> None:
        self.opening.emit()
        super().showPopup()


def model_combo(first: str, tip: str) -> ModelCombo:
    """An editable model list whose first item is ``first``; a long path shows its beginning unless edited."""
    c = ModelCombo()
    c.setEditable(True)
    c.addItem(first)
    c.setToolTip(tip)
    c.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
    c.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    c.setMinimumContentsLength(12)
    c.setItemDelegate(DetailsDelegate(c))
    le = c.lineEdit()

    def show_start(*_: object) -> None:
        if not le.hasFocus():
            le.setCursorPosition(0)

    c.currentTextChanged.connect(show_start)
    le.editingFinished.connect(show_start)
    show_start()
    return c


def with_browse(panel: QWidget, field: QWidget, save: bool = False) -> QWidget:
    """``field`` with a "…" button that chooses a recording file (``save``) or a model folder."""
    w = QWidget()
    row = QHBoxLayout(w)
    row.setContentsMargins(0, 0, 0, 0)
    row.addWidget(field, 1)
    b = QToolButton()
    b.setText("…")
    b.setToolTip("Choose a file" if save else "Browse for a local model folder (config.json, weights, tokenizer)")
    row.addWidget(b)

    def browse() -> None:
        if save:
            path, _ = QFileDialog.getSaveFileName(panel, "Record sessions to", field.text(),
                                                  "SpecViz recordings (*.db *.sqlite);;All files (*)",
                                                  options=QFileDialog.Option.DontConfirmOverwrite)
            if path:
                field.setText(path)
                field.editingFinished.emit()  # chosen: as if typed and confirmed
        else:
            path = QFileDialog.getExistingDirectory(panel, "Model folder (config.json, weights, tokenizer)")
            if path:
                field.setEditText(path)

    b.clicked.connect(browse)
    return w


class ModelPicker(QObject):
    """Fills the target and draft lists from the scan and marks the drafts against the target.

    The scan (which imports transformers, and with it torch) starts when a list first opens, or on
    :meth:`refresh`: a window that only replays recordings never loads them."""

    scanned = Signal()
    """The lists were filled from a finished scan."""

    def __init__(self, target: QComboBox, draft: QComboBox, hint: QLabel, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.target, self.draft, self.hint = target, draft, hint
        self.entries: list[ModelEntry] = []
        self.method = ""
        self._described: dict[str, ModelEntry | None] = {}
        self.scan = CatalogScan(self)
        self.scan.done.connect(self._fill)
        self._timer = QTimer(self, singleShot=True, interval=250)
        self._timer.timeout.connect(self.mark_drafts)
        for combo in (target, draft):
            if isinstance(combo, ModelCombo):
                combo.opening.connect(self._first_look)
        target.editTextChanged.connect(lambda *_: self._timer.start())
        draft.editTextChanged.connect(lambda *_: self._show_hint())
        set_role(hint, "hint")
        hint.setWordWrap(True)

    def refresh(self, force: bool = False) -> None:
        """List the models again (``force``: scan even if this process scanned before)."""
        if self.scan.start(force) and self.scan.running:
            for combo in (self.target, self.draft):  # what the open list says meanwhile
                if combo.findText(SCANNING) < 0:
                    combo.addItem(SCANNING)
                    item = combo.model().item(combo.count() - 1)
                    item.setEnabled(False)

    def _first_look(self) -> None:
        if not self.entries and not self.scan.running:
            self.refresh()

    # -- filling -----------------------------------------------------------------------------
    def _fill(self, result: object) -> None:
        self.scan.running = False
        if isinstance(result, str):
            for combo in (self.target, self.draft):
                i = combo.findText(SCANNING)
                if i >= 0:
                    combo.removeItem(i)
            self.hint.setText(result)
            self.hint.setVisible(True)
            return
        self.entries = list(result)  # type: ignore[call-overload]
        for combo, first in ((self.target, DEFAULT_MODEL_LABEL), (self.draft, NO_DRAFT_LABEL)):
            text = combo.currentText()
            combo.blockSignals(True)
            combo.clear()
            combo.addItem(first)
            for e in self.entries:
                label = (DEFAULT_MODEL_LABEL if combo is self.target else SAME_AS_TARGET) if e.name == DEFAULT_MODEL \
                    else e.name
                combo.addItem(label)
                i = combo.count() - 1
                combo.setItemData(i, e.name, NAME_ROLE)
                combo.setItemData(i, details(e), DETAILS_ROLE)
                combo.setItemData(i, entry_tip(e), Qt.ItemDataRole.ToolTipRole)
            combo.setEditText(text)
            combo.lineEdit().setCursorPosition(0)
            combo.blockSignals(False)
        fit_popup(self.target)
        self.mark_drafts()
        self.scanned.emit()

    def target_entry(self) -> ModelEntry | None:
        """The entry of the model the target list names (a folder not in the list is described, once)."""
        text = self.target.currentText().strip()
        name = DEFAULT_MODEL if text in ("", DEFAULT_MODEL_LABEL) else text
        for e in self.entries:
            if e.name == name:
                return e
        p = Path(name).expanduser()
        if name not in self._described:
            self._described[name] = describe_folder(p, str(p), "recent") if (p / "config.json").is_file() else None
        return self._described[name]

    def relation(self, index: int) -> str:
        """The draft list's item ``index`` against the target: same, universal, target, unknown ("" no entry)."""
        name = self.draft.itemData(index, NAME_ROLE)
        target = self.target_entry()
        entry = next((e for e in self.entries if e.name == name), None)
        if entry is None or target is None:
            return "" if entry is None else "unknown"
        return draft_relation(target, entry)

    def mark_drafts(self) -> None:
        """Mark every draft entry against the target now in the target list."""
        for i in range(1, self.draft.count()):
            name = self.draft.itemData(i, NAME_ROLE)
            entry = next((e for e in self.entries if e.name == name), None)
            if entry is not None:
                rel = self.relation(i)
                self.draft.setItemData(i, details(entry, rel), DETAILS_ROLE)
                self.draft.setItemData(i, entry_tip(entry, rel), Qt.ItemDataRole.ToolTipRole)
        fit_popup(self.draft)
        self._show_hint()

    def set_method(self, method: str) -> None:
        self.method = method or ""
        self._show_hint()

    def _show_hint(self) -> None:
        """Under the draft list: whether the chosen draft shares the target's tokenizer, and what that means."""
        i = self.draft.findText(self.draft.currentText())
        rel = self.relation(i) if i > 0 else ""
        text = {"same": "The draft shares the target's tokenizer (hf_assisted, draft_tree, TALON drafter=model).",
                "universal": "The draft has another tokenizer: it needs universal decoding (method hf_universal).",
                "target": "The draft is the target itself: it assists itself.",
                "unknown": "Whether the draft shares the target's tokenizer is known once it is loaded."}.get(rel, "")
        if rel == "universal" and self.method and self.method != "hf_universal":
            text += f" {self.method} would refuse it."
        elif rel == "same" and self.method == "hf_universal":
            text += " hf_universal would refuse it: use hf_assisted."
        self.hint.setText(text)
        self.hint.setVisible(bool(text))
        set_role(self.hint, "error" if ("refuse" in text) else "hint")
