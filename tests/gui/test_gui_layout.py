"""The default layout from a 1100 x 700 laptop to a 2560 x 1440 screen: no stray tab bar over a panel, the draft
tree keeps about half the window, every dock has room for its panel."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QTabBar

from gui_records import keep_none_alive, word_vocab
from gui_trees import talon_source

keep_none_alive()


@pytest.fixture
def window(qtbot, qapp, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CONFIG", str(tmp_path / "gui.ini"))
    from specviz_app.shell.window import MainWindow

    style = qapp.style().name()
    qapp.setStyle("Fusion")  # the window's style (specviz gui sets it): Qt's stray tab bars show under it
    w = MainWindow(tmp_path / "sessions.db", restore_layout=False)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.close()
    qapp.setStyle(style)


def in_window(w, widget) -> QRect:
    return QRect(widget.mapTo(w, widget.rect().topLeft()), widget.size())


@pytest.mark.parametrize("size", [(1100, 700), (1500, 940), (2560, 1440)])
def test_no_stray_tab_bar_and_the_tree_keeps_its_room(window, qtbot, size) -> None:
    w = window
    w.resize(*size)
    w.dock_layout.proportion_docks()
    w.model.open(talon_source(), word_vocab())
    qtbot.wait(50)
    assert w.dock_layout.compact == (size[0] < 1300)
    inside = QRect(0, 0, *size)
    panels = [in_window(w, d.widget()) for d in w.docks.values() if d.widget().isVisible()]
    panels = [r for r in panels if inside.contains(r)] + [in_window(w, w.tree)]
    assert len(panels) >= 4
    for bar in w.findChildren(QTabBar, options=Qt.FindChildOption.FindDirectChildrenOnly):
        if bar.isVisible() and bar.geometry().intersects(inside):
            for r in panels:
                assert not bar.geometry().intersects(r), ([bar.tabText(i) for i in range(bar.count())], r)
    tree = in_window(w, w.tree)
    assert tree.width() >= 0.42 * size[0]
    assert tree.height() >= 0.4 * size[1]
    for name in ("mask", "kv", "output", "charts"):
        d = w.docks[name]
        if d.widget().isVisible() and inside.contains(in_window(w, d.widget())):
            assert d.widget().width() >= 300 and d.widget().height() >= 140, name


def test_a_stray_tab_bar_left_by_qt_is_hidden(window, qtbot) -> None:
    """Qt 6 can leave a second tab bar for a tabbed dock group at its first place (seen over the output at 1100 x
    700 with the Fusion style): one that is not under its docks is hidden after the next layout."""
    w = window
    w.resize(1100, 700)
    w.dock_layout.proportion_docks()
    stray = QTabBar(w)
    for title in (w.docks["stop_cause"].windowTitle(), w.docks["charts"].windowTitle()):
        stray.addTab(title)
    out = in_window(w, w.docks["output"].widget())
    stray.setGeometry(out.center().x(), out.top() + 20, 300, 26)
    stray.show()
    w.resize(1110, 700)
    qtbot.waitUntil(lambda: not stray.isVisible(), timeout=2000)
    assert any(b.isVisible() and b.tabText(0) == stray.tabText(0)
               for b in w.findChildren(QTabBar, options=Qt.FindChildOption.FindDirectChildrenOnly))  # the real one
