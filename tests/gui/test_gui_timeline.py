"""The timeline strip draws its bars once per data and size; what it shows must still follow the data."""

from __future__ import annotations

from PySide6.QtGui import QColor

from gui_records import goose_session, keep_none_alive, word_vocab
from specviz_app.panels.timeline import MODE_COLORS, TimelinePanel
from specviz_core.viewer.session_model import SessionModel

keep_none_alive()


def _strip(qtbot):
    model = SessionModel()
    timeline = TimelinePanel(model)
    qtbot.addWidget(timeline)
    model.open(goose_session(n_nodes=12, spine_len=5, spine_accepted=2, branch_continues=0), word_vocab())
    timeline.resize(600, 60)
    timeline.show()
    qtbot.waitExposed(timeline)
    return model, timeline, timeline.strip


def _pixel(strip, cycle: int, y: int) -> QColor:
    """The colour at ``y`` in the middle of the left half of ``cycle``'s bar (away from the cursor line)."""
    n = len(strip.panel.model.source)
    x = int((cycle + 0.25) * strip.width() / n)
    return strip.grab().toImage().pixelColor(x, y)


def test_a_filter_fades_the_cached_bars_it_no_longer_matches(qtbot):
    model, timeline, strip = _strip(qtbot)
    bottom = strip.height() - 2
    assert _pixel(strip, 0, bottom).name() == QColor(MODE_COLORS["ar"]).name()  # an AR cycle, bright
    editor = timeline.filter_editor
    editor.kind.setCurrentIndex(editor.kind.findData("spine_broke"))  # only the last cycle matches
    faded = _pixel(strip, 0, bottom)
    base = strip.palette().base().color()
    ar = QColor(MODE_COLORS["ar"])
    for got, b, c in ((faded.red(), base.red(), ar.red()), (faded.green(), base.green(), ar.green())):
        assert abs(got - (b + (c - b) * 50 / 255)) <= 2  # alpha 50 over the base colour
    assert _pixel(strip, len(model.source) - 1, bottom).name() == QColor(MODE_COLORS["tree"]).name()


def test_the_cursor_follows_the_cycle_over_unchanged_bars(qtbot):
    model, _, strip = _strip(qtbot)
    n = len(model.source)
    text = strip.palette().text().color().name()

    def cursor_at(cycle: int) -> bool:
        x = int((cycle + 0.5) * strip.width() / n)
        return strip.grab().toImage().pixelColor(x, 2).name() == text

    model.set_cycle(1)
    assert cursor_at(1) and not cursor_at(3)
    model.set_cycle(3)
    assert cursor_at(3) and not cursor_at(1)
