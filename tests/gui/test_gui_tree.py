"""The draft tree panel: what it draws for hand-built Goose cycles, and how it talks to the session model."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QColor, QHelpEvent, QMouseEvent, QWheelEvent
from PySide6.QtWidgets import QApplication, QToolTip

from gui_records import first_rejected_spine, goose_session, keep_none_alive, word_id, word_vocab
from helpers import tree_record
from specviz_app.panels.tree.items import NodeItem
from specviz_app.panels.tree.view import TreeView
from specviz_app.theme import ACCEPTED, REJECTED, source_color
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.tree_layout import BONUS, marker_id, tidy_rows

keep_none_alive()


def open_view(qtbot, source) -> TreeView:
    model = SessionModel()
    model.open(source, word_vocab())
    view = TreeView(model)
    qtbot.addWidget(view)
    view.resize(700, 450)
    view.show()
    qtbot.waitExposed(view)
    return view


@pytest.fixture
def big(qtbot) -> TreeView:
    return open_view(qtbot, goose_session(n_nodes=60, spine_len=9, spine_accepted=3, branch_continues=2, n_gated=8))


@pytest.fixture
def small(qtbot) -> TreeView:
    """Spine of 5 accepted up to depth 2; the target wanted ' house' at depth 3 and no branch had it."""
    return open_view(qtbot, goose_session(n_nodes=12, spine_len=5, spine_accepted=2, branch_continues=0, n_gated=2,
                                          wanted=word_id("house")))


def center(view: TreeView, item: NodeItem) -> QPoint:
    return view.mapFromScene(item.mapToScene(item.boundingRect().center()))


def test_one_item_per_node_with_its_label_and_source_colour(big: TreeView) -> None:
    rec, vocab = big.model.record, big.model.vocab
    big.set_show_gated(True)
    items = big.node_items()
    assert len(rec.nodes) == 69
    assert set(items) == {n.id for n in rec.nodes} | {BONUS}
    for n in rec.nodes:
        item = items[n.id]
        assert item.text() == vocab.label(n.token)
        assert "␣" in item.text() or n.token < 3  # whitespace is made visible
        if not n.gated:
            assert item.brush().color() == source_color(n.source)
    bonus = items[BONUS]
    assert bonus.text() == "★" + vocab.label(rec.bonus_token)
    assert bonus.brush().color() == source_color("bonus")
    # Hidden items from a previous, bigger cycle are not counted: only visible ones are in the scene's drawing.
    visible = [i for i in big.scene().items() if isinstance(i, NodeItem) and i.isVisible()]
    assert len(visible) == len(rec.nodes) + 1


def test_gated_nodes_are_hollow_and_dashed(big: TreeView) -> None:
    rec = big.model.record
    gated = [n for n in rec.nodes if n.gated]
    assert len(gated) == 8
    big.set_show_gated(True)
    assert big.header.gated.isChecked()
    for n in rec.nodes:
        item = big.node_items()[n.id]
        if n.gated:
            assert item.brush().style() == Qt.BrushStyle.NoBrush
            assert item.pen().style() == Qt.PenStyle.DashLine
        else:
            assert item.brush().style() == Qt.BrushStyle.SolidPattern
            assert item.pen().style() == Qt.PenStyle.SolidLine
    big.set_show_gated(False)
    assert set(big.node_items()) == {n.id for n in rec.nodes if not n.gated} | {BONUS}
    assert not big.header.gated.isChecked()
    # Collapsed: one "+N gated" box per node that had gated children, hollow and dotted.
    parents = {n.parent for n in gated}
    markers = big.marker_items()
    assert set(markers) == parents
    for p, item in markers.items():
        assert item.text() == f"+{sum(n.parent == p for n in gated)} gated"
        assert item.brush().style() == Qt.BrushStyle.NoBrush and item.pen().style() == Qt.PenStyle.DotLine


def test_accepted_path_is_bold(big: TreeView) -> None:
    rec = big.model.record
    items = big.node_items()
    broken = first_rejected_spine(rec)
    for n in rec.nodes:
        if n.gated:
            continue  # collapsed into "+N gated" boxes
        pen = items[n.id].pen()
        if n.accepted:
            assert pen.widthF() >= 2.5 and pen.color() == QColor(ACCEPTED), n
        elif n.id != broken.id:
            assert pen.widthF() <= 1.5, n
    # One thick green edge per accepted node (from its parent) plus one into the bonus token.
    accepted_edges = big.drawing.edges["accepted"]
    assert accepted_edges.pen().widthF() >= 3 and accepted_edges.pen().color() == QColor(ACCEPTED)
    edges = accepted_edges.path()
    assert edges.elementCount() == 4 * (len(rec.accepted_path) + 1)  # moveTo + cubicTo (3 elements) per edge
    # The bonus edge ends at the bonus token's left side, after the last accepted node.
    last = items[rec.accepted_path[-1]]
    bonus = items[BONUS]
    assert bonus.x() > last.x()
    end = edges.elementAt(edges.elementCount() - 1)
    assert abs(end.x - bonus.x()) < 1e-6


def test_first_rejected_spine_node_is_marked_with_what_the_target_wanted(small: TreeView) -> None:
    rec, vocab = small.model.record, small.model.vocab
    broken = first_rejected_spine(rec)
    assert broken is not None and broken.depth == 3 and broken.source == "spine"
    assert small.node_items()[broken.id].pen().color() == QColor(REJECTED)
    text = small.callout_text()
    parent = rec.node_by_id[broken.parent]
    assert parent.target_token == word_id("house")
    top = dict(rec.target_topk[rec.verify_order.index(parent.id)])
    assert f"target wanted '␣house' (p {top[word_id('house')]:.3f})" in text
    assert f"proposed '{vocab.label(broken.token)}' (p {broken.target_prob:.3f})" in text
    assert text.count("0.") >= 7  # both probabilities and the top-5 list
    assert "top-5: ␣house" in text


def test_no_callout_when_the_spine_held_or_there_is_none(qtbot) -> None:
    view = open_view(qtbot, goose_session(n_nodes=20, spine_len=4, spine_accepted=4, branch_continues=0, n_gated=0))
    assert view.callout_text() == ""
    assert first_rejected_spine(view.model.record) is None
    view.model.set_cycle(0)  # an AR cycle: the root and the bonus token
    assert set(view.node_items()) == {0, BONUS}
    assert view.callout_text() == ""


@pytest.mark.qt_log_ignore("This plugin does not support raise")
def test_hover_tooltips(small: TreeView, qtbot) -> None:
    rec = small.model.record
    broken = first_rejected_spine(rec)
    tip = small.tooltip_for(broken.id)
    assert f"node {broken.id}" in tip and f"depth {broken.depth}" in tip and "spine" in tip
    assert f"(id {broken.token})" in tip and small.model.vocab.label(broken.token) in tip
    assert f"score {broken.score:.3f}" in tip and f"target p {broken.target_prob:.3f}" in tip
    assert "verified, rejected" in tip and "first rejected spine token" in tip
    gated = next(n for n in rec.nodes if n.gated)
    assert "gated (never verified)" in small.tooltip_for(gated.id)
    accepted = rec.accepted_path[0]
    assert "verified, accepted" in small.tooltip_for(accepted)
    assert "bonus token" in small.tooltip_for(BONUS)
    # A real hover: the help event on the viewport shows that text.
    item = small.node_items()[broken.id]
    pos = center(small, item)
    event = QHelpEvent(QEvent.Type.ToolTip, pos, small.viewport().mapToGlobal(pos))
    small.viewportEvent(event)
    assert QToolTip.text() == tip
    QToolTip.hideText()


def test_clicking_a_node_selects_it_and_selection_is_highlighted(small: TreeView, qtbot) -> None:
    model = small.model
    rec = model.record
    target = rec.accepted_path[-1]
    qtbot.mouseClick(small.viewport(), Qt.MouseButton.LeftButton, pos=center(small, small.node_items()[target]))
    assert model.selected_node == target
    halo = small._halo
    assert halo.isVisible()
    assert halo.path().boundingRect().contains(small.node_items()[target].sceneBoundingRect())
    # Selection from elsewhere (the mask panel) moves the highlight; its pixels show the palette's highlight colour.
    other = next(n.id for n in rec.nodes if n.source == "branch" and not n.gated)
    model.select_node(other)
    item_rect = small.node_items()[other].sceneBoundingRect()
    assert halo.path().boundingRect().contains(item_rect)
    assert not halo.path().boundingRect().contains(small.node_items()[target].sceneBoundingRect())
    img = small.viewport().grab().toImage()
    ring = small.mapFromScene(QPointF(item_rect.center().x(), item_rect.top() - 2.5))
    assert img.pixelColor(ring) == small.palette().highlight().color()
    # Clicking empty space clears the selection.
    qtbot.mouseClick(small.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(3, small.viewport().height() - 3))
    assert model.selected_node is None and not halo.isVisible()


def test_pixels_show_fill_colours(small: TreeView) -> None:
    small.set_show_gated(True)
    img = small.viewport().grab().toImage()
    rec = small.model.record
    for n in rec.nodes:
        r = small.node_items()[n.id].sceneBoundingRect()
        inside = small.mapFromScene(QPointF(r.left() + 3.0, r.center().y()))
        colour = img.pixelColor(inside)
        if n.gated:
            assert colour == small.viewport().palette().base().color()
        else:
            assert colour == source_color(n.source), n


def test_wheel_zoom_and_double_click_fit(small: TreeView, qtbot) -> None:
    fitted = small.transform().m11()
    assert 1.0 <= fitted <= 1.4
    rect = small.mapFromScene(small.sceneRect()).boundingRect()
    assert small.viewport().rect().adjusted(-2, -2, 2, 2).contains(rect)  # the whole tree is in view
    pos = QPointF(small.viewport().rect().center())
    wheel = QWheelEvent(pos, QPointF(small.viewport().mapToGlobal(pos.toPoint())), QPoint(), QPoint(0, 240),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    small.wheelEvent(wheel)
    assert small.transform().m11() == pytest.approx(fitted * 1.0015 ** 240)
    qtbot.mouseDClick(small.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(5, 5))
    assert small.transform().m11() == pytest.approx(fitted)


def test_drag_pans_without_selecting(small: TreeView, qtbot) -> None:
    vp = small.viewport()
    for _ in range(3):  # zoom in far enough to have somewhere to pan to
        pos = QPointF(vp.rect().center())
        small.wheelEvent(QWheelEvent(pos, QPointF(vp.mapToGlobal(pos.toPoint())), QPoint(), QPoint(0, 360),
                                     Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier,
                                     Qt.ScrollPhase.NoScrollPhase, False))
    before = small.mapToScene(vp.rect().center())
    item = small.node_items()[small.model.record.accepted_path[0]]
    start = QPointF(center(small, item))
    left, none = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    for kind, pos, buttons in ((QEvent.Type.MouseButtonPress, start, left),
                               (QEvent.Type.MouseMove, start - QPointF(40, 25), left),
                               (QEvent.Type.MouseMove, start - QPointF(80, 50), left),
                               (QEvent.Type.MouseButtonRelease, start - QPointF(80, 50), Qt.MouseButton.NoButton)):
        QApplication.sendEvent(vp, QMouseEvent(kind, pos, QPointF(vp.mapToGlobal(pos.toPoint())), left, buttons, none))
    after = small.mapToScene(vp.rect().center())
    scale = small.transform().m11()
    assert after.x() - before.x() == pytest.approx(80 / scale, abs=2)  # the drawing followed the mouse
    assert after.y() - before.y() == pytest.approx(50 / scale, abs=2)
    assert small.model.selected_node is None  # a drag that starts on a node is not a click


def test_a_record_it_cannot_draw_gives_a_message(qtbot) -> None:
    source = goose_session(n_nodes=12, spine_len=5, spine_accepted=2, branch_continues=0)
    bad = source.cycle(len(source) - 1)
    bad = bad.replace(nodes=bad.nodes[1:])  # no root
    view = open_view(qtbot, source)
    view.model.record = bad
    view.model.cycle_changed.emit(bad)
    assert view._error is not None and view.node_items() == {}
    view.model.set_cycle(0)
    assert view._error is None and set(view.node_items()) == {0, BONUS}


def test_empty_model_shows_nothing(qtbot) -> None:
    view = TreeView(SessionModel())
    qtbot.addWidget(view)
    assert view.node_items() == {} and view.callout_text() == "" and view.legend_sources() == []


def test_legend_lists_the_sources_present(big: TreeView) -> None:
    assert big.legend_sources() == ["root", "spine", "branch"]
    text = big.header.legend.text()
    assert "spine broke" in text and "gated" in text and "bonus" in text


def test_tidy_rows_centres_parents_and_keeps_layers_apart() -> None:
    children = {0: [1, 2, 3], 1: [4, 5], 3: [6], 6: [7, 8, 9], 2: []}
    rows = tidy_rows(children)
    for parent, kids in children.items():
        if kids:
            assert rows[parent] == pytest.approx((rows[kids[0]] + rows[kids[-1]]) / 2)
    assert rows[1] < rows[2] < rows[3] and rows[4] < rows[5] and rows[7] < rows[8] < rows[9]
    depth = {0: 0, 1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 2, 7: 3, 8: 3, 9: 3}
    for d in set(depth.values()):
        layer = sorted(rows[n] for n in depth if depth[n] == d)
        assert all(b - a >= 1.0 - 1e-9 for a, b in zip(layer, layer[1:]))



def test_layout_tree_columns_by_depth_and_the_bonus_after_the_last_accepted_node() -> None:
    from gui_records import small_cycle
    from specviz_core.viewer.tree_layout import Metrics, layout_tree

    rec = small_cycle()  # root -> a (accepted) -> b, root -> c, a -> d, c -> e (gated); bonus after a
    m = Metrics(12.0)
    HGAP, MARGIN, NODE_H, ROW = m.hgap, m.margin, m.node_h, m.row
    lay = layout_tree(rec, True, lambda t: f"t{t}", lambda label: 10.0 * len(label), m)
    assert set(lay.pos) == {0, 1, 2, 3, 4, 5, BONUS}
    assert lay.children[1] == [2, 4, BONUS] and lay.labels[BONUS] == "★t15" and lay.labels[3] == "t12"
    x = {i: p[0] for i, p in lay.pos.items()}
    assert x[0] == MARGIN and x[1] == x[3] == MARGIN + 20 + HGAP  # column width: the widest label ("t4" = 20)
    assert x[2] == x[4] == x[5] == x[BONUS] == x[1] + 30 + HGAP  # after depth 1 ("t10", "t12": 30 wide)
    assert lay.width == x[BONUS] + 40 + MARGIN  # the last column is as wide as "★t15"
    rows = sorted({p[1] for p in lay.pos.values()})
    assert rows[0] == MARGIN and all(b - a >= ROW - 1e-9 for a, b in zip(rows, rows[1:]))
    assert lay.height == rows[-1] + NODE_H + MARGIN
    hidden = layout_tree(rec, False, lambda t: f"t{t}", lambda label: 10.0 * len(label), m)
    assert 5 not in hidden.pos and 5 not in hidden.nodes
    assert hidden.children[3] == [marker_id(3)] and hidden.labels[marker_id(3)] == "+1 gated"
    assert hidden.hidden == {3: [5]} and hidden.pos[marker_id(3)][0] == x[5]
    opened = layout_tree(rec, False, lambda t: f"t{t}", lambda label: 10.0 * len(label), m, expanded={3})
    assert 5 in opened.pos and marker_id(3) not in opened.pos


def test_an_eagle_cycle_says_its_path_probabilities_and_the_reranking_cut(qtbot):
    """EAGLE-2's dynamic tree: a node's hover text gives its path probability, the gated box says the reranking cut
    them below the last kept path probability, and the legend gives the cut line (from the cycle's rerank_cut)."""
    from dataclasses import replace

    from specviz_app.panels.tree.text import legend_html, marker_tip, node_tip
    from specviz_core.runtime.vocab import TokenText

    rec = tree_record([(1, 0, "head", 0.5, 1, False), (2, 0, "head", 0.002, 1, False)], drafter="head",
                      rerank_cut=0.004)
    rec = replace(rec, nodes=(*rec.nodes[:2], rec.nodes[2].replace(verified=False, gated=True)))
    vocab = TokenText(None)
    nodes = rec.node_by_id
    assert "path probability 0.500" in node_tip(nodes[1], vocab, False, path_scores=True)
    assert "cut by the reranking: path probability below 0.004" in marker_tip([nodes[2]], vocab, 0.004)
    assert "the reranking kept path p ≥ 0.004" in legend_html(rec, False)
    assert "cut by the confidence gate or the budget" in marker_tip([nodes[2]], vocab)  # TALON's own words stay
