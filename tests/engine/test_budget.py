"""budget=auto: the chooser's argmax, the controller's pruning, its statistics, and losslessness."""

from __future__ import annotations

import itertools

import pytest

from helpers import hf_greedy, make_engine, tree_record
from specviz_core.analysis.stop_cause import budget_note
from specviz_core.analysis.timing import CostCurve
from specviz_core.drafters import METHODS
from specviz_core.engine.acceptance import DECAY, AcceptanceStats
from specviz_core.engine.budget import (
    BudgetController,
    CycleTimeModel,
    choose_budget,
    split_auto,
    wants_auto,
)
from specviz_core.engine.cost_curve import measure_cost_curve
from specviz_core.errors import SpecVizError
from specviz_core.runtime.cost_files import load_cost_curve, save_cost_curve
from specviz_core.tree import DraftTree

# A CPU-like curve: a 64-row forward costs about 3x a 1-row one (DESIGN.md section 6).
CURVE = {"n": [1, 16, 32, 64, 128], "ms": [66.0, 106.0, 138.0, 192.0, 330.0]}


def brute_force_best(p_chain: list[float], curve: dict) -> int:
    """Independent argmax over chain lengths b: (1 + sum_{d<=b} prod_{i<=d} p_i) / ms(b + 1), linear interpolation."""
    def ms(rows: float) -> float:
        n, t = curve["n"], curve["ms"]
        for (x0, y0), (x1, y1) in zip(zip(n, t), zip(n[1:], t[1:])):
            if rows <= x1:
                return y0 + (y1 - y0) * (rows - x0) / (x1 - x0)
        return t[-1] + (t[-1] - t[-2]) * (rows - n[-1]) / (n[-1] - n[-2])

    rates = []
    for b in range(len(p_chain) + 1):
        acc = 0.0
        prod = 1.0
        for d in range(b):
            prod *= p_chain[d]
            acc += prod
        rates.append((1 + acc) / ms(b + 1))
    return max(range(len(rates)), key=lambda b: (rates[b], -b))


@pytest.mark.parametrize("p_chain", [
    [0.95] * 30,            # a reliable spine: a long chain pays
    [0.6, 0.5, 0.4, 0.3],   # a weak draft: a short one
    [0.05] * 10,            # nothing pays: AR (b = 0)
    [0.9, 0.9, 0.1, 0.9, 0.9, 0.9, 0.9, 0.9],
])
def test_choose_budget_is_the_argmax_on_a_synthetic_curve(p_chain):
    assert chain_choice(p_chain, CURVE) == brute_force_best(p_chain, CURVE)


def chain_choice(p_chain: list[float], curve: dict) -> int:
    """What ``choose_budget`` keeps of a chain with these acceptances, on this curve."""
    c = CostCurve.from_dict(curve)
    expected = [1.0]
    prod = 1.0
    for p in p_chain:
        prod *= p
        expected.append(expected[-1] + prod)
    return choose_budget(expected, [c(k + 1) for k in range(len(expected))])


def test_cost_curve_interpolates_and_keeps_the_measured_bumps():
    c = CostCurve.from_dict({"n": [1, 8, 4, 16], "ms": [10.0, 14.0, 16.0, 20.0]})  # 4 rows dearer than 8
    assert c.n == (1, 4, 8, 16) and c.ms == (10.0, 16.0, 14.0, 20.0)
    assert c(1) == 10.0 and c(2) == pytest.approx(12.0) and c(6) == pytest.approx(15.0) and c(12) == pytest.approx(17.0)
    assert c(24) == pytest.approx(26.0)  # the last slope continues


# The default model's curve on a 2-core EPYC, one thread (1-row units), and what a 2,048-token cache adds: measured.
LONG = {"n": [1, 2, 4, 8, 16, 32, 64], "ms": [1.0, 1.54, 1.73, 1.63, 1.77, 2.30, 3.17], "cache_len": 256,
        "context": {"n": [1, 2, 4, 8, 16, 32, 64],
                    "ms_per_token": [0.0, 0.32 / 1792, 0.39 / 1792, 0.56 / 1792, 0.79 / 1792, 0.87 / 1792,
                                     1.61 / 1792]}}


def test_a_longer_cache_makes_rows_dearer_as_measured():
    """``at(rows, context)``: the measured curve plus each cached token beyond its own cache's measured cost at that
    size, linear in the tokens (the attention reads each once) and between the measured sizes."""
    c = CostCurve.from_dict(LONG)
    assert c.at(16, None) == c(16) == 1.77 and c.at(16, 256) == pytest.approx(1.77)
    assert c.at(16, 2048) == pytest.approx(1.77 + 0.79) and c.at(1, 2048) == pytest.approx(1.0)
    assert c.at(12, 2048) == pytest.approx(1.70 + (0.56 + 0.79) / 2)  # halfway between 8 and 16, both terms
    assert c.at(64, 256 + 2 * 1792) == pytest.approx(3.17 + 2 * 1.61)
    assert c.at(64, 0) >= 0.5 * c(64)  # a cache shorter than the measured one saves some attention, not all
    assert CostCurve.from_dict(CURVE).at(16, 4096) == CostCurve.from_dict(CURVE)(16)  # measured without: as it is


def test_what_a_longer_cache_adds_is_measured_per_size(tiny, one_thread):
    """Each size timed on a short and a long cache; the entry a curve stores, and reads back; none where the
    model's context leaves no room for a longer cache."""
    from specviz_core.engine.cost_curve import measure_context_cost

    d = measure_context_cost(tiny, sizes=(1, 8), cache_len=16, long_len=96, reps=1, warmup=0)
    assert d["cache_len"] == 16 and d["long_cache_len"] == 96 and d["n"] == [1, 8] and d["reps"] == 1
    assert all(m >= 0.0 for m in d["ms_per_token"])
    c = CostCurve.from_dict({"n": [1, 8], "ms": [1.0, 2.0], "cache_len": 16, "context": d})
    assert c.context_n == (1, 8) and c.at(8, 96) == pytest.approx(2.0 + 80 * d["ms_per_token"][1])
    # timed on trees, not chains (a chain takes the model's cheaper causal path): every row sees its ancestors
    from specviz_core.engine.cost_curve import _tree_block
    from specviz_core.engine.forward import _causal

    block = _tree_block(6, tiny.vocab_size)
    assert not _causal(tiny, block) and block.parent_rows[2] == 0
    for i, p in enumerate(block.parent_rows):
        ancestors = {i}
        while p >= 0:
            ancestors.add(int(p))
            p = block.parent_rows[p]
        assert set(map(int, block.mask[i].nonzero()[0])) == ancestors and block.depths[i] == len(ancestors) - 1
    none = measure_context_cost(tiny, sizes=(1, 128), cache_len=64, long_len=2048)
    assert none["n"] == [] and CostCurve.from_dict({"n": [1], "ms": [1.0], "context": none}).context_n is None


def test_a_long_prompt_gets_a_smaller_tree():
    """The same chain of drafts, priced at a 256- and a 2,048-token cache: the controller's cycle times are the curve
    at that length, its choice the brute force's over them, and the longer cache keeps fewer nodes."""
    p_chain = [0.6, 0.5, 0.45, 0.4, 0.35, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3]
    expected = [1.0]
    for p in itertools.accumulate(p_chain, lambda a, b: a * b):
        expected.append(expected[-1] + p)
    c = CostCurve.from_dict(LONG)
    chosen = {}
    for context in (256, 2048):
        ctl = BudgetController(c, 40)
        ctl.pad = False
        ctl.draft_budget(context)
        assert ctl.time(16) == pytest.approx(c.at(16, context))
        chosen[context] = choose_budget(expected, [ctl.time(b + 1) for b in range(len(expected))])
        at = {"n": list(range(1, 66)), "ms": [c.at(n, context) for n in range(1, 66)]}
        assert chosen[context] == brute_force_best(p_chain, at)
    assert chosen[2048] < chosen[256]


