"""STAND: table arithmetic, Gumbel-top-k sampling, lossless decoding, the tree optimizer, samples as a group."""

from __future__ import annotations

import itertools
import json
import math
import random
from collections import Counter

import pytest
import torch
from scipy.stats import chisquare
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from transformers import PreTrainedTokenizerFast

from helpers import compare_greedy, hf_greedy, run, tiny_llama, torch_threads
from specviz_core.bench.optimize_tree import large_tree, optimize_tree, select_tree
from specviz_core.bench.suites import ALL, load_suite
from specviz_core.cli.commands import main
from specviz_core.drafters.stand import GumbelCache, gumbel_topk, load_tree
from specviz_core.drafters.talon.ngram_tables import NGramTables, merge_entry

ALPHA = 0.001


pytestmark = pytest.mark.usefixtures("one_thread")


# -- the logit n-gram tables --------------------------------------------------------------------

def test_merge_is_a_running_mean_then_top_k():
    e = merge_entry(None, [1, 2], [0.6, 0.4], k=3)
    assert (e.ids, e.probs, e.count) == ([1, 2], [0.6, 0.4], 1)
    # Second sighting: 1/2 old + 1/2 new; token 3 was not stored before, so it counts as 0 there.
    e = merge_entry(e, [2, 3], [0.5, 0.5], k=3)
    assert e.ids == [2, 1, 3] and e.count == 2
    assert e.probs == pytest.approx([0.45, 0.30, 0.25])
    # Third: 2/3 old + 1/3 new, then only the top 3 of {1: .2+.3, 2: .3, 3: .1667, 4: .0333} stay.
    e = merge_entry(e, [1, 4], [0.9, 0.1], k=3)
    assert e.ids == [1, 2, 3] and e.count == 3
    assert e.probs == pytest.approx([0.2 + 0.3, 0.3, 0.25 * 2 / 3])


def test_merge_truncates_to_ten():
    e = merge_entry(None, list(range(10)), [0.1] * 10, k=10)
    e = merge_entry(e, list(range(10, 20)), [0.05 + 0.001 * i for i in range(10)], k=10)
    assert len(e.ids) == 10 and e.count == 2
    # Old entries are 0.05 each after the merge; new ones 0.025 + 0.0005 i: every old one wins.
    assert sorted(e.ids) == list(range(10)) and e.probs == pytest.approx([0.05] * 10)


def test_lookup_uses_the_longest_ngram():
    t = NGramTables(n_max=4, k=10)
    t.update((1, 2, 3, 4), [7], [1.0])  # every n-gram ending in 4 says 7
    t.update((9, 9, 3, 4), [8], [1.0])  # 3- and 4-gram differ; the 1- and 2-gram (4), (3, 4) are merged
    e, n = t.lookup((1, 2, 3, 4))
    assert n == 4 and e.ids == [7]
    e, n = t.lookup((5, 2, 3, 4))  # no such 4-gram; the 3-gram (2, 3, 4) is only from the first
    assert n == 3 and e.ids == [7]
    e, n = t.lookup((5, 5, 3, 4))  # the bigram (3, 4): a mean of both
    assert n == 2 and e.ids == [7, 8] and e.probs == pytest.approx([0.5, 0.5])
    assert t.lookup((5, 5, 5, 6)) == (None, 0)


# -- Gumbel-top-k ----------------------------------------------------------------------------------

def inclusion_probs(q: list[float], k: int) -> list[float]:
    """P(i is among k sequential draws without replacement from q), by enumerating every draw order."""
    out = [0.0] * len(q)

    def go(left: list[int], prob: float, depth: int) -> None:
        if depth == k:
            return
        mass = math.fsum(q[j] for j in left)
        for i in left:
            pi = prob * q[i] / mass
            out[i] += pi
            go([j for j in left if j != i], pi, depth + 1)

    go(list(range(len(q))), 1.0, 0)
    return out


