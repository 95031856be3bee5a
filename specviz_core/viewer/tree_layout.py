"""Where the draft tree's boxes go (no Qt): one column per depth, root on the left, subtrees packed tightly.

Sizes are in scene pixels, scaled by the label font (:class:`Metrics`). The bonus token is laid out as one more
node, id :data:`BONUS`, after the last accepted node. Gated nodes are collapsed by default: the gated candidates
under each drawn node become one marker box "+N gated" (id :func:`marker_id`), unless that node is expanded.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from specviz_core.records import CycleRecord, Node
from specviz_core.viewer.selection import BONUS

__all__ = ["BONUS", "Metrics", "TreeLayout", "is_marker", "layout_tree", "marker_id", "marker_parent", "tidy_rows"]


def marker_id(parent: int) -> int:
    """The id of the "+N gated" marker under node ``parent`` (always below :data:`BONUS`)."""
    return -2 - parent


def marker_parent(marker: int) -> int:
    return -2 - marker


def is_marker(i: int) -> bool:
    return i <= -2


@dataclass(frozen=True)
class Metrics:
    """Box height, row pitch, column gap, margin and narrowest box, for labels ``font_px`` pixels high."""

    font_px: float = 12.0

    @property
    def node_h(self) -> float:
        return round(self.font_px * 1.3)

    @property
    def row(self) -> float:
        return self.node_h + max(2.0, round(self.font_px * 0.2))

    @property
    def hgap(self) -> float:
        return round(self.font_px * 1.15)

    @property
    def margin(self) -> float:
        return round(self.font_px * 0.8)

    @property
    def min_w(self) -> float:
        return round(self.font_px * 1.5)


@dataclass
class TreeLayout:
    """The boxes of one cycle's tree: which nodes, their labels and where each box's top-left corner is."""

    nodes: dict[int, Node]
    """The record's nodes drawn (gated ones only when shown), by id."""
    children: dict[int, list[int]]
    """Drawn children per node, in id order, then its gated marker; the last accepted node also has :data:`BONUS`."""
    parent: dict[int, int]
    """Drawn parent of every drawn box but the root (markers and the bonus token included)."""
    labels: dict[int, str]
    pos: dict[int, tuple[float, float]]
    widths: dict[int, float]
    depth: dict[int, int]
    width: float
    height: float
    node_h: float
    """Every box's height."""
    hidden: dict[int, list[int]] = field(default_factory=dict)
    """Gated nodes collapsed into each marker, by the marker's parent."""

    def rect(self, i: int) -> tuple[float, float, float, float]:
        """(x, y, width, height) of box ``i``."""
        x, y = self.pos[i]
        return x, y, self.widths[i], self.node_h


def gated_home(rec: CycleRecord) -> dict[int, int]:
    """For every gated node, its nearest verified ancestor (where its marker hangs)."""
    by_id = rec.node_by_id
    home: dict[int, int] = {}

    def find(n: Node) -> int:
        chain = []
        while n.gated and n.id not in home and n.parent >= 0:
            chain.append(n.id)
            n = by_id[n.parent]
        h = home.get(n.id, n.id)
        for i in chain:
            home[i] = h
        return h

    for n in rec.nodes:
        if n.gated:
            find(n)
    return home


def layout_tree(rec: CycleRecord, show_gated: bool, label: Callable[[int], str], box_width: Callable[[str], float],
                metrics: Metrics = Metrics(), expanded: Collection[int] = ()) -> TreeLayout:
    """Lay out ``rec``'s tree; ``label`` names a token, ``box_width`` sizes a box for a label. Gated nodes are drawn
    when ``show_gated``, or under the nodes in ``expanded``; elsewhere each node's gated ones are one marker."""
    m = metrics
    home = gated_home(rec)
    hidden: dict[int, list[int]] = {}
    nodes: dict[int, Node] = {}
    for n in rec.nodes:
        if not n.gated or show_gated or home[n.id] in expanded:
            nodes[n.id] = n
        else:
            hidden.setdefault(home[n.id], []).append(n.id)
    children: dict[int, list[int]] = {}
    parent: dict[int, int] = {}
    for n in nodes.values():
        if n.parent >= 0 and n.parent in nodes:
            children.setdefault(n.parent, []).append(n.id)
            parent[n.id] = n.parent
    for kids in children.values():
        kids.sort()
    depth = {i: n.depth for i, n in nodes.items()}
    labels = {i: label(n.token) for i, n in nodes.items()}
    for p, group in hidden.items():
        if p in nodes:
            k = marker_id(p)
            children.setdefault(p, []).append(k)
            parent[k] = p
            depth[k] = depth[p] + 1
            labels[k] = f"+{len(group)} gated"
    last = rec.accepted_path[-1] if rec.accepted_path and rec.accepted_path[-1] in nodes else 0
    children.setdefault(last, []).append(BONUS)
    parent[BONUS] = last
    depth[BONUS] = nodes[last].depth + 1
    labels[BONUS] = "★" + label(rec.bonus_token)
    rows = tidy_rows(children, 0)
    widths = {i: box_width(labels[i]) for i in rows}
    col_w: dict[int, float] = {}
    for i in rows:
        d = depth[i]
        col_w[d] = max(col_w.get(d, 0.0), widths[i])
    col_x, x = {}, m.margin
    for d in range(max(col_w) + 1):
        col_x[d] = x
        x += col_w.get(d, m.min_w) + m.hgap
    top = min(rows.values())
    pos = {i: (col_x[depth[i]], m.margin + (r - top) * m.row) for i, r in rows.items()}
    return TreeLayout({i: nodes[i] for i in rows if i in nodes}, children, parent, labels, pos, widths, depth,
                      width=x - m.hgap + m.margin, height=m.margin * 2 + (max(rows.values()) - top) * m.row + m.node_h,
                      node_h=m.node_h, hidden={p: g for p, g in hidden.items() if p in nodes})


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