def test_the_engine_prices_each_cycle_at_its_own_cache(tmp_path, monkeypatch, tiny, one_thread):
    """Where each cached token makes rows dear, a session on a long prompt verifies no draft, while the same
    session on a short prompt does: the engine gives the controller each cycle's cache length. Both decode as plain
    greedy decoding does."""
    from specviz_core.session.session import Session
    from specviz_core.session.spec import check_method, spec_for

    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    curve = measure_cost_curve(tiny, sizes=tuple(range(1, 17)) + (64,), cache_len=32, reps=1, warmup=0, context=False)
    curve["ms"] = [10.0 * (1 + 0.05 * (n - 1)) for n in curve["n"]]  # a CPU's slope, whatever this machine's load
    curve["host_ms"] = [0.1 * (1 + 0.05 * (n - 1)) for n in curve["n"]]
    # measured quiet: one measured under load is measured again by a session that finds the machine quiet, and this
    # test's curve was then the machine's (the long prompt verified drafts, in a run beside a benchmark)
    curve["load"] = 0.0
    curve["context"] = {"cache_len": 32, "long_cache_len": 1032, "n": [1, 2, 64], "ms_per_token": [0.0, 0.2, 1.0]}
    save_cost_curve(curve)
    pattern = [5, 6, 7, 8, 9, 10, 11, 12]
    verified = {}
    for name, prompt in (("short", pattern * 3), ("long", pattern * 25)):
        e = Session(spec_for(check_method("goose", {"budget": "auto"}), prompt, max_new_tokens=24), tiny).engine
        records = list(e.cycles())
        assert e.output_ids == hf_greedy(tiny, prompt, 24)
        verified[name] = sum(r.n_verified - 1 for r in records)
    assert verified["short"] > 0 and verified["long"] == 0


# A jagged CPU curve as measured on a 2-core EPYC: 3 rows cost more than 4, 7 more than 8.
JAGGED = {"n": list(range(1, 9)) + [16], "ms": [65.0, 101.0, 121.0, 93.0, 95.0, 98.0, 120.0, 96.0, 110.0]}


@pytest.mark.parametrize("p_chain", [[0.6, 0.3, 0.2, 0.1, 0.1, 0.1, 0.1], [0.9, 0.8, 0.5, 0.3, 0.3, 0.3, 0.2, 0.1]])
def test_on_a_jagged_curve_the_choice_skips_the_dear_sizes(p_chain):
    """A block of 3 rows costs more than one of 4 here: with more nodes to offer, the chooser never verifies 3 (or 7),
    and its choice is the brute-force argmax over the measured points (not a smoothed curve)."""
    b = chain_choice(p_chain, JAGGED)
    assert b == brute_force_best(p_chain, JAGGED)
    assert b + 1 not in (2, 3, 7)


def test_a_stored_curve_with_gaps_at_small_sizes_is_measured_again(tmp_path, monkeypatch, tiny):
    """Curves stored before every size up to 16 was measured hid the kernels' bumps: auto measures them again."""
    from specviz_core.engine.budget import make_controller
    from specviz_core.engine.cost_curve import DENSE_UP_TO, QUICK_SIZES, SIZES, is_dense

    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    assert set(range(1, DENSE_UP_TO + 1)) <= set(SIZES) and set(range(1, DENSE_UP_TO + 1)) <= set(QUICK_SIZES)
    save_cost_curve(measure_cost_curve(tiny, sizes=(1, 4, 16, 64), cache_len=16, reps=1, warmup=0))
    assert not is_dense(load_cost_curve("tiny", "cpu")) and make_controller(tiny, 20).prior
    save_cost_curve(measure_cost_curve(tiny, sizes=tuple(range(1, 17)), cache_len=16, reps=1, warmup=0))
    assert not make_controller(tiny, 20).prior


def test_a_cpu_curve_prices_the_threads_it_was_measured_with(tmp_path, monkeypatch, tiny):
    """On a CPU a block's rows share the cores, so a curve's shape depends on the threads: a session is priced by the
    curve measured with its own (measuring one where there is none), while a plot or a replay reads the last one
    measured. A curve stored before curves were kept per thread count is found for its own threads."""
    import torch

    from specviz_core.engine.budget import stored_curve
    from specviz_core.runtime.cost_files import curve_path

    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = measure_cost_curve(tiny, sizes=tuple(range(1, 17)), cache_len=16, reps=1, warmup=0, context=False)
        one["ms"] = [10.0 + n for n in one["n"]]
        assert one["threads"] == 1
        save_cost_curve(one)
        assert stored_curve(tiny).ms == tuple(one["ms"])
        torch.set_num_threads(2)
        assert stored_curve(tiny) is None and load_cost_curve("tiny", "cpu") == one
        two = dict(one, threads=2, ms=[5.0 + n / 2 for n in one["n"]])
        save_cost_curve(two)
        assert stored_curve(tiny).ms == tuple(two["ms"]) and load_cost_curve("tiny", "cpu") == two
        torch.set_num_threads(1)
        assert stored_curve(tiny).ms == tuple(one["ms"])
        curve_path("tiny", "cpu", threads=1).unlink()  # as an earlier version stored it: the last curve alone
        curve_path("tiny", "cpu", threads=2).unlink()
        assert stored_curve(tiny) is None  # the last one stored was measured with 2
        torch.set_num_threads(2)
        assert stored_curve(tiny).ms == tuple(two["ms"])
    finally:
        torch.set_num_threads(before)


def test_the_default_model_loaded_by_its_folder_shares_the_curve_of_default(tmp_path, monkeypatch):
    """``specviz.load()`` names the default model by its converted folder; the CLI names it ``default``: one curve."""
    from specviz_core.runtime.cost_files import curve_path
    from specviz_core.runtime.locations import default_model_folder

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    folder = default_model_folder()
    folder.mkdir(parents=True)
    assert curve_path(str(folder), "cpu") == curve_path("default", "cpu")
    assert curve_path(str(tmp_path), "cpu") != curve_path("default", "cpu")


def _tree() -> DraftTree:
    """A spine of 6 with two branches under the root and one under the first spine node."""
    t = DraftTree(root_token=1)
    t.add_chain([10, 11, 12, 13, 14, 15], "spine")
    t.add(0, 20, "branch", 0.3)
    t.add(0, 21, "branch", 0.08)
    t.add(1, 22, "branch", 0.4)
    t.add(7, 23, "branch", 0.6)
    return t


def best_subset(full: DraftTree, p: dict[str, float], cycle_ms) -> tuple[list[float], int, float]:
    """Independently: each node's path probability (the product of ``p`` by source along its path), and the size and
    rate of the best parent-closed subset of nodes, by brute force over every subset (``cycle_ms(b)``: b kept)."""
    pp = [1.0] * len(full)
    for i in range(1, len(full)):
        pp[i] = pp[full.parents[i]] * p[full.sources[i]]
    best_rate, best_b = -1.0, 0
    for b in range(len(full)):
        for subset in itertools.combinations(range(1, len(full)), b):
            s = set(subset)
            if any(full.parents[i] not in s | {0} for i in s):
                continue
            rate = (1 + sum(pp[i] for i in s)) / cycle_ms(b)
            if rate > best_rate + 1e-12:
                best_rate, best_b = rate, b
    return pp, best_b, best_rate


def test_fit_keeps_the_independently_best_nodes():
    p = {"spine": 0.8, "branch": 0.25}
    for steep in (False, True):
        curve = CostCurve.from_dict({"n": [1, 2, 64], "ms": [50.0, 100.0, 5000.0]} if steep else CURVE)
        ctl = BudgetController(curve, max_budget=60)
        ctl.stats.estimate = lambda source, score, depth: (p[source], p[source], source)
        tree = _tree()
        choice = ctl.fit(tree)
        full = _tree()
        pp, best_b, best_rate = best_subset(full, p, lambda b: curve(b + 1))
        assert choice.chosen == best_b
        kept = [i for i in range(1, len(tree)) if not tree.gated[i]]
        assert len(kept) == best_b
        assert (1 + sum(pp[i] for i in kept)) / curve(best_b + 1) == pytest.approx(best_rate)
        assert all(tree.parents[i] == 0 or tree.parents[i] in kept for i in kept)
        if steep:
            assert choice.chosen == 0 and tree.mode == "ar"


