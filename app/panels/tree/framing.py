"""Where the draft tree view stands: a cycle opens on its root and accepted path, and what matters (that path, the
selection) is moved out from under the overview in the corner."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRectF

from specviz_core.viewer.tree_layout import BONUS


def show_path(view: Any) -> None:  # view: the TreeView (its model, drawing, minimap and scroll bars)
    """Show the root and the accepted path (to the bonus token) with the spine-break callout; when they are
    larger than the view, from the root: the view opens a cycle where it starts, the minimap shows the rest.
    None of them, nor the selected node, is left under the minimap."""
    rects, ends = path_rects(view)
    area, end = QRectF(), QRectF()
    for r in rects:
        area = area.united(r)
    for r in ends:
        end = end.united(r)
    vp = view.mapToScene(view.viewport().rect()).boundingRect()
    w, h = vp.width() * 0.95, vp.height() * 0.95
    if area.width() > w:  # the path runs left to right from the root: keep its start
        area.setRight(area.left() + w)
    if area.height() > h:
        area = QRectF(area.left(), end.center().y() - h / 2, area.width(), h)
    view.centerOn(area.center())
    items = view.drawing.items
    selected = items.get(view.model.selected_node) if view.model.selected_node is not None else None
    clear_of_minimap(view, rects + ([selected.sceneBoundingRect()] if selected is not None else []))


def path_rects(view: Any) -> tuple[list[QRectF], list[QRectF]]:
    """Scene rectangles of the root, the accepted path, the bonus token and the spine-break callout; and of the path's
    end (the last accepted node, the bonus, the callout)."""
    record = view.model.record
    items = view.drawing.items
    path = [i for i in (0, *(record.accepted_path if record else ()), BONUS) if i in items]
    rects = [items[i].sceneBoundingRect() for i in path]
    ends = rects[-2:]  # the last accepted node and the bonus token
    if view.drawing.callout.visible():
        rects.append(view.drawing.callout.rect())
        ends.append(rects[-1])
    return rects, ends


def path_area(view: Any) -> QRectF:
    """The scene rectangle that holds the root, the accepted path, the bonus token and the callout."""
    area = QRectF()
    for r in path_rects(view)[0]:
        area = area.united(r)
    return area


def clear_of_minimap(view: Any, rects: list[QRectF]) -> None:
    """Scroll so that none of ``rects`` (scene coordinates) lies under the overview, where the view can."""
    h, v = view.horizontalScrollBar(), view.verticalScrollBar()
    shown = [view.viewportTransform().mapRect(r) for r in rects]
    dx, dy = view.minimap.clearance(shown, (h.maximum() - h.value(), v.maximum() - v.value()))
    h.setValue(h.value() + dx)
    v.setValue(v.value() + dy)
