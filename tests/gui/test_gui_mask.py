"""The mask panel draws record.mask cell for cell, labels rows and columns, and selects nodes both ways."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QPoint, Qt
from PySide6.QtGui import QColor, QHelpEvent, QImage, QPalette
from PySide6.QtWidgets import QApplication, QToolTip

from gui_records import bfs_goose_cycle, goose_session, keep_none_alive, model_for, single_cycle_source, small_cycle
from specviz_app.panels.mask.view import HINT, MIN_CELL, MaskView
from specviz_app.theme import ACCEPTED
from specviz_core.viewer.session_model import SessionModel

keep_none_alive()
# The offscreen platform cannot size native windows or raise a tooltip window, and says so.
pytestmark = pytest.mark.qt_log_ignore("does not support propagateSizeHints", "does not support raise")


@pytest.fixture
def goose():
    rec = bfs_goose_cycle(60)
    return rec, model_for(single_cycle_source(rec))


def make_view(qtbot, model: SessionModel, w: int = 900, h: int = 900) -> MaskView:
    view = MaskView(model)
    qtbot.addWidget(view)
    view.resize(w, h)
    view.show()
    QApplication.processEvents()
    return view


def grab(view: MaskView) -> QImage:
    img = view.canvas.grab().toImage()
    assert img.devicePixelRatio() == 1.0
    return img


def base(view: MaskView) -> QColor:
    return view.palette().color(QPalette.ColorRole.Base)


def test_every_cell_shows_the_mask(qtbot, goose):
    rec, model = goose
    view = make_view(qtbot, model)
    img = grab(view)
    accepted_rows = {rec.verify_order.index(a) for a in (0, *rec.accepted_path)}
    plain: set[int] = set()
    n = rec.n_verified
    assert n == 60 and rec.verify_order != tuple(range(n))  # rows are not node ids
    for i in range(n):
        for j in range(n):
            got = img.pixelColor(view.cell_rect(i, j).center())
            if not rec.mask[i, j]:
                assert got == base(view), (i, j)
            elif i in accepted_rows:
                assert got == QColor(ACCEPTED), (i, j)
            else:
                plain.add(got.rgb())
    # One colour for attending cells of rejected rows, distinct from the background and from green.
    assert len(plain) == 1
    assert plain.pop() not in (base(view).rgb(), QColor(ACCEPTED).rgb())


def test_cells_are_square_readable_and_fit(qtbot, goose):
    rec, model = goose
    view = make_view(qtbot, model, 900, 900)
    r0, r1 = view.cell_rect(0, 0), view.cell_rect(59, 59)
    assert r0.width() == r0.height() >= MIN_CELL
    assert r1.bottom() < view.canvas.height() and r1.right() < view.canvas.width()
    assert view.canvas.size() == view.scroll.viewport().size()  # fits: no scrolling at the default zoom
    # A small dock keeps cells at the readable minimum and scrolls instead of shrinking them.
    small = make_view(qtbot, model, 600, 400)
    assert small.cell_rect(0, 0).width() >= MIN_CELL
    assert small.canvas.width() <= small.scroll.viewport().width() + 1  # no sideways scrolling for 60 rows
    # Zoom grows the cells, fit brings them back.
    c = view.cell_rect(0, 0).width()
    view.set_zoom(2.0)
    assert view.cell_rect(0, 0).width() > c
    view.fit()
    assert view.cell_rect(0, 0).width() == c


def test_rows_show_tokens_positions_and_acceptance(qtbot, goose):
    rec, model = goose
    view = make_view(qtbot, model)
    by_id = rec.node_by_id
    accepted = {0, *rec.accepted_path}
    want = [(model.vocab.label(by_id[nid].token), rec.cache_len + by_id[nid].depth, nid in accepted)
            for nid in rec.verify_order]
    assert view.row_texts() == want
    assert "every row also attends to all 125 cached positions" in view.note_text()
    # The labels are drawn left of the grid: something other than the background in each row's label box.
    img = grab(view)
    window = view.palette().color(QPalette.ColorRole.Window)
    for i in (0, 1, 30, 59):
        box = view.row_label_rect(i)
        assert any(img.pixelColor(x, y) != window for x in range(box.left(), box.right()) for y in range(box.top(), box.bottom()))
    # The accepted bar: green just left of the grid on accepted rows only.
    for i, nid in enumerate(rec.verify_order):
        r = view.cell_rect(i, 0)
        bar = img.pixelColor(r.left() - 4, r.center().y())
        assert (bar == QColor(ACCEPTED)) == (nid in accepted), i


def test_clicks_select_nodes(qtbot, goose):
    rec, model = goose
    view = make_view(qtbot, model)
    i, j = 17, 3
    qtbot.mouseClick(view.canvas, Qt.MouseButton.LeftButton, pos=view.cell_rect(i, j).center())
    assert model.selected_node == rec.verify_order[i]
    qtbot.mouseClick(view.canvas, Qt.MouseButton.LeftButton, pos=view.row_label_rect(42).center())
    assert model.selected_node == rec.verify_order[42]
    col = view.col_label_rect(9)
    qtbot.mouseClick(view.canvas, Qt.MouseButton.LeftButton, pos=QPoint(col.center().x(), col.bottom() - 4))
    assert model.selected_node == rec.verify_order[9]


def test_selection_draws_a_crosshair_band(qtbot, goose):
    rec, model = goose
    view = make_view(qtbot, model)
    k = 20
    empty_in_row = next(j for j in range(rec.n_verified) if not rec.mask[k, j])
    empty_in_col = next(i for i in range(rec.n_verified) if not rec.mask[i, k])
    elsewhere = next((i, j) for i in range(rec.n_verified) for j in range(rec.n_verified)
                     if i != k and j != k and not rec.mask[i, j])
    before = grab(view)
    assert before.pixelColor(view.cell_rect(k, empty_in_row).center()) == base(view)
    model.select_node(rec.verify_order[k])
    img = grab(view)
    for cell in ((k, empty_in_row), (empty_in_col, k)):
        assert img.pixelColor(view.cell_rect(*cell).center()) != base(view), cell
    assert img.pixelColor(view.cell_rect(*elsewhere).center()) == base(view)
    assert view.selected_row() == k
    model.select_node(None)
    assert grab(view).pixelColor(view.cell_rect(k, empty_in_row).center()) == base(view)


def test_tooltips(qtbot):
    rec = small_cycle()  # verify order: root, a, c, b, d
    model = model_for(single_cycle_source(rec))
    view = make_view(qtbot, model, 640, 420)
    label = model.vocab.label
    tok = [label(rec.node_by_id[nid].token, 24) for nid in rec.verify_order]
    assert rec.mask[3, 1] and not rec.mask[3, 2]
    assert view.tooltip_at(view.cell_rect(3, 1).center()).startswith(
        f"row 3 (token '{tok[3]}', pos {rec.cache_len + 2}) attends to column 1 (token '{tok[1]}', "
        f"pos {rec.cache_len + 1})")
    assert view.tooltip_at(view.cell_rect(3, 2).center()).startswith(
        f"row 3 (token '{tok[3]}', pos {rec.cache_len + 2}) does not attend to column 2 (token '{tok[2]}', "
        f"pos {rec.cache_len + 1})")
    row_tip = view.tooltip_at(view.row_label_rect(1).center())
    assert row_tip.startswith(f"row 1: node 1, token '{tok[1]}'") and "accepted" in row_tip
    assert "Ctrl+wheel" in view.tooltip_at(QPoint(20, 8))  # the note explains the panel
    # A real tooltip event shows the same text.
    pos = view.cell_rect(3, 1).center()
    QApplication.sendEvent(view.canvas, QHelpEvent(QEvent.Type.ToolTip, pos, view.canvas.mapToGlobal(pos)))
    assert QToolTip.text() == view.tooltip_at(pos)
    QToolTip.hideText()


def test_follows_the_model(qtbot):
    source = goose_session()
    model = model_for(source, index=0)  # an AR cycle: one row
    view = make_view(qtbot, model, 640, 420)
    assert len(view.row_texts()) == 1
    model.set_cycle(len(source) - 1)
    assert len(view.row_texts()) == model.record.n_verified > 50
    img = grab(view)
    rec = model.record
    i, j = next((i, j) for i in range(rec.n_verified) for j in range(rec.n_verified) if rec.mask[i, j] and i > 20)
    assert img.pixelColor(view.cell_rect(i, j).center()) != base(view)
    model.close()
    assert view.rows() is None and view.note_text() == HINT
    img = grab(view)
    window = view.palette().color(QPalette.ColorRole.Window)
    mid = img.height() // 2
    assert any(img.pixelColor(x, y) != window for x in range(img.width()) for y in range(mid - 8, mid + 8))


def test_empty_model_shows_the_hint(qtbot):
    view = make_view(qtbot, SessionModel(), 600, 400)
    assert view.rows() is None and view.tooltip_at(QPoint(100, 100)) == ""
    qtbot.mouseClick(view.canvas, Qt.MouseButton.LeftButton, pos=QPoint(100, 100))  # nothing to select, no error


def test_labels_never_overlap_and_zoom_labels_every_row(qtbot, goose):
    rec, model = goose
    view = make_view(qtbot, model, 340, 330)  # a laptop's mask dock: 60 rows in 330 pixels
    g = view.geometry()
    assert g.stride * g.cell >= g.font_px + 1 and g.font_px >= 8  # labels as high as a row pitch allows
    assert g.stride > 1
    view.set_zoom(3.0)
    g = view.geometry()
    assert g.stride == 1 and g.font_px >= 8  # zoomed in, every row has its label
    assert view.canvas.height() > view.scroll.viewport().height()  # and the grid scrolls


def test_scrolled_the_label_bands_stay_and_accepted_rows_stay_marked(qtbot, goose):
    rec, model = goose
    view = make_view(qtbot, model, 420, 380)
    view.set_zoom(4.0)
    QApplication.processEvents()
    view.scroll.horizontalScrollBar().setValue(view.scroll.horizontalScrollBar().maximum())
    view.scroll.verticalScrollBar().setValue(view.scroll.verticalScrollBar().maximum() // 2)
    QApplication.processEvents()
    shown = view.shown_rect()
    assert shown.x() > 0 and shown.y() > 0
    img = grab(view)
    window = view.palette().color(QPalette.ColorRole.Window)
    accepted = {0, *rec.accepted_path}
    g = view.geometry()
    rows_in_view = [i for i in range(rec.n_verified)
                    if shown.y() + g.gy < g.gy + i * g.cell and g.gy + (i + 1) * g.cell < shown.bottom()]
    assert rows_in_view
    for i in rows_in_view:
        box = view.row_label_rect(i)
        assert shown.left() <= box.left() and box.right() < shown.left() + g.gx  # pinned at the view's left
        assert any(img.pixelColor(x, y) != window for x in range(box.left(), box.right())
                   for y in range(box.top(), box.bottom())), i
        bar = img.pixelColor(shown.x() + g.bar_x + 1, g.gy + i * g.cell + g.cell // 2)
        assert (bar == QColor(ACCEPTED)) == (rec.verify_order[i] in accepted), i
    i = rows_in_view[len(rows_in_view) // 2]
    qtbot.mouseClick(view.canvas, Qt.MouseButton.LeftButton, pos=view.row_label_rect(i).center())
    assert model.selected_node == rec.verify_order[i]
    # The column band is pinned at the view's top: a click there picks the column under it, not a cell.
    j = (shown.x() + shown.width() // 2 - g.gx) // g.cell
    col = view.col_label_rect(j)
    assert col.top() >= shown.top()
    qtbot.mouseClick(view.canvas, Qt.MouseButton.LeftButton, pos=QPoint(col.center().x(), col.bottom() - 4))
    assert model.selected_node == rec.verify_order[j]


def test_the_note_over_the_mask_takes_a_shorter_wording_where_the_long_one_does_not_fit(qtbot):
    from PySide6.QtGui import QFontMetrics

    from specviz_app.panels.mask.paint import fitting_text

    view = MaskView(model_for(single_cycle_source(small_cycle())))
    qtbot.addWidget(view)
    notes = view.note_texts()
    fm = QFontMetrics(view.font())
    widths = [fm.horizontalAdvance(t) for t in notes]
    assert widths == sorted(widths, reverse=True) and notes[0] == view.note_text()
    for room in (widths[0] + 1, widths[1] + 1, widths[2] + 1):
        shown = fitting_text(fm, notes, room)
        assert shown in notes and fm.horizontalAdvance(shown) <= room  # whole, never cut mid-word
    assert fitting_text(fm, notes, widths[0] + 1) == notes[0]