def test_optimism_counts_once_per_class_on_a_path():
    """A long spine of one class gets its optimism bonus once: mean^d x (upper / mean), not upper^d."""
    st = AcceptanceStats(decay=1.0)
    for k in range(6):  # spine runs of 12 accepted, then a break: about 12/13 per node past depth 4
        nodes = [(d, d - 1, "spine", 1.0, d, d <= 12) for d in range(1, 14)]
        st.observe(tree_record(nodes))
    ctl = BudgetController(CostCurve.from_dict(CURVE), max_budget=100)
    ctl.stats = st
    tree = DraftTree(root_token=1)
    tree.add_chain(list(range(10, 100)), "spine")
    tree.add(0, 5, "branch", 0.3)
    pp = ctl.path_probs(tree)
    # Independently: classes are depth 1, 2, 3 and 4+ (the class of depth >= 4 repeats down the chain).
    expect, seen = 1.0, set()
    for d in range(1, 91):
        mean = st.mean("spine", 1.0, d)
        upper = st.p("spine", 1.0, d)
        expect *= upper if min(d, 4) not in seen else mean
        seen.add(min(d, 4))
        assert pp[d] == pytest.approx(expect, rel=1e-9)
    assert pp[90] < 0.5 * st.p("spine", 1.0, 90) ** 87 * pp[3]  # the compounded bound would keep the chain
    assert pp[91] == pytest.approx(st.p("branch", 0.3, 1))  # the branch is a path of its own


def test_the_budget_counts_mean_tokens_while_the_optimism_only_orders():
    st = AcceptanceStats(decay=1.0)
    for k in range(3):  # little data: the optimistic estimate sits well above the mean
        st.observe(tree_record([(1, 0, "spine", 1.0, 1, k != 0), (2, 1, "spine", 1.0, 2, False),
                            (3, 0, "branch", 0.3, 1, False)]))
    ctl = BudgetController(CostCurve.from_dict(CURVE), max_budget=60)
    ctl.stats = st
    tree = _tree()
    choice = ctl.fit(tree)
    kept = [i for i in range(1, len(tree)) if not tree.gated[i]]
    assert kept and len(kept) == choice.chosen

    def mean_path(i: int) -> float:
        return 1.0 if i == 0 else mean_path(tree.parents[i]) * st.mean(tree.sources[i], tree.scores[i], tree.depths[i])

    assert choice.expected_tokens == pytest.approx(1 + sum(mean_path(i) for i in kept))
    assert sum(ctl.path_probs(_tree())[i] for i in kept) > 1.2 * sum(mean_path(i) for i in kept)  # optimism is real


def test_acceptance_stats_learn_the_measured_rate():
    st = AcceptanceStats(decay=1.0)
    assert st.mean("spine", 1.0, 1) == pytest.approx(0.85)  # the measured prior for a copy at depth 1
    assert st.p("spine", 1.0, 1) > 0.8  # optimism while there is no data
    for k in range(200):
        # depth-1 spine accepted 9 times in 10; its child (depth 2) is seen only when the parent was accepted.
        acc = k % 10 != 0
        nodes = [(1, 0, "spine", 1.0, 1, acc), (2, 1, "spine", 1.0, 2, False), (3, 0, "branch", 0.3, 1, False)]
        st.observe(tree_record(nodes))
    assert st.mean("spine", 1.0, 1) == pytest.approx(0.9, abs=0.02)
    assert st.mean("spine", 1.0, 2) < 0.05  # never accepted
    assert st.mean("branch", 0.3, 1) < 0.05
    assert st.mean("spine", 1.0, 1) < st.p("spine", 1.0, 1) < st.mean("spine", 1.0, 1) + 0.03  # little optimism left


def test_nodes_past_the_tokens_left_are_never_worth_a_row():
    """Near the token limit a node at depth >= the room left commits nothing the bonus would not: auto cuts there."""
    cheap = {"n": [1, 64], "ms": [60.0, 70.0]}
    chosen = {}
    for room in (None, 5, 1):
        tree = DraftTree(root_token=1)
        tree.add_chain(list(range(10, 30)), "spine")
        ctl = BudgetController(CostCurve.from_dict(cheap), max_budget=60)
        choice = ctl.fit(tree, room=room)
        kept = [i for i in range(1, len(tree)) if not tree.gated[i]]
        chosen[room] = choice.chosen
        assert all(tree.depths[i] < (room or 99) for i in kept) and len(kept) == choice.chosen
    assert chosen == {None: 20, 5: 4, 1: 0}


def test_auto_never_verifies_past_the_session_end(curve_cache, tiny):
    prompt = [5, 6, 7, 8, 9, 10, 11, 12] * 4
    e = make_engine(tiny, "goose", prompt, 14, budget="auto")
    out = 0
    for r in e.cycles():
        room = 14 - out
        assert max((n.depth for n in r.nodes if n.verified), default=0) < room
        out += len(r.committed_ids)
    assert e.output_ids == hf_greedy(tiny, prompt, 14)


def test_time_model_prices_from_the_curve_alone():
    """No clock: a cycle's predicted time is the curve's at the rows the block runs as, whatever was observed."""
    curve = CostCurve.from_dict(CURVE)
    tm = CycleTimeModel(curve, pad=False)
    assert [tm(r) for r in (1, 16, 40)] == [curve(1), curve(16), curve(40)]


class BusyClock:
    """A clock on a machine that gets busier and busier: each reading moves on by more than the last."""

    def __init__(self, step: float) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.step *= 1.3
        self.t += self.step
        return self.t


@pytest.mark.parametrize("method,temperature", [("goose", 0.0), ("tr", 0.8), ("stand", 0.8)])
def test_a_session_decides_the_same_however_busy_the_machine(curve_cache, tiny, one_thread, method, temperature):
    """budget=auto reads no clock: a quiet machine and one whose forwards take ever longer choose the same trees,
    and a seed fixes a sampled session's text either way."""
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 5, 6, 7] * 2
    runs = []
    for clock in (BusyClock(1e-4), BusyClock(0.05)):
        e = make_engine(tiny, method, prompt, 40, temperature=temperature, seed=7, budget="auto")
        e.clock = clock
        records = list(e.cycles())
        runs.append(([sorted(n.id for n in r.nodes if n.verified) for r in records], e.output_ids))
    assert runs[0] == runs[1]
    assert any(len(v) > 1 for v in runs[0][0])  # some cycles verified draft nodes


def test_auto_is_parsed_out_and_only_for_methods_with_a_budget():
    assert wants_auto({"budget": "auto"}) and wants_auto({"budget": " AUTO "}) and not wants_auto({"budget": "60"})
    rest, auto = split_auto("goose", METHODS["goose"].params_cls, {"budget": "auto", "top_k": "8"})
    assert auto and rest == {"top_k": "8"}
    with pytest.raises(SpecVizError, match="no budget"):
        split_auto("pld", METHODS["pld"].params_cls, {"budget": "auto"})


@pytest.fixture
def curve_cache(tmp_path, monkeypatch, tiny):
    """A curve measured and stored for the tiny model, its times (forward and host) then set to a CPU-like slope (5%
    a row): the tiny model's own forwards are nearly flat in the rows and noisy, so whether auto would keep the
    paper's trees (a flat curve) would depend on the machine's load."""
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))
    curve = measure_cost_curve(tiny, sizes=tuple(range(1, 17)) + (64,), cache_len=32, reps=1, warmup=1)
    curve["ms"] = [10.0 * (1 + 0.05 * (n - 1)) for n in curve["n"]]
    curve["host_ms"] = [0.1 * (1 + 0.05 * (n - 1)) for n in curve["n"]]  # measured host times would vary too
    curve["load"] = 0.0
    save_cost_curve(curve)
    return curve


def test_cost_curve_is_stored_for_the_gui(curve_cache, tiny):
    loaded = load_cost_curve("tiny", "cpu")
    assert loaded is not None and loaded["n"] == list(range(1, 17)) + [64] and len(loaded["ms"]) == 17
    assert loaded["device"] == "cpu" and loaded["dtype"] == "float32" and loaded["cache_len"] == 32
    assert load_cost_curve("tiny", "cuda:0") is None


@pytest.mark.parametrize("method", ["goose", "tr", "isotropic", "draft_tree"])
def test_budget_auto_is_lossless_and_recorded(curve_cache, tiny, method):
    from specviz_core.engine.budget import make_controller

    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 5, 6, 7]
    e = make_engine(tiny, method, prompt, 40)
    e.budget = make_controller(tiny, e.drafter.params.budget)
    records = list(e.cycles())
    assert e.output_ids == hf_greedy(tiny, prompt, 40)
    for r in records:
        b = r.state["budget"]
        assert r.n_verified - 1 == b["chosen"] <= b["ceiling"] <= e.drafter.params.budget
    assert e.budget.summary()["cycles"] == len(records)


def test_session_request_takes_budget_auto(curve_cache, tiny):
    from specviz_core.session.spec import SessionRequest

    choice = SessionRequest(method="goose", prompt="x", params={"budget": "auto"}).check().choice
    assert choice.auto
    assert choice.params.budget == METHODS["goose"].params_cls().budget
    with pytest.raises(SpecVizError, match="no budget"):
        SessionRequest(method="pld", prompt="x", params={"budget": "auto"}).check()


