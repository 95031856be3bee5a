"""Independent references for the tests: plain forwards and transformers' own generate."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from specviz_core.drafters import METHODS
from specviz_core.engine.cycle import Engine
from specviz_core.records import CycleRecord, Node
from specviz_core.runtime.models import LoadedModel
from specviz_core.session.spec import check_method, spec_for
from specviz_core.session.session import Session
from specviz_core.target_rows import TargetRows, target_rows

TIE_GAP = 1e-3


def tiny_llama(vocab: int = 96, seed: int = 0, layers: int = 2) -> LoadedModel:
    """A small random Llama (2 layers unless told) in fp32. A large init spreads the logits, so greedy ties are rare."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.3, eos_token_id=None,
        bos_token_id=None, pad_token_id=None, attn_implementation="sdpa",
    )
    model = LlamaForCausalLM(cfg).eval()
    return LoadedModel(model=model, tokenizer=None, name="tiny", path="tiny", device=torch.device("cpu"),
                       dtype=torch.float32)


def concentrated_llama(seed: int, noise: float = 0.0):
    """A tiny random Llama (32 tokens) that is mostly a Markov chain with concentrated transitions.

    Attention and MLP outputs are scaled down (x0.1), so the next token depends mostly, not only, on
    the current one, and context copying (PLD, n-gram tables) predicts it; the output layer is scaled
    up (x2.5), so the first three tokens fall on a dozen likely sequences. ``noise`` perturbs every
    weight (relative to its spread) to make a draft model that differs from the target.
    """
    m = tiny_llama(vocab=32, seed=0)
    with torch.no_grad():
        for layer in m.model.model.layers:
            layer.self_attn.o_proj.weight.mul_(0.1)
            layer.mlp.down_proj.weight.mul_(0.1)
        m.model.lm_head.weight.mul_(2.5)
        g = torch.Generator().manual_seed(seed)
        for p in m.model.parameters():
            p.add_(noise * p.std() * torch.randn(p.shape, generator=g))
    return m


def rows_of(tokens, logits: torch.Tensor, prev=None, k: int = 16) -> TargetRows:
    """What a harvest receives for rows that ran ``tokens`` and gave ``logits`` [n, V] (``prev``: -1 where None)."""
    tokens = np.asarray([int(t) for t in tokens])
    prev = np.full(len(tokens), -1) if prev is None else np.asarray([-1 if p is None else int(p) for p in prev])
    return target_rows(logits.float(), tokens, None, prev, k)


def top_of(logits: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's top-k ids and softmax probabilities, by a full softmax (an independent computation)."""
    top = torch.softmax(logits.float(), dim=-1).topk(k, dim=-1)
    return top.indices.numpy(), top.values.numpy()


@torch.no_grad()
def hf_greedy(m: LoadedModel, ids: list[int], n: int) -> list[int]:
    x = torch.tensor([ids])
    eos = list(m.eos_token_ids) or None
    out = m.model.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n,
                           eos_token_id=eos, pad_token_id=eos[0] if eos else 0, num_beams=1)
    return out[0, len(ids):].tolist()


#: hf_greedy's outputs for a model kept for the whole run (the default model): (id, prompt, n) -> (model, tokens).
_GREEDY: dict[tuple[int, tuple[int, ...], int], tuple[LoadedModel, list[int]]] = {}


def hf_greedy_once(m: LoadedModel, ids: list[int], n: int) -> list[int]:
    """:func:`hf_greedy`, run once per model, prompt and length in a test run: the default model's reference for a
    prompt that several tests (or files) decode, each compared with the same generate output. For a model no test
    changes (the session's ``smol``); the entry keeps the model, so its id names it for the whole run."""
    key = (id(m), tuple(int(t) for t in ids), n)
    if key not in _GREEDY:
        _GREEDY[key] = (m, hf_greedy(m, list(ids), n))
    return list(_GREEDY[key][1])


