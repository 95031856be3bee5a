"""The KV panel: counts from the record, kept and dropped cells in the right colours and places, selection both ways."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import QApplication

from gui_records import bfs_goose_cycle, goose_session, keep_none_alive, model_for, single_cycle_source, small_cycle
from specviz_app.panels.kv.view import KVView
from specviz_app.theme import SOURCE_COLORS, source_color
from specviz_core.viewer.session_model import SessionModel

keep_none_alive()
# The offscreen platform cannot size native windows or raise a tooltip window, and says so.
pytestmark = pytest.mark.qt_log_ignore("does not support propagateSizeHints", "does not support raise")


def make_view(qtbot, model: SessionModel, w: int = 1100, h: int = 460) -> KVView:
    view = KVView(model)
    qtbot.addWidget(view)
    view.resize(w, h)
    view.show()
    QApplication.processEvents()
    return view


def grab(view: KVView) -> QImage:
    img = view.grab().toImage()
    assert img.devicePixelRatio() == 1.0
    return img


def fill_pixel(img: QImage, rect) -> QColor:
    """A cell's fill, sampled near its top (token labels are drawn from the bottom up)."""
    return img.pixelColor(rect.center().x(), rect.top() + 1)


def test_counts_come_from_the_record(qtbot):
    rec = bfs_goose_cycle(60, cache_len=125, spine_accepted=3, branch_accepted=2)
    view = make_view(qtbot, model_for(single_cycle_source(rec)))
    kept, n = len(rec.kv_keep), rec.n_verified
    assert (kept, n - kept, rec.cache_len + kept) == (6, 54, 131)
    assert view.counts() == (rec.cache_len, rec.cache_len + kept, kept, n - kept)
    assert view.counts_text() == "cache 125 → 131 positions: kept root + 5 accepted, dropped 54 rejected"
    assert view.strip_subtitles() == ("125 positions", "at 125–184", "131 positions")

    small = small_cycle()
    view.model.close()
    view.model.open(single_cycle_source(small))
    assert view.counts_text() == (f"cache {small.cache_len} → {small.cache_len + 2} positions: "
                                  f"kept root + 1 accepted, dropped {small.n_verified - 2} rejected")


def test_a_narrow_panel_says_the_counts_in_numbers_rather_than_cut_words(qtbot):
    """Where the sentence does not fit, the numbers do: never "dropped 54 rejec…"."""
    from PySide6.QtGui import QFont, QFontMetrics

    rec = bfs_goose_cycle(60, cache_len=125, spine_accepted=3, branch_accepted=2)
    view = make_view(qtbot, model_for(single_cycle_source(rec)))
    bold = QFont(view.font())
    bold.setBold(True)
    fm = QFontMetrics(bold)
    full = view.counts_text()
    assert view.fitted_counts_text(fm, fm.horizontalAdvance(full)) == full
    short = "cache 125 → 131: kept 6, dropped 54"
    assert view.fitted_counts_text(fm, fm.horizontalAdvance(full) - 1) == short
    assert view.fitted_counts_text(fm, fm.horizontalAdvance(short)) == short


