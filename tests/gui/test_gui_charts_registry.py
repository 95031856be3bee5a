"""The charts registry against an expectation written here: for hand-made sessions of each kind, exactly the charts
that apply are in the grid, in the registry's order, and every registered chart is in the grid for some session.

A new chart must add its session here (the last test fails until it does)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from specviz_app.panels.charts.panel import ChartsPanel
from specviz_app.panels.charts.registry import CHARTS
from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.viewer.session_model import SessionModel

CURVE = {"n": [1, 8, 64], "ms": [20.0, 22.0, 30.0]}
SCHEDULE = {"num_assistant_tokens": 5, "candidate_length": 4, "n_matches": 1, "assistant_confidence_threshold": 0.4}


def cycles(n: int = 4, *, verified: int = 1, accepted: int = 0, mode: str = "tree", **kw: object) -> list[CycleSummary]:
    return [CycleSummary(index=i, mode=mode, n_verified=verified, n_accepted=accepted,
                         committed_ids=tuple(range(accepted + 1)), committed_kinds=("spine",) * (accepted + 1),
                         cycle_ms=30.0 + i, spine_broke_at=None, spine_continued=False, **kw) for i in range(n)]


class Source:
    """A replayed session of hand-made summaries; ``group``: the sessions of its group (STAND's samples)."""

    def __init__(self, method: str, summaries: list[CycleSummary], group: int = 0) -> None:
        self._summaries = summaries
        self.info = SimpleNamespace(method=method, model="m", device="cpu", id="s1", group_id="g" if group else "")
        self.live = False
        if group:
            infos = [SimpleNamespace(id=f"s{k}", group_id="g", tokens_per_forward=1.0 + k) for k in range(group)]
            self.recording = SimpleNamespace(sessions=lambda damaged=None: infos)

    def __len__(self) -> int:
        return len(self._summaries)

    def cycle(self, index: int) -> None:
        return None  # a record is not needed for which charts apply

    def summaries(self) -> list[CycleSummary]:
        return self._summaries


GOOSE = dict(verified=5, accepted=2, by_source={"spine": (3, 2), "branch": (2, 0)},
             depth_rank=[[1, 0, 1, 1], [2, 0, 1, 1], [1, 1, 1, 0]], state={"spine_ratio": 0.5, "ema_p_s": 0.4},
             cause="budget", headroom={"*": 3, "spine": 3}, timings_ms={"draft": 2.0, "forward": 20.0})

#: (method, cycles, cost curve, samples in the group) -> the charts in the grid, in order, as the docs describe them.
SESSIONS = [
    ("ar", cycles(mode="ar"), None, 0, ["tau", "tps"]),
    # plain decoding: no stop causes (it drafts nothing), but its timings and the curve apply
    ("ar", cycles(mode="ar", cause="not_offered", timings_ms={"forward": 20.0}), CURVE, 0,
     ["tau", "tps", "why", "cost"]),
    ("pld", cycles(verified=4, accepted=2, by_source={"ngram": (3, 2)}), None, 0,
     ["tau", "sources", "tps", "positions"]),
    ("goose", cycles(**GOOSE), None, 0,
     ["tau", "sources", "tps", "heat", "why", "causes", "headroom", "positions", "spine"]),
    ("goose", cycles(**GOOSE), CURVE, 0,
     ["tau", "sources", "tps", "heat", "why", "causes", "headroom", "positions", "cost", "spine"]),
    ("goose", cycles(), None, 0, ["tau", "tps", "spine"]),  # Goose's spine chart even before a ratio is recorded
    ("tr", cycles(state={"spine_ratio": 0.5}), None, 0, ["tau", "tps", "spine"]),
    ("talon", cycles(), None, 0, ["tau", "tps", "delta"]),
    ("tr", cycles(state={"draft_steps": 3}), None, 0, ["tau", "tps", "delta"]),
    ("hf_assisted", cycles(verified=4, accepted=1, state=SCHEDULE), None, 0,
     ["tau", "schedule", "tps", "positions"]),
    ("tr", cycles(state=SCHEDULE), None, 0, ["tau", "tps"]),  # not transformers' schedule
    ("stand", cycles(), None, 3, ["tau", "samples", "tps"]),
    ("stand", cycles(), None, 1, ["tau", "tps"]),  # a group of one: nothing to compare
]


@pytest.fixture
def panel(qtbot):
    w = ChartsPanel(SessionModel())
    qtbot.addWidget(w)
    w.resize(1200, 900)
    w.show()
    qtbot.waitExposed(w)
    return w


@pytest.mark.parametrize("method, summaries, curve, group, want", SESSIONS)
def test_the_charts_that_apply_are_in_the_grid_and_no_other(panel, method, summaries, curve, group, want):
    panel.model.open(Source(method, summaries, group), cost_curve=curve)
    panel.flush()
    assert panel.shown == want
    grid = panel.glw.ci.layout
    in_grid = {grid.itemAt(i) for i in range(grid.count())}
    for cls in CHARTS:
        chart = panel.chart(cls.name)
        assert isinstance(chart, cls)
        if cls.name in want:
            assert chart.isVisible() and chart in in_grid and chart.width() > 50, cls.name
        else:
            assert not chart.isVisible() and chart not in in_grid, cls.name
    # Each shown chart can be seen alone, and all again.
    for name in want:
        panel.set_solo(name)
        assert [c.name for c in panel.plots if c.isVisible()] == [name]
    panel.set_solo(None)
    assert [c.name for c in panel.plots if c.isVisible()] == want


def test_every_registered_chart_is_shown_for_some_session():
    names = [cls.name for cls in CHARTS]
    assert len(set(names)) == len(names), "two charts of one name"
    assert set(names) == {name for *_, want in SESSIONS for name in want}
    # the order of the grid, as the panel has always shown it
    assert names == ["tau", "schedule", "samples", "sources", "tps", "heat", "why", "causes", "headroom", "positions",
                     "cost", "spine", "delta"]
    assert {cls.name for cls in CHARTS if cls.wide} == {"tau", "tps", "why"}
    assert {cls.name for cls in CHARTS if cls.per_cycle} == {"tau", "tps", "sources", "spine", "delta", "why",
                                                             "schedule"}
