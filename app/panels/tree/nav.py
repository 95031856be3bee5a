"""Keyboard moves in the drawn tree (no Qt): to the parent, to a child, to the box above or below."""

from __future__ import annotations

from specviz_core.viewer.tree_layout import BONUS, TreeLayout

MOVES = ("parent", "child", "up", "down")


def neighbour(lay: TreeLayout, current: int, move: str) -> int:
    """The box an arrow key moves to from box ``current`` (``current`` itself where there is none).

    ``parent`` and ``child`` follow the edges (a child on the accepted path first, else the one nearest in
    height); ``up`` and ``down`` go to the previous or next sibling, and past the first or last one to the
    nearest box above or below in the same column, so every box of a column can be reached.
    """
    if current not in lay.pos:
        return 0
    if move == "parent":
        return lay.parent.get(current, current)
    y = lay.pos[current][1]
    if move == "child":
        kids = lay.children.get(current)
        if not kids:
            return current
        on_path = [k for k in kids if k == BONUS or (k in lay.nodes and lay.nodes[k].accepted)]
        return on_path[0] if on_path else min(kids, key=lambda k: (abs(lay.pos[k][1] - y), lay.pos[k][1]))
    if move not in ("up", "down"):
        raise ValueError(f"no move {move!r}: one of {', '.join(MOVES)}")
    step = -1 if move == "up" else 1
    p = lay.parent.get(current)
    if p is not None:
        sibs = sorted(lay.children[p], key=lambda k: lay.pos[k][1])
        i = sibs.index(current) + step
        if 0 <= i < len(sibs):
            return sibs[i]
    column = sorted((k for k in lay.pos if lay.depth[k] == lay.depth[current]), key=lambda k: lay.pos[k][1])
    i = column.index(current) + step
    return column[i] if 0 <= i < len(column) else current
