"""``specviz.record``: the user's own ``model.generate(...)`` calls recorded where they run (issue 31).

Each call is run inside the block and watched, independently of SpecViz, by ``hf_reference`` (which wraps
transformers' candidate generator classes): the recorded cycles must be the iterations transformers ran (tokens
drafted, matches it was told, the assistant settings it drafted under), the output must be plain greedy
``generate``'s, token for token, and every verify row's top token must be a plain forward's argmax. Sampled calls
are in ``test_sampling_lossless``.
"""

from __future__ import annotations

import random
import threading
import warnings

import pytest
import torch
from transformers.generation.utils import GenerationMixin

import specviz
from helpers import hf_greedy, plain_logits
from hf_reference import hf_reference, near_copy, universal_pair
from specviz_core.analysis.stop_cause import stop_cause
from specviz_core.recording.check import check_recording
from specviz_core.recording.store import Recording


def prompts() -> list[list[int]]:
    rng = random.Random(0)
    pat = [rng.randrange(96) for _ in range(5)]
    return [[rng.randrange(96) for _ in range(12)], pat * 5, pat * 3 + [rng.randrange(96) for _ in range(4)] + pat[:2]]


@pytest.fixture(scope="module")
def assistant(tiny):
    return near_copy(tiny, 0.02)


def recorded(db, session_id):
    with Recording(db, read_only=True) as rec:
        return rec.session(session_id), list(rec.cycles(session_id))


def check_cycles(m, prompt, ref, info, cycles, method: str) -> None:
    """The recording against what transformers did (``ref``) and what plain forwards say."""
    assert info.method == method and info.status == "complete"
    assert list(info.output_ids) == ref.tokens
    assert [c.state["candidate_length"] for c in cycles] == ref.drafted
    assert [c.state["n_matches"] for c in cycles] == ref.told
    assert [len(c.committed_ids) - 1 for c in cycles] == ref.told
    if ref.num_assistant_tokens:
        assert [c.state["num_assistant_tokens"] for c in cycles] == ref.num_assistant_tokens
        assert [c.state["assistant_confidence_threshold"] for c in cycles] == pytest.approx(ref.thresholds)
    assert [c.n_accepted for c in cycles[:-1]] == ref.told[:-1]
    # The last cycle, cut at max_new_tokens: its accepted nodes are the draft's matches with the target's greedy
    # continuation past the cut (what the target accepted before generate cut it), as SpecViz's engine records them.
    last, start = cycles[-1], len(ref.tokens) - len(cycles[-1].committed_ids)
    drafted, beyond = [n.token for n in last.nodes[1:]], hf_greedy(m, prompt, start + 30)[start:]
    matches = 0
    while matches < len(drafted) and drafted[matches] == beyond[matches]:
        matches += 1
    assert last.n_accepted == matches
    context = list(prompt)
    for c in cycles:
        assert c.cache_len == len(context) - 1 and c.nodes[0].token == context[-1]
        # Row 0 is the target after the last committed token: its top token is a plain forward's argmax.
        logits = plain_logits(m, context)
        assert c.target_topk[0][0][0] == int(logits.argmax())
        assert c.target_topk[0][0][1] == pytest.approx(float(torch.softmax(logits, -1).max()), abs=1e-4)
        for nid in c.accepted_path:  # every accepted token is the target's greedy choice after its parent
            assert c.nodes[nid].token == c.nodes[nid - 1].target_token
        stop_cause(c)  # the window's analysis reads a recorded cycle like any other
        context += list(c.committed_ids)


@pytest.mark.parametrize("settings", [{}, {"num_assistant_tokens": 3, "num_assistant_tokens_schedule": "heuristic",
                                           "assistant_confidence_threshold": 0.0}], ids=["defaults", "heuristic"])
