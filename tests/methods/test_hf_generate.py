"""hf_assisted, hf_universal and hf_prompt_lookup against transformers' own generate with the same arguments.

Per prompt: the tokens equal generate's; per cycle, the draft length equals what generate's candidate generator
drafted, the accepted count equals the num_matches generate told it (update_candidate_strategy), and the
recorded num_assistant_tokens and threshold are the ones generate's generator drafted under.
"""

from __future__ import annotations

import random

import pytest

from helpers import compare_greedy, run
from hf_reference import hf_reference, near_copy, universal_pair
from specviz_core.analysis.stop_cause import stop_cause
from specviz_core.errors import SpecVizError
from specviz_core.session.spec import SessionRequest


def tiny_prompts() -> list[list[int]]:
    rng = random.Random(0)
    pat = [rng.randrange(96) for _ in range(5)]
    return [[rng.randrange(96) for _ in range(12)], pat * 5, pat * 3 + [rng.randrange(96) for _ in range(4)] + pat[:2]]


def check_against(ref, m, prompt, ours, records, assistant: bool) -> None:
    assert ours == ref.tokens, compare_greedy(m, prompt, ours, ref.tokens)
    assert [r.state["candidate_length"] for r in records] == ref.drafted
    assert [r.state["n_matches"] for r in records] == ref.told
    # The accepted count: what the walk accepted, cut (last cycle only) at max_new_tokens or EOS as generate cuts.
    assert [len(r.committed_ids) - 1 for r in records] == ref.told
    assert [len(r.accepted_path) for r in records[:-1]] == ref.told[:-1]
    if assistant:
        assert [r.state["num_assistant_tokens"] for r in records] == ref.num_assistant_tokens
        assert [r.state["assistant_confidence_threshold"] for r in records] == pytest.approx(ref.thresholds)


@pytest.fixture(scope="module")
def assistant(tiny):
    return near_copy(tiny, 0.02)


SETTINGS = [
    {},  # transformers' defaults: 20 tokens, constant, threshold 0.4
    {"num_assistant_tokens": 3, "num_assistant_tokens_schedule": "heuristic", "assistant_confidence_threshold": 0.0},
    {"num_assistant_tokens": 5, "num_assistant_tokens_schedule": "heuristic_transient",
     "assistant_confidence_threshold": 0.2},
    {"num_assistant_tokens": 4, "num_assistant_tokens_schedule": "constant", "assistant_confidence_threshold": 0.0},
]


@pytest.mark.parametrize("settings", SETTINGS, ids=["defaults", "heuristic", "transient", "constant"])
@pytest.mark.parametrize("n", [48, 7])
def test_hf_assisted_is_generate(tiny, assistant, one_thread, settings, n):
    matched = 0
    for prompt in tiny_prompts():
        ref = hf_reference(tiny, prompt, n, "hf_assisted", assistant, **settings)
        ours, records = run(tiny, "hf_assisted", prompt, n, draft=assistant, **settings)
        check_against(ref, tiny, prompt, ours, records, assistant=True)
        matched += sum(ref.told)
    assert matched > 0  # the comparison saw accepted drafts, not only rejections


def test_heuristic_schedule_is_recorded(tiny, assistant, one_thread):
    """heuristic: +2 after a cycle whose whole draft was accepted, -1 (not below 1) otherwise; both happen."""
    prompt = tiny_prompts()[0]
    _, records = run(tiny, "hf_assisted", prompt, 48, draft=assistant, num_assistant_tokens=3,
                     num_assistant_tokens_schedule="heuristic", assistant_confidence_threshold=0.0)
    steps = set()
    for a, b in zip(records, records[1:]):
        k, drafted, matched = a.state["num_assistant_tokens"], a.state["candidate_length"], a.state["n_matches"]
        want = k + 2 if matched == drafted else max(1, k - 1)
        assert a.state["num_assistant_tokens_next"] == want == b.state["num_assistant_tokens"]
        steps.add(want - k)
    assert {2, -1} <= steps


def test_target_as_its_own_assistant_grows_the_draft(tiny, one_thread):
    """The target drafting for itself: every draft accepted, so heuristic adds 2 every cycle."""
    ref = hf_reference(tiny, [3, 1, 4, 1, 5], 40, "hf_assisted", tiny, num_assistant_tokens=2,
                       num_assistant_tokens_schedule="heuristic", assistant_confidence_threshold=0.0)
    ours, records = run(tiny, "hf_assisted", [3, 1, 4, 1, 5], 40, draft=tiny, num_assistant_tokens=2,
                        num_assistant_tokens_schedule="heuristic", assistant_confidence_threshold=0.0)
    check_against(ref, tiny, [3, 1, 4, 1, 5], ours, records, assistant=True)
    assert [r.state["num_assistant_tokens"] for r in records[:3]] == [2, 4, 6]


