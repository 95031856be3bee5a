"""Where the shown charts go in the charts panel's grid (no Qt).

The grid has three columns (the wide charts, the per-cycle plots that read better wide, span two), two when the panel
is narrow, one when it is very narrow; a row's last chart widens to fill it, so no cell is left empty. Which charts are
shown, in which order, and which are wide is the registry's (:mod:`specviz_app.panels.charts.registry`).
"""

from __future__ import annotations

from collections.abc import Container, Iterable

THREE_COLUMNS_PX, TWO_COLUMNS_PX = 780, 440


def columns_for(width: int) -> int:
    return 3 if width >= THREE_COLUMNS_PX else 2 if width >= TWO_COLUMNS_PX else 1


def grid_cells(names: Iterable[str], columns: int, wide: Container[str]) -> dict[str, tuple[int, int, int]]:
    """(row, column, column span) of each chart, filled row by row; the ``wide`` ones span two of three columns."""
    cells: dict[str, tuple[int, int, int]] = {}
    row, col, last = 0, 0, None
    for name in names:
        span = min(2 if name in wide and columns == 3 else 1, columns)
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
