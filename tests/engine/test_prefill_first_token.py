"""The first token from the prefill's last row: no forward is spent on a one-node cycle 0 (issue 32).

Target forwards are counted by wrapping the model's own ``forward``, not by the engine's counter, and held against
transformers' greedy ``generate`` (one prefill, then one forward per token) and against the rule that a cycle 0
with a draft verifies it in one forward after the prefill.
"""

from __future__ import annotations

import random

import pytest
import torch

from helpers import hf_greedy, make_engine, plain_logits
from specviz_core.recording.check import check_recording
from specviz_core.recording.store import Recording
from specviz_core.session.factory import session_info
from specviz_core.session.spec import check_method


class ForwardCounter:
    def __init__(self, model):
        self.model, self.calls = model, 0
        self.own = model.forward

    def __enter__(self):
        def counted(*a, **k):
            self.calls += 1
            return self.own(*a, **k)

        self.model.forward = counted
        return self

    def __exit__(self, *exc):
        del self.model.forward


PROMPT = [random.Random(1).randrange(3, 96) for _ in range(14)]


def test_ar_spends_generates_forwards(tiny, one_thread):
    with ForwardCounter(tiny.model) as hf:
        want = hf_greedy(tiny, PROMPT, 12)
    with ForwardCounter(tiny.model) as ours:
        e = make_engine(tiny, "ar", PROMPT, 12)
        records = list(e.cycles())
    assert e.output_ids == want
    assert ours.calls == hf.calls == 12  # the prefill gives the first token; 11 more forwards, one per token
    assert e.n_forward == 11 and records[0].state.get("from_prefill") is True
    assert not any(r.state.get("from_prefill") for r in records[1:])
    # Cycle 0's top-5 is the prefill's last row: a plain forward over the prompt.
    p = torch.softmax(plain_logits(tiny, PROMPT), -1)
    top = p.topk(5)
    assert [t for t, _ in records[0].target_topk[0]] == top.indices.tolist()
    assert [q for _, q in records[0].target_topk[0]] == pytest.approx(top.values.tolist(), abs=1e-5)


def test_goose_cycle_zero_is_the_prefill(tiny, one_thread):
    with ForwardCounter(tiny.model) as ours:
        e = make_engine(tiny, "goose", PROMPT * 2, 24)
        records = list(e.cycles())
    assert e.output_ids == hf_greedy(tiny, PROMPT * 2, 24)
    assert records[0].state["route"] == "prefill" and records[0].state["from_prefill"]
    assert ours.calls == 1 + (len(records) - 1) == 1 + e.n_forward  # the official decoder's count


def test_a_drafted_cycle_zero_verifies_its_root_after_the_prefill(tiny, one_thread):
    prompt = PROMPT[:5] * 4  # PLD matches in the prompt at once
    with ForwardCounter(tiny.model) as ours:
        e = make_engine(tiny, "pld", prompt, 16)
        records = list(e.cycles())
    assert records[0].n_verified > 1 and "from_prefill" not in records[0].state
    assert records[0].cache_len == len(prompt) - 1
    assert ours.calls == 1 + len(records) == 1 + e.n_forward
    assert e.output_ids == hf_greedy(tiny, prompt, 16)


def test_a_recording_counts_no_forward_for_the_prefills_token(tiny, tmp_path, one_thread):
    e = make_engine(tiny, "ar", PROMPT, 8)
    db = tmp_path / "r.db"
    with Recording(db, create=True) as rec:
        writer = rec.new_session(session_info(tiny, check_method("ar", {}), PROMPT, max_new_tokens=8))
        for r in e.cycles():
            writer.append(r)
        writer.finish("complete")
        info = rec.session(writer.id)
    assert (info.n_cycles, info.n_forward, info.n_tokens) == (8, 7, 8)
    assert info.tokens_per_forward == pytest.approx(8 / 7) and info.tau_prefill_counted == pytest.approx(1.0)
    assert check_recording(db).clean