def test_confidence_stop_is_recorded(tiny, assistant, one_thread):
    """With the default threshold 0.4 the chain stops after the first token the assistant is unsure of."""
    stops, whys = {}, {}
    for prompt in tiny_prompts():
        _, records = run(tiny, "hf_assisted", prompt, 48, draft=assistant)
        for r in records:
            probs, threshold = r.state["draft_probs"], r.state["assistant_confidence_threshold"]
            stops[r.state["draft_stop"]] = stops.get(r.state["draft_stop"], 0) + 1
            assert all(p >= threshold for p in probs[:-1])  # only the last token may fall below it
            if r.state["draft_stop"] == "confidence":
                assert probs[-1] < threshold and "below the threshold" in r.state["draft_stop_text"]
            assert [n.score for n in r.nodes[1:]] == pytest.approx(probs)
            if len(r.accepted_path) == len(r.nodes) - 1 and r.state["draft_stop"] in ("confidence", "num_assistant_tokens"):
                # The whole chain was accepted: the why panel says the chain ended, not that the assistant had w.
                cause = stop_cause(r)
                assert cause.chain_end and cause.kind == {"confidence": "gated"}.get(r.state["draft_stop"], "budget")
                text = cause.sentence()
                assert "the assistant's chain ended there" in text and r.state["draft_stop_text"][:20] in text.lower()
                assert "had it" not in text and "offered it" not in text
                whys[r.state["draft_stop"]] = whys.get(r.state["draft_stop"], 0) + 1
    assert stops.get("confidence", 0) > 0
    assert whys.get("confidence", 0) > 0, "no confidence-stopped chain was accepted whole"


@pytest.mark.parametrize("params", [{}, {"prompt_lookup_num_tokens": 3, "max_matching_ngram_size": 1},
                                    {"prompt_lookup_num_tokens": 5, "max_matching_ngram_size": 4}],
                         ids=["defaults", "k3n1", "k5n4"])
@pytest.mark.parametrize("n", [48, 9])
def test_hf_prompt_lookup_is_generate(tiny, one_thread, params, n):
    matched = 0
    for prompt in tiny_prompts():
        ref = hf_reference(tiny, prompt, n, "hf_prompt_lookup", **params)
        ours, records = run(tiny, "hf_prompt_lookup", prompt, n, **params)
        check_against(ref, tiny, prompt, ours, records, assistant=False)
        context = list(prompt)
        for r in records:  # the recorded match span is where the chain was copied from
            m = r.state["match"]
            chain = [n.token for n in r.nodes[1:]]
            if chain:
                a, b = m["copy_span"]
                assert context[a:b] == chain and m["match_span"][1] == a
            else:
                assert r.state["draft_stop"] in ("no_match", "max_length", "eos")
            context += list(r.committed_ids)
        matched += sum(ref.told)
    assert matched > 0


def test_prompt_lookup_copies_the_first_occurrence(tiny, one_thread):
    """transformers copies from the first earlier occurrence, as SpecViz's own pld does by default (and from the last
    with occurrence=last)."""
    prompt = [9, 1, 2, 9, 3, 4, 9]  # "9" was followed by 1 and later by 3
    _, records = run(tiny, "hf_prompt_lookup", prompt, 4, max_matching_ngram_size=1, prompt_lookup_num_tokens=2)
    assert [n.token for n in records[0].nodes[1:]] == [1, 2]
    assert records[0].state["match"]["copy_span"] == [1, 3]
    _, own = run(tiny, "pld", prompt, 4, max_ngram=1, num_pred_tokens=2)
    assert [n.token for n in own[0].nodes[1:]] == [1, 2]
    _, own = run(tiny, "pld", prompt, 4, max_ngram=1, num_pred_tokens=2, occurrence="last")
    assert [n.token for n in own[0].nodes[1:]] == [3, 4]
    # One token of room left: generate drafts nothing (max_length), and says so.
    _, records = run(tiny, "hf_prompt_lookup", prompt, 1)
    assert records[0].mode == "ar" and records[0].state["draft_stop"] == "max_length"


@pytest.fixture(scope="module")
def pair():
    return universal_pair()


@pytest.mark.parametrize("settings", SETTINGS[:2], ids=["defaults", "heuristic"])
def test_hf_universal_is_generate(pair, one_thread, settings):
    target, assistant = pair
    matched, agreed = 0, 0
    for text in ("w1 w2 w3 w4 w5 w6 w7 w8 w9 w10", "w30 w31 w32 w30 w31 w32 w30", "w85 w86 w2"):
        prompt = target.tokenizer(text)["input_ids"]
        ref = hf_reference(target, prompt, 40, "hf_universal", assistant, **settings)
        ours, records = run(target, "hf_universal", prompt, 40, draft=assistant, **settings)
        check_against(ref, target, prompt, ours, records, assistant=True)
        matched += sum(ref.told)
        for r in records:
            al = r.state["alignment"]
            assert al["target_tokens"] == [n.token for n in r.nodes[1:]]
            assert len(al["assistant_tokens"]) == len(al["assistant_pieces"]) <= r.state["num_assistant_tokens"]
            agreed += al["text_agrees"] and len(al["target_tokens"]) > 0
    assert matched > 0 and agreed > 0