def test_gumbel_topk_draws_without_replacement_with_the_right_marginals():
    q = [0.5, 0.25, 0.15, 0.07, 0.03]
    k, n = 3, 20000
    cache, gen = GumbelCache(1000), torch.Generator().manual_seed(0)
    log_q = torch.log(torch.tensor(q, dtype=torch.float64))
    first, second, incl = Counter(), Counter(), Counter()
    for _ in range(n):
        picks = gumbel_topk(log_q, k, cache.take(len(q), gen))
        assert len(picks) == k and len(set(picks)) == k  # without replacement
        first[picks[0]] += 1
        second[picks[1]] += 1
        incl.update(picks)
    assert cache.refills == n * len(q) // 1000  # the noise is drawn in bulk and each value used once
    exp_first = q
    exp_second = [sum(q[i] * q[j] / (1 - q[i]) for i in range(len(q)) if i != j) for j in range(len(q))]
    for counts, exp in ((first, exp_first), (second, exp_second)):
        res = chisquare([counts[i] for i in range(len(q))], [n * e for e in exp])
        assert res.pvalue > ALPHA, (counts, exp, res)
    for i, pi in enumerate(inclusion_probs(q, k)):  # each token's inclusion: within 4.5 binomial sigmas
        assert abs(incl[i] - n * pi) < 4.5 * math.sqrt(n * pi * (1 - pi)) + 1, (i, incl[i], n * pi)


# -- decoding ---------------------------------------------------------------------------------------

def tiny_prompts() -> list[list[int]]:
    rng = random.Random(0)
    pat = [rng.randrange(96) for _ in range(5)]
    return [[rng.randrange(96) for _ in range(12)], pat * 5,
            pat * 3 + [rng.randrange(96) for _ in range(4)] + pat[:2], [7]]


@pytest.fixture(scope="module")
def optimized_tree(tiny, tmp_path_factory) -> str:
    with torch_threads(1):  # set up before the tests' one_thread fixture: on one thread too
        data = optimize_tree(tiny, tiny_prompts()[1:3], large=150, keep=40, max_depth=10, max_new_tokens=40)
    path = tmp_path_factory.mktemp("trees") / "tree.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("tree", ["heuristic", "optimized"])
def test_greedy_equals_generate_tiny(tiny, optimized_tree, tree):
    params = {"tree": optimized_tree} if tree == "optimized" else {}
    accepted = 0
    for prompt in tiny_prompts():
        ref = hf_greedy(tiny, prompt, 48)
        ours, records = run(tiny, "stand", prompt, 48, **params)
        verdict = compare_greedy(tiny, prompt, ours, ref)
        assert not verdict.startswith("diverged"), f"stand ({tree}) on {prompt[:8]}...: {verdict}"
        accepted += sum(r.n_accepted for r in records)
    assert accepted > 0


@pytest.mark.default_model
def test_greedy_equals_generate_default_model(smol):
    from specviz_core.runtime.models import encode_prompt

    text = "List the first five prime numbers, then list them again in reverse order, then list them again."
    ids, _ = encode_prompt(smol, text)
    ref = hf_greedy(smol, ids, 40)
    ours, records = run(smol, "stand", ids, 40)
    verdict = compare_greedy(smol, ids, ours, ref)
    assert not verdict.startswith("diverged"), verdict
    assert sum(r.n_accepted for r in records) > 0
    out, records = run(smol, "stand", ids, 24, temperature=0.7, seed=3)
    assert len(out) == 24 and any(r.state["stochastic"] for r in records)


@pytest.mark.default_model
def test_the_default_model_runs_on_the_shipped_optimized_tree(smol, tiny):
    """Issue 18: STAND as published drafts on a tree optimized from data; SpecViz ships one for the default model,
    made from a 625-node depth-20 tree on calibration prompts that are not the bench prompts, at T=0.7."""
    import json

    from helpers import make_engine
    from specviz_resources import read_text

    shipped = json.loads(read_text("trees", "stand-smollm2-135m-instruct.json"))
    cal = shipped["calibration"]
    assert (cal["large_tree"], cal["temperature"], shipped["nodes"]) == (625, 0.7, 80)
    assert cal["large_tree_depth"] >= 16 and cal["tables"] == "reset per prompt"
    paths = [tuple(p) for p in shipped["paths"]]
    assert_valid_tree([list(p) for p in paths])
    bench = " ".join(read_text("suites", f"{n}.json") for n in ("code_editing", "summarising", "qa", "chat", "multi_turn"))
    for name in ("code", "rewrite", "chat", "qa", "summary", "list"):  # calibration prompts are not bench prompts
        assert read_text("prompts", f"calibration-{name}.txt").strip()[:60] not in bench
    ids = [1, 2, 3]
    assert make_engine(smol, "stand", ids, 4).drafter.template == paths  # auto: the shipped tree here
    assert make_engine(smol, "stand", ids, 4, tree="heuristic").drafter.template != paths
    assert make_engine(tiny, "stand", ids, 4).drafter.tree_used == "heuristic"  # another model: the heuristic tree
    assert make_engine(smol, "stand", ids, 4, budget=20).drafter.template == paths[:20]


