"""The draft tree from the keyboard: with the focus, arrows move a cursor along the edges (Left: parent, Right: a
child, Up/Down: the box above or below), Enter selects the cursor's box (or opens a "+N gated" one), Esc leaves."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QFocusEvent, QKeyEvent

from specviz_app.panels.tree.nav import neighbour

KEY_MOVES = {Qt.Key.Key_Left: "parent", Qt.Key.Key_Right: "child", Qt.Key.Key_Up: "up", Qt.Key.Key_Down: "down"}
KEYS = (*KEY_MOVES, Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Escape)


class TreeKeys:
    """Mixed into :class:`~specviz_app.panels.tree.view.TreeView` (its ``tree_layout``, ``cursor_node``, ``activate``)."""

    def event(self, event: QEvent) -> bool:
        # With the focus, arrows and Enter move in the tree before the window's shortcuts (previous/next cycle).
        if event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent) and \
                event.key() in KEYS and event.modifiers() in (Qt.KeyboardModifier.NoModifier,
                                                              Qt.KeyboardModifier.KeypadModifier):
            event.accept()
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        lay, key = self.tree_layout, event.key()
        if lay is None or key not in KEYS:
            super().keyPressEvent(event)
            return
        event.accept()
        if key == Qt.Key.Key_Escape:
            self.cursor_node = None
            self.clearFocus()
        elif key in KEY_MOVES:
            start = self.cursor_node if self.cursor_node in lay.pos else (
                self.model.selected_node if self.model.selected_node in lay.pos else None)
            self.cursor_node = 0 if start is None else neighbour(lay, start, KEY_MOVES[key])
            self._show_cursor()
            item = self._items.get(self.cursor_node)
            if item is not None:
                self.ensureVisible(item.sceneBoundingRect(), 30, 30)
        elif self.cursor_node is not None:
            self.activate(self.cursor_node)
        self._show_cursor()

    def focusInEvent(self, event: QFocusEvent) -> None:
        super().focusInEvent(event)
        self._show_cursor()

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        self._show_cursor()