def test_universal_alignment_pairs_tokens(pair, one_thread):
    target, assistant = pair
    prompt = target.tokenizer("w1 w2 w3 w4 w5 w6 w7 w8 w9 w10")["input_ids"]
    _, records = run(target, "hf_universal", prompt, 6, draft=assistant, num_assistant_tokens=4,
                     assistant_confidence_threshold=0.0)
    al = records[0].state["alignment"]
    assert al["text_agrees"]  # one word is one token in both: token i pairs with token i
    assert al["target_to_assistant"] == [[i] for i in range(len(al["target_tokens"]))]
    assert [p.strip() for p in al["target_pieces"]] == [p.strip() for p in al["assistant_pieces"]]
    assert al["assistant_tokens"] != al["target_tokens"]  # the same words, other ids


def test_universal_refuses_one_vocabulary(tiny):
    with pytest.raises(SpecVizError, match="use hf_assisted"):
        run(tiny, "hf_universal", [1, 2, 3], 4, draft=tiny)


@pytest.mark.parametrize("method", ["hf_assisted", "hf_universal"])
def test_sampling_is_refused_in_one_line(method):
    req = SessionRequest(method=method, prompt="hi", draft_model="default", temperature=0.7)
    with pytest.raises(SpecVizError) as e:
        req.check()
    assert "greedily" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.default_model
def test_default_model_assisting_itself_is_generate(smol):
    """The default model as its own assistant, with transformers' defaults, on a chat prompt."""
    from specviz_core.runtime.models import encode_prompt

    ids, _ = encode_prompt(smol, "Write the numbers one to ten as words.", chat_template=True)
    ref = hf_reference(smol, ids, 32, "hf_assisted", smol)
    ours, records = run(smol, "hf_assisted", ids, 32, draft=smol)
    check_against(ref, smol, ids, ours, records, assistant=True)
    assert sum(ref.told) > len(records)  # drafting for itself, most drafts are accepted


@pytest.mark.parametrize("method,params", [("hf_prompt_lookup", {"prompt_lookup_num_tokens": "3"}),
                                           ("hf_assisted", {"num_assistant_tokens": "4",
                                                            "num_assistant_tokens_schedule": "heuristic"})])
def test_bench_row_is_the_recorded_method(tiny, assistant, one_thread, method, params):
    """One name, one decoding: `specviz bench`'s row (transformers' own generate, timed) and a recorded session of
    the same method and parameters commit the same tokens in the same number of target forwards."""
    from specviz_core.bench import hf as bench_hf
    from specviz_core.bench.specs import parse_method_specs

    spec = parse_method_specs(method + "".join(f":{k}={v}" for k, v in params.items()))[0]
    assert spec.is_hf and spec.params == params
    prompt = tiny_prompts()[2]
    row = bench_hf.run(tiny, assistant, spec.method, prompt, 40, spec.params)
    ours, records = run(tiny, method, prompt, 40, draft=assistant, **params)
    assert row.output_ids == ours and row.n_forward == len(records)


@pytest.mark.parametrize("text,needle", [("hf_universal", "hf_universal is not benchmarked"),
                                         ("hf_prompt_lookup:k=1", "unknown parameter 'k'"),
                                         ("hf_greedy:num_assistant_tokens=3", "hf_greedy takes no parameters")])
def test_bench_refuses_bad_hf_rows(text, needle):
    from specviz_core.bench.specs import parse_method_specs

    with pytest.raises(SpecVizError, match=needle):
        parse_method_specs(text)


@pytest.mark.parametrize("method", ["hf_universal", "hf_prompt_lookup"])
def test_recorded_sessions_export_valid_records(pair, tmp_path, one_thread, method):
    """Recorded, exported and read back, an hf_* session keeps the record contract (docs/record-format.md)."""
    import io
    import json

    from test_docs import check_invariants

    from specviz_core.recording.export import export_jsonl
    from specviz_core.recording.store import Recording
    from specviz_core.session.spec import SessionRequest
    from specviz_core.session.session import Session

    target, assistant = pair
    req = SessionRequest(method=method, prompt="w1 w2 w3 w1 w2 w3 w1 w2",
                         draft_model="assistant" if method != "hf_prompt_lookup" else None,
                         max_new_tokens=24, chat_template=False)
    with Recording(tmp_path / "r.db", create=True) as rec:
        run_ = Session(req.check(), target, assistant if method == "hf_universal" else None, recording=rec)
        list(run_.run())
        out = io.StringIO()
        export_jsonl(rec, None, out)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert lines[0]["method"] == method and lines[0]["status"] == "complete"
    check_invariants(lines)
    assert all("draft_stop" in c["state"] and "n_matches" in c["state"] for c in lines[1:])
