"""One truth for every figure (issue 51): a session's tokens/s, tokens per forward and speed-ups are the same in every
face that shows them, each computed here by hand from the recorded cycles; a recorded session's estimates use the
cost curve it was decided with, whatever this machine measures later; a cycle that ran no forward claims no
speed-up; and "N of M drafted" counts what the cycle's tree holds."""

from __future__ import annotations

import io
import json
import sqlite3

import pytest

from specviz_core.analysis.compare import compare
from specviz_core.analysis.metrics import speedup, tokens_per_forward, tokens_per_s
from specviz_core.analysis.race import make_race
from specviz_core.analysis.stop_cause import budget_note
from specviz_core.analysis.timing import CostCurve, cycle_cost, session_cost
from specviz_core.recording.export import export_jsonl
from specviz_core.recording.store import Recording
from specviz_core.runtime.cost_files import FORMAT_VERSION, load_cost_curve, save_cost_curve
from specviz_core.session.session import Session
from specviz_core.session.spec import check_method, spec_for
from specviz_core.viewer.sources import CURVE_OF_MACHINE, CURVE_RECORDED, session_curve

PROMPT = [5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 5, 6, 7, 8, 5, 6]
SIZES = [1, 2, 4, 8, 16, 32, 64]


def store_curve(model, scale: float = 1.0) -> dict:
    """This machine's verify-cost curve for ``model``, as the cost-curve measurement keeps it."""
    curve = {"version": FORMAT_VERSION, "model": model.name, "device": str(model.device), "dtype": "float32",
             "n": SIZES, "ms": [scale * (2.0 + 0.1 * n) for n in SIZES], "reps": 1, "threads": 1}
    save_cost_curve(curve)
    assert load_cost_curve(model.name, model.device, model.dtype)["ms"] == curve["ms"]
    return curve


def record(rec: Recording, model, method: str) -> tuple[str, list]:
    """A session of ``method`` recorded to ``rec``; its id and its cycles' summaries as decoded."""
    params = {"budget": "paper"} if method != "ar" else {}
    run = Session(spec_for(check_method(method, params), PROMPT, max_new_tokens=24), model, recording=rec)
    cycles = list(run.run())
    return run.info.id, cycles


@pytest.fixture
def recorded(tmp_path, tiny, one_thread):
    store_curve(tiny)
    with Recording(tmp_path / "r.db", create=True) as rec:
        ar_id, ar_cycles = record(rec, tiny, "ar")
        goose_id, goose_cycles = record(rec, tiny, "goose")
    return tmp_path / "r.db", ar_id, ar_cycles, goose_id, goose_cycles


def by_hand(cycles) -> tuple[float, float]:
    """tokens/s (tokens over every recorded stage's time summed, the prefill not counted) and tokens per forward (a
    cycle served from the prefill's last row ran none), from the records themselves."""
    records = [c.record for c in cycles]
    tokens = sum(len(r.committed_ids) for r in records)
    ms = sum(sum(r.timings_ms.values()) for r in records)
    forwards = sum(1 for r in records if not r.state.get("from_prefill"))
    return 1000.0 * tokens / ms, tokens / forwards