def test_a_copys_depths_are_estimated_apart_and_the_spine_kept_accordingly():
    """A spine that breaks at its first token in most cycles but runs on once past it: each depth's estimate is
    its own Beta posterior around the measured prior (not pooled with depth 1's breaks), and the controller
    keeps the chain length an independent argmax over those posteriors gives."""
    st = AcceptanceStats(decay=1.0)
    runs = [0, 0, 0, 9, 0, 12]  # spine tokens accepted per cycle, of 20 offered
    for run in runs:
        st.observe(tree_record([(d, d - 1, "spine", 1.0, d, d <= run) for d in range(1, 21)]))
    prior = {1: 0.85, 2: 0.80, 3: 0.88, 4: 0.92}
    seen = {d: [0, 0] for d in prior}  # depth class -> [accepted, tried with the parent accepted]
    for run in runs:
        for d in range(1, min(run + 1, 20) + 1):
            seen[min(d, 4)][0] += d <= run
            seen[min(d, 4)][1] += 1
    post = {d: (a + 2 * prior[d]) / (n + 2) for d, (a, n) in seen.items()}
    for d in (1, 2, 3, 4, 9):
        assert st.mean("spine", 1.0, d) == pytest.approx(post[min(d, 4)])
    assert st.mean("spine", 1.0, 1) < 0.5 < 0.85 < st.mean("spine", 1.0, 6)  # 4 of 6 broke at once; survivors ran on

    ctl = BudgetController(CostCurve.from_dict(CURVE), max_budget=100)
    ctl.stats = st
    tree = DraftTree(root_token=1)
    tree.add_chain(list(range(10, 60)), "spine")
    choice = ctl.fit(tree)
    assert choice.chosen == brute_force_best([post[min(d, 4)] for d in range(1, 51)], CURVE)
    assert choice.chosen >= 10


@pytest.mark.parametrize("method", ["goose", "isotropic", "tr", "talon", "eagle_static", "stand", "draft_tree"])
def test_every_tree_method_defaults_to_auto_and_paper_is_one_word_away(method):
    from specviz_core.session.spec import check_method

    paper = METHODS[method].params_cls().budget
    default = check_method(method, {})
    assert default.auto and default.recorded_params["budget"] == "auto" and default.params.budget == paper
    chosen = check_method(method, {"budget": "paper"})
    assert not chosen.auto and chosen.recorded_params["budget"] == paper
    fixed = check_method(method, {}, budget=8)
    assert not fixed.auto and fixed.params.budget == 8
    assert not check_method(method, {"budget": "12"}).auto


@pytest.mark.parametrize("method", ["ar", "pld", "hf_prompt_lookup"])
def test_methods_without_a_budget_take_neither_word(method):
    from specviz_core.session.spec import check_method

    assert not check_method(method, {}).auto
    with pytest.raises(SpecVizError, match="has no budget"):
        check_method(method, {"budget": "paper"})


