"""Which charts a session gets and where they go in the grid (no Qt).

Only the charts that apply are shown: the spine ratio for Goose, TALON's delta against tau where draft steps are
counted, the per-source and depth/rank charts once a drafted token was verified, the verify-cost curve once it is
measured, the time breakdown once cycles recorded timings, transformers' assistant schedule for hf_assisted and
hf_universal, why cycles stopped and the headroom once cycles recorded a stop cause (not for plain decoding), and
acceptance by draft position once something was drafted, the samples of the prompt for a session decoded as
one of a group (STAND's ``--samples N``). The grid has three columns (the per-cycle plots span two), two when the panel is narrow, one when it is
very narrow; a row's last chart widens to fill it, so no cell is left empty.
"""

from __future__ import annotations

from collections.abc import Iterable

ORDER = ("tau", "schedule", "samples", "sources", "tps", "heat", "why", "causes", "headroom", "positions", "cost",
         "spine", "delta")
WIDE = ("tau", "tps", "why")
"""Per-cycle plots that read better wide: two columns of three."""
THREE_COLUMNS_PX, TWO_COLUMNS_PX = 780, 440


def applicable(method: str, *, has_sources: bool, has_heat: bool, has_spine: bool, has_delta: bool,
               has_cost: bool, has_timings: bool = False, has_schedule: bool = False, has_causes: bool = False,
               has_positions: bool = False, has_samples: bool = False) -> list[str]:
    """The charts worth showing for a session of ``method`` with what its cycles recorded so far, in grid order."""
    shown = {"tau", "tps"}
    if has_sources:
        shown.add("sources")
    if has_heat:
        shown.add("heat")
    if method == "goose" or has_spine:
        shown.add("spine")
    if method == "talon" or has_delta:
        shown.add("delta")
    if has_cost:
        shown.add("cost")
    if has_timings:
        shown.add("why")
    if method.startswith("hf_") and has_schedule:
        shown.add("schedule")
    if has_causes and method != "ar":  # plain decoding drafts nothing: every cycle "stops" at the root
        shown.update(("causes", "headroom"))
    if has_positions:
        shown.add("positions")
    if has_samples:  # STAND's samples of one prompt, decoded as a group
        shown.add("samples")
    return [name for name in ORDER if name in shown]


def columns_for(width: int) -> int:
    return 3 if width >= THREE_COLUMNS_PX else 2 if width >= TWO_COLUMNS_PX else 1


def grid_cells(names: Iterable[str], columns: int) -> dict[str, tuple[int, int, int]]:
    """(row, column, column span) of each chart, filled row by row."""
    cells: dict[str, tuple[int, int, int]] = {}
    row, col, last = 0, 0, None
    for name in names:
        span = min(2 if name in WIDE and columns == 3 else 1, columns)
        if col + span > columns:
            if last is not None and col < columns:  # widen the row's last chart over the gap
                r, c, _ = cells[last]
                cells[last] = (r, c, columns - c)
            row, col = row + 1, 0
        cells[name] = (row, col, span)
        col += span
        last = name
    if last is not None and col < columns:
        r, c, _ = cells[last]
        cells[last] = (r, c, columns - c)
    return cells