def test_each_suite_ships_a_tree_calibrated_on_its_held_out_prompts(tiny):
    """Issue 33: STAND calibrated per workload, as the paper does; ``tree=SUITE`` runs the suite's tree."""
    import json

    from helpers import make_engine
    from specviz_core.drafters.stand import SUITE_TREES, suite_tree_file
    from specviz_resources import read_text

    assert set(SUITE_TREES) == set(ALL)
    for name in SUITE_TREES:
        data = json.loads(read_text("trees", suite_tree_file(name)))
        cal = data["calibration"]
        assert (cal["large_tree"], cal["temperature"], data["nodes"]) == (625, 0.7, 80)
        assert cal["prompts"] == len(load_suite(f"calibration/{name}").prompts) and cal["samples"] == 4
        assert_valid_tree(data["paths"])
        e = make_engine(tiny, "stand", [1, 2, 3], 4, tree=name)
        assert e.drafter.tree_used == name and e.drafter.template == [tuple(p) for p in data["paths"]]


@torch.no_grad()
def test_tables_hold_running_means_of_the_decoded_trajectory(tiny):
    prompt = tiny_prompts()[2]
    from helpers import make_engine

    e = make_engine(tiny, "stand", prompt, 30)
    records = list(e.cycles())
    # Every committed position is merged once, in order: the prompt's, then each cycle's root and
    # accepted path (the last cycle's path may run past the token limit; it is merged all the same).
    x = list(prompt)
    for r in records[:-1]:
        x += list(r.committed_ids)
    x += [r.token for r in records[-1].nodes if r.id in records[-1].accepted_path]
    logits = tiny.model(input_ids=torch.tensor([x])).logits[0].double()  # one plain forward: [len(x), V]
    top = torch.softmax(logits, dim=-1).topk(10)
    expected: list[dict[tuple, tuple[dict[int, float], int]]] = [{} for _ in range(4)]
    for i in range(len(x)):
        new = dict(zip(top.indices[i].tolist(), top.values[i].tolist()))
        for n in range(1, min(4, i + 1) + 1):
            key = tuple(x[i + 1 - n:i + 1])
            old, c = expected[n - 1].get(key, ({}, 0))
            mean = {t: old.get(t, 0.0) * c / (c + 1) + new.get(t, 0.0) / (c + 1) for t in set(old) | set(new)}
            expected[n - 1][key] = (dict(sorted(mean.items(), key=lambda tp: -tp[1])[:10]), c + 1)
    tables = e.drafter.tables.tables
    for n in range(4):
        assert set(tables[n]) == set(expected[n]), f"{n + 1}-gram keys differ"
        for key, (mean, count) in expected[n].items():
            got = tables[n][key]
            assert got.count == count
            tenth = min(mean.values())
            want = {t: p for t, p in mean.items() if p > tenth + 1e-4}  # leave near-ties at the cut alone
            assert {t: p for t, p in zip(got.ids, got.probs) if t in want} == pytest.approx(want, abs=1e-5)


# -- the tree optimizer ------------------------------------------------------------------------------

def assert_valid_tree(paths: list[list[int]], top_k: int = 10) -> None:
    s = {tuple(p) for p in paths}
    assert len(s) == len(paths)
    for p in map(tuple, paths):
        assert p and all(0 <= r < top_k for r in p)
        assert len(p) == 1 or p[:-1] in s, f"{p} has no parent"
        assert p[-1] == 0 or p[:-1] + (p[-1] - 1,) in s, f"{p} has no lower-ranked sibling"


