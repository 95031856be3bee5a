"""The draft tree at any size: a ~200-node TALON cycle in the default window keeps every drawn label readable and
apart, gated candidates collapse into "+N gated" boxes, the overview and the keyboard work."""

from __future__ import annotations

import itertools

import pytest
from PySide6.QtCore import QPoint, QPointF, QRectF, Qt
from PySide6.QtGui import QFontInfo, QFontMetricsF, QWheelEvent

from gui_records import keep_none_alive, word_vocab
from gui_trees import talon_cycle, talon_source
from specviz_core.viewer.tree_layout import BONUS, is_marker

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
    w.model.open(talon_source(), word_vocab())
    yield w
    w.close()


def drawn_labels(tree) -> list[tuple[QRectF, object]]:
    """(viewport rectangle, item) of every box in view whose label is drawn."""
    view = QRectF(tree.viewport().rect())
    out = []
    for item in tree._items.values():
        if item.isVisible() and item.label_shown(tree.label_scale()):
            r = tree.viewportTransform().mapRect(item.mapRectToScene(item.rect))  # the box the label is drawn in
            if r.intersects(view):
                out.append((r, item))
    return out


def test_the_talon_cycle_is_about_200_nodes() -> None:
    rec = talon_cycle()
    assert rec.n_verified == 61 and 190 <= len(rec.nodes) <= 210


@pytest.mark.parametrize("show_gated", [False, True])
def test_talon_200_nodes_after_fit_labels_are_apart_and_at_least_the_base_size(window, show_gated) -> None:
    tree = window.tree
    tree.set_show_gated(show_gated)
    tree.header.fit.click()
    base = QFontInfo(tree.font()).pixelSize()
    labels = drawn_labels(tree)
    assert len(labels) >= 30, "a good part of the tree is in view"
    for r, item in labels:
        assert item.font.pixelSize() * tree.label_scale() >= base - 1e-6
        assert QFontMetricsF(item.font).horizontalAdvance(item.text()) <= item.rect.width()  # the text fits its box
    for (a, ia), (b, ib) in itertools.combinations(labels, 2):
        assert not a.intersects(b), (ia.text(), ib.text())
    if show_gated:
        return
    # Collapsed (the default), the accepted path and the bonus token are in view.
    rec = window.model.record
    view = QRectF(tree.viewport().rect())
    for i in (0, *rec.accepted_path, BONUS):
        assert view.contains(tree.mapFromScene(tree.node_items()[i].sceneBoundingRect()).boundingRect().toRectF())


def test_gated_nodes_collapse_per_parent_and_open_on_click(window, qtbot) -> None:
    tree, rec = window.tree, window.model.record
    assert not tree.show_gated and not tree.header.gated.isChecked()
    gated_by_parent: dict[int, int] = {}
    for n in rec.nodes:
        if n.gated:
            gated_by_parent[n.parent] = gated_by_parent.get(n.parent, 0) + 1
    markers = tree.marker_items()
    assert {p: int(m.text().split()[0][1:]) for p, m in markers.items()} == gated_by_parent
    assert set(tree.node_items()) == {n.id for n in rec.nodes if not n.gated} | {BONUS}
    parent = max(gated_by_parent, key=gated_by_parent.get)
    item = markers[parent]
    tree.ensureVisible(item.sceneBoundingRect())
    pos = tree.mapFromScene(item.sceneBoundingRect().center())
    qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert parent not in tree.marker_items()
    assert {n.id for n in rec.nodes if n.gated and n.parent == parent} <= set(tree.node_items())
    assert "gated candidates" in tree.tooltip_for(next(k for k in tree._items if is_marker(k)))
    tree.set_show_gated(True)  # the Gated toggle opens them all
    assert set(tree.node_items()) == {n.id for n in rec.nodes} | {BONUS} and not tree.marker_items()


def test_overview_shows_when_the_tree_is_larger_than_the_view(window) -> None:
    tree = window.tree
    tree.set_show_gated(True)
    assert tree.minimap.isVisible()
    assert tree.minimap.view_rect().width() < tree.sceneRect().width() or \
        tree.minimap.view_rect().height() < tree.sceneRect().height()
    window.resize(2560, 1440)
    window.dock_layout.proportion_docks()
    tree.set_show_gated(False)
    tree.fit()
    if not tree.minimap.isVisible():  # everything fits: the whole tree is in view
        view = tree.mapToScene(tree.viewport().rect()).boundingRect()
        assert view.adjusted(-2, -2, 2, 2).contains(tree.sceneRect())