class StepClock:
    """A clock that advances 1 ms per reading, whatever the work: every stage of every cycle takes the same time."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 0.001
        return self.t


@pytest.mark.parametrize("method", ["goose", "tr", "talon"])
def test_on_a_flat_cost_curve_auto_keeps_the_papers_trees(tiny, method, one_thread):
    """Where a forward costs the same at any size (a GPU at these sizes), auto keeps the paper's budget: every cycle
    verifies the tree that budget=paper verifies (computed without a controller)."""
    from specviz_core.engine.budget import BudgetController

    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 5, 6, 7] * 2
    paper = make_engine(tiny, method, prompt, 40, budget="paper")
    want = [sorted(n.id for n in r.nodes if n.verified) for r in paper.cycles()]
    e = make_engine(tiny, method, prompt, 40, budget="paper")
    e.clock = StepClock()
    flat = CostCurve((1, 64, 128), (20.0, 20.0, 20.0))
    e.budget = BudgetController(flat, METHODS[method].card.max_budget(e.drafter.params), paper=e.drafter.params.budget)
    got = [sorted(n.id for n in r.nodes if n.verified) for r in e.cycles()]
    assert got == want and e.output_ids == paper.output_ids == hf_greedy(tiny, prompt, 40)
    assert any(len(v) > 2 for v in want)  # trees, not only AR cycles


def test_with_no_curve_yet_the_session_set_up_measures_one_before_the_first_cycle(tmp_path, monkeypatch, tiny,
                                                                               one_thread):
    """No stored curve: building a budget=auto session measures this device's curve first (told to ``progress``,
    stored round by round), so no cycle pays for it; the next session finds it stored and measures nothing."""
    from specviz_core.session.factory import MEASURING_CURVE
    from specviz_core.session.session import Session
    from specviz_core.session.spec import check_method, spec_for

    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 5, 6, 7] * 2
    assert load_cost_curve("tiny", "cpu") is None
    said = []
    e = Session(spec_for(check_method("goose", {"budget": "auto"}), prompt, max_new_tokens=40), tiny,
                progress=lambda stage, f: said.append((stage, f))).engine
    stored = load_cost_curve("tiny", "cpu")
    assert stored is not None and stored["reps"] == 2 and stored["threads"] >= 1
    assert said[0] == (MEASURING_CURVE, 0.0) and said[-1] == (MEASURING_CURVE, 1.0) and len(said) >= 3
    assert not e.budget.prior and e.budget.summary()["curve"] == "stored"
    records = list(e.cycles())
    assert e.output_ids == hf_greedy(tiny, prompt, 40)
    assert not any("curve" in r.timings_ms for r in records)
    said.clear()
    Session(spec_for(check_method("goose", {"budget": "auto"}), prompt, max_new_tokens=8), tiny,
            progress=lambda stage, f: said.append((stage, f)))
    assert said == []
    # A short session did not pay for what a longer cache adds; the first that may reach one measures that alone
    from specviz_core.session.factory import ensure_curve

    assert "context" not in stored
    ensure_curve(tiny, lambda stage, f: said.append((stage, f)), long=True)
    assert said[0] == (MEASURING_CURVE, 0.0) and "context" in load_cost_curve("tiny", "cpu")
    assert {k: v for k, v in load_cost_curve("tiny", "cpu").items() if k != "context"} == stored


def test_a_curve_measured_under_load_is_measured_again_once_the_machine_is_quiet(tmp_path, monkeypatch, tiny,
                                                                                 one_thread):
    """Beside another job a 1-row forward slows more than a big block, so a curve measured then prices rows too
    cheaply: a session that finds the machine quiet measures it again, once, saying why; on a machine still busy the
    stored curve stands."""
    from specviz_core.engine import cost_curve
    from specviz_core.engine.cost_curve import QUICK_SIZES
    from specviz_core.runtime import threads
    from specviz_core.session.factory import MEASURING_AGAIN, ensure_curve

    monkeypatch.setattr(cost_curve, "BUSY", 1.0)  # the rule, which the suite's other tests leave off
    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    busy = measure_cost_curve(tiny, QUICK_SIZES, cache_len=16, reps=1, warmup=0, context=False)
    busy["load"] = 2.0
    save_cost_curve(busy)
    said = []
    monkeypatch.setattr(threads, "machine_load", lambda *a, **k: 3.0)  # still busy: the stored curve stands
    ensure_curve(tiny, lambda stage, f: said.append(stage))
    assert said == [] and load_cost_curve("tiny", "cpu") == busy
    monkeypatch.setattr(threads, "machine_load", lambda *a, **k: 0.0)  # quiet now: measured again, once
    ensure_curve(tiny, lambda stage, f: said.append(stage))
    again = load_cost_curve("tiny", "cpu")
    assert said and set(said) == {MEASURING_AGAIN} and again["load"] == 0.0
    assert again["measured_at"] >= busy["measured_at"]
    said.clear()
    ensure_curve(tiny, lambda stage, f: said.append(stage))
    assert said == []


def test_a_measurement_cut_short_keeps_its_timed_rounds(tmp_path, monkeypatch, tiny, one_thread):
    """Each timed round is stored as it ends: a measurement interrupted after its first is kept, and used."""
    from specviz_core.engine.cost_curve import QUICK_SIZES, ensure_device_curve

    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))

    def stop_after_first_timed_round(done: int, total: int) -> None:
        if done == 2:  # the warm-up round, then one timed round
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ensure_device_curve(tiny, stop_after_first_timed_round)
    kept = load_cost_curve("tiny", "cpu")
    assert kept is not None and kept["reps"] == 1 and kept["n"] == list(QUICK_SIZES) and "context" not in kept
    # found, not measured again: only what a longer cache adds, which the cut measurement had not reached (nothing,
    # for a model whose context, 256 tokens, has no room for a cache longer than the curve's)
    found = ensure_device_curve(tiny)
    assert {k: v for k, v in found.items() if k != "context"} == kept and found["context"]["n"] == []
    assert load_cost_curve("tiny", "cpu") == found
    said = []
    assert ensure_device_curve(tiny, lambda done, total: said.append(done)) == found and said == []


def test_until_a_curve_is_measured_auto_prices_with_a_cautious_prior(tiny, one_thread):
    """With no curve, the controller prices trees with the device's prior, not the paper's GPU budget: on a CPU a
    block of 2+ rows costs 1.5x a 1-row forward, so a draft must be likely to pay; the cycle says so."""
    from specviz_core.analysis.stop_cause import method_notes
    from specviz_core.engine.budget import PRIOR_CPU, prior_curve

    curve = prior_curve("cpu")
    assert curve(1) == 1.0 and curve(2) == PRIOR_CPU[0] + PRIOR_CPU[1] and prior_curve("cuda:0")(64) < 1.5
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 5, 6, 7] * 2
    e = make_engine(tiny, "tr", prompt, 40, budget="paper")
    e.budget = BudgetController(None, METHODS["tr"].card.max_budget(e.drafter.params), paper=e.drafter.params.budget)
    records = list(e.cycles())
    assert e.output_ids == hf_greedy(tiny, prompt, 40)
    chosen = [r.n_verified - 1 for r in records]
    assert max(chosen) < 80 and sum(chosen) / len(chosen) < 20
    said = [method_notes(r.state) for r in records if r.state.get("budget", {}).get("candidates")]
    assert said and all(any(s.startswith("Budget chosen for this device (budget=auto) from a cautious prior")
                            for s in notes) for notes in said)
    assert e.session_stats()["budget"]["curve"] == "prior"
    assert not any(r.state.get("padded_to") for r in records)  # the prior has no kernel bumps to pad to


def test_each_cycle_and_session_says_how_its_budget_was_chosen(curve_cache, tiny, one_thread):
    """The window's words for a cycle's budget come from its recorded state: chosen (so many of so many, the
    paper's beside); the session's line says the mean chosen and the paper's budget."""
    from specviz_core.analysis.metrics import budget_words
    from specviz_core.analysis.stop_cause import method_notes

    e = make_engine(tiny, "tr", [5, 6, 7, 8, 5, 6, 7, 8, 9, 10] * 3, 200, budget="auto")
    records = list(e.cycles())
    assert not e.budget.flat
    chosen = [r for r in records if r.state["budget"]["candidates"]]
    assert chosen
    for r in chosen:
        b = r.state["budget"]
        assert method_notes(r.state)[0].startswith(
            f"Budget chosen for this device (budget=auto): {r.n_verified - 1} of {b['candidates']} drafted nodes "
            "verified (the paper's budget: 80)")
    stats = e.session_stats()
    mean = sum(r.n_verified - 1 for r in records) / len(records)
    assert budget_words(stats) == f"; budget chosen for this device: {mean:.1f} nodes a cycle (the paper's 80)"


def test_under_greedy_decoding_the_nodes_auto_cut_are_counted_as_they_would_have_fared():
    """A hand-computed cycle: the root's verified child 1 (token 5) is accepted; its sibling 2 (token 7) and its
    child 3 (token 9) were cut, and 4 hangs under the cut 2. The target wanted 5 at the root (node 1's token) and 9
    after node 1 (the bonus), so greedy, 2 would have been rejected and 3 accepted; 4's parent was never reached."""
    import dataclasses

    from specviz_core.engine.acceptance import score_band

    rec = tree_record([(1, 0, "recycle", 0.5, 1, True), (2, 0, "recycle", 0.5, 1, False),
                       (3, 1, "recycle", 0.5, 2, False), (4, 2, "recycle", 0.5, 2, False)])
    tokens = {1: 5, 2: 7, 3: 9, 4: 9}
    nodes = tuple(n if n.id in (0, 1) else n.replace(verified=False, gated=True) for n in rec.nodes)
    nodes = tuple(n.replace(token=tokens.get(n.id, n.token)) for n in nodes)
    rec = dataclasses.replace(rec, nodes=nodes, accepted_path=(1,), bonus_token=9)
    band = score_band(0.5)
    greedy, sampled = AcceptanceStats(decay=1.0), AcceptanceStats(decay=1.0)
    greedy.observe(rec, greedy=True)
    sampled.observe(rec)
    assert greedy._get(("recycle", band, 1)) == (1.0, 2.0)  # node 1 accepted, node 2 would not have been
    assert greedy._get(("recycle", band, 2)) == (1.0, 1.0)  # node 3 would have been; node 4 is not counted
    assert sampled._get(("recycle", band, 1)) == (1.0, 1.0)  # sampling: only what was verified
    assert sampled._get(("recycle", band, 2)) == (0.0, 0.0)


def test_auto_prices_each_budget_as_the_padded_block_it_runs_as(tiny, one_thread):
    """On a curve with the CPU kernels' bumps, a choice of B nodes is priced at the size its block runs as (2-7 rows
    cost what 8 do), the engine runs it so (recorded as ``padded_to``), and the output is still plain greedy's.
    With padding off (``DecodeConfig.pad_rows``) both the pricing and the forward are the block's own size. (The run
    is at a fixed budget of 2: priced padded, auto itself takes the 7 nodes an 8-row block holds.)"""
    import dataclasses

    from specviz_core.analysis.stop_cause import method_notes
    from specviz_core.analysis.timing import cycle_cost, padded_rows

    # Cheap enough a row that trees pay on the tiny model's acceptance; 2-7 rows dearer than 8, as a CPU's kernels.
    bumpy = CostCurve((1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64), (10.0, 14.0, 15.0, 11.0, 11.5, 13.0, 15.0, 10.5, 12.0,
                                                              14.0, 20.0))
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 5, 6, 7] * 2
    for pad in (True, False):
        e = make_engine(tiny, "goose", prompt, 40, budget="auto")
        e.budget = BudgetController(bumpy, METHODS["goose"].card.max_budget(e.drafter.params), paper=60)
        e.budget.pad = pad
        assert e.budget.time.forward_ms(2) == pytest.approx(bumpy(8) if pad else bumpy(2))
        # The engine pads what it runs by the same curve: blocks of 3 rows (a fixed budget of 2) run as 8.
        e = make_engine(tiny, "goose", prompt, 40, budget=2)
        e.pad_curve = bumpy
        e.config = dataclasses.replace(e.config, pad_rows=pad)
        records = list(e.cycles())
        assert e.output_ids == hf_greedy(tiny, prompt, 40)
        ran = [(r.n_verified, r.state.get("padded_to")) for r in records if not r.state.get("from_prefill")]
        if pad:
            assert all(run == (padded_rows(bumpy, n) if padded_rows(bumpy, n) > n else None) for n, run in ran), ran
            assert any(run for _, run in ran), ran
            for r in records:  # the window says it, in the cycle's own numbers
                if r.state.get("padded_to"):
                    run = r.state["padded_to"]
                    said = method_notes(r.state, r.n_verified)
                    assert any(s.startswith(f"The forward ran {run} rows, {run - r.n_verified} of them padding: on "
                                            f"this device a forward of {run} rows costs less than one of "
                                            f"{r.n_verified} ") for s in said), said
                    cost = cycle_cost(r, bumpy)  # the time sentence prices what the forward ran
                    assert cost.curve_ms == bumpy(run) and f"{r.n_verified}-row verify (run as {run}, padded)" \
                        in cost.sentence
        else:
            assert not any(run for _, run in ran), ran