@contextmanager
def torch_threads(n: int):
    """Torch's intra-op threads set to ``n`` inside, restored after: for a module's fixture that trains or decodes a
    tiny model (the ``one_thread`` fixture covers a test's own body, not the module fixtures set up before it). A
    tiny model gains nothing from a second thread, and on a shared CPU its spinning against the other load made a
    200-step head training 10x slower (88 s against 8.5 s, the same weights)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@torch.no_grad()
def plain_logits(m: LoadedModel, ids: list[int]) -> torch.Tensor:
    """Logits after the last of ``ids`` from one plain causal forward, no cache: [V]."""
    return m.model(input_ids=torch.tensor([ids])).logits[0, -1].float()


def compare_greedy(m: LoadedModel, prompt: list[int], ours: list[int], ref: list[int]) -> str:
    """'identical', 'tie at i (gap g)' when the first divergence is a near-tie of the top-2 logits, else 'diverged ...'."""
    if ours == ref:
        return "identical"
    i = next((k for k, (a, b) in enumerate(zip(ours, ref)) if a != b), min(len(ours), len(ref)))
    if i == min(len(ours), len(ref)):
        return f"diverged: lengths {len(ours)} vs {len(ref)}"
    top2 = plain_logits(m, prompt + ref[:i]).topk(2).values
    gap = float(top2[0] - top2[1])
    return f"tie at {i} (gap {gap:.2e})" if gap < TIE_GAP else f"diverged at {i} (gap {gap:.2e}): {ours[i]} vs {ref[i]}"


def make_engine(m: LoadedModel, method: str, prompt: list[int], n: int, draft: LoadedModel | None = None,
                temperature: float = 0.0, seed: int = 0, reuse=None, **params) -> Engine:
    """The engine of :func:`make_session` (no recording)."""
    return make_session(m, method, prompt, n, draft, temperature, seed, reuse, **params).engine


def make_session(m: LoadedModel, method: str, prompt: list[int], n: int, draft: LoadedModel | None = None,
                 temperature: float = 0.0, seed: int = 0, reuse=None, recording=None, info=None, **params) -> Session:
    """A session of ``method`` on token ids, recorded to ``recording`` (under ``info`` when given) if one is."""
    # The method's own trees unless a test asks for budget=auto (the default, which chooses from this machine's
    # timings: its own tests are in test_budget.py).
    if "budget" in METHODS[method].params_cls.__dataclass_fields__:
        params.setdefault("budget", "paper")
    choice = check_method(method, params)
    if choice.wants_draft_model and draft is None:
        draft = m
    spec = spec_for(choice, prompt, max_new_tokens=n, temperature=temperature, seed=seed,
                    draft_model=draft.name if draft is not None else None)
    return Session(spec, m, draft if choice.wants_draft_model else None, drafter=reuse, recording=recording,
                   info=info)


def run(m: LoadedModel, method: str, prompt: list[int], n: int, **kw) -> tuple[list[int], list]:
    e = make_engine(m, method, prompt, n, **kw)
    records = list(e.cycles())
    return e.output_ids, records


def tree_record(nodes: list[tuple[int, int, str, float, int, bool]], **state) -> CycleRecord:
    """nodes: (id, parent, source, score, depth, accepted); the root is added; ``state``: the record's state."""
    ns = [Node(0, -1, 1, "root", 0, 1.0, True, accepted=True)]
    ns += [Node(i, par, 5, src, d, sc, True, accepted=acc) for i, par, src, sc, d, acc in nodes]
    n = len(ns)
    return CycleRecord(index=0, mode="tree", cache_len=10, nodes=tuple(ns), verify_order=tuple(range(n)),
                       mask=np.eye(n, dtype=bool), positions=tuple(range(n)),
                       accepted_path=tuple(x.id for x in ns if x.id and x.accepted), bonus_token=1,
                       committed_ids=(1,), kv_keep=(0,), timings_ms={"forward": 60.0, "walk": 1.0}, state=state)


#: Two float computations of the same value in different orders (another kernel, batch shape or CPU's vector
#: width) differ by rounding that grows with the magnitudes involved and the reductions on the way: through a few
#: layers, a few hundred units in the last place of the largest value (an Intel Xeon gave 3.0e-5 on values near 3
#: in float32, 250 ulp, where the AMD CPU the test was written on gave under 1e-5). A real bug (a wrong mask, a
#: wrong position) moves values by tenths.
REORDER_ULPS = 1024


def reorder_tol(*refs, dtype=None, ulps: int = REORDER_ULPS) -> float:
    """An absolute tolerance for comparing floats computed in two orders: ``ulps`` units in the last place of the
    largest magnitude among ``refs`` (tensors or arrays), in ``dtype`` (default: the first ref's)."""
    import torch as _torch

    scale = 1.0
    for r in refs:
        t = _torch.as_tensor(r).detach()
        if t.numel():
            scale = max(scale, float(t.abs().max()))
    dt = dtype or _torch.as_tensor(refs[0]).dtype
    return ulps * _torch.finfo(dt).eps * scale
