"""The draft tree from the keyboard, entered on purpose: with the focus, Enter puts a cursor on the selected box (or
the root); then arrows move it along the edges (Left: parent, Right: a child, Up/Down: the box above or below),
Enter selects the cursor's box (or opens a "+N gated" one) and Esc leaves. Until the tree is entered, Left/Right,
Home/End and Space are the window's shortcuts: they move through cycles with the focus here as anywhere but in a
text field (which keeps its editing keys).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QKeyEvent

from specviz_app.panels.tree.nav import neighbour

KEY_MOVES = {Qt.Key.Key_Left: "parent", Qt.Key.Key_Right: "child", Qt.Key.Key_Up: "up", Qt.Key.Key_Down: "down"}
ENTER = (Qt.Key.Key_Return, Qt.Key.Key_Enter)
KEYS = (*KEY_MOVES, *ENTER, Qt.Key.Key_Escape)
PLAIN = (Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.KeypadModifier)


class TreeKeys(QObject):
    """The tree view's keyboard: an event filter on the view, given the view (its ``tree_layout``, ``cursor_node``,
    ``model``, ``item_of``, ``show_cursor`` and ``activate``)."""

    def __init__(self, view: Any) -> None:
        super().__init__(view)
        self.view = view
        view.installEventFilter(self)

    @property
    def entered(self) -> bool:
        return self.view.cursor_node is not None

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        kind = event.type()
        # Entered, the arrows move in the tree before the window's shortcuts (previous/next cycle).
        if kind == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent) and \
                event.key() in KEYS and event.modifiers() in PLAIN and (self.entered or event.key() in ENTER):
            event.accept()
            return True
        if kind == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            return self.key(event)
        if kind in (QEvent.Type.FocusIn, QEvent.Type.FocusOut):
            if kind == QEvent.Type.FocusOut:
                self.leave()
            self.view.show_cursor()  # the focus widget is set before the event arrives
        return False

    def leave(self) -> None:
        """The arrows are the window's again."""
        self.view.cursor_node = None

    def key(self, event: QKeyEvent) -> bool:
        """Handle a key press; False for a key that is not the tree's (the view handles it as usual)."""
        view = self.view
        lay, key = view.tree_layout, event.key()
        if lay is None or key not in KEYS or (key in KEY_MOVES and not self.entered):
            return False
        event.accept()
        if key == Qt.Key.Key_Escape:
            self.leave()
        elif key in ENTER and not self.entered:  # enter the tree: the cursor on the selected box, else the root
            view.cursor_node = view.model.selected_node if view.model.selected_node in lay.pos else 0
        elif key in KEY_MOVES:
            view.cursor_node = neighbour(lay, view.cursor_node if view.cursor_node in lay.pos else 0, KEY_MOVES[key])
            item = view.item_of(view.cursor_node)
            if item is not None:
                view.ensureVisible(item.sceneBoundingRect(), 30, 30)
        elif view.cursor_node is not None:
            view.activate(view.cursor_node)
        view.show_cursor()
        return True
