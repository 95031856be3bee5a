"""The one cycle-condition editor, as the timeline's filter and the Run panel's breakpoint use it."""

from __future__ import annotations

from gui_records import goose_session, keep_none_alive, word_vocab
from specviz_app.panels.filter_editor import FilterEditor
from specviz_app.panels.timeline import TimelinePanel
from specviz_core.records import MODES
from specviz_core.viewer.filters import KINDS, CycleFilter
from specviz_core.viewer.session_model import SessionModel

keep_none_alive()


def test_kinds_and_modes_come_from_the_core(qtbot):
    editor = FilterEditor("Filter:", "tip", with_all=False)
    qtbot.addWidget(editor)
    kinds = [editor.kind.itemData(i) for i in range(editor.kind.count())]
    assert kinds == [k for k in KINDS if k != "all"]
    assert [editor.mode.itemText(i) for i in range(editor.mode.count())] == list(MODES)


def test_k_and_mode_show_only_where_the_kind_takes_them(qtbot):
    editor = FilterEditor("Filter:", "tip")
    qtbot.addWidget(editor)
    editor.show()
    seen: list[CycleFilter] = []
    editor.changed.connect(seen.append)
    assert editor.value().kind == "all" and not editor.k.isVisible() and not editor.mode.isVisible()
    editor.kind.setCurrentIndex(editor.kind.findData("accepted_le"))
    editor.k.setValue(2)
    assert editor.k.isVisible() and not editor.mode.isVisible()
    assert (seen[-1].kind, seen[-1].k) == ("accepted_le", 2)
    editor.kind.setCurrentIndex(editor.kind.findData("mode"))
    editor.mode.setCurrentText("bypass")
    assert editor.mode.isVisible() and not editor.k.isVisible()
    assert seen[-1] == CycleFilter("mode", k=2, mode="bypass") and seen[-1].label() == "Mode is bypass"


def test_the_timeline_filter_sets_the_model_filter(qtbot):
    model = SessionModel()
    model.open(goose_session(n_nodes=12, spine_len=5, spine_accepted=2, branch_continues=0), word_vocab())
    timeline = TimelinePanel(model)
    qtbot.addWidget(timeline)
    editor = timeline.filter_editor
    editor.kind.setCurrentIndex(editor.kind.findData("spine_broke"))
    assert model.filter.kind == "spine_broke"
    assert model.visible_indices() == [len(model.source) - 1]  # the AR cycles before it have no spine
    assert timeline.matches.text() == "1 match"