def test_trees_that_keep_missing_are_calibrated_down_to_plain_cycles_and_tried_again_later():
    """The estimates stay high (fixed here), but the session's trees accept nothing: the expectation is scaled by
    accepted over expected draft tokens (decayed sums, two pseudo-tokens of 1), down to an AR cycle; through AR
    cycles the sums decay and a draft is tried again."""
    p = {"spine": 0.6, "branch": 0.25}
    # a CPU's curve: a 2-row forward costs 1.4x a 1-row one
    ctl = BudgetController(CostCurve.from_dict({"n": [1, 2, 16, 64], "ms": [50.0, 70.0, 90.0, 200.0]}), max_budget=60)
    ctl.stats.estimate = lambda source, score, depth: (p[source], p[source], source)
    ctl.stats.observe = lambda record, greedy=False: None
    expected_sum, chosen = 0.0, []
    for _ in range(40):
        tree = _tree()
        choice = ctl.fit(tree)
        kept = [i for i in range(1, len(tree)) if not tree.gated[i]]
        # (the record keeps the choice to three decimals: the controller reads it back from there)
        assert choice.calibration == pytest.approx(min(1.5, max(0.05, 2.0 / (expected_sum + 2.0))), rel=2e-3)
        # Independently: the choice's expected tokens are 1 + calibration x the kept nodes' path probabilities.
        pp = [1.0] * len(tree)
        for i in range(1, len(tree)):
            pp[i] = pp[tree.parents[i]] * p[tree.sources[i]]
        assert choice.expected_tokens == pytest.approx(1 + choice.calibration * sum(pp[i] for i in kept))
        record = tree_record([(i, tree.parents[i], tree.sources[i], tree.scores[i], tree.depths[i], False)
                              for i in kept], budget=choice.as_state())
        ctl.observe(record)
        expected_sum = expected_sum * DECAY + sum(pp[i] for i in kept)
        chosen.append(choice.chosen)
    assert chosen[0] > 0 and 0 in chosen, chosen  # it drafted, then stopped
    later = chosen[chosen.index(0):]
    assert 0 < later.count(0) < len(later), f"never tried a draft again: {chosen}"


def test_a_cycles_drafting_is_weighed_with_its_forward():
    """A tree drafted in 6 steps of 0.5 forward each: the kept nodes maximise tokens over forward + drafting
    (brute force over every parent-closed subset), which keeps more of a costly draft than the forward alone would."""
    p = {"spine": 0.8, "branch": 0.25}
    curve = CostCurve.from_dict({"n": [1, 2, 16, 64], "ms": [50.0, 70.0, 90.0, 200.0]})
    for step in (0.0, 0.5):
        ctl = BudgetController(curve, max_budget=60, drafts=step > 0, draft_step=step)
        ctl.stats.estimate = lambda source, score, depth: (p[source], p[source], source)
        tree = _tree()
        tree.state = {"draft_steps": 6}
        choice = ctl.fit(tree)
        draft_ms = 6 * step * 50.0
        _, best_b, best_rate = best_subset(_tree(), p, lambda b: curve(b + 1) + draft_ms)
        assert choice.chosen == best_b and choice.draft_ms == pytest.approx(draft_ms)
        assert choice.expected_ms == pytest.approx(curve(best_b + 1) + draft_ms)
        assert choice.gain_vs_ar == pytest.approx(best_rate * 50.0)  # against a plain cycle: 1 token in 50 ms


@pytest.mark.parametrize("hoped", [0.6, 1.37])
def test_where_drafts_do_not_pay_their_drafting_cycles_are_plain_and_a_draft_is_tried_after_1_2_4_plain_cycles(hoped):
    """Drafted cycles that accept nothing, whether their choice expected a loss (0.6x) or a gain (1.37x: the best of
    optimistic estimates, as a head's probes do): what they gave is what counts, so plain cycles follow and the wait
    between two tries doubles. Drafts that pay bring them back once the tokens they gave outweigh what they cost."""
    curve = CostCurve.from_dict({"n": [1, 2, 16, 64], "ms": [50.0, 70.0, 90.0, 200.0]})
    ctl = BudgetController(curve, max_budget=60, drafts=True, draft_step=0.5)
    table = BudgetController(curve, max_budget=60)  # drafting from a table costs no model steps: never plain
    ceilings, gave, cost = [], 0.0, 0.0
    for _ in range(80):
        ceiling = ctl.draft_budget()
        ceilings.append(ceiling)
        assert table.draft_budget() > 0
        if ceiling == 0:
            state = ctl.plain().as_state()
            record = tree_record([], budget=state)
        else:  # a drafted cycle that lost: 6 steps, its node rejected
            record = tree_record([(1, 0, "head", 0.5, 1, False)], draft_steps=6,
                                 budget={"chosen": 1, "candidates": 9, "ceiling": ceiling, "expected_tokens": 1.5,
                                         "expected_ms": 220.0, "gain_vs_ar": hoped, "calibration": 1.0})
            # independently: it gave 1 token and cost 1.5 / hoped plain cycles
            gave, cost = 0.7 * gave + 1.0, 0.7 * cost + 1.5 / hoped
        ctl.observe(record)
    runs, run = [], 0
    for c in ceilings:
        if c == 0:
            run += 1
        elif run:
            runs.append(run)
            run = 0
    assert ceilings[0] > 0 and runs[:6] == [1, 2, 4, 8, 16, 32], ceilings
    assert "Budget: a plain cycle" in budget_note(ctl.plain().as_state())
    # Drafts that pay (2 tokens at 1.9 / 5 plain cycles) bring the drafts back when the sums say so.
    back = None
    for n in range(1, 6):
        ctl.observe(tree_record([(1, 0, "head", 0.5, 1, True)], draft_steps=6,
                                budget={"chosen": 1, "candidates": 9, "ceiling": 16, "expected_tokens": 1.9,
                                        "expected_ms": 90.0, "gain_vs_ar": 5.0, "calibration": 1.0}))
        gave, cost = 0.7 * gave + 2.0, 0.7 * cost + 1.9 / 5.0
        assert ctl.drafts_gain == pytest.approx(gave / cost)
        if gave / cost >= 1.0:
            back = n
            break
    assert back is not None and ctl.draft_budget() > 0


def test_a_draft_is_tried_again_only_where_the_tokens_left_could_repay_the_try_at_its_odds():
    """Drafts that never pay, in a 200-token session: a try costs at least one draft step (0.5 x 50 ms) and the
    verify's second row (70 - 50 ms), 45 ms; if drafts paid 1.1x a plain cycle (a CPU's hope), each token left would
    save 50 / 11 ms, at odds of one in the plain cycles waited. So the tries follow the waits 1, 2, 4 ... until the
    tokens left, over the wait, fall below 45 / (50 / 11) = 9.9; then every cycle is plain and says why. Each try is
    the cheapest draft: one level."""
    curve = CostCurve.from_dict({"n": [1, 2, 16, 64], "ms": [50.0, 70.0, 90.0, 200.0]})
    ctl = BudgetController(curve, max_budget=60, drafts=True, draft_step=0.5)
    n_tokens, tried, depths, states = 200, [], [], []
    for t in range(n_tokens):
        ceiling, depth = ctl.begin_cycle(room=n_tokens - t)
        if ceiling == 0:
            state = ctl.plain().as_state()
            states.append(state)
            ctl.observe(tree_record([], budget=state))
            continue
        tried.append(t)
        depths.append(depth)
        ctl.observe(tree_record([(1, 0, "head", 0.5, 1, False)], draft_steps=1,
                                budget={"chosen": 1, "candidates": 4, "ceiling": ceiling, "expected_tokens": 1.5,
                                        "expected_ms": 95.0, "gain_vs_ar": 0.8, "calibration": 1.0}))
    # independently: the waits double from 1, and a try is made only where it could repay itself
    expected, gap, waited = [0], 1, 0
    for t in range(1, n_tokens):
        if waited < gap:
            waited += 1
        elif (n_tokens - t) / gap * 50.0 * (1 - 1 / 1.1) >= 0.5 * 50.0 + 20.0:
            expected.append(t)
            gap, waited = min(2 * gap, 32), 0
    assert tried == expected and len(tried) < 8 and tried[-1] < n_tokens - 64, tried
    assert depths[0] is None and set(depths[1:]) == {1}  # the first draft: the drafter's own depth
    last = states[-1]
    assert last["try_ms"] == pytest.approx(45.0) and last["room"] == 1 and last["waited"] == gap
    note = budget_note(last)
    assert "trying one again (about 45 ms)" in note and "in the last token" in note and f"one in {gap}" in note