def test_zoomed_out_labels_are_left_out_but_tooltips_stay(window) -> None:
    tree = window.tree
    pos = QPointF(tree.viewport().rect().center())
    wheel = QWheelEvent(pos, QPointF(tree.viewport().mapToGlobal(pos.toPoint())), QPoint(), QPoint(0, -800),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    tree.wheelEvent(wheel)
    assert tree.label_scale() < 0.5
    assert not drawn_labels(tree)
    assert not any(item.label.isVisible() for item in tree._items.values())
    tree.fit()
    assert all(item.label.isVisible() for item in tree._items.values())
    node = window.model.record.accepted_path[0]
    assert "node" in tree.tooltip_for(node)


def test_keyboard_moves_along_the_edges_and_enter_selects(window, qtbot) -> None:
    tree, rec = window.tree, window.model.record
    tree.setFocus()
    nexts: list[bool] = []
    window.next_action.triggered.connect(lambda *_: nexts.append(True))
    qtbot.keyClick(tree, Qt.Key.Key_Right)  # not entered: the arrow is the window's (the next cycle)
    assert tree.cursor_node is None and len(nexts) == 1
    qtbot.keyClick(tree, Qt.Key.Key_Return)  # Enter enters the tree: the cursor on the root (nothing selected)
    assert tree.cursor_node == 0
    qtbot.keyClick(tree, Qt.Key.Key_Right)  # a child: the accepted one
    assert tree.cursor_node == rec.accepted_path[0]
    qtbot.keyClick(tree, Qt.Key.Key_Down)
    below = tree.cursor_node
    assert below != rec.accepted_path[0] and tree.tree_layout.parent[below] == 0
    qtbot.keyClick(tree, Qt.Key.Key_Up)
    assert tree.cursor_node == rec.accepted_path[0]
    qtbot.keyClick(tree, Qt.Key.Key_Left)
    assert tree.cursor_node == 0
    for _ in range(len(rec.accepted_path) + 1):
        qtbot.keyClick(tree, Qt.Key.Key_Right)
    assert tree.cursor_node == BONUS
    assert window.model.selected_node is None
    qtbot.keyClick(tree, Qt.Key.Key_Return)
    assert window.model.selected_node == BONUS
    qtbot.keyClick(tree, Qt.Key.Key_Right)  # entered, arrows stay in the tree: no cycle change
    assert len(nexts) == 1
    qtbot.keyClick(tree, Qt.Key.Key_Escape)  # Esc leaves: the arrows are the window's again
    assert tree.cursor_node is None
    qtbot.keyClick(tree, Qt.Key.Key_Right)
    assert len(nexts) == 2


def test_presentation_mode_scales_the_tree_labels(window) -> None:
    tree = window.tree
    before = tree.font_px()
    window.dock_layout.toggle_presentation()
    try:
        assert tree.font_px() >= round(before * 1.4)
        assert all(item.font.pixelSize() == tree.font_px() for item in tree._items.values())
        # Fitted, labels are at the presentation font, or (a tree too large for it, fitted by its accepted path)
        # never smaller than the normal window's
        assert tree.label_scale() >= 1.0 or tree.font_px() * tree.label_scale() >= before - 0.5
    finally:
        window.dock_layout.toggle_presentation()
    assert tree.font_px() == before


def test_a_long_chain_opens_on_its_root_and_exports_whole(window, tmp_path) -> None:
    """Issue 30, item 6: a long spine was drawn from its right end, the root and first nodes cut off (on screen and in
    the screenshot) while the legend listed "root"."""
    from PySide6.QtGui import QImage

    from gui_records import single_cycle_source, tree_record, word_id

    n = 40
    words = ["the", "water", "came", "on", "old", "line"]
    rec = tree_record(list(range(-1, n - 1)), ["root"] + ["spine"] * (n - 1),
                      [word_id(words[i % len(words)]) for i in range(n)], accepted_path=tuple(range(1, n)),
                      bonus_token=word_id("home"), cache_len=12, mode="bypass")
    window.model.open(single_cycle_source(rec), word_vocab())
    tree = window.tree
    assert tree.sceneRect().width() > tree.viewport().width(), "the chain is wider than the view"
    view = QRectF(tree.viewport().rect())
    root = tree.viewportTransform().mapRect(tree.node_items()[0].sceneBoundingRect())
    assert view.contains(root), "the view opens on the root"
    for suffix in (".png", ".svg"):
        out = window.export.panel("tree", tmp_path / f"tree{suffix}")
        assert out.exists() and out.stat().st_size > 1000
    img = QImage(str(tmp_path / "tree.png"))
    scale = tree.label_scale()
    # The whole chain at a readable scale: the image is as wide as the tree at the panel's font (it grows).
    assert img.width() / img.devicePixelRatio() >= tree.sceneRect().width() * min(scale, 1.0)
    svg = (tmp_path / "tree.svg").read_text(encoding="utf-8")
    for word in ("home", "the", "line"):  # the bonus token and words from both ends are in the drawing
        assert f">{word}<" in svg or f"{word}</" in svg, word


def test_fit_pressed_again_fits_a_large_tree_whole(window, qtbot) -> None:
    """Fit keeps labels readable, so on a tree too large for the panel a first press changes nothing that is shown;
    pressed again it fits the whole tree (every box in view), labels as small as that takes."""
    from gui_records import single_cycle_source
    from gui_trees import grid_cycle

    window.model.open(single_cycle_source(grid_cycle(rows=24, depth=20), method="goose"), word_vocab())
    tree = window.tree
    tree.fit()
    readable = tree.label_scale()
    view = QRectF(tree.viewport().rect())
    boxes = [QRectF(tree.mapFromScene(item.sceneBoundingRect()).boundingRect()) for item in tree._items.values()]
    assert not all(view.contains(b) for b in boxes)  # too large to show whole at readable labels
    tree.header.fit.click()  # first press: as fitted
    assert tree.label_scale() == pytest.approx(readable)
    tree.header.fit.click()  # again: whole
    assert tree.label_scale() < readable
    boxes = [QRectF(tree.mapFromScene(item.sceneBoundingRect()).boundingRect()) for item in tree._items.values()]
    out = [b for b in boxes if not view.contains(b)]
    assert not out, f"{len(out)} boxes out of view, e.g. {out[0]} in {view}"