def test_select_tree_keeps_parents_and_lower_siblings():
    paths = list(itertools.chain.from_iterable(itertools.product(range(3), repeat=d) for d in (1, 2, 3)))
    # Adversarial counts: a rank-2 node counted more than its rank-1 and rank-0 siblings.
    counts = {(0,): 50, (1,): 40, (1, 2): 30, (1, 0): 5, (0, 0): 45, (0, 0, 0): 44}
    kept = select_tree(paths, counts, 7)
    assert_valid_tree([list(p) for p in kept])
    # (1, 2) needs its lower siblings (1, 0) and (1, 1); the 7 best that form a valid tree:
    assert set(kept) == {(0,), (0, 0), (0, 0, 0), (1,), (1, 0), (1, 1), (1, 2)}


def test_optimizer_counts_accepted_paths_and_keeps_a_valid_tree(tiny, tmp_path):
    prompts = tiny_prompts()[1:3]
    data = optimize_tree(tiny, prompts, large=120, keep=30, max_depth=10, max_new_tokens=40)
    assert data["format"] == "specviz-tree" and data["nodes"] == len(data["paths"]) <= 30
    assert_valid_tree(data["paths"])
    # Count independently: decode with the large tree as a tree file and read accepted paths off the records.
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"format": "specviz-tree", "paths": [list(p) for p in large_tree(120, 10, 10)]}))
    from helpers import make_engine

    counts: Counter = Counter()
    for prompt in prompts:
        e = make_engine(tiny, "stand", prompt, 40, tree=str(big))  # fresh tables per prompt, as STAND runs
        for rec in e.cycles():
            nodes = rec.node_by_id
            for nid in rec.accepted_path:
                path, a = [], nid
                while a:
                    siblings = [n.id for n in rec.nodes if n.parent == nodes[a].parent]
                    path.insert(0, siblings.index(a))  # rank = order among its siblings
                    a = nodes[a].parent
                counts[tuple(path)] += 1
    assert sum(counts.values()) == data["calibration"]["accepted_tokens"] > 0
    assert data["counts"] == [counts[tuple(p)] for p in data["paths"]]
    kept = {tuple(p) for p in data["paths"]}
    most = [p for p, _ in counts.most_common(10)]
    assert set(most) <= kept  # the most accepted paths are kept


@pytest.fixture(scope="module")
def word_model_dir(tmp_path_factory):
    """The tiny random Llama saved as a model folder, with a 96-word tokenizer."""
    d = tmp_path_factory.mktemp("tiny-words")
    tiny_llama().model.save_pretrained(d)
    words = ["<unk>", "<eos>"] + [f"w{i}" for i in range(94)]
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>").save_pretrained(d)
    return d


