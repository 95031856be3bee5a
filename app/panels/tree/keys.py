"""The draft tree from the keyboard: with the focus, arrows move a cursor along the edges (Left: parent, Right: a
child, Up/Down: the box above or below), Enter selects the cursor's box (or opens a "+N gated" one), Esc leaves."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QKeyEvent

from specviz_app.panels.tree.nav import neighbour

KEY_MOVES = {Qt.Key.Key_Left: "parent", Qt.Key.Key_Right: "child", Qt.Key.Key_Up: "up", Qt.Key.Key_Down: "down"}
KEYS = (*KEY_MOVES, Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Escape)


class TreeKeys(QObject):
    """The tree view's keyboard: an event filter on the view, given the view (its ``tree_layout``, ``cursor_node``,
    ``model``, ``item_of``, ``show_cursor`` and ``activate``)."""

    def __init__(self, view: Any) -> None:
        super().__init__(view)
        self.view = view
        view.installEventFilter(self)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        kind = event.type()
        # With the focus, arrows and Enter move in the tree before the window's shortcuts (previous/next cycle).
        if kind == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent) and \
                event.key() in KEYS and event.modifiers() in (Qt.KeyboardModifier.NoModifier,
                                                              Qt.KeyboardModifier.KeypadModifier):
            event.accept()
            return True
        if kind == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            return self.key(event)
        if kind in (QEvent.Type.FocusIn, QEvent.Type.FocusOut):
            self.view.show_cursor()  # the focus widget is set before the event arrives
        return False

    def key(self, event: QKeyEvent) -> bool:
        """Handle a key press; False for a key that is not the tree's (the view handles it as usual)."""
        view = self.view
        lay, key = view.tree_layout, event.key()
        if lay is None or key not in KEYS:
            return False
        event.accept()
        if key == Qt.Key.Key_Escape:
            view.cursor_node = None
            view.clearFocus()
        elif key in KEY_MOVES:
            start = view.cursor_node if view.cursor_node in lay.pos else (
                view.model.selected_node if view.model.selected_node in lay.pos else None)
            view.cursor_node = 0 if start is None else neighbour(lay, start, KEY_MOVES[key])
            view.show_cursor()
            item = view.item_of(view.cursor_node)
            if item is not None:
                view.ensureVisible(item.sceneBoundingRect(), 30, 30)
        elif view.cursor_node is not None:
            view.activate(view.cursor_node)
        view.show_cursor()
        return True
