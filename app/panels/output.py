"""The generated text, every token coloured by how it was committed; hover shows its cycle, a click goes to that
cycle and selects the node that committed the token (the bonus token included), and a node selected anywhere
lights its token here. Tokens are decoded in sequence, so a character split across tokens shows whole."""

from __future__ import annotations

import bisect

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QMouseEvent, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QTextEdit, QToolTip, QVBoxLayout, QWidget

from specviz_app.panels.base import PanelMixin
from specviz_app.theme import SOURCE_COLORS, SOURCE_LABELS, source_color
from specviz_core.analysis.cycle_summary import PROMPT, CycleSummary
from specviz_core.records import CycleRecord
from specviz_core.runtime.vocab import TextStream
from specviz_core.viewer.selection import committed_index
from specviz_core.viewer.sources import CycleSource

LEGEND_KINDS = ("prompt", "spine", "branch", "draft", "ngram", "recycle", "table", "head", "bonus", "ar")


class _Text(QPlainTextEdit):
    """The text itself: mouse tracking for tooltips, clicks reported to the panel."""

    def __init__(self, panel: OutputView) -> None:
        super().__init__()
        self.panel = panel
        self.setReadOnly(True)
        self.setMouseTracking(True)
        self.viewport().setMouseTracking(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    def mouseMoveEvent(self, e: QMouseEvent) -> None:
        super().mouseMoveEvent(e)
        pos = self.cursorForPosition(e.position().toPoint()).position()
        tip = self.panel.tooltip_at(pos)
        if tip:
            QToolTip.showText(e.globalPosition().toPoint(), tip, self)
        else:
            QToolTip.hideText()

    def mouseReleaseEvent(self, e: QMouseEvent) -> None:
        super().mouseReleaseEvent(e)
        if e.button() == Qt.MouseButton.LeftButton and not self.textCursor().hasSelection():
            self.panel.select_at(self.cursorForPosition(e.position().toPoint()).position())


class OutputView(PanelMixin, QWidget):
    """Prompt then output; each token's colour says how it was committed (prompt, spine, branch, bonus...)."""

    title = "Output"

    def __init__(self, model, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        self.legend = QWidget()
        row = QHBoxLayout(self.legend)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(10)
        self._legend_labels: dict[str, QLabel] = {}
        for kind in LEGEND_KINDS:
            lab = QLabel(f"<span style='color:{SOURCE_COLORS[kind]}'>■</span> {kind}")
            lab.setToolTip(SOURCE_LABELS[kind])
            row.addWidget(lab)
            self._legend_labels[kind] = lab
        row.addStretch(1)
        layout.addWidget(self.legend)
        self.text = _Text(self)
        font = QFont("monospace")
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.text.setFont(font)
        layout.addWidget(self.text, 1)
        self.hint = "Step a cycle (F10) or open a recording"
        self.text.setPlaceholderText(self.hint)
        # Per token: its start offset in the document, its cycle (-1 for the prompt), its kind.
        self._starts: list[int] = []
        self._cycles: list[int] = []
        self._kinds: list[str] = []
        self._tokens: list[int] = []
        self._cycle_first: list[int] = []  # cycle -> index of its first token
        self._n_prompt = 0
        self._span: tuple[int, int] | None = None
        self._formats: dict[str, QTextCharFormat] = {}
        self._stream = TextStream(model.vocab)
        self.connect_model(model)

    # -- model callbacks --------------------------------------------------------------
    def on_session_opened(self, source: CycleSource) -> None:
        self._clear()
        self._stream = TextStream(self.model.vocab)
        self._append_tokens(list(source.info.prompt_ids), -1, [PROMPT] * len(source.info.prompt_ids))
        self._n_prompt = len(source.info.prompt_ids)
        self._append_summaries(source.summaries())
        self._update_legend()

    def on_session_closed(self) -> None:
        self._clear()

    def on_cycles_appended(self, summaries: list[CycleSummary]) -> None:
        self._append_summaries(summaries)
        self._update_legend()

    def on_cycle_changed(self, record: CycleRecord) -> None:
        self._highlight()

    def on_node_selected(self, node_id: int | None) -> None:
        self._highlight(scroll=False)

    def set_matched_span(self, span: tuple[int, int] | None) -> None:
        """Context token indices [start, end) to underline (the spine's matched context)."""
        self._span = span
        self._highlight()

    # -- building the text -------------------------------------------------------------------
    def _clear(self) -> None:
        self.text.clear()
        self._starts, self._cycles, self._kinds, self._tokens, self._cycle_first = [], [], [], [], []
        self._span = None

    def _append_summaries(self, summaries: list[CycleSummary]) -> None:
        cursor = self._end_cursor()
        cursor.beginEditBlock()  # one edit block for the lot: per-token blocks dominate opening a long session
        for s in summaries:
            while len(self._cycle_first) <= s.index:
                self._cycle_first.append(len(self._tokens))
            self._insert(cursor, list(s.committed_ids), s.index, list(s.committed_kinds))
        cursor.endEditBlock()

    def _append_tokens(self, tokens: list[int], cycle: int, kinds: list[str]) -> None:
        cursor = self._end_cursor()
        cursor.beginEditBlock()
        self._insert(cursor, tokens, cycle, kinds)
        cursor.endEditBlock()

    def _end_cursor(self) -> QTextCursor:
        cursor = QTextCursor(self.text.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        return cursor

    def _insert(self, cursor: QTextCursor, tokens: list[int], cycle: int, kinds: list[str]) -> None:
        piece = self._stream.push
        formats = self._formats
        for tok, kind in zip(tokens, kinds):
            fmt = formats.get(kind)
            if fmt is None:
                fmt = formats[kind] = QTextCharFormat()
                fmt.setForeground(source_color(kind))
                fmt.setFontWeight(QFont.Weight.Normal if kind == PROMPT else QFont.Weight.DemiBold)
            self._starts.append(cursor.position())
            self._cycles.append(cycle)
            self._kinds.append(kind)
            self._tokens.append(tok)
            cursor.insertText(piece(tok), fmt)

    def _update_legend(self) -> None:
        present = set(self._kinds)
        for kind, lab in self._legend_labels.items():
            lab.setVisible(kind in present)

    # -- lookups ------------------------------------------------------------------------------
    def token_at(self, pos: int) -> int | None:
        """Index of the token covering document position ``pos``."""
        i = bisect.bisect_right(self._starts, pos) - 1
        return i if 0 <= i < len(self._starts) else None

    def tooltip_at(self, pos: int) -> str:
        i = self.token_at(pos)
        if i is None:
            return ""
        label = self.model.vocab.label(self._tokens[i], limit=24)
        if self._cycles[i] < 0:
            return f"prompt token {i} · {label!s} (id {self._tokens[i]})"
        kind = SOURCE_LABELS.get(self._kinds[i], self._kinds[i])
        return f"cycle {self._cycles[i]} · {kind}\ntoken {label} (id {self._tokens[i]}), position {i}\nclick to open this cycle"

    def jump_to(self, pos: int) -> None:
        """Go to the cycle that committed the token at document position ``pos``."""
        i = self.token_at(pos)
        if i is not None and self._cycles[i] >= 0:
            self.model.set_cycle(self._cycles[i])

    def select_at(self, pos: int) -> None:
        """What a click does: go to the token's cycle and select the node that committed it."""
        i = self.token_at(pos)
        if i is not None:
            self.select_token(i)

    def select_token(self, i: int) -> None:
        """Select the node that committed token ``i`` (in its cycle); a prompt token selects nothing."""
        c = self._cycles[i]
        if c >= 0 and c < len(self._cycle_first):
            self.model.select_committed(c, i - self._cycle_first[c])

    def selected_token(self) -> int | None:
        """Index of the token of the selected node (None when it committed none)."""
        rec, idx = self.model.record, self.model.index
        if rec is None or not 0 <= idx < len(self._cycle_first):
            return None
        k = committed_index(rec, self.model.selected_node)
        i = None if k is None else self._cycle_first[idx] + k
        return i if i is not None and 0 <= i < len(self._tokens) else None

    def shown_tokens(self) -> list[tuple[int, int, str]]:
        """(token id, cycle, kind) of every token shown, prompt first (for tests and CSV export)."""
        return list(zip(self._tokens, self._cycles, self._kinds))

    # -- highlighting ---------------------------------------------------------------------------
    def _range(self, first: int, last: int) -> QTextEdit.ExtraSelection | None:
        if not (0 <= first < last <= len(self._starts)):
            return None
        sel = QTextEdit.ExtraSelection()
        cur = QTextCursor(self.text.document())
        cur.setPosition(self._starts[first])
        end = self._starts[last] if last < len(self._starts) else self.text.document().characterCount() - 1
        cur.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        sel.cursor = cur
        return sel

    def _highlight(self, scroll: bool = True) -> None:
        sels = []
        idx = self.model.index
        if 0 <= idx < len(self._cycle_first):
            first = self._cycle_first[idx]
            last = self._cycle_first[idx + 1] if idx + 1 < len(self._cycle_first) else len(self._tokens)
            sel = self._range(first, last)
            if sel is not None:
                color = QColor(self.palette().highlight().color())
                color.setAlpha(70)
                sel.format.setBackground(color)
                sels.append(sel)
                if scroll:
                    self.text.setTextCursor(QTextCursor(sel.cursor))
                    c = self.text.textCursor()
                    c.clearSelection()
                    self.text.setTextCursor(c)
                    self.text.ensureCursorVisible()
        tok = self.selected_token()
        sel = self._range(tok, tok + 1) if tok is not None else None
        if sel is not None:  # the selected node's own token, in the selection's colours
            sel.format.setBackground(self.palette().highlight().color())
            sel.format.setForeground(self.palette().highlightedText().color())
            sels.append(sel)
        if self._span is not None:
            sel = self._range(*self._span)
            if sel is not None:
                sel.format.setUnderlineStyle(QTextCharFormat.UnderlineStyle.SingleUnderline)
                sel.format.setUnderlineColor(QColor(SOURCE_COLORS["spine"]))
                bg = QColor(SOURCE_COLORS["spine"])
                bg.setAlpha(45)
                sel.format.setBackground(bg)
                sels.append(sel)
        self.text.setExtraSelections(sels)

    def current_cycle_range(self) -> tuple[int, int] | None:
        """Token indices [first, last) of the current cycle's committed tokens."""
        idx = self.model.index
        if not 0 <= idx < len(self._cycle_first):
            return None
        last = self._cycle_first[idx + 1] if idx + 1 < len(self._cycle_first) else len(self._tokens)
        return self._cycle_first[idx], last
