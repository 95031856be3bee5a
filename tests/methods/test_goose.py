"""Goose (seed 004) on real models: the harvest, spine continuation, and losslessness. The rules themselves are
pinned on constructed contexts in test_goose_rules.py."""

from __future__ import annotations

import collections

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from helpers import hf_greedy, make_engine, plain_logits, rows_of
from specviz_core.drafters.adjacency import AdjacencyTable
from specviz_core.runtime.models import LoadedModel


def test_adjacency_lookup_returns_what_was_harvested():
    table = AdjacencyTable(50, 4, bigram=True)
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(1))
    rows = rows_of([5, 6, 5], logits, [-1, 5, 9], k=4)
    table.update(rows.tokens, *rows.top(4), prev=rows.prev)
    ids, ps, tier = table.lookup(6, prev=5)
    probs = torch.softmax(logits, -1)
    assert tier == "bigram" and ids == probs[1].topk(4).indices.tolist()
    assert ps == pytest.approx(probs[1].topk(4).values.tolist())
    ids, _, tier = table.lookup(6, prev=1)  # unknown bigram: the unigram tier answers
    assert tier == "unigram" and ids == probs[1].topk(4).indices.tolist()
    ids, _, tier = table.lookup(5, prev=-1)  # the later row for token 5 overwrote the earlier one
    assert tier == "unigram" and ids == probs[2].topk(4).indices.tolist()
    assert table.lookup(7)[2] == "none"


def test_harvest_covers_rejected_positions(tiny):
    """After a tree cycle the table holds the target's top-K after every verified node, rejected ones included."""
    prompt = [3, 4, 5, 6, 7, 3, 4, 5, 6, 8, 9, 10, 3, 4, 5]
    e = make_engine(tiny, "goose", prompt, 40)
    for rec in e.cycles():
        rejected = [n for n in rec.nodes if n.verified and not n.accepted]
        if rec.mode == "tree" and rejected:
            break
    else:
        pytest.fail("no tree cycle with rejected nodes")
    table = e.drafter.table
    nodes = rec.node_by_id
    # A (previous token, token) pair drafted twice in one tree keeps its last row: check the pairs drafted once.
    pairs = collections.Counter((nodes[n.parent].token, n.token) for n in rec.nodes if n.verified and n.parent >= 0)
    rejected = [n for n in rejected if pairs[(nodes[n.parent].token, n.token)] == 1]
    assert len(rejected) >= 5
    for n in rejected[:5]:
        path, a = [], n.id
        while a != 0:
            path.append(nodes[a].token)
            a = nodes[a].parent
        ctx = list(e.ids[: rec.cache_len + 1]) + path[::-1]
        ref = plain_logits(tiny, ctx).topk(table.k).indices
        prev = nodes[n.parent].token
        ids = [t for t, _ in table.successors(n.token, prev)]
        assert ids[:3] == ref[:3].tolist()


def bigram_llama(successor: dict[int, int], vocab: int = 16) -> LoadedModel:
    """A real Llama whose layers add nothing, so its greedy next token is ``successor[token]``."""
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=vocab, intermediate_size=8, num_hidden_layers=1,
                      num_attention_heads=1, num_key_value_heads=1, head_dim=vocab, max_position_embeddings=128,
                      tie_word_embeddings=False, eos_token_id=None, bos_token_id=None, pad_token_id=None)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(torch.eye(vocab))
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        head = torch.zeros(vocab, vocab)
        for t, s in successor.items():
            head[s, t] = 2.0
        model.lm_head.weight.copy_(head)
    return LoadedModel(model=model, tokenizer=None, name="bigram", path="bigram", device=torch.device("cpu"),
                       dtype=torch.float32)


