"""Why slower than plain decoding: the time arithmetic against numbers computed here from the records' timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import make_session
from specviz_core.analysis.timing import cycle_cost, session_cost
from specviz_core.engine.cost_curve import measure_cost_curve
from specviz_core.recording.store import Recording, new_session_id
from specviz_core.records import SessionInfo
from specviz_core.runtime.cost_files import load_cost_curve, save_cost_curve

PROMPT = [3, 4, 5, 6, 3, 4, 5, 6, 3, 4]


def line(rows: float) -> float:
    """A stand-in cost curve: 10 ms plus 0.5 ms a row."""
    return 10.0 + 0.5 * rows


@pytest.fixture(scope="module")
def recorded(tiny, tmp_path_factory):
    path = tmp_path_factory.mktemp("slowdown") / "s.db"
    info = SessionInfo(id=new_session_id(), model="tiny", tokenizer="tiny", method="tr", params={},
                       prompt_ids=tuple(PROMPT), prompt_text="", temperature=0.0, seed=0, device="cpu",
                       dtype="float32", max_new_tokens=40)
    with Recording(path, create=True) as rec:
        run = make_session(tiny, "tr", PROMPT, 40, recording=rec, info=info)
        list(run.run())
    with Recording(path, read_only=True) as rec:
        records = list(rec.cycles(info.id))
        summaries = rec.cycle_summaries(info.id)
    assert any(r.n_accepted for r in records), "the session must accept something for the test to mean anything"
    return records, summaries


def context_curve():
    """:func:`line` measured on a 256-token cache, with what a longer cache adds per token: 0.002 ms at 1 row,
    0.02 at 64 (interpolated between)."""
    from specviz_core.analysis.timing import CostCurve

    sizes = (1, 2, 4, 8, 16, 32, 64)
    return CostCurve(sizes, tuple(line(n) for n in sizes), cache_len=256, context_n=(1, 64), context_ms=(0.002, 0.02))


def at(rows: int, context: int) -> float:
    """:func:`context_curve`'s forward by its definition: the line, plus the extra per cached token interpolated in
    the rows, never below half the line."""
    return max(0.5 * line(rows), line(rows) + (context - 256) * (0.002 + (0.02 - 0.002) * (rows - 1) / 63))


def accepted_within(r, b: int) -> int:
    """The accepted nodes ``r`` keeps when its tree is cut to its first ``b`` verified nodes (the root's row and b
    more): the path up to its first node cut."""
    kept = set(r.verify_order[: b + 1])
    n = 0
    while n < len(r.accepted_path) and r.accepted_path[n] in kept:
        n += 1
    return n


def hindsight(records, t_ar):
    """Per budget b: (tokens, ms) summed over cycles with every tree cut to its first b verified nodes."""
    top = max(r.n_verified for r in records) - 1
    out = {}
    for b in range(1, top + 1):
        tokens = ms = 0.0
        for r in records:
            n = accepted_within(r, b)
            t = r.timings_ms
            tokens += n + 1
            ms += sum(t.values()) - t["forward"] + line(min(b + 1, r.n_verified))
        out[b] = (tokens, ms)
    return out


def test_the_cycle_sentence_is_the_paper_arithmetic(recorded):
    records, _ = recorded
    t_ar = line(1)
    checked = 0
    for r in records:
        if r.n_verified < 2:
            continue
        t = r.timings_ms
        total = sum(t.values())
        tau = len(r.committed_ids)
        speedup = tau * t_ar / total
        c = cycle_cost(r, line)
        assert f"{r.n_verified}-row verify took {t['forward']:.1f} ms = {t['forward'] / t_ar:.1f}x" in c.sentence
        assert f"the cost curve says {line(r.n_verified) / t_ar:.1f}x" in c.sentence
        assert f"{tau} / {total / t_ar:.2f} = {speedup:.2f}x plain decoding" in c.sentence
        assert c.speedup == pytest.approx(speedup)
        # In hindsight: this one cycle's tree cut to its best budget (ties go to the smaller budget).
        best = max(hindsight([r], t_ar).items(), key=lambda kv: (kv[1][0] * t_ar / kv[1][1], -kv[0]))
        b, (tok, ms) = best
        assert f"cut to its first {b} node" in c.sentence and f"predicts {tok * t_ar / ms:.2f}x" in c.sentence
        checked += 1
    assert checked


def test_hindsight_prices_each_cycle_over_its_own_cache(recorded):
    """A cycle over a 2,048-token cache: every row costs what the curve measured a longer cache to add, the 1-token
    forward of the unit too, so the hindsight budget is the one best at that length (computed here by hand)."""
    from dataclasses import replace

    records, _ = recorded
    curve = context_curve()
    r = max((r for r in records if r.n_verified > 2 and r.accepted_path), key=lambda r: r.n_verified)
    for context in (256, 2048):
        c = cycle_cost(replace(r, cache_len=context), curve)
        t = r.timings_ms
        other = sum(t.values()) - t["forward"]
        best = None
        for b in range(1, r.n_verified):
            x = (accepted_within(r, b) + 1) * at(1, context) / (other + at(b + 1, context))
            if best is None or x > best[0] + 1e-12:
                best = (x, b)
        assert c.best_budget == best[1] and c.best_speedup == pytest.approx(best[0])
        assert c.curve_ms == pytest.approx(at(r.n_verified, context))


def test_a_sessions_sums_price_each_cycle_over_its_own_cache(recorded):
    """The session's figures from the summaries read back from the recording: each cycle's forward and its
    1-token unit read where the curve measured a longer cache to add, at the cycle's cache (the record's, which the
    summary carries), computed here cycle by cycle from the records. A long prompt (every cache moved 1,800
    tokens on) makes every row dearer and the best budget smaller, as budget=auto chooses. Every cycle's host work
    is set to the same 10 ms (in record and summary alike), so that what the trees show does not depend on how fast
    the machine that recorded them was."""
    from dataclasses import replace

    records, summaries = recorded
    assert [s.cache_len for s in summaries] == [r.cache_len for r in records]
    host = {"forward": 10.0, "walk": 10.0}
    records = [replace(r, timings_ms=host) for r in records]
    summaries = [replace(x, timings_ms=host, cycle_ms=sum(host.values())) for x in summaries]
    curve = context_curve()
    def best_of(records):
        top = max(r.n_verified for r in records) - 1
        points = []
        for b in range(1, top + 1):
            value = ms = 0.0
            for r in records:
                value += (accepted_within(r, b) + 1) * at(1, r.cache_len)
                ms += sum(r.timings_ms.values()) - r.timings_ms["forward"] + at(min(b + 1, r.n_verified), r.cache_len)
            points.append((value / ms, b))
        return max(points, key=lambda p: (p[0], -p[1]))

    bests = []
    for shift in (0, 1800):
        moved = [replace(r, cache_len=r.cache_len + shift) for r in records]
        s = session_cost([replace(x, cache_len=x.cache_len + shift) for x in summaries], curve)
        value = sum(len(r.committed_ids) * at(1, r.cache_len) for r in moved)
        ms = sum(sum(r.timings_ms.values()) - r.timings_ms["forward"] + at(r.n_verified, r.cache_len) for r in moved)
        assert s.curve_speedup == pytest.approx(value / ms)
        x, b = best_of(moved)
        assert s.best is not None and s.best.budget == b and s.best.speedup == pytest.approx(x)
        bests.append(b)
    assert bests[1] < bests[0], "a long cache makes rows dearer: the recorded trees must show it"


def test_a_given_ar_time_is_the_unit(recorded):
    records, summaries = recorded
    r = next(r for r in records if r.n_verified > 1)
    c = cycle_cost(r, None, 25.0)
    assert f"{len(r.committed_ids) * 25.0 / sum(r.timings_ms.values()):.2f}x plain decoding" in c.sentence
    assert "cost curve" not in c.sentence
    # A summary read from the recording carries the same timings as its record.
    assert cycle_cost(summaries[r.index], line).sentence == cycle_cost(r, line).sentence


def test_the_session_sentence_and_best_budget(recorded):
    """The measured figures in units of a 1-token forward at the session's own pace (the median of its forwards
    over the curve's for the same rows: the tiny model's forwards run far faster than the stand-in curve, as a
    busy machine's run slower); the curve's predictions in the curve's own unit."""
    records, summaries = recorded
    timed = [r for r in records if not r.state.get("from_prefill")]
    ratios = sorted(r.timings_ms["forward"] / line(r.n_verified) for r in timed)
    pace = (ratios[(len(ratios) - 1) // 2] + ratios[len(ratios) // 2]) / 2
    t_ar, u = line(1) * pace, line(1)
    tokens = sum(len(r.committed_ids) for r in records)
    ms = sum(sum(r.timings_ms.values()) for r in records)
    forward = sum(r.timings_ms["forward"] for r in records) / len(records)
    s = session_cost(summaries, line)
    assert s.cycles == len(records) and s.tokens == tokens
    assert f"costs {forward / t_ar:.1f}x a 1-token forward" in s.sentence
    assert f"{tokens / len(timed):.2f} tokens per forward" in s.sentence  # the session's own tokens/forward
    assert f"= {tokens * t_ar / ms:.2f}x" in s.sentence
    curve_ms = sum(sum(r.timings_ms.values()) - r.timings_ms["forward"] + line(r.n_verified) for r in records)
    assert f"the cost curve predicts {tokens * u / curve_ms:.2f}x for these trees" in s.sentence
    b, (tok, bms) = max(hindsight(records, u).items(), key=lambda kv: (kv[1][0] / kv[1][1], -kv[0]))
    assert s.best is not None and s.best.budget == b
    assert s.best.speedup == pytest.approx(tok * u / bms)
    assert f"budget {b}" in s.sentence and f"{tok * u / bms:.2f}x" in s.sentence


def test_a_baseline_timed_under_another_load_is_not_the_unit(recorded):
    """An AR baseline whose ms per token is more than 1.5x off this session's pace was timed under another load:
    the sentence says so and keeps the session's own pace as the unit; one at the session's pace is the unit."""
    records, summaries = recorded
    paced = session_cost(summaries, line)
    far = session_cost(summaries, line, paced.ar_forward_ms * 40, "the AR baseline")
    assert far.ar_forward_ms == pytest.approx(paced.ar_forward_ms)
    assert "ran" in far.ar_source and "under another load, so it is not the unit" in far.sentence
    near = session_cost(summaries, line, paced.ar_forward_ms * 1.2, "the AR baseline")
    assert near.ar_forward_ms == pytest.approx(paced.ar_forward_ms * 1.2) and near.ar_source == "the AR baseline"


def test_old_recordings_without_accepted_rows_get_no_budget(recorded):
    from dataclasses import replace

    _, summaries = recorded
    s = session_cost([replace(x, accepted_rows=None) for x in summaries], line)
    assert s.best is None and not s.budgets and "no budget prediction" in s.sentence


_LOAD = ("import json; from specviz_core.runtime.cost_files import load_cost_curve as L; "
         "print(json.dumps([L('tiny', 'cpu', 'float32'), L('other', 'cpu', 'float32'), "
         "L('tiny', 'cuda:0', 'float32'), L('tiny', 'cpu', 'float16')]))")


def test_a_stored_curve_is_found_again_after_a_restart_for_the_same_model_and_device_only(tiny, tmp_path,
                                                                                           monkeypatch):
    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    curve = measure_cost_curve(tiny, sizes=(1, 4, 8), cache_len=16, reps=1, warmup=0)
    path = save_cost_curve(curve)
    assert path.is_relative_to(tmp_path / "data")  # kept in the data folder, which SPECVIZ_DATA moves
    out = subprocess.run([sys.executable, "-c", _LOAD], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ), check=True)
    same, other_model, other_device, other_dtype = json.loads(out.stdout)
    assert same is not None and same["n"] == [1, 4, 8] and same["ms"] == curve["ms"]
    assert other_model is None and other_device is None and other_dtype is None
    assert load_cost_curve("tiny", "cpu", "float32")["ms"] == curve["ms"]


def test_a_sessions_own_plain_forwards_are_its_unit(recorded):
    """With three or more plain cycles of its own, a session's 1-token forward is their median forward, measured under
    its own load: an AR cycle of it then comes out near 1x plain decoding, whatever the curve's shape says of its
    big blocks. With two, the curve at the session's pace stands in; an AR baseline at the same load is the unit."""
    from dataclasses import replace

    _, summaries = recorded
    trees = [s for s in summaries if s.n_verified > 1 and s.timings_ms.get("forward")]

    def plain(i: int, ms: float):
        return replace(trees[0], index=1000 + i, n_verified=1, n_accepted=0, committed_ids=(7,), accepted_rows=(),
                       state={}, timings_ms={"forward": ms, "walk": 1.0})

    forwards = [60.0, 40.0, 55.0]
    with_three = trees + [plain(i, ms) for i, ms in enumerate(forwards)]
    cost = session_cost(with_three, line)
    assert cost.ar_forward_ms == pytest.approx(55.0) and "own plain cycles" in cost.ar_source
    ar_cycle = cycle_cost(with_three[-1], line, cost.ar_forward_ms)
    assert ar_cycle.speedup == pytest.approx(55.0 / 56.0)  # its forward at the unit, plus 1 ms of bookkeeping
    two = session_cost(trees + [plain(i, ms) for i, ms in enumerate(forwards[:2])], line)
    assert "at this session's pace" in two.ar_source
    baseline = session_cost(with_three, line, 58.0, "the AR baseline", 57.0)
    assert baseline.ar_forward_ms == 58.0 and baseline.ar_source == "the AR baseline"
    far = session_cost(with_three, line, 580.0, "the AR baseline", 570.0)
    assert far.ar_forward_ms == pytest.approx(55.0) and "under another load" in far.ar_source
