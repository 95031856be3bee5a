"""Draft tree: the current cycle's tree, root on the left, one layer per depth.

Nodes are boxes labelled with their token (whitespace visible) and filled with their source's colour; gated nodes
are hollow and dashed, collapsed by default into one "+N gated" box per node (click it to open it, or show them
all with Gated); the accepted path is bold and ends in the bonus token (a double-outlined ★ box); the first
rejected spine node has a red outline and a callout with the token the target wanted there and its top-5.
Labels use the panel's font: Fit never shrinks them below it (a larger tree scrolls, with an overview in the
corner); zoomed out further, labels too small to read are left out. Wheel zooms, dragging pans, a double-click
fits; clicking a box selects it in the model; with the focus, Enter enters the tree: arrows then move a cursor along
the edges, Enter selects and Esc leaves (until then the arrows step cycles, as anywhere in the window).
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt
from PySide6.QtGui import (
    QHelpEvent,
    QMouseEvent,
    QPainter,
    QPalette,
    QPen,
    QResizeEvent,
    QTransform,
    QWheelEvent,
)
from PySide6.QtWidgets import QApplication, QGraphicsScene, QGraphicsView, QToolTip, QWidget

from specviz_app.panels.base import PanelMixin, placeholder
from specviz_app.panels.tree.drawing import TreeDrawing
from specviz_app.panels.tree.export import MAX_FIT, MIN_FIT, export_tree
from specviz_app.panels.tree.framing import clear_of_minimap, path_area, show_path
from specviz_app.panels.tree.items import NodeItem, TreeHeader
from specviz_app.panels.tree.keys import TreeKeys
from specviz_app.panels.tree.minimap import TreeMinimap
from specviz_app.panels.tree.text import (
    HELP,
    alignment_tip,
    bonus_tip,
    legend_html,
    legend_sources,
    legend_tip,
    marker_tip,
    node_tip,
)
from specviz_core.analysis.spine import analyze_spine
from specviz_core.cycle_state import AssistedFacts, TalonFacts
from specviz_core.records import CycleRecord, Node
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.tree_layout import BONUS, TreeLayout, is_marker, layout_tree, marker_parent

log = logging.getLogger(__name__)
LABEL_CHARS = 10
MIN_ZOOM, MAX_ZOOM = 0.08, 8.0


class TreeView(PanelMixin, QGraphicsView):
    """The current cycle's draft tree. ``fit()`` fits it; ``node_items()`` maps node ids to their items."""

    title = "Draft tree"

    def __init__(self, model: SessionModel, parent: QWidget | None = None) -> None:
        QGraphicsView.__init__(self, parent)
        self._scene = QGraphicsScene(self)
        self._scene.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.NoIndex)
        self.setScene(self._scene)
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.FullViewportUpdate)
        self.setFrameShape(QGraphicsView.Shape.NoFrame)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setMinimumSize(200, 120)
        self.show_gated = False
        """Every gated node drawn; otherwise one "+N gated" box per node, but under the ``expanded`` ones."""
        self.expanded: set[int] = set()
        self.cursor_node: int | None = None
        """The keyboard cursor's box (Enter selects it)."""
        self.presenting = False
        """Presentation mode: Fit keeps the root, the accepted path and the bonus in view (:meth:`fit`)."""
        self._fit_pressed: tuple | None = None  # the view as the last press of Fit left it (:meth:`fit_clicked`)
        self.tree_layout: TreeLayout | None = None
        self.drawing = TreeDrawing(self._scene, self.font())
        self.drawing.set_text_color(self.palette().color(QPalette.ColorRole.Text))
        self._normal_px = self.font_px()  # the labels' size out of presentation mode
        self.broken_node: Node | None = None
        """The first rejected spine node of the current cycle, if any."""
        self._auto_fit = True
        self._error: str | None = None
        self._press: QPointF | None = None
        self.header = TreeHeader(self)
        self.header.gated.toggled.connect(self.set_show_gated)
        self.header.fit.clicked.connect(self.fit_clicked)
        self.minimap = TreeMinimap(self.viewport())
        self.minimap.moved.connect(self._minimap_moved)
        for bar in (self.horizontalScrollBar(), self.verticalScrollBar()):
            bar.valueChanged.connect(self._update_minimap)
        self.keys = TreeKeys(self)
        self.connect_model(model)
        self._redraw()

    # -- model callbacks ----------------------------------------------------------------------------------------------
    def on_session_opened(self, source) -> None:
        self._redraw()

    def on_session_closed(self) -> None:
        self._redraw()

    def on_cycle_changed(self, record: CycleRecord) -> None:
        self.expanded.clear()
        self.keys.leave()  # a new cycle: the arrows are the window's again
        self._redraw()
        self.fit()

    def on_presentation_changed(self, on: bool) -> None:
        # The application font has changed; this panel hears of it only at the next event loop turn.
        self.presenting = on
        self.drawing.set_font(QApplication.font())
        self._redraw()
        self.fit()

    def on_node_selected(self, node_id: int | None) -> None:
        item = self._items.get(node_id) if node_id is not None else None
        if node_id is not None and self.cursor_node is not None:
            self.cursor_node = node_id
        self.drawing.ring(self.drawing.halo, item, QPen(self.palette().color(QPalette.ColorRole.Highlight), 3.0), 3.5)
        self.show_cursor()
        if item is not None:
            self.ensureVisible(item.sceneBoundingRect(), 20, 20)
            clear_of_minimap(self, [item.sceneBoundingRect()])

    @property
    def _items(self) -> dict[int, NodeItem]:
        return self.drawing.items

    @property
    def _halo(self):
        """The selection's outline (tests read it)."""
        return self.drawing.halo

    # -- public -------------------------------------------------------------------------------------------------------
    def item_of(self, box: int | None) -> NodeItem | None:
        """The drawn box of ``box`` (a node or a "+N gated" box), if drawn."""
        return self._items.get(box) if box is not None else None

    def node_items(self) -> dict[int, NodeItem]:
        """Visible node items by node id (the bonus token under ``BONUS``; not the "+N gated" boxes)."""
        return {k: v for k, v in self._items.items() if not is_marker(k)}

    def marker_items(self) -> dict[int, NodeItem]:
        """The "+N gated" boxes, by the id of the node whose gated candidates they stand for."""
        return {marker_parent(k): v for k, v in self._items.items() if is_marker(k)}

    def callout_text(self) -> str:
        """The text of the spine-break callout ('' when there is none)."""
        return self.drawing.callout.text()

    def legend_sources(self) -> list[str]:
        rec = self.model.record
        return legend_sources(rec) if rec is not None else []

    def label_scale(self) -> float:
        """Screen pixels per scene pixel: a label is drawn ``font_px() * label_scale()`` pixels high."""
        return self.transform().m22()

    def font_px(self) -> int:
        """The labels' size in scene pixels: the panel font's."""
        return self.drawing.font.pixelSize()

    def tooltip_for(self, node_id: int) -> str:
        """The hover text of a node, of the bonus token (``BONUS``) or of a "+N gated" box, built when asked."""
        rec = self.model.record
        if rec is None:
            return ""
        nodes = rec.node_by_id
        if node_id == BONUS:
            return bonus_tip(rec, nodes[rec.accepted_path[-1] if rec.accepted_path else 0], self.model.vocab)
        if is_marker(node_id) and self.tree_layout is not None:
            hidden = self.tree_layout.hidden.get(marker_parent(node_id), [])
            return marker_tip([nodes[i] for i in hidden], self.model.vocab, TalonFacts.read(rec.state).rerank_cut)
        if node_id not in nodes:
            return ""
        broken = self.broken_node is not None and node_id == self.broken_node.id
        tip = node_tip(nodes[node_id], self.model.vocab, broken, path_scores=TalonFacts.read(rec.state).drafter is not None)
        alignment = AssistedFacts.read(rec.state).alignment
        align = alignment_tip(alignment, nodes[node_id].depth) if alignment is not None else ""
        return f"{tip}\n{align}" if align else tip

    def set_show_gated(self, show: bool) -> None:
        self.show_gated = show
        if not show:
            self.expanded.clear()
        if self.header.gated.isChecked() != show:
            self.header.gated.setChecked(show)
        self._redraw()
        self.fit()

    def expand(self, parent: int) -> None:
        """Open the "+N gated" box under node ``parent``: draw its gated candidates."""
        self.expanded.add(parent)
        self._redraw()
        if self._auto_fit:
            self.fit()

    def fit_clicked(self) -> None:
        """The Fit button: fit as :meth:`fit` does; pressed again right after (nothing zoomed, panned or redrawn in
        between) on a tree that did not fit, fit it whole."""
        again = self._fit_pressed is not None and self._auto_fit and self._fit_pressed == self._fit_state()
        self.fit()
        self._fit_pressed = self._fit_state()
        rect, vp = self._scene.sceneRect(), self.viewport().rect()
        if not again or rect.isEmpty() or vp.width() < 10 or vp.height() < 10:
            return
        whole = min(vp.width() / rect.width(), vp.height() / rect.height()) * 0.98  # a margin for the outlines
        if whole < self.transform().m11():  # fitted as far as readable labels go: the whole tree now
            self._fit_pressed = None
            self.setTransform(QTransform.fromScale(whole, whole))
            self.drawing.show_labels(whole)
            self._update_minimap()
            self.centerOn(rect.center())
            self._update_minimap()

    def _fit_state(self) -> tuple:
        """What a second press of Fit must find unchanged: the cycle, the scale and the scroll position."""
        return (self.model.index, round(self.transform().m11(), 6), self.horizontalScrollBar().value(),
                self.verticalScrollBar().value(), self.show_gated, tuple(sorted(self.expanded)))

    def fit(self) -> None:
        """Fit the tree in the view at 100-140% of the panel's font; a tree too large for that is shown from the
        accepted path, scrolls, and gets an overview. In presentation mode such a tree is fitted by its root, accepted
        path and bonus token instead, its labels down to the normal window's size. The view refits on resize until
        zoomed or panned."""
        self._auto_fit = True
        rect = self._scene.sceneRect()
        vp = self.viewport().rect()
        if rect.isEmpty() or vp.width() < 10 or vp.height() < 10:
            return
        fit = min(vp.width() / rect.width(), vp.height() / rect.height()) * 0.995
        s = min(max(fit, MIN_FIT), MAX_FIT)
        if self.presenting and fit < MIN_FIT:
            # Presented, what the audience must see is the root, the accepted path and the bonus token: fit them,
            # with labels down to the normal window's size (the presentation font is larger by its scale).
            path = path_area(self)
            if not path.isEmpty():
                floor = MIN_FIT * min(1.0, self._normal_px / max(1, self.font_px()))
                # (at 94%: show_path keeps a 5% margin, and starts from the root when the path is wider)
                s = min(max(min(vp.width() / path.width(), vp.height() / path.height()) * 0.94, floor), MIN_FIT)
        self.setTransform(QTransform.fromScale(s, s))
        self.drawing.show_labels(s)
        self._update_minimap()  # the room to scroll past the tree, before moving in it
        if s <= fit:
            self.centerOn(rect.center())
        else:
            show_path(self)
        self._update_minimap()

    def export(self, path: Path) -> Path:
        """The whole tree, never the part the view scrolled to (:func:`export_tree`)."""
        return export_tree(self, Path(path))

    # -- drawing ------------------------------------------------------------------------------------------------------
    def _redraw(self) -> None:
        """Rebuild the drawing; a record the panel cannot draw gives a short message, never a traceback."""
        self._error = None
        try:
            self._rebuild()
        except Exception as exc:  # noqa: BLE001 - one odd record must not stop the other panels' updates
            log.exception("draft tree: cannot draw cycle %s", self.model.index)
            self._error = f"Cannot draw this cycle's tree ({type(exc).__name__}: {exc})"
            self._hide_all()
            self.viewport().update()
        self._update_minimap()

    def _hide_all(self) -> None:
        self.drawing.hide()
        self.tree_layout = None
        self.minimap.hide()

    def _rebuild(self) -> None:
        rec = self.model.record
        d = self.drawing
        if rec is None:
            self._hide_all()
            self._scene.setSceneRect(QRectF(0, 0, 1, 1))
            self._set_legend(None)
            self.viewport().update()
            return
        vocab = self.model.vocab
        self.tree_layout = lay = layout_tree(rec, self.show_gated, lambda t: vocab.label(t, LABEL_CHARS),
                                             d.box_width, d.metrics, self.expanded)
        spine = analyze_spine(rec)
        self.broken_node = broken = rec.node_by_id[spine.broken] if spine.broken is not None else None
        minimap = d.build(rec, lay, broken)
        bounds = QRectF(0, 0, lay.width, lay.height)
        item = d.items.get(broken.id) if broken is not None else None
        bounds = d.callout.place(spine, broken, item, vocab, self.palette(), bounds, d.metrics.margin)
        self._scene.setSceneRect(bounds)
        self.minimap.set_tree(minimap, bounds)
        self._set_legend(rec)
        self.header.gated.setEnabled(any(n.gated for n in rec.nodes))
        self.on_node_selected(self.model.selected_node)

    def show_cursor(self) -> None:
        item = self._items.get(self.cursor_node) if self.cursor_node is not None and self.hasFocus() else None
        pen = QPen(self.palette().color(QPalette.ColorRole.Highlight), 1.5, Qt.PenStyle.DashLine)
        self.drawing.ring(self.drawing.cursor, item, pen, 6.0)

    def _set_legend(self, rec: CycleRecord | None) -> None:
        text = "" if rec is None else legend_html(rec, self.broken_node is not None)
        if self.header.legend.text() != text:
            self.header.legend.setText(text)
            self.header.legend.setToolTip(legend_tip(rec) if rec is not None else HELP)

    def _update_minimap(self, *_: object) -> None:
        """Place the overview, and let the view scroll far enough past the tree to uncover what lies under it."""
        room = tree = self._scene.sceneRect()
        if self.tree_layout is not None:
            room = self.minimap.scroll_room(tree, self.transform().m11(), self.viewport().rect())
        if room != self.sceneRect():
            self.setSceneRect(room)
        shown = self.mapToScene(self.viewport().rect()).boundingRect()
        self.minimap.follow(shown, self.viewport().rect(), self.tree_layout is not None)

    def _minimap_moved(self, p: QPointF) -> None:
        self._auto_fit = False
        self.centerOn(p)

    # -- interaction --------------------------------------------------------------------------------------------------
    def message(self) -> str:
        """The text shown in place of a tree ('' while a tree is drawn)."""
        if self.model.record is not None and self._error is None:
            return ""
        return self._error or placeholder(self.model)

    def drawForeground(self, painter: QPainter, rect: QRectF) -> None:
        text = self.message()
        if not text:
            return
        painter.save()
        painter.resetTransform()
        painter.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
        painter.drawText(self.viewport().rect().adjusted(8, 8, -8, -8),
                         Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, text)
        painter.restore()

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize:  # a scroll bar came or went
            self._place_header()
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            item = self.box_at(event.pos())
            if item is not None:
                QToolTip.showText(event.globalPos(), self.tooltip_for(item.node_id), self.viewport())
                return True
        return super().viewportEvent(event)

    def wheelEvent(self, event: QWheelEvent) -> None:
        cur = self.transform().m11()
        new = min(max(cur * 1.0015 ** event.angleDelta().y(), MIN_ZOOM), MAX_ZOOM)
        self.scale(new / cur, new / cur)
        self.drawing.show_labels(new)
        self._auto_fit = False
        self._update_minimap()
        event.accept()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._press = event.position()
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._press is not None and (event.position() - self._press).manhattanLength() > 3:
            self._auto_fit = False
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        super().mouseReleaseEvent(event)
        press, self._press = self._press, None
        if press is None or (event.position() - press).manhattanLength() > 3 or \
                event.button() != Qt.MouseButton.LeftButton:
            return
        event.accept()
        item = self.box_at(event.position().toPoint())
        self.activate(item.node_id if item is not None else None)

    def box_at(self, pos) -> NodeItem | None:
        """The box under a viewport point (its label included)."""
        item = self.itemAt(pos)
        if item is not None and not isinstance(item, NodeItem):
            item = item.parentItem()
        return item if isinstance(item, NodeItem) else None

    def activate(self, box: int | None) -> None:
        """What a click or Enter does to a box: select its node (or the bonus token), open a "+N gated" box;
        None (empty space) clears the selection."""
        if box is not None and is_marker(box):
            self.expand(marker_parent(box))
        else:
            self.model.select_node(box)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        self.fit()
        event.accept()

    def resizeEvent(self, event: QResizeEvent) -> None:
        h = self.header.sizeHint().height()
        self.setViewportMargins(0, h, 0, 0)
        super().resizeEvent(event)
        self._place_header()
        if self._auto_fit:
            self.fit()
        else:
            self._update_minimap()

    def _place_header(self) -> None:
        """Above the drawing, as wide as it: the vertical scroll bar runs the view's full height beside it."""
        self.header.setGeometry(0, 0, self.viewport().width(), self.header.sizeHint().height())

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self.drawing.set_text_color(self.palette().color(QPalette.ColorRole.Text))
            self._redraw()
        elif event.type() == QEvent.Type.FontChange:
            self.drawing.set_font(self.font())
            self._redraw()
            self.fit()