@pytest.mark.parametrize("n", [40, 7])
def test_recorded_assisted_generate_is_what_transformers_ran(tiny, assistant, tmp_path, one_thread, settings, n):
    db = tmp_path / "runs.db"
    for prompt in prompts():
        with specviz.record(db) as rec:
            ref = hf_reference(tiny, prompt, n, "hf_assisted", assistant, **settings)
        assert ref.tokens == hf_greedy(tiny, prompt, n)  # recorded, the output is plain greedy generate's
        info, cycles = recorded(db, rec.sessions[0])
        check_cycles(tiny, prompt, ref, info, cycles, "hf_assisted")
        for key in ("num_assistant_tokens_schedule", "assistant_confidence_threshold"):
            if key in settings:
                assert info.params[key] == settings[key]
    assert check_recording(db).clean


@pytest.mark.parametrize("params", [{}, {"prompt_lookup_num_tokens": 3, "max_matching_ngram_size": 1}],
                         ids=["k10", "k3-n1"])
def test_recorded_prompt_lookup_is_what_transformers_ran(tiny, tmp_path, one_thread, params):
    db = tmp_path / "runs.db"
    for prompt in prompts():
        with specviz.record(db) as rec:
            ref = hf_reference(tiny, prompt, 40, "hf_prompt_lookup", **params)
        assert ref.tokens == hf_greedy(tiny, prompt, 40)
        info, cycles = recorded(db, rec.sessions[0])
        check_cycles(tiny, prompt, ref, info, cycles, "hf_prompt_lookup")
        assert info.params == {"prompt_lookup_num_tokens": params.get("prompt_lookup_num_tokens", 10),
                               "max_matching_ngram_size": params.get("max_matching_ngram_size", 2)}
        for c in cycles:  # where the chain was copied from, when there was one: the same tokens earlier on
            m = c.state["match"]
            if m and c.state["candidate_length"]:
                a, b = m["copy_span"]
                ctx = list(info.prompt_ids) + list(info.output_ids)
                assert ctx[a:b] == [n.token for n in c.nodes[1:]]
    assert check_recording(db).clean


def test_recorded_universal_generate_is_what_transformers_ran(tmp_path, one_thread):
    target, assistant = universal_pair()
    db = tmp_path / "runs.db"
    rng = random.Random(4)
    prompt = [rng.randrange(2, 80) for _ in range(6)] * 2
    with specviz.record(db) as rec:
        ref = hf_reference(target, prompt, 30, "hf_universal", assistant, num_assistant_tokens=5)
    info, cycles = recorded(db, rec.sessions[0])
    assert info.method == "hf_universal" and info.draft_model and list(info.output_ids) == ref.tokens
    assert [c.state["candidate_length"] for c in cycles] == ref.drafted
    assert [c.state["n_matches"] for c in cycles] == ref.told
    assert any(c.n_accepted for c in cycles)
    assert all("alignment" in c.state for c in cycles if c.state["draft_stop"] != "max_length")
    assert check_recording(db).clean


def test_a_call_that_does_not_draft_is_refused_before_it_decodes(tiny, tmp_path):
    x = torch.tensor([[5, 6, 7, 5, 6]])
    db = tmp_path / "runs.db"
    with specviz.record(db) as rec:
        with pytest.raises(specviz.SpecVizError, match="decodes by greedy search") as e:
            tiny.model.generate(x, do_sample=False, max_new_tokens=4, pad_token_id=0)
        assert "\n" not in str(e.value)
        with pytest.raises(specviz.SpecVizError, match="decodes by beam search"):
            tiny.model.generate(x, do_sample=False, num_beams=2, max_new_tokens=4, pad_token_id=0)
        with pytest.raises(specviz.SpecVizError, match="one at a time"):
            with specviz.record(tmp_path / "other.db"):
                pass
    assert rec.sessions == []
    with Recording(db, read_only=True) as r:
        assert r.sessions() == []
    # The block left transformers as it found it: plain generate runs, unwatched.
    assert GenerationMixin.generate.__qualname__ == "GenerationMixin.generate"
    assert tiny.model.generate(x, do_sample=False, max_new_tokens=4, pad_token_id=0).shape == (1, 9)