def test_a_drafters_step_cost_is_stored_once_from_its_first_session_and_priced_from_then_on(
        curve_cache, tiny, tmp_path):
    from test_eagle_layouts import write_checkpoint

    from specviz_core.engine.budget import PRIOR_DRAFT_STEP, make_controller
    from specviz_core.runtime.cost_files import load_draft_cost

    write_checkpoint(tmp_path / "head", "eagle", tiny.model.config, seed=5)
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 5, 6, 7]
    e = make_engine(tiny, "eagle", prompt, 40, head=str(tmp_path / "head"))
    key = e.drafter.draft_cost_key()
    assert key is not None and load_draft_cost("tiny", "cpu", None, key) is None
    e.budget = make_controller(tiny, e.drafter.params.budget, drafter_key=key)
    assert e.budget.draft_step == PRIOR_DRAFT_STEP
    records = list(e.cycles())
    assert e.output_ids == hf_greedy(tiny, prompt, 40)
    stored = load_draft_cost("tiny", "cpu", None, key)
    # Independently: the (upper) median of the first four drafted cycles' head step times, over the curve's 1-row
    # forward.
    steps = [r.state["draft_step_ms"] for r in records if r.state.get("draft_steps")][:4]
    assert len(steps) == 4 and stored == pytest.approx(sorted(steps)[2] / curve_cache["ms"][0])
    assert e.budget.draft_step == PRIOR_DRAFT_STEP  # this session kept pricing as it started
    assert make_controller(tiny, 60, drafter_key=key).draft_step == pytest.approx(stored)


def test_a_head_whose_drafts_cost_more_than_they_give_runs_plain_cycles_losslessly(curve_cache, tiny, tmp_path):
    """A stored step cost of 5 forwards: the session drafts, finds it loses, runs plain cycles (nothing drafted, no
    head step), tries again now and then, and its output is still plain greedy decoding's; a fork's re-run of its
    recorded decisions drafts exactly where it did."""
    from test_eagle_layouts import write_checkpoint

    from specviz_core.engine.budget import make_controller
    from specviz_core.runtime.cost_files import save_draft_cost

    write_checkpoint(tmp_path / "head", "eagle", tiny.model.config, seed=5)
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 5, 6, 7]
    e = make_engine(tiny, "eagle", prompt, 40, head=str(tmp_path / "head"))
    save_draft_cost("tiny", "cpu", None, e.drafter.draft_cost_key(), 5.0, 8)
    e.budget = make_controller(tiny, e.drafter.params.budget, drafter_key=e.drafter.draft_cost_key())
    records = list(e.cycles())
    assert e.output_ids == hf_greedy(tiny, prompt, 40)
    plain = [r for r in records if r.state["budget"].get("plain")]
    drafted = [r for r in records if r.state.get("draft_steps")]
    assert plain and drafted and all(r.n_verified == 1 and not r.state["draft_steps"] for r in plain)
    again = make_engine(tiny, "eagle", prompt, 40, head=str(tmp_path / "head"))
    again.reuse_decisions(records)
    replay = list(again.cycles())
    assert [r.state["budget"].get("plain", False) for r in replay] == [r.state["budget"].get("plain", False)
                                                                        for r in records]
    assert again.output_ids == e.output_ids


def test_a_session_starts_where_the_last_one_with_its_head_left_off(curve_cache, tiny, tmp_path):
    """A head whose drafts cost more than they give: the first session learns it by drafting and stores what it found
    beside the step cost; the next starts with that many plain cycles (nothing drafted, said so), so it pays for
    fewer drafts, and decodes as plain greedy decoding does. A session as short as the first does not try again at
    all (a try could not repay itself in the tokens it has left); a longer one tries after the remembered wait, with
    the cheapest draft. Where the drafts paid, the next session drafts at once."""
    from test_eagle_layouts import write_checkpoint

    from specviz_core.analysis.stop_cause import method_notes
    from specviz_core.engine.budget import make_controller
    from specviz_core.runtime.cost_files import load_draft_cost, load_draft_outcome, save_draft_cost, save_draft_outcome

    write_checkpoint(tmp_path / "head", "eagle", tiny.model.config, seed=5)
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 5, 6, 7]
    drafted, sessions = [], []
    for n_tokens in (40, 40, 200):
        e = make_engine(tiny, "eagle", prompt, n_tokens, head=str(tmp_path / "head"))
        key = e.drafter.draft_cost_key()
        if not drafted:
            save_draft_cost("tiny", "cpu", None, key, 0.5, 8)
            assert load_draft_outcome("tiny", "cpu", None, key) is None
        e.budget = make_controller(tiny, e.drafter.params.budget, drafter_key=key)
        records = list(e.cycles())
        assert e.output_ids == hf_greedy(tiny, prompt, n_tokens)
        drafted.append(sum(1 for r in records if r.state.get("draft_steps")))
        sessions.append(records)
        gain, gap = load_draft_outcome("tiny", "cpu", None, key)
        assert gain < 1.0 and gap >= 2 and load_draft_cost("tiny", "cpu", None, key) == 0.5
        if len(drafted) == 1:
            remembered_gap = gap
            assert sessions[0][0].state.get("draft_steps")  # the first session drafts at once
    # as short as the first: its wait ends too near the end for a try to repay itself, so it never drafts
    second = sessions[1]
    assert drafted[1] == 0 and all(r.n_verified == 1 for r in second)
    assert all(r.state["budget"].get("remembered") for r in second[:remembered_gap])
    assert all("try_ms" in r.state["budget"] and r.state["budget"]["waited"] == remembered_gap
               for r in second[remembered_gap:])
    assert any("last session" in n for n in method_notes(second[0].state))
    assert any("trying one again" in n for n in method_notes(second[-1].state))
    # a longer one tries after the remembered wait, and its first try is the cheapest draft: one level, a head step
    third = sessions[2]
    assert e.budget.summary()["outcome_from"] == "stored"
    assert next(i for i, r in enumerate(third) if not r.state["budget"].get("plain")) == remembered_gap
    probe = third[remembered_gap]
    assert probe.state["budget"]["depth"] == 1 and probe.state["draft_steps"] == 1
    assert max(n.depth for n in probe.nodes) == 1
    save_draft_outcome("tiny", "cpu", None, key, 1.3, 1)  # a head that paid: drafts from the first cycle
    assert make_controller(tiny, 20, drafter_key=key).draft_budget() != 0


def test_the_why_of_a_plain_cycle_says_the_budget_chose_it_and_a_drafted_one_what_its_drafting_cost():
    from specviz_core.analysis.stop_cause import method_notes

    plain = method_notes({"budget": {"chosen": 0, "candidates": 0, "ceiling": 0, "plain": True, "gain_vs_ar": 0.54}})
    assert any("a plain cycle" in n and "0.54x" in n for n in plain)
    assert method_notes({"budget": {"chosen": 0, "candidates": 0, "ceiling": 16}}) == []  # nothing drafted: no choice
    drafted = method_notes({"budget": {"chosen": 1, "candidates": 79, "ceiling": 16, "expected_tokens": 1.57,
                                       "expected_ms": 283.0, "gain_vs_ar": 0.63, "draft_ms": 170.2}})
    assert any("1 of 79" in n and "drafting 170 ms of it" in n for n in drafted)


def test_the_draft_depth_follows_what_the_choice_kept_a_level_at_a_time(curve_cache, tiny, tmp_path):
    """Where a draft step costs (a head), the depth is chosen before drafting: one level past the deepest node the
    recent cycles kept. Each drafted cycle drafts no deeper than asked and records the depth, and a fork's re-run asks
    for the recorded depth, drafting the same trees; the output stays plain greedy decoding's."""
    from test_eagle_layouts import write_checkpoint

    from specviz_core.engine.budget import make_controller
    from specviz_core.runtime.cost_files import save_draft_cost

    write_checkpoint(tmp_path / "head", "eagle", tiny.model.config, seed=5)
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 5, 6, 7]
    e = make_engine(tiny, "eagle", prompt, 40, head=str(tmp_path / "head"))
    save_draft_cost("tiny", "cpu", None, e.drafter.draft_cost_key(), 0.05, 8)  # cheap steps: it keeps drafting
    e.budget = make_controller(tiny, e.drafter.params.budget, drafter_key=e.drafter.draft_cost_key())
    own = e.drafter.params.depth
    records = list(e.cycles())
    assert e.output_ids == hf_greedy(tiny, prompt, 40)
    drafted = [r for r in records if r.state.get("draft_steps")]
    assert "depth" not in drafted[0].state["budget"]  # nothing kept yet: the drafter's own depth
    asked = [r.state["budget"]["depth"] for r in drafted[1:]]
    assert asked and min(asked) < own + 1  # the depth came down to what was kept
    for before, r in zip(drafted, drafted[1:]):
        depth = r.state["budget"]["depth"]
        assert max(n.depth for n in r.nodes) <= depth  # drafted no deeper than asked
        kept = max(n.depth for n in before.nodes if n.verified)
        assert depth <= max(asked[0], kept + 1) + 1  # one level past what recent cycles kept, not the drafter's own
    again = make_engine(tiny, "eagle", prompt, 40, head=str(tmp_path / "head"))
    again.reuse_decisions(records)
    replay = list(again.cycles())
    assert [r.state["budget"].get("depth") for r in replay] == [r.state["budget"].get("depth") for r in records]
    assert [len(r.nodes) for r in replay] == [len(r.nodes) for r in records] and again.output_ids == e.output_ids


