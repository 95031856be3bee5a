"""Qt-free layout of the draft tree: one layer per depth, subtrees packed tightly."""

from __future__ import annotations


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