def test_a_failing_recording_never_breaks_the_call(tiny, tmp_path, monkeypatch):
    import specviz_core.session.capture.call as capture

    prompt = prompts()[1]
    want = hf_greedy(tiny, prompt, 20)
    calls, summarize = [], capture.summarize

    def broken(record):
        calls.append(record.index)
        if record.index == 2:
            raise ValueError("disk on fire")
        return summarize(record)

    monkeypatch.setattr(capture, "summarize", broken)
    db = tmp_path / "runs.db"
    x = torch.tensor([prompt])
    with warnings.catch_warnings(record=True) as seen, specviz.record(db) as rec:
        warnings.simplefilter("always")
        out = tiny.model.generate(x, attention_mask=torch.ones_like(x), prompt_lookup_num_tokens=4,
                                  do_sample=False, max_new_tokens=20, pad_token_id=0)
    assert out[0, len(prompt):].tolist() == want
    assert any("disk on fire" in str(w.message) for w in seen)
    info, cycles = recorded(db, rec.sessions[0])
    assert info.status == "failed" and "cycle 2" in info.stop_reason and "disk on fire" in info.stop_reason
    assert len(cycles) == 2 and calls == [0, 1, 2]  # nothing recorded after the failure
    assert check_recording(db).clean


def test_only_the_blocks_own_thread_is_recorded(tiny, tmp_path):
    prompt = prompts()[1]
    x = torch.tensor([prompt])
    kw = dict(attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=6, pad_token_id=0)
    other = {}

    def elsewhere():  # plain greedy in another thread: neither refused nor recorded
        other["out"] = tiny.model.generate(x, **kw)[0, len(prompt):].tolist()

    with specviz.record(tmp_path / "runs.db") as rec:
        t = threading.Thread(target=elsewhere)
        t.start()
        t.join()
        tiny.model.generate(x, prompt_lookup_num_tokens=3, **kw)
    assert other["out"] == hf_greedy(tiny, prompt, 6)
    assert len(rec.sessions) == 1


def test_sampled_universal_decoding_is_recorded_and_early_exit_refused(tmp_path, one_thread):
    """With do_sample=True transformers switches universal decoding to another generator (its assistant's head
    pruned to the shared vocabulary): still recorded whole; a generator SpecViz does not record is refused."""
    target, assistant = universal_pair()
    x = target.tokenizer("w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w1 w2 w3", return_tensors="pt")
    db = tmp_path / "runs.db"
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the recording failing would warn
        with specviz.record(db) as rec:
            torch.manual_seed(0)
            out = target.model.generate(**x, assistant_model=assistant.model, tokenizer=target.tokenizer,
                                        assistant_tokenizer=assistant.tokenizer, do_sample=True, max_new_tokens=20,
                                        pad_token_id=0)
            with pytest.raises(specviz.SpecVizError, match="EarlyExitCandidateGenerator, which it does not record"):
                target.model.generate(**x, assistant_early_exit=1, max_new_tokens=5, pad_token_id=0)
    info, cycles = recorded(db, rec.sessions[0])
    assert len(rec.sessions) == 1 and info.status == "complete" and info.temperature == 1.0
    assert list(info.output_ids) == out[0, x["input_ids"].shape[1]:].tolist()
    assert info.stats["generator"] == "UniversalSpeculativeDecodingGenerator"
    assert check_recording(db).clean


@pytest.mark.default_model
def test_a_recorded_call_keeps_its_prompts_text_without_a_tokenizer(smol, tmp_path):
    """Prompt lookup is given no tokenizer: the session's prompt text comes from the model's own, found by its name
    (it was stored empty)."""
    ids = smol.tokenizer("def add(a, b):\n    return a + b\n\ndef add(", return_tensors="pt").input_ids
    db = tmp_path / "runs.db"
    with specviz.record(db) as rec:
        smol.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False,
                            prompt_lookup_num_tokens=5)
    info, _ = recorded(db, rec.sessions[0])
    assert info.prompt_text == smol.tokenizer.decode(ids[0].tolist()) != ""