def test_spine_continuation_eval_data_flag():
    """Section 4: the context holds eval(data, flag, 1); the target wants 2; a branch continues the path."""
    EVAL, LP, DATA, C1, FLAG, C2, ONE, TWO, RP, NL, A, B, X = range(13)
    succ = {A: B, B: EVAL, EVAL: LP, LP: DATA, DATA: C1, C1: FLAG, FLAG: C2, C2: TWO, TWO: RP, RP: NL, NL: X,
            X: A, ONE: RP}
    m = bigram_llama(succ)
    # Earlier text: "A B eval ( data , flag , 1 ) \n"; "TWO )" once, so the table knows what follows 2. Only the
    # 3-gram "A B eval" matches, once: no consensus. The copy runs to the end (12 tokens): confidence 0.77, so the
    # chain grows by matching again (84 tokens) and the budget to 90; the spine takes int(90 * 0.88) = 79 of it and
    # every one of the first 5 spine nodes gets one branch (harmonic share 5): at ", " the table's best is 2.
    # draft_first_cycle: cycle 0 drafts from the prompt's last token (the official prefill would take it itself).
    prompt = [TWO, RP, NL, A, B, EVAL, LP, DATA, C1, FLAG, C2, ONE, RP, NL, X, A, B, EVAL]
    e = make_engine(m, "goose", prompt, 12, draft_first_cycle=True)
    rec = e.step()
    assert rec.state["chain_extended"] and (rec.state["node_budget"], rec.state["spine_len"]) == (90, 79)
    nodes = rec.node_by_id
    spine = [nodes[i].token for i in range(1, len(rec.nodes)) if nodes[i].source == "spine"]
    assert rec.mode == "tree" and spine[:7] == [LP, DATA, C1, FLAG, C2, ONE, RP]
    path_tokens = [nodes[i].token for i in rec.accepted_path]
    path_sources = [nodes[i].source for i in rec.accepted_path]
    assert path_tokens[:6] == [LP, DATA, C1, FLAG, C2, TWO]
    assert path_sources[:6] == ["spine"] * 5 + ["branch"]
    assert rec.state["path"] == "spine_continuation" and rec.state["spine_broke_at"] == 6
    assert len(rec.committed_ids) >= 7  # 5 spine + 2 + bonus: more than the pure spine's 5 + bonus
    assert list(rec.committed_ids) == hf_greedy(m, prompt, len(rec.committed_ids))


# A chat prompt whose third cycle is a spine continuation on the default model (docs/goose.md, "A spine
# continuation on the default model"): the root " team" matches "Dear team" in the note, the chain is extended to
# 100 tokens (confidence 0.9), the target takes its "," and then wants a newline where the spine says " the"; the
# branch "\n" off that spine node carries the path on. Cycles 0-2 commit "Dear", " team", ",\n\n": 5 tokens.
NOTE = ("Here is a note:\n\nDear team, the weekly meeting moves to Thursday at 10am in room B. Please bring your project "
        "updates and the latest budget numbers. Lunch will be served after the meeting.\n\nRepeat the note exactly, word "
        "for word, but replace Thursday with Friday.")


@pytest.mark.default_model
def test_spine_continuation_default_model(smol, tmp_path):
    """Recorded greedily with the official defaults: the spine says " the", the target wants a newline, and a branch
    off the accepted spine node continues."""
    from specviz_core.recording.store import Recording
    from specviz_core.session.spec import SessionRequest
    from specviz_core.session.session import Session

    n = 5
    req = SessionRequest(method="goose", prompt=NOTE, max_new_tokens=n, budget="paper")  # not this machine's auto
    with Recording(tmp_path / "s.db", create=True) as rec:
        run = Session(req.check(), smol, recording=rec)
        list(run.run())
        info = rec.session(run.info.id)
        cycles = list(rec.cycles(info.id))
    conts = [c for c in cycles if c.state["path"] == "spine_continuation"]
    assert conts, [c.state["path"] for c in cycles]
    c = conts[0]
    nodes = c.node_by_id
    path = [nodes[i] for i in c.accepted_path]
    sources = [n.source for n in path]
    k = sources.index("branch")
    assert c.mode == "tree" and k >= 1 and sources == ["spine"] * k + ["branch"] * (len(path) - k)
    # The accepted path is a chain from the root: spine nodes, then a branch whose parent is the last spine node.
    assert [n.parent for n in path] == [0] + [n.id for n in path[:-1]]
    fork = nodes[path[k].parent]
    assert fork.source == "spine" and fork.id == path[k - 1].id
    # The spine really mismatched there: its next spine node was verified and rejected for the branch's token.
    nxt = [n for n in c.nodes if n.parent == fork.id and n.source == "spine"]
    assert len(nxt) == 1 and nxt[0].verified and not nxt[0].accepted
    assert fork.target_token == path[k].token != nxt[0].token
    assert c.state["spine_broke_at"] == k + 1 and c.state["consensus"] is False
    assert c.state["route"] == "spine_tree" and c.state["chain_extended"] and c.state["continuation_tokens"] == len(path) - k
    tok = smol.tokenizer
    assert (tok.decode([nxt[0].token]), tok.decode([path[k].token])) == (" the", "\n")
    assert list(c.committed_ids) == [n.token for n in path] + [c.bonus_token]
    assert c.index == 2 and [x.state["route"] for x in cycles[:2]] == ["prefill", "branch_tree"]
    assert list(info.output_ids) == hf_greedy(smol, list(info.prompt_ids), len(info.output_ids))
