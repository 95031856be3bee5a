"""Where the draft tree's boxes go (no Qt): one column per depth, root on the left, subtrees packed tightly.

Sizes are in scene pixels. The bonus token is laid out as one more node, id :data:`BONUS`, after the last
accepted node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from specviz_core.records import CycleRecord, Node

BONUS = -1
"""Node id used for the bonus token's box (it is not a node of the record)."""
NODE_H, MIN_W = 15.0, 18.0
"""Box height, and the narrowest box."""
ROW, HGAP, MARGIN = 17.5, 15.0, 10.0
"""Distance between rows, gap between columns, margin around the drawing."""


@dataclass
class TreeLayout:
    """The boxes of one cycle's tree: which nodes, their labels and where each box's top-left corner is."""

    nodes: dict[int, Node]
    """The nodes drawn (gated ones only when shown), by id."""
    children: dict[int, list[int]]
    """Drawn children per node, in id order; the last accepted node also has :data:`BONUS`."""
    labels: dict[int, str]
    pos: dict[int, tuple[float, float]]
    width: float
    height: float


def layout_tree(rec: CycleRecord, show_gated: bool, label: Callable[[int], str],
                box_width: Callable[[str], float]) -> TreeLayout:
    """Lay out ``rec``'s tree; ``label`` names a token, ``box_width`` sizes a box for a label."""
    nodes = {n.id: n for n in rec.nodes if (show_gated or not n.gated)}
    children: dict[int, list[int]] = {}
    for n in nodes.values():
        if n.parent >= 0 and n.parent in nodes:
            children.setdefault(n.parent, []).append(n.id)
    for kids in children.values():
        kids.sort()
    last = rec.accepted_path[-1] if rec.accepted_path and rec.accepted_path[-1] in nodes else 0
    children.setdefault(last, []).append(BONUS)
    rows = tidy_rows(children, 0)
    depth = {i: nodes[i].depth for i in rows if i != BONUS}
    depth[BONUS] = nodes[last].depth + 1
    labels = {i: label(nodes[i].token) for i in rows if i != BONUS}
    labels[BONUS] = "★" + label(rec.bonus_token)
    col_w: dict[int, float] = {}
    for i, d in depth.items():
        col_w[d] = max(col_w.get(d, 0.0), box_width(labels[i]))
    col_x, x = {}, MARGIN
    for d in range(max(col_w) + 1):
        col_x[d] = x
        x += col_w.get(d, MIN_W) + HGAP
    top = min(rows.values())
    pos = {i: (col_x[depth[i]], MARGIN + (r - top) * ROW) for i, r in rows.items()}
    return TreeLayout(nodes, children, labels, pos, width=x - HGAP + MARGIN,
                      height=MARGIN * 2 + (max(rows.values()) - top) * ROW + NODE_H)


def tidy_rows(children: dict[int, list[int]], root: int = 0) -> dict[int, float]:
    """Row of every node (in row units, root at 0) for a layered drawing with one layer per depth.

    Subtrees are packed as tightly as their per-layer contours allow (Reingold-Tilford style, one row apart at
    least), and every parent sits midway between its first and last child.
    """
    order, stack = [], [root]
    while stack:  # pre-order: parents before children
        n = stack.pop()
        order.append(n)
        stack.extend(children.get(n, ()))
    contour: dict[int, list[list[float]]] = {}
    offset: dict[int, float] = {}
    for n in reversed(order):
        kids = children.get(n)
        if not kids:
            contour[n] = [[0.0, 0.0]]
            continue
        acc: list[list[float]] = []
        shifts = []
        for k in kids:
            c = contour.pop(k)
            s = max((acc[d][1] - c[d][0] + 1.0 for d in range(min(len(acc), len(c)))), default=0.0)
            shifts.append(s)
            for d, (lo, hi) in enumerate(c):
                if d < len(acc):
                    acc[d][0], acc[d][1] = min(acc[d][0], lo + s), max(acc[d][1], hi + s)
                else:
                    acc.append([lo + s, hi + s])
        mid = (shifts[0] + shifts[-1]) / 2
        for k, s in zip(kids, shifts):
            offset[k] = s - mid
        contour[n] = [[0.0, 0.0]] + [[lo - mid, hi - mid] for lo, hi in acc]
    rows = {root: 0.0}
    for n in order:
        for k in children.get(n, ()):
            rows[k] = rows[n] + offset[k]
    return rows
