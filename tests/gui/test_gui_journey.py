"""A user's journey through the window on the tiny model (issue 30): one cycle of every kind of method, each shown by
every panel for that method and cycle; every panel exported as PNG and SVG and the cycles as CSV; the window at a
laptop's size, a large screen's and in presentation mode. At each step the status line and the enabled actions say
what is true, and nothing is printed on standard error. Waits are on states, never on sleeps."""

from __future__ import annotations

import csv

import pytest
from test_gui_window import assert_panels_show

from specviz_core.viewer.lifecycle import enabled_actions, status_text

METHODS = ("goose", "talon", "tr", "pld", "stand", "hf_prompt_lookup")
PANELS = ("tree", "mask", "kv", "charts", "output", "stop_cause")


def settle(qtbot, w, timeout=120000):
    """Until the engine has nothing in flight (a background baseline included)."""
    qtbot.waitUntil(lambda: w.controller.idle, timeout=timeout)


def says_the_truth(w) -> None:
    state = w.controller.state
    assert w.state_label.text() == status_text(state)
    want = enabled_actions(state)
    assert {n: a.isEnabled() for n, a in w.lifecycle_actions().items()} == {n: want[n] for n in w.lifecycle_actions()}


@pytest.mark.parametrize("method", METHODS)
def test_one_cycle_of_each_method_is_shown_by_every_panel(qtbot, window, method, capfd):
    w = window
    rp = w.run_panel
    rp.method.setCurrentIndex(rp.method.findData(method))
    assert rp.method.currentData() == method
    says_the_truth(w)
    w.controller.step()
    qtbot.waitUntil(lambda: w.model.n_cycles == 1, timeout=120000)
    settle(qtbot, w)
    says_the_truth(w)
    assert w.controller.state.phase == "ready"
    rec, info = w.model.record, w.model.source.info
    assert info.method == method and rec is not None and rec.index == 0
    # Every panel shows this method's cycle 0.
    assert w.windowTitle().startswith(f"SpecViz — {method} · live · cycle 0")
    assert f"{method} · cycle 0" in w.info_label.text()
    assert_panels_show(w, rec)  # tree, mask, KV cache, why, charts: read back against the record
    assert w.timeline.label.text() == "cycle 0 · 1 cycle"
    shown = [t for t, c, _ in w.output.shown_tokens() if c == 0]
    assert shown == list(rec.committed_ids)
    # A second cycle: every panel moves on with it.
    w.controller.step()
    qtbot.waitUntil(lambda: w.model.n_cycles == 2 or w.controller.state.phase == "finished", timeout=120000)
    settle(qtbot, w)
    says_the_truth(w)
    assert w.model.index == w.model.n_cycles - 1
    assert_panels_show(w, w.model.record)
    assert capfd.readouterr().err == "", "nothing on standard error"


def test_every_panel_exports_and_the_window_reads_at_every_size(qtbot, window, tmp_path, capfd):
    w = window
    w.controller.step()
    qtbot.waitUntil(lambda: w.model.n_cycles == 1, timeout=120000)
    settle(qtbot, w)  # a cycle is shown before its job ends; Step while busy does nothing, as the disabled button says
    w.controller.step()
    qtbot.waitUntil(lambda: w.model.n_cycles == 2, timeout=120000)
    settle(qtbot, w)
    for name in (*PANELS, "window"):
        for suffix in (".png", ".svg"):
            out = w.export.panel(name, tmp_path / f"{name}{suffix}")
            assert out.exists() and out.stat().st_size > 500, out
    n = w.export.csv(tmp_path / "cycles.csv")
    with open(tmp_path / "cycles.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert n == len(rows) == 2 and [r["cycle"] for r in rows] == ["0", "1"]
    for size in ((1100, 700), (2560, 1440)):
        w.resize(*size)
        w.dock_layout.proportion_docks()
        qtbot.wait(50)
        assert w.tree.isVisible() and w.tree.width() > 300, size
        says_the_truth(w)
    w.dock_layout.toggle_presentation()
    try:
        assert w.presentation_action.isChecked() and not w.docks["mask"].isVisible()
        says_the_truth(w)
        img = w.grab().toImage()
        assert not img.isNull() and img.width() >= 1000
    finally:
        w.dock_layout.toggle_presentation()
    assert capfd.readouterr().err == "", "nothing on standard error"