def test_every_face_gives_one_tokens_per_s_tau_and_speed_up(recorded):
    db, ar_id, ar_cycles, goose_id, goose_cycles = recorded
    tps, tau = by_hand(goose_cycles)
    ar_tps, _ = by_hand(ar_cycles)
    with Recording(db, read_only=True) as rec:
        info, ar = rec.session(goose_id), rec.session(ar_id)
        sums, ar_sums = rec.cycle_summaries(goose_id), rec.cycle_summaries(ar_id)
        out = io.StringIO()
        export_jsonl(rec, goose_id, out)
    live = [c.summary for c in goose_cycles]
    # The session row (``sessions``, the Run panel's list), the metrics of the live summaries (Session.summary(), the
    # charts) and of the stored ones (a replay), and the export.
    assert info.tokens_per_s == pytest.approx(tps, rel=1e-9)
    assert tokens_per_s(live) == pytest.approx(tps, rel=1e-9)
    assert tokens_per_s(sums) == pytest.approx(tps, rel=1e-9)
    assert json.loads(out.getvalue().splitlines()[0])["tokens_per_s"] == pytest.approx(tps, rel=1e-9)
    assert info.tokens_per_forward == pytest.approx(tau) and tokens_per_forward(sums) == pytest.approx(tau)
    # The measured speed-up against the AR session: compare's row and the race at the finish.
    want = tps / ar_tps
    comparison = compare([(ar, ar_sums), (info, sums)])
    assert comparison.rows()[1]["speedup"] == pytest.approx(want, rel=1e-9)
    assert comparison.rows()[1]["tokens_per_s"] == pytest.approx(tps, rel=1e-9)
    assert speedup(info.tokens_per_s, ar.tokens_per_s) == pytest.approx(want, rel=1e-9)
    race = make_race(comparison.sessions)
    assert race.final_speedups()[1] == pytest.approx(want, rel=1e-9)


def test_a_replay_estimates_with_the_curve_the_session_was_decided_with(recorded, tiny):
    db, _, _, goose_id, _ = recorded
    with Recording(db, read_only=True) as rec:
        info, sums = rec.session(goose_id), rec.cycle_summaries(goose_id)
    curve, where = session_curve(info)
    assert where == CURVE_RECORDED and curve["ms"] == [2.0 + 0.1 * n for n in SIZES]
    before = session_cost(sums, CostCurve.from_dict(curve))
    store_curve(tiny, scale=3.0)  # this machine measures its curve again (a bench, Measure cost curve)
    curve2, where2 = session_curve(info)
    after = session_cost(sums, CostCurve.from_dict(curve2))
    assert (where2, curve2) == (where, curve)
    assert (after.headline, after.sentence) == (before.headline, before.sentence)
    # A session recorded before sessions kept their curve uses this machine's, and says so.
    with sqlite3.connect(db) as con:
        stats = json.loads(con.execute("SELECT stats FROM sessions WHERE id = ?", (goose_id,)).fetchone()[0])
        stats.pop("cost_curve")
        con.execute("UPDATE sessions SET stats = ? WHERE id = ?", (json.dumps(stats), goose_id))
    with Recording(db, read_only=True) as rec:
        old = rec.session(goose_id)
    # (the recording names the model by a reference any machine resolves: the curve kept under that name)
    save_cost_curve({**load_cost_curve(tiny.name, tiny.device, tiny.dtype), "model": old.model})
    curve3, where3 = session_curve(old)
    assert where3 == CURVE_OF_MACHINE and curve3["ms"] == [3.0 * (2.0 + 0.1 * n) for n in SIZES]


def test_a_cycle_with_no_forward_of_its_own_claims_no_speed_up(recorded):
    db, _, _, goose_id, goose_cycles = recorded
    first = goose_cycles[0].record
    assert first.state.get("from_prefill"), "Goose's official first cycle takes its token from the prefill"
    curve = CostCurve.from_dict({"n": SIZES, "ms": [2.0 + 0.1 * n for n in SIZES]})
    cost = cycle_cost(first, curve)
    assert cost.speedup is None and "no speed-up claimed" in cost.sentence and "x plain decoding" not in cost.sentence
    later = next(c.record for c in goose_cycles[1:] if c.record.n_verified > 1)
    assert cycle_cost(later, curve).speedup > 0


def test_the_budgets_sentence_counts_the_nodes_the_tree_shows():
    b = {"chosen": 23, "candidates": 49, "paper": 60, "expected_tokens": 2.0, "expected_ms": 80.0}
    assert "23 of 95 drafted nodes verified" in budget_note(b, drafted=95)
    assert "23 of 49 drafted nodes verified" in budget_note(b)  # an older caller: the candidates it chose among
