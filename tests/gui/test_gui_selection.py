"""One selection for every panel: a click on a tree node, the bonus token, a mask cell, a KV cell or an output token
selects the same node, and every panel shows it (tree halo, mask row and column, KV cells, output token)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QTextCursor

from gui_records import goose_session, keep_none_alive, word_vocab
from specviz_core.viewer.selection import committed_index, committed_node
from specviz_core.viewer.tree_layout import BONUS

keep_none_alive()


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CONFIG", str(tmp_path / "gui.ini"))
    from specviz_app.shell.window import MainWindow

    w = MainWindow(tmp_path / "sessions.db", restore_layout=False)
    qtbot.addWidget(w)
    w.resize(1500, 940)
    w.show()
    qtbot.waitExposed(w)
    w.dock_layout.proportion_docks()
    w.model.open(goose_session(n_nodes=40, spine_len=6, spine_accepted=3, branch_continues=1, n_gated=4),
                 word_vocab())
    w.model.set_cycle(w.model.n_cycles - 1)
    yield w
    w.close()


def assert_selected_everywhere(w, node: int | None) -> None:
    rec = w.model.record
    assert w.model.selected_node == node
    item = w.tree.node_items().get(node)
    assert w.tree._halo.isVisible() == (item is not None)
    if item is not None:
        assert w.tree._halo.path().boundingRect().contains(item.mapRectToScene(item.rect))
    row = rec.verify_order.index(node) if node in rec.verify_order else None
    assert w.mask.selected_row() == row
    assert {c.row for c in w.kv.selected_cells()} == ({row} if row is not None else set())
    k = committed_index(rec, node)
    first = w.output.current_cycle_range()[0]
    assert w.output.selected_token() == (None if k is None else first + k)


def token_point(w, i: int) -> QPoint:
    """Where token ``i`` of the output is, in the text's viewport."""
    text = w.output.text
    cur = QTextCursor(text.document())
    cur.setPosition(w.output._starts[i] + 1)
    text.ensureCursorVisible()
    text.setTextCursor(cur)
    text.ensureCursorVisible()
    r = text.cursorRect(cur)
    return QPoint(r.left() - 2, r.center().y())


def test_a_tree_click_selects_everywhere_bonus_included(window, qtbot) -> None:
    w = window
    rec = w.model.record
    for node in (rec.accepted_path[1], BONUS, 0):
        item = w.tree.node_items()[node]
        w.tree.ensureVisible(item.sceneBoundingRect())
        qtbot.mouseClick(w.tree.viewport(), Qt.MouseButton.LeftButton,
                         pos=w.tree.mapFromScene(item.sceneBoundingRect().center()))
        assert_selected_everywhere(w, node)
    assert "bonus token" in w.tree.tooltip_for(BONUS)


def test_a_mask_cell_selects_its_row_node_everywhere(window, qtbot) -> None:
    w = window
    rec = w.model.record
    i, j = rec.verify_order.index(rec.accepted_path[-1]), 0
    qtbot.mouseClick(w.mask.canvas, Qt.MouseButton.LeftButton, pos=w.mask.cell_rect(i, j).center())
    assert_selected_everywhere(w, rec.verify_order[i])
    rejected = next(n.id for n in rec.nodes if n.verified and not n.accepted)
    k = rec.verify_order.index(rejected)
    qtbot.mouseClick(w.mask.canvas, Qt.MouseButton.LeftButton, pos=w.mask.col_label_rect(k).center())
    assert_selected_everywhere(w, rejected)


def test_a_kv_cell_selects_its_node_everywhere(window, qtbot) -> None:
    w = window
    rec = w.model.record
    for strip, row in (("verify", rec.verify_order.index(rec.accepted_path[0])), ("after", len(rec.verify_order) - 1)):
        cell = w.kv.cell(strip, row=row)
        assert cell is not None
        qtbot.mouseClick(w.kv, Qt.MouseButton.LeftButton, pos=cell.rect.center())
        assert_selected_everywhere(w, rec.verify_order[row])


def test_an_output_token_selects_the_node_that_committed_it(window, qtbot) -> None:
    w = window
    rec = w.model.record
    first, last = w.output.current_cycle_range()
    for k in (0, last - first - 1):  # an accepted token, then the bonus token
        qtbot.mouseClick(w.output.text.viewport(), Qt.MouseButton.LeftButton, pos=token_point(w, first + k))
        assert w.model.index == rec.index
        assert_selected_everywhere(w, committed_node(rec, k))
    assert w.model.selected_node == BONUS
    # A token of an earlier cycle: that cycle opens, its node selected (an AR cycle: its bonus token).
    qtbot.mouseClick(w.output.text.viewport(), Qt.MouseButton.LeftButton, pos=token_point(w, first - 1))
    assert w.model.index == rec.index - 1
    assert_selected_everywhere(w, BONUS)
