"""Charts that fit: at a laptop's 1100 x 700 no chart title is wider than its plot, only the charts that apply to the
session's method are shown, one can be seen alone, and the panel opens in its own window."""

from __future__ import annotations

import pytest

from gui_records import goose_session, keep_none_alive, word_vocab
from gui_trees import talon_source

keep_none_alive()


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CONFIG", str(tmp_path / "gui.ini"))
    from specviz_app.shell.window import MainWindow

    w = MainWindow(tmp_path / "sessions.db", restore_layout=False)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.close()


def show_charts(w, qtbot, size, source, method) -> None:
    w.resize(*size)
    w.dock_layout.proportion_docks()
    w.docks["charts"].raise_()
    w.model.open(source, word_vocab())
    w.charts.set_ar_baseline(12.5, "AR session on the same prompt")
    qtbot.wait(30)


@pytest.mark.parametrize("size", [(1100, 700), (1500, 940)])
@pytest.mark.parametrize("method", ["goose", "talon"])
def test_no_chart_title_is_wider_than_its_plot(window, qtbot, size, method) -> None:
    source = goose_session() if method == "goose" else talon_source()
    show_charts(window, qtbot, size, source, method)
    charts = window.charts
    shown = [charts.chart(n) for n in charts.shown]
    assert shown and all(p.isVisible() for p in shown)
    for p in shown:
        title = p.titleLabel.item
        assert p.width() > 50, p.title
        assert p.title_width() <= p.width() + 0.5, (p.title, p.title_width(), p.width())
        assert title.mapRectToScene(title.boundingRect()).width() <= p.width() + 0.5
        assert title.boundingRect().height() < p.height() / 2, p.title  # the plot keeps most of its room
        # Tick labels have room (pyqtgraph sizes an axis to 0 while its chart is hidden).
        left = p.getAxis("left")  # the causes chart labels its bars in the plot and hides its left axis
        assert (left.width() > 20 or not left.isVisible()) and p.getAxis("bottom").height() > 20, p.title


def test_only_the_charts_that_apply(window, qtbot) -> None:
    show_charts(window, qtbot, (1500, 940), goose_session(), "goose")
    charts = window.charts
    assert "spine" in charts.shown and "delta" not in charts.shown and "cost" not in charts.shown
    assert not charts.chart("delta").isVisible() and not charts.chart("cost").isVisible()
    window.model.open(talon_source(), word_vocab())
    assert "delta" in charts.shown and "spine" not in charts.shown
    assert charts.chart("delta").isVisible() and not charts.chart("spine").isVisible()
    texts = " ".join(p.header_text() for p in charts.plots if p.isVisible())
    assert "no " not in texts  # no chart is there to say it has nothing


@pytest.mark.qt_log_ignore("This plugin does not support raise")
def test_a_chart_alone_and_the_charts_in_their_own_window(window, qtbot) -> None:
    show_charts(window, qtbot, (1100, 700), talon_source(), "talon")
    charts = window.charts
    charts.set_solo("delta")
    assert [p for p in charts.plots if p.isVisible()] == [charts.chart("delta")]
    charts.set_solo(None)
    assert sum(p.isVisible() for p in charts.plots) == len(charts.shown)
    charts.pop_out.click()
    dock = window.docks["charts"]
    assert dock.isFloating() and dock.isVisible()
    assert dock.width() >= 900 and dock.height() >= 595