def test_the_hosts_reduction_of_the_rows_is_measured_with_the_curve_and_priced_beside_the_forward(tiny, one_thread):
    """The curve measurement times the host's reduction of each block's rows too; the cycle time model adds it to
    the forward, and a choice over the same acceptance keeps the subset that is best with it counted (brute force)."""
    from specviz_core.engine.cost_curve import measure_cost_curve

    d = measure_cost_curve(tiny, sizes=(1, 4, 8), cache_len=16, reps=1, warmup=0)
    assert len(d["host_ms"]) == 3 and all(h > 0 for h in d["host_ms"])
    curve = CostCurve.from_dict(d)
    assert curve.host(4) == d["host_ms"][1] and curve(4) == d["ms"][1]  # the forward's own curve is unchanged
    # A device whose rows cost the host a lot: the choice weighs forward + host.
    p = {"spine": 0.8, "branch": 0.25}
    base = CostCurve.from_dict(CURVE)
    heavy = CostCurve(base.n, base.ms, tuple(0.5 * n * base.ms[0] / 10 for n in base.n))
    tm = CycleTimeModel(heavy, pad=False)
    assert tm(40) == pytest.approx(heavy(40) + heavy.host(40)) and tm(40) > CycleTimeModel(base, pad=False)(40)
    ctl = BudgetController(heavy, max_budget=60)
    ctl.time.pad = False
    ctl.stats.estimate = lambda source, score, depth: (p[source], p[source], source)
    tree = _tree()
    choice = ctl.fit(tree)
    _, best_b, _ = best_subset(_tree(), p, lambda b: heavy(b + 1) + heavy.host(b + 1))
    _, light_b, _ = best_subset(_tree(), p, lambda b: base(b + 1))
    assert choice.chosen == best_b and best_b < light_b  # the host's cost bought fewer rows


def _head_engine(tiny, tmp_path, prompt, n):
    from test_eagle_layouts import write_checkpoint

    from specviz_core.engine.budget import make_controller

    if not (tmp_path / "head").exists():
        write_checkpoint(tmp_path / "head", "eagle", tiny.model.config, seed=5)
    e = make_engine(tiny, "eagle", prompt, n, head=str(tmp_path / "head"))
    e.budget = make_controller(tiny, e.drafter.params.budget, drafter_key=e.drafter.draft_cost_key())
    return e


def test_a_catch_up_the_tokens_left_cannot_repay_leaves_the_cycle_plain(one_thread, curve_cache, tiny, tmp_path):
    """A head drafts after catching up on every committed token it has not run: at its first draft the whole prompt.
    Priced at 0.05 forwards a row (stored for this head), a 150-token prompt costs 149 x 0.05 x 10 ms = 75 ms, more
    than drafts paying 1.1x a plain cycle (a CPU's hope) would save in 8 tokens (8 x 10.1 ms / 11 = 7 ms): every
    cycle is plain, nothing drafted, and says why. With 100 tokens to go (92 ms to save) the same prompt is drafted
    on. A fork
    re-runs the plain decisions as recorded; the output is plain greedy decoding's either way."""
    import random

    from specviz_core.runtime.cost_files import save_catch_up_row

    prompt = [random.Random(3).randrange(96) for _ in range(150)]
    e = _head_engine(tiny, tmp_path, prompt, 8)
    save_catch_up_row("tiny", "cpu", None, e.drafter.draft_cost_key(), 0.05)
    e = _head_engine(tiny, tmp_path, prompt, 8)
    records = list(e.cycles())
    assert e.output_ids == hf_greedy(tiny, prompt, 8)
    committed = 0
    for r in records:
        b = r.state["budget"]
        # the head (EAGLE's layout) has no row for token 0: it would run every committed token but the first
        assert b.get("plain") and b["catch_up"] == len(prompt) + committed - 1 and b["room"] == 8 - committed
        assert b["catch_up_ms"] == pytest.approx((b["catch_up"] - 1) * 0.05 * 10.0, abs=0.05)
        assert r.n_verified == 1 and not r.state.get("draft_steps")
        committed += len(r.committed_ids)
    assert "would first have run over the 149 tokens it has not seen" in budget_note(records[0].state["budget"])
    again = _head_engine(tiny, tmp_path, prompt, 8)
    again.reuse_decisions(records)
    assert [r.n_verified for r in again.cycles()] == [1] * len(records) and again.output_ids == e.output_ids
    longer = _head_engine(tiny, tmp_path, prompt, 100)
    first = next(iter(longer.cycles()))
    assert not first.state["budget"].get("plain") and first.state.get("draft_steps")


def test_a_long_catch_up_is_timed_and_prices_the_next_sessions(one_thread, curve_cache, tiny, tmp_path, monkeypatch):
    """The first draft after a long prompt is timed (the rows and the ms, in the cycle's record); from it a catch-up
    row's cost is stored beside the head's step cost, less the step it ends in, in 1-row forwards of the curve, with
    the rows it was measured on: a later session's longer catch-up replaces it, a shorter one does not."""
    import random

    from specviz_core.drafters import draft_tree
    from specviz_core.engine import budget as budget_module
    from specviz_core.runtime.cost_files import load_catch_up_row, load_catch_up_rows, save_draft_outcome

    monkeypatch.setattr(draft_tree, "TIMED_CATCH_UP", 100)  # the tiny model's context holds 256 tokens
    prompt = [random.Random(4).randrange(96) for _ in range(150)]
    e = _head_engine(tiny, tmp_path, prompt, 20)
    key = e.drafter.draft_cost_key()
    assert load_catch_up_row("tiny", "cpu", None, key) is None and e.budget.summary()["catch_up_row_from"] == "prior"
    records = list(e.cycles())
    assert e.output_ids == hf_greedy(tiny, prompt, 20)
    timed = [r for r in records if "catch_up_rows" in r.state]
    assert len(timed) == 1 and timed[0].state["catch_up_rows"] == 149 and timed[0].state["catch_up_ms"] > 0
    want = max(timed[0].state["catch_up_ms"] / curve_cache["ms"][0] - e.budget.draft_step, 0.0) / 148
    assert load_catch_up_row("tiny", "cpu", None, key) == pytest.approx(max(want, 1e-6))
    assert load_catch_up_rows("tiny", "cpu", None, key) == 149
    assert _head_engine(tiny, tmp_path, prompt, 20).budget.summary()["catch_up_row_from"] == "stored"
    # A shorter prompt's catch-up leaves the price as it was; a longer one's (a row attends to more rows) replaces it.
    # Whether drafts may repay the catch-up in 20 tokens depends on the price just measured, so on how busy the
    # machine was: hope for drafts that pay 100x, and every catch-up is run.
    monkeypatch.setitem(budget_module.HOPED_GAIN, "cpu", 100.0)
    for length in (110, 200):
        before = load_catch_up_row("tiny", "cpu", None, key), load_catch_up_rows("tiny", "cpu", None, key)
        save_draft_outcome("tiny", "cpu", None, key, 1.3, 1)  # as if its drafts paid: it drafts from the first cycle
        e = _head_engine(tiny, tmp_path, [random.Random(length).randrange(96) for _ in range(length)], 20)
        timed = [r.state for r in e.cycles() if "catch_up_rows" in r.state]
        assert len(timed) == 1
        rows, ms = timed[0]["catch_up_rows"], timed[0]["catch_up_ms"]
        assert rows == length - 1
        if rows <= before[1]:
            assert (load_catch_up_row("tiny", "cpu", None, key), load_catch_up_rows("tiny", "cpu", None, key)) == before
        else:
            want = max(ms / curve_cache["ms"][0] - e.budget.draft_step, 0.0) / (rows - 1)
            assert load_catch_up_row("tiny", "cpu", None, key) == pytest.approx(max(want, 1e-6))
            assert load_catch_up_rows("tiny", "cpu", None, key) == rows