def test_kept_and_dropped_cells(qtbot):
    rec = bfs_goose_cycle(60)
    model = model_for(single_cycle_source(rec))
    view = make_view(qtbot, model)
    img = grab(view)
    by_id = rec.node_by_id
    n, C = rec.n_verified, rec.cache_len
    # The verify block: one cell per row, at slots cache_len.., coloured by the row's source.
    for i, nid in enumerate(rec.verify_order):
        cell = view.cell("verify", row=i)
        assert cell.slot == C + i and cell.node.id == nid
        assert fill_pixel(img, cell.rect) == source_color(by_id[nid].source), i
    # After the trim: kept rows compacted right after the old positions, in kv_keep order, still in their colour.
    last_old = view.cell("after", slot=C - 1)
    prev_right = last_old.rect.right()
    for m, row in enumerate(rec.kv_keep):
        cell = view.cell("after", row=row)
        assert cell.slot == C + m and not cell.dropped
        assert cell.rect.left() > prev_right and cell.rect.left() - prev_right <= 2  # contiguous
        prev_right = cell.rect.right()
        assert fill_pixel(img, cell.rect) == source_color(by_id[rec.verify_order[row]].source)
    # Dropped rows: grey, never a source colour.
    sources = {QColor(c).rgb() for c in SOURCE_COLORS.values()}
    dropped = [i for i in range(n) if i not in rec.kv_keep]
    assert len(dropped) == n - len(rec.kv_keep) == 54
    for row in dropped:
        cell = view.cell("after", row=row)
        assert cell.dropped and cell.rect.left() > prev_right
        px = fill_pixel(img, cell.rect)
        assert px.rgb() not in sources and px.hsvSaturation() < 40, (row, px.name())
        assert "dropped" in view.tooltip_at(cell.rect.center())
    assert "kept: compacted to position 125" in view.tooltip_at(view.cell("verify", row=0).rect.center())
    lay = view.layout_cells()
    assert "dropped (rejected) rows" in view.tooltip_at(QPoint(10, lay.strip_y["after"] + lay.strip_h // 2))


def test_old_positions_hold_the_context(qtbot):
    source = goose_session()  # AR cycles, then a spine cycle: the cache ends with the AR cycles' tokens
    model = model_for(source)
    rec = model.record
    view = make_view(qtbot, model)
    context = list(source.info.prompt_ids) + [t for s in source.summaries()[:rec.index] for t in s.committed_ids]
    kinds = ["prompt"] * len(source.info.prompt_ids) + [k for s in source.summaries()[:rec.index] for k in s.committed_kinds]
    assert context[rec.cache_len] == rec.nodes[0].token  # the root is the last committed token
    old = [c for c in view.layout_cells().cells if c.strip == "before"]
    assert 4 <= len(old) <= 16 and [c.slot for c in old] == list(range(rec.cache_len - len(old), rec.cache_len))
    img = grab(view)
    for c in old:
        assert c.token == context[c.slot] and c.kind == kinds[c.slot]
        assert fill_pixel(img, c.rect) == source_color(kinds[c.slot])
    assert kinds[rec.cache_len - 1] == "ar"
    # The elided block says how many positions it stands for.
    elided = view.layout_cells().elided["before"]
    hidden = rec.cache_len - len(old)
    assert view.tooltip_at(elided.center()).startswith(f"positions 0–{hidden - 1:,}: {hidden:,} earlier tokens")


def test_a_long_cache_is_compressed(qtbot):
    rec = bfs_goose_cycle(60, cache_len=5000)
    view = make_view(qtbot, model_for(single_cycle_source(rec)), 640, 420)
    lay = view.layout_cells()
    old = [c for c in lay.cells if c.strip == "before"]
    assert len(old) <= 16 and lay.n_elided + len(old) == 5000
    assert max(c.rect.right() for c in lay.cells) < view.width()  # everything fits at the dock's size
    assert view.counts_text().startswith("cache 5,000 → 5,006 positions")


def test_selection_both_ways(qtbot):
    rec = bfs_goose_cycle(60)
    model = model_for(single_cycle_source(rec))
    view = make_view(qtbot, model)
    row = rec.kv_keep[3]
    cell = view.cell("verify", row=row)
    qtbot.mouseClick(view, Qt.MouseButton.LeftButton, pos=cell.rect.center())
    assert model.selected_node == rec.verify_order[row]
    highlight = view.palette().color(QPalette.ColorRole.Highlight)
    img = grab(view)
    for strip in ("verify", "after"):
        r = view.cell(strip, row=row).rect
        assert img.pixelColor(r.left() - 2, r.center().y()) == highlight, strip
    other = view.cell("verify", row=row + 1).rect
    assert img.pixelColor(other.center().x(), other.top() - 2) != highlight
    # Clicking a dropped row's ghost selects that node too; clicking an old position selects nothing new.
    dropped_row = next(i for i in range(rec.n_verified) if i not in rec.kv_keep)
    qtbot.mouseClick(view, Qt.MouseButton.LeftButton, pos=view.cell("after", row=dropped_row).rect.center())
    assert model.selected_node == rec.verify_order[dropped_row]
    qtbot.mouseClick(view, Qt.MouseButton.LeftButton, pos=view.cell("before", slot=rec.cache_len - 1).rect.center())
    assert model.selected_node == rec.verify_order[dropped_row]
    model.select_node(None)
    r = view.cell("verify", row=row).rect
    assert grab(view).pixelColor(r.left() - 2, r.center().y()) != highlight


def test_empty_model_shows_the_hint(qtbot):
    model = SessionModel()
    view = make_view(qtbot, model, 600, 400)
    assert view.counts_text() == "" and view.layout_cells() is None
    img = grab(view)
    window = view.palette().color(QPalette.ColorRole.Window)
    mid = img.height() // 2
    assert any(img.pixelColor(x, y) != window for x in range(img.width()) for y in range(mid - 8, mid + 8))
    assert view.tooltip_at(QPoint(300, 200)) == ""
