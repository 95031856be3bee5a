"""The chart of ``specviz reproduce``: one row per claim, the paper's figure against ours, as an SVG.

Written by hand (no plotting library in the core): each row names the claim, draws the paper's number and
ours as two bars on the row's own scale where the claim has one number each, prints both figures as the
paper and we state them, and marks whether the claim holds here.
"""

from __future__ import annotations

from html import escape
from typing import Any

ROW = 34
LABEL_W = 430
BAR_W = 220
TEXT_W = 440
MARK_W = 110
COLORS = {True: "#2e9e44", False: "#d64541", None: "#8a8f98"}
WORDS = {True: "holds", False: "does not hold", None: "n/a"}


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def _bars(x: float, y: float, paper: float | None, ours: float | None) -> list[str]:
    if paper is None or ours is None:
        return []
    top = max(abs(paper), abs(ours), 1e-9)
    zero = x + (BAR_W / 2 if min(paper, ours) < 0 else 0)
    half = BAR_W / 2 if min(paper, ours) < 0 else BAR_W
    out = []
    for i, (v, color) in enumerate(((paper, "#9aa4b1"), (ours, "#1f77d0"))):
        w = abs(v) / top * (half - 4)
        left = zero if v >= 0 else zero - w
        out.append(f'<rect x="{left:.1f}" y="{y + 5 + i * 12:.1f}" width="{max(w, 1):.1f}" height="10" fill="{color}"/>')
    out.append(f'<line x1="{zero:.1f}" y1="{y + 3}" x2="{zero:.1f}" y2="{y + ROW - 5}" stroke="#5f6b7a"/>')
    return out


def chart_svg(results: list[dict[str, Any]]) -> str:
    rows = [(r["paper"], c) for r in results for c in r["claims"]]
    heads = len(results)
    height = 60 + heads * 30 + len(rows) * ROW + 30
    width = LABEL_W + BAR_W + TEXT_W + MARK_W + 40
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="13">'),
           f'<rect width="{width}" height="{height}" fill="white"/>',
           '<text x="20" y="28" font-size="17" font-weight="bold">Paper claims on this model</text>',
           (f'<rect x="{LABEL_W + 20}" y="38" width="10" height="10" fill="#9aa4b1"/>'
           f'<text x="{LABEL_W + 34}" y="47">paper</text>'
           f'<rect x="{LABEL_W + 90}" y="38" width="10" height="10" fill="#1f77d0"/>'
           f'<text x="{LABEL_W + 104}" y="47">ours</text>')]
    y = 60
    for r in results:
        out.append(f'<text x="20" y="{y + 20}" font-size="15" font-weight="bold">{escape(r["paper"].upper())} '
                   f'<tspan font-weight="normal" font-size="12">on {escape(str(r["model"]))}, '
                   f'{escape(", ".join(r["suites"]))}</tspan></text>')
        y += 30
        for c in r["claims"]:
            out.append(f'<text x="20" y="{y + 21}">{escape(_cut(c["name"], 62))}</text>')
            out += _bars(LABEL_W + 20, y, c.get("paper_value"), c.get("ours_value"))
            tx = LABEL_W + BAR_W + 30
            out.append(f'<text x="{tx}" y="{y + 15}" fill="#5f6b7a" font-size="11">paper: '
                       f'{escape(_cut(c["paper_figure"], 66))}</text>')
            out.append(f'<text x="{tx}" y="{y + 29}" font-size="11">ours: {escape(_cut(c["ours"], 66))}</text>')
            mx = LABEL_W + BAR_W + TEXT_W + 30
            out.append(f'<rect x="{mx}" y="{y + 8}" width="{MARK_W - 10}" height="20" rx="4" '
                       f'fill="{COLORS[c["holds"]]}"/>'
                       f'<text x="{mx + (MARK_W - 10) / 2}" y="{y + 22}" fill="white" text-anchor="middle" '
                       f'font-size="12">{WORDS[c["holds"]]}</text>')
            y += ROW
    out.append("</svg>")
    return "\n".join(out) + "\n"
