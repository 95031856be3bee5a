"""The draft tree's overview never hides a node for good (issue 30, item 9): it sits over the bottom-right corner of
the view while the tree is larger than the view, so the view scrolls past the tree far enough for any node to be
scrolled clear of it, and a cycle opens (and a node is selected) with the accepted path and the selection beside it.

Trees are built by hand to reach that corner: a grid of chains whose nodes fill a rectangle, the accepted path its
bottom row or a middle one, and the TALON cycle with its gated candidates drawn.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRectF

from gui_records import keep_none_alive, single_cycle_source, word_vocab
from gui_trees import grid_cycle, talon_source
from specviz_core.viewer.tree_layout import BONUS

keep_none_alive()


@pytest.fixture(params=[(1100, 700), (1500, 940)], ids=lambda s: f"{s[0]}x{s[1]}")
def window(qtbot, tmp_path, monkeypatch, request):
    monkeypatch.setenv("SPECVIZ_CONFIG", str(tmp_path / "gui.ini"))
    from specviz_app.shell.window import MainWindow

    w = MainWindow(tmp_path / "sessions.db", restore_layout=False)
    qtbot.addWidget(w)
    w.resize(*request.param)
    w.show()
    qtbot.waitExposed(w)
    w.dock_layout.proportion_docks()
    yield w
    w.close()


def in_view(tree, node: int) -> QRectF:
    """The node's box in viewport coordinates."""
    return tree.viewportTransform().mapRect(tree.node_items()[node].sceneBoundingRect())


def overview(tree) -> QRectF:
    assert tree.minimap.isVisible(), "the tree is larger than the view: the overview shows"
    return QRectF(tree.minimap.geometry())


def open_grid(window, path_row: int, rows: int = 24) -> None:
    window.model.open(single_cycle_source(grid_cycle(rows, path_row=path_row)), word_vocab())


@pytest.mark.parametrize("path_row", [23, 11, 0])
def test_a_cycle_opens_with_its_accepted_path_beside_the_overview(window, path_row) -> None:
    open_grid(window, path_row)
    tree, rec = window.tree, window.model.record
    corner, view = overview(tree), QRectF(tree.viewport().rect())
    shown = [i for i in (0, *rec.accepted_path, BONUS) if in_view(tree, i).intersects(view)]
    assert 0 in shown and len(shown) >= 3, "the view opens on the root and the start of the accepted path"
    under = [i for i in shown if in_view(tree, i).intersects(corner)]
    assert not under, f"accepted nodes {under} open under the overview"


def test_a_selected_node_is_scrolled_clear_of_the_overview(window) -> None:
    open_grid(window, 20, rows=40)
    tree, rec = window.tree, window.model.record
    corner = overview(tree)
    last = max(n.id for n in rec.nodes)  # the end of the bottom row: the tree's bottom-right corner
    window.model.select_node(last)
    box = in_view(tree, last)
    assert QRectF(tree.viewport().rect()).contains(box)
    assert not box.intersects(corner)
    # Fit reopens the view on the accepted path; a selected node that would open under the overview is moved out.
    window.model.select_node(None)
    tree.header.fit.click()
    view = QRectF(tree.viewport().rect())
    under = [i for i in tree.node_items() if in_view(tree, i).intersects(overview(tree))]
    assert under, "nodes lie under the overview when the view opens on the path"
    window.model.select_node(under[0])
    tree.header.fit.click()
    box = in_view(tree, under[0])
    assert view.contains(box) and not box.intersects(overview(tree))
    for i in (0, *rec.accepted_path[:2]):
        assert view.contains(in_view(tree, i)), "the view still opens on the root and the path"


@pytest.mark.parametrize("tree_of", ["grid", "talon"])
def test_every_node_can_be_scrolled_clear_of_the_overview(window, tree_of) -> None:
    if tree_of == "grid":
        open_grid(window, 23)
    else:
        window.model.open(talon_source(), word_vocab())
        window.tree.set_show_gated(True)
    tree = window.tree
    corner, view = overview(tree), QRectF(tree.viewport().rect())
    hidden = []
    for node, item in tree.node_items().items():
        tree.centerOn(item)  # as near the middle of the view as the scroll bars go
        box = in_view(tree, node)
        if not view.contains(box) or box.intersects(corner):
            hidden.append(item.text())
    assert not hidden, f"{len(hidden)} nodes cannot be scrolled out from under the overview: {hidden[:8]}"
