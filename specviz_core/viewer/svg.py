"""A cycle's draft tree and tree attention mask, and a session's acceptance, as SVG text (no Qt).

The pictures a notebook shows inline (``specviz.Cycle`` and ``specviz.Session`` render themselves with them):
the window's tree layout (:mod:`specviz_core.viewer.tree_layout`) and colours (:mod:`.colors`), boxes sized
from the label's length; the mask's rows and columns in verify order, with the accepted rows marked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from specviz_core.records import CycleRecord
from specviz_core.viewer.colors import ACCEPTED, FALLBACK, GATED, SOURCE_COLORS
from specviz_core.viewer.tree_layout import BONUS, Metrics, is_marker, layout_tree

FONT_PX = 12.0
CHAR_W = 0.62
"""A label character's width, in font pixels (a sans-serif's average)."""
FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"


def box_width(text: str, m: Metrics) -> float:
    return max(m.min_w, len(text) * FONT_PX * CHAR_W + FONT_PX)


def tree_svg(record: CycleRecord, label: Callable[[int], str] = str, show_gated: bool = False) -> str:
    """The draft tree: boxes coloured by source, the accepted path and its edges bold green, the bonus token
    (★) after it, gated candidates hollow and dashed (collapsed into "+N gated" unless ``show_gated``)."""
    m = Metrics(FONT_PX)
    lay = layout_tree(record, show_gated, label, lambda t: box_width(t, m), m)
    accepted = {0, *record.accepted_path}
    w, h = lay.width + 2 * m.margin, lay.height + 2 * m.margin
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{w:.0f}' height='{h:.0f}' viewBox='0 0 {w:.0f} {h:.0f}' "
           f"{FONT} font-size='{FONT_PX:.0f}'>"]

    def centre(i: int, side: float) -> tuple[float, float]:
        x, y, bw, bh = lay.rect(i)
        return x + m.margin + side * bw, y + m.margin + bh / 2

    for child, parent in lay.parent.items():
        x0, y0 = centre(parent, 1.0)
        x1, y1 = centre(child, 0.0)
        on_path = child in accepted and parent in accepted or (child == BONUS)
        gated = is_marker(child) or (child in lay.nodes and lay.nodes[child].gated)
        style = (f"stroke='{ACCEPTED}' stroke-width='3'" if on_path else
                 f"stroke='{GATED}' stroke-width='1' stroke-dasharray='4 3'" if gated else "stroke='#9aa0a6' stroke-width='1'")
        mx = (x0 + x1) / 2
        out.append(f"<path d='M{x0:.1f},{y0:.1f} C{mx:.1f},{y0:.1f} {mx:.1f},{y1:.1f} {x1:.1f},{y1:.1f}' fill='none' {style}/>")
    for i in lay.pos:
        x, y, bw, bh = lay.rect(i)
        x, y = x + m.margin, y + m.margin
        node = lay.nodes.get(i)
        if i == BONUS:
            fill, stroke, text, extra = ACCEPTED, ACCEPTED, "#ffffff", " stroke-width='2'"
        elif is_marker(i) or (node is not None and node.gated):
            fill, stroke, text, extra = "none", GATED, GATED, " stroke-dasharray='4 3'"
        else:
            fill = SOURCE_COLORS.get(node.source if node is not None else "", FALLBACK)
            stroke, text = (ACCEPTED, "#ffffff") if i in accepted else (fill, "#ffffff")
            extra = " stroke-width='2.5'" if i in accepted else ""
        tip = "" if node is None else f"<title>node {i}, {node.source}, depth {node.depth}</title>"
        out.append(f"<g>{tip}<rect x='{x:.1f}' y='{y:.1f}' width='{bw:.1f}' height='{bh:.1f}' rx='{bh / 3:.1f}' "
                   f"fill='{fill}' stroke='{stroke}'{extra}/>"
                   f"<text x='{x + bw / 2:.1f}' y='{y + bh / 2:.1f}' fill='{text}' text-anchor='middle' "
                   f"dy='0.35em'>{escape(lay.labels[i])}</text></g>")
    out.append("</svg>")
    return "".join(out)


def mask_svg(record: CycleRecord, label: Callable[[int], str] = str, cell: float = 10.0) -> str:
    """The tree attention mask in verify order: a dark cell where row i attends column j (its ancestors and
    itself), the accepted rows' cells green; each row labelled with its token and position id."""
    order = list(record.verify_order)
    n = len(order)
    nodes = record.node_by_id
    accepted = {0, *record.accepted_path}
    labels = [f"{label(nodes[i].token)} {record.positions[r]}" for r, i in enumerate(order)]
    left = max(len(t) for t in labels) * FONT_PX * CHAR_W * 0.85 + 8
    w, h = left + n * cell + 2, n * cell + 2
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{w:.0f}' height='{h:.0f}' viewBox='0 0 {w:.0f} {h:.0f}' "
           f"{FONT} font-size='{min(cell, FONT_PX) * 0.85:.1f}'>"]
    for r in range(n):
        y = 1 + r * cell
        out.append(f"<text x='{left - 4:.1f}' y='{y + cell / 2:.1f}' text-anchor='end' dy='0.35em'>"
                   f"{escape(labels[r])}</text>")
        row_ok = order[r] in accepted
        for c in range(n):
            if record.mask[r, c]:
                colour = ACCEPTED if row_ok else "#4a5160"
                out.append(f"<rect x='{left + c * cell:.1f}' y='{y:.1f}' width='{cell - 1:.1f}' height='{cell - 1:.1f}' "
                           f"fill='{colour}'/>")
    out.append(f"<rect x='{left:.1f}' y='1' width='{n * cell:.1f}' height='{n * cell:.1f}' fill='none' stroke='#c8ccd2'/>")
    out.append("</svg>")
    return "".join(out)


def acceptance_svg(tokens_per_cycle: Sequence[int], width: float = 420.0, height: float = 120.0) -> str:
    """Tokens committed per cycle (accepted + bonus) as bars, with the running mean as a line."""
    n = len(tokens_per_cycle)
    top = max([1, *tokens_per_cycle])
    bw = width / max(n, 1)
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height + 16:.0f}' {FONT} "
           f"font-size='10'><text x='2' y='10'>tokens per cycle (max {top})</text>"]
    total = 0.0
    points = []
    for k, t in enumerate(tokens_per_cycle):
        bh = height * t / top
        out.append(f"<rect x='{k * bw:.1f}' y='{16 + height - bh:.1f}' width='{max(bw - 1, 0.5):.1f}' height='{bh:.1f}' "
                   f"fill='{ACCEPTED}' fill-opacity='0.45'/>")
        total += t
        points.append(f"{k * bw + bw / 2:.1f},{16 + height - height * (total / (k + 1)) / top:.1f}")
    if points:
        out.append(f"<polyline points='{' '.join(points)}' fill='none' stroke='#222' stroke-width='1.5'/>")
    out.append("</svg>")
    return "".join(out)
