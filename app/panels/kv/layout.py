"""Where the KV panel's cells go: the cache before the forward, the verify block, the cache after the trim.

Cache slot p holds context token p (the prompt, then every committed token; the root, the last committed
token, is written by this cycle's forward as verify row 0). The forward writes the n verify rows at slots
``cache_len ..``; the trim keeps rows ``record.kv_keep`` (root first) compacted after the old slots and drops
the rest. Long caches show only their last positions after an elided block.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QRect
from PySide6.QtGui import QFont, QFontMetrics

from specviz_core.analysis.cycle_summary import PROMPT
from specviz_core.records import CycleRecord, Node
from specviz_core.viewer.sources import CycleSource

MARGIN, GAP = 8, 6
STRIPS = ("before", "verify", "after")
STRIP_NAMES = {"before": "before", "verify": "verify block", "after": "after trim"}
MAX_CELL, OLD_CELL = 28, 16

OldPosition = tuple[int, int, str, int]
"""(cache slot, token or -1 if unknown, how it was committed, committing cycle or -1 for the prompt)."""


@dataclass
class Cell:
    """One drawn cell: which strip, where, and what it stands for."""

    strip: str
    rect: QRect
    slot: int
    """Cache slot (position in the cache); -1 for a dropped row."""
    token: int
    kind: str
    """Source or commit kind (prompt, spine, branch, bonus, ...) that colours it."""
    row: int = -1
    """Verify row for block cells, -1 for old positions."""
    node: Node | None = None
    dropped: bool = False
    cycle: int = -1
    """Cycle that committed an old position's token (-1: the prompt)."""
    text: str = ""
    """The token label drawn in the cell ("" where there is no room)."""


@dataclass
class KVLayout:
    """Every cell of the three strips, and where the strips and labels go (pixels)."""

    key: tuple
    cells: list[Cell]
    elided: dict[str, QRect]
    strip_y: dict[str, int]
    strip_h: int
    x0: int
    font_px: int
    old_font_px: int
    n_elided: int


def old_positions(rec: CycleRecord, source: CycleSource | None, count: int) -> list[OldPosition]:
    """The last ``count`` cached positions before cycle ``rec``, in slot order."""
    out: list[OldPosition] = []
    # The context ends with the root (slot cache_len); walk back over earlier cycles' commits, then the prompt.
    pos = rec.cache_len
    want_from = max(0, rec.cache_len - count)
    if source is not None:
        summaries = source.summaries()
        for c in range(min(rec.index, len(summaries)) - 1, -1, -1):
            s = summaries[c]
            for tok, kind in zip(reversed(s.committed_ids), reversed(s.committed_kinds)):
                if pos < rec.cache_len:
                    out.append((pos, tok, kind, c))
                pos -= 1
            if pos < want_from:
                break
        prompt = source.info.prompt_ids
        while pos >= want_from and pos >= 0:
            if pos < rec.cache_len:
                out.append((pos, prompt[pos] if pos < len(prompt) else -1, PROMPT, -1))
            pos -= 1
    out = [o for o in out if want_from <= o[0] < rec.cache_len]
    have = {o[0] for o in out}
    out += [(p, -1, PROMPT, -1) for p in range(want_from, rec.cache_len) if p not in have]
    out.sort()
    return out


def sized_font(font: QFont, px: int, bold: bool = False) -> QFont:
    f = QFont(font)
    f.setPixelSize(px)
    f.setBold(bold)
    return f


def layout_kv(rec: CycleRecord, width: int, height: int, font: QFont, subtitles: tuple[str, str, str],
              old: Callable[[int], list[OldPosition]], label: Callable[[int, int], str], key: tuple) -> KVLayout:
    """Cells for a ``width`` x ``height`` panel drawn in ``font``; ``old(k)`` gives the last k cached positions,
    ``label(token, chars)`` a token's text; ``key`` is kept to tell when the layout is stale."""
    fm = QFontMetrics(font)
    n, C = rec.n_verified, rec.cache_len
    x0 = MARGIN + max(fm.horizontalAdvance(t) for t in (*STRIP_NAMES.values(), *subtitles)) + 12
    avail = width - x0 - MARGIN
    # Keep the verify block readable: show fewer old positions before making block cells tiny.
    for k in (16, 12, 8, 4):
        shown = min(C, k)
        elide_w = fm.horizontalAdvance(f"… {C - shown:,} earlier") + 14 if C > shown else 0
        wb = (avail - elide_w - shown * OLD_CELL) // n
        if wb >= 9:
            break
    wb = max(2, min(MAX_CELL, wb))
    wo = max(OLD_CELL, min(MAX_CELL, wb, (avail - elide_w - n * wb) // max(1, shown)))
    head = 2 * (fm.height() + 4)
    tick = fm.height()
    rest = height - MARGIN - head - 3 * tick - 26 - 2 * GAP - MARGIN - (tick + 4)  # the last line: the next root
    strip_h = max(tick + 10, min(72, rest // 3))
    font_px = max(8, min(11, wb - 1))
    y = MARGIN + head + 4
    strip_y = {"before": y, "verify": y + strip_h + tick + GAP // 2, "after": 0}
    strip_y["after"] = strip_y["verify"] + strip_h + 26 + GAP
    cells: list[Cell] = []
    elided: dict[str, QRect] = {}
    olds = old(shown)
    for strip in ("before", "after"):
        x = x0
        if elide_w:
            elided[strip] = QRect(x, strip_y[strip], elide_w - 4, strip_h)
            x += elide_w
        for slot, tok, kind, cyc in olds:
            cells.append(Cell(strip, QRect(x, strip_y[strip], wo - 1, strip_h), slot, tok, kind, cycle=cyc))
            x += wo
    block_x = x0 + elide_w + len(olds) * wo
    by_id = rec.node_by_id
    nodes = [by_id[nid] for nid in rec.verify_order]
    for i, node in enumerate(nodes):
        cells.append(Cell("verify", QRect(block_x + i * wb, strip_y["verify"], wb - 1, strip_h), C + i, node.token,
                          node.source, row=i, node=node, dropped=i not in rec.kv_keep))
    keep = list(rec.kv_keep)
    dropped = [i for i in range(n) if i not in set(keep)]
    for k, i in enumerate(keep + dropped):
        cells.append(Cell("after", QRect(block_x + k * wb, strip_y["after"], wb - 1, strip_h),
                          C + k if k < len(keep) else -1, nodes[i].token, nodes[i].source, row=i, node=nodes[i],
                          dropped=k >= len(keep)))
    old_px = max(8, min(11, wo - 3))
    chars = max(2, (strip_h - 6) // 6)
    show = {True: wb >= 9, False: QFontMetrics(sized_font(font, old_px)).height() <= wo}
    for c in cells:
        if show[c.node is not None] and c.token >= 0 and not (c.dropped and c.strip == "after"):
            c.text = label(c.token, chars)
    return KVLayout(key, cells, elided, strip_y, strip_h, x0, font_px, old_px, n_elided=C - shown)