def test_optimize_tree_command_writes_a_tree_record_uses(word_model_dir, tmp_path, capsys):
    prompt = tmp_path / "p.txt"
    prompt.write_text(" ".join(f"w{i % 9 + 2}" for i in range(40)))
    out = tmp_path / "tree.json"
    code = main(["optimize-tree", "--method", "stand", "--model", str(word_model_dir), "--prompt-file", str(prompt),
                 "--out", str(out), "--large", "200", "--max-new-tokens", "30", "--no-chat-template", "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert "tree.json: " in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["nodes"] <= 80 and data["calibration"]["large_tree"] == 200
    assert_valid_tree(data["paths"])
    assert len(load_tree(str(out), 10)) == data["nodes"]
    db = tmp_path / "r.db"
    code = main(["record", "--method", "stand", "--param", f"tree={out}", "--model", str(word_model_dir),
                 "--prompt-file", str(prompt), "--max-new-tokens", "20", "--no-chat-template", "--db", str(db), "--quiet"])
    assert code == 0, capsys.readouterr().err


def test_calibration_suites_hold_prompts_of_each_kind_that_the_bench_does_not_run():
    """Issue 33: STAND calibrated per workload, on held-out prompts of each built-in suite's kind."""
    for name in ALL:
        held, bench = load_suite(f"calibration/{name}"), load_suite(name)
        assert len(held.prompts) >= 3
        texts = {p.text or json.dumps(p.messages) for p in bench.prompts}
        assert not {p.id for p in held.prompts} & {p.id for p in bench.prompts}
        assert not {p.text or json.dumps(p.messages) for p in held.prompts} & texts
        assert all(bool(p.messages) == (name == "multi_turn") for p in held.prompts)  # the same kind of prompt


def test_optimize_tree_calibrates_on_a_suite_file(word_model_dir, tmp_path, capsys):
    suite = tmp_path / "mine.json"
    suite.write_text(json.dumps({"prompts": [
        {"id": "a", "text": " ".join(f"w{i % 9 + 2}" for i in range(30))},
        {"id": "b", "messages": [{"role": "user", "content": "w3 w4 w5"}, {"role": "assistant", "content": "w6 w7"},
                                 {"role": "user", "content": " ".join(f"w{i % 7 + 2}" for i in range(20))}]}]}))
    out = tmp_path / "tree.json"
    code = main(["optimize-tree", "--model", str(word_model_dir), "--prompt-file", str(suite), "--out", str(out),
                 "--large", "100", "--keep", "20", "--max-new-tokens", "12", "--no-chat-template", "--quiet"])
    assert code == 0, capsys.readouterr().err
    data = json.loads(out.read_text())
    assert data["calibration"]["prompts"] == 2 and data["calibration"]["samples_finished"] == 2
    assert_valid_tree(data["paths"])
    code = main(["optimize-tree", "--model", str(word_model_dir), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "--prompt-file FILE (repeatable) or --suite NAME" in err and "Traceback" not in err


@pytest.mark.parametrize("content,needle", [
    ("{", "bad JSON"),
    ('{"format": "other", "paths": []}', "not a tree file"),
    ('{"format": "specviz-tree", "paths": [[0], [0, 1]]}', "without its lower-ranked sibling"),
    ('{"format": "specviz-tree", "paths": [[0, 0]]}', "has no parent"),
    ('{"format": "specviz-tree", "paths": [[12]]}', "bad rank path"),
])
def test_bad_tree_file_is_one_clear_error(word_model_dir, tmp_path, capsys, content, needle):
    f = tmp_path / "t.json"
    f.write_text(content)
    code = main(["record", "--method", "stand", "--param", f"tree={f}", "--model", str(word_model_dir),
                 "--prompt", "w1 w2", "--no-chat-template", "--db", str(tmp_path / "x.db"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err, err


def test_samples_of_one_prompt_are_one_group_with_one_drafter(word_model_dir, tmp_path, capsys):
    db = tmp_path / "g.db"
    code = main(["record", "--method", "stand", "--model", str(word_model_dir), "--prompt",
                 " ".join(f"w{i % 7 + 2}" for i in range(24)), "--max-new-tokens", "24", "--temperature", "0.8",
                 "--seed", "5", "--samples", "3", "--no-chat-template", "--db", str(db), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.count("tokens/forward,") == 3 and "tokens/forward by sample:" in out
    from specviz_core.recording.store import Recording

    with Recording(db) as rec:
        sessions = sorted(rec.sessions(), key=lambda s: s.seed)
    assert [s.seed for s in sessions] == [5, 6, 7] and all(s.status == "complete" for s in sessions)
    assert len({s.group_id for s in sessions}) == 1 and sessions[0].group_id is not None
    # One drafter: the tables only grow, so the last sample starts with what the first ones saw.
    entries = [s.stats["table_entries"] for s in sessions]
    assert entries == sorted(entries) and entries[0] < entries[-1]


def test_same_seed_same_recording(word_model_dir, tmp_path, capsys):
    """Two recordings with one seed export the same cycles (ids, times and timings aside)."""
    exports = []
    for k in range(2):
        db = tmp_path / f"s{k}.db"
        assert main(["record", "--method", "stand", "--model", str(word_model_dir), "--prompt",
                     " ".join(f"w{i % 5 + 2}" for i in range(20)), "--max-new-tokens", "20", "--temperature", "0.9",
                     "--seed", "4", "--no-chat-template", "--db", str(db), "--quiet"]) == 0
        capsys.readouterr()
        assert main(["export", "--db", str(db)]) == 0
        lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        for line in lines:
            for key in ("id", "session", "created", "timings_ms", "decode_ms", "prefill_ms", "tokens_per_s"):
                line.pop(key, None)
        exports.append(lines)
    assert exports[0] == exports[1] and len(exports[0]) > 2
