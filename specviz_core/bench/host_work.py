"""What the loop costs around the forward: host work per cycle on a 2-layer model, and AR against a plain loop.

On a GPU a large model's forward takes a few milliseconds, and everything a cycle does besides it (drafting,
walking, trimming, harvesting, building and storing the record) is time the device waits. A 2-layer random Llama
makes the forward cheap on any machine, so what is left is the loop's own work. Every method runs through
:class:`~specviz_core.session.session.Session` with a recording (a temporary file), one thread, the paper's
budgets; host work is every recorded stage but the forward (and, by the wall clock, the whole ``Session.step`` less
its forward: what no stage times besides, the summary and the SQLite write). AR, not recorded, runs beside a plain greedy loop of a
dozen lines over the same model and cache type, interleaved.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

from specviz_core.drafters import METHODS
from specviz_core.recording.store import Recording
from specviz_core.runtime import kv
from specviz_core.runtime.models import LoadedModel
from specviz_core.session.session import Session
from specviz_core.session.spec import check_method, spec_for

#: Methods that need no draft model or head, each as it runs with the paper's budget.
HOST_METHODS = ("ar", "pld", "goose", "tr", "stand", "talon", "draft_tree")
#: A prompt with repeated structure, so that the copying methods find something to copy.
PATTERN = (5, 17, 3, 42, 8, 23, 61, 9, 14, 77, 2, 30)


#: Tokens a random model writes: with a larger vocabulary the others' output rows are zero, so it still repeats
#: itself as a 96-token model does (the copying methods draft trees), while every row's softmax, top-k and copy
#: span the whole vocabulary.
ACTIVE = 96


def two_layer_model(vocab: int, seed: int = 0) -> LoadedModel:
    """A random 2-layer Llama (hidden 64) in fp32 with ``vocab`` tokens, writing only the first :data:`ACTIVE`."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      initializer_range=0.3, eos_token_id=None, bos_token_id=None, pad_token_id=None,
                      attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight[ACTIVE:] = 0.0
    return LoadedModel(model=model, tokenizer=None, name=f"random-2layer-{vocab}", path="random",
                       device=torch.device("cpu"), dtype=torch.float32)


def prompt_ids(vocab: int) -> list[int]:
    return [t % vocab for t in PATTERN * 8]


@dataclass(frozen=True)
class HostRow:
    method: str
    cycles: int
    rows: float
    """Median rows verified a cycle."""
    forward_ms: float
    host_ms: float
    """Median of every recorded stage but the forward, a cycle."""
    stages: dict[str, float]
    """Median ms of each recorded stage, a cycle."""
    wall_host_ms: float = 0.0
    """Median of a cycle's whole ``Session.step`` (by the wall clock) less its forward: the recorded stages and what
    no stage times (the cycle's summary, the SQLite insert and commit)."""

    @property
    def ratio(self) -> float:
        return self.host_ms / self.forward_ms if self.forward_ms > 0 else float("inf")

    @property
    def wall_ratio(self) -> float:
        return self.wall_host_ms / self.forward_ms if self.forward_ms > 0 else float("inf")


def host_work(target: LoadedModel, method: str, tokens: int, folder: Path) -> HostRow:
    """One recorded session of ``method`` (the paper's budget); medians over its cycles but the first."""
    params = {"budget": "paper"} if "budget" in METHODS[method].params_cls.__dataclass_fields__ else {}
    choice = check_method(method, params)
    spec = spec_for(choice, prompt_ids(target.model.config.vocab_size), max_new_tokens=tokens,
                    draft_model=target.name if choice.wants_draft_model else None)
    recording = Recording(folder / f"{method}.db", create=True)
    session = Session(spec, target, target if choice.wants_draft_model else None, recording=recording)
    session.prefill()
    records, walls = [], []
    while not session.done:
        t0 = time.perf_counter()
        records.append(session.step().record)
        walls.append((time.perf_counter() - t0) * 1000.0)
    session.end()
    records, walls = records[1:], walls[1:]
    if not records:
        return HostRow(method, 0, 0.0, 0.0, 0.0, {}, 0.0)
    stages = sorted({k for r in records for k in r.timings_ms})
    med = {k: statistics.median(r.timings_ms.get(k, 0.0) for r in records) for k in stages}
    host = statistics.median(sum(v for k, v in r.timings_ms.items() if k != "forward") for r in records)
    wall = statistics.median(w - r.timings_ms.get("forward", 0.0) for w, r in zip(walls, records))
    rows = statistics.median(len(r.verify_order) for r in records)
    return HostRow(method, len(records), rows, med.get("forward", 0.0), host, med, wall)


@torch.no_grad()
def plain_greedy(model: torch.nn.Module, ids: list[int], n: int) -> list[int]:
    """The dozen-line loop: prefill, then one token a forward with a DynamicCache, argmax."""
    cache = DynamicCache()
    x = torch.tensor([ids])
    out = []
    for _ in range(n):
        logits = model(input_ids=x, **kv.cache_arg(model, cache), use_cache=True).logits
        nxt = logits[0, -1].argmax()
        out.append(int(nxt))
        x = nxt.view(1, 1)
    return out


def ar_against_plain(target: LoadedModel, tokens: int, rounds: int) -> tuple[float, float, bool]:
    """AR through ``Session`` (not recorded) and the plain loop, interleaved: (AR tok/s, plain tok/s, same output),
    medians of ``rounds``; each run's time counts the prefill and every token, for both alike."""
    ids = prompt_ids(target.model.config.vocab_size)
    spec = spec_for(check_method("ar", {}), ids, max_new_tokens=tokens)

    def ours() -> list[int]:
        session = Session(spec, target, None)
        for _ in session.records():
            pass
        return session.engine.output_ids

    def plain() -> list[int]:
        return plain_greedy(target.model, ids, tokens)

    def timed(fn: Callable[[], list[int]]) -> tuple[float, list[int]]:
        t0 = time.perf_counter()
        out = fn()
        return tokens / (time.perf_counter() - t0), out

    timed(ours), timed(plain)  # warm-up
    a, b, same = [], [], True
    for _ in range(rounds):
        ta, oa = timed(ours)
        tb, ob = timed(plain)
        a.append(ta)
        b.append(tb)
        same = same and oa == ob
    return statistics.median(a), statistics.median(b), same


def run(vocabs: tuple[int, ...] = (96, 49152), tokens: int = 128, rounds: int = 5,
        methods: tuple[str, ...] = HOST_METHODS, say: Callable[[str], None] = print) -> dict:
    """Print (through ``say``) and return the host-work table for every vocabulary, and AR against the plain loop."""
    torch.set_num_threads(1)
    result: dict = {"tokens": tokens, "vocabs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for vocab in vocabs:
            target = two_layer_model(vocab)
            say(f"2-layer random Llama, vocabulary {vocab:,}, {tokens} tokens, one thread, recorded, paper budgets")
            say(f"  {'method':11s} {'cycles':>6s} {'rows':>5s} {'forward':>9s} {'host':>9s} {'host/fwd':>8s} "
                f"{'wall/fwd':>8s}  stages (ms)")
            rows = []
            for method in methods:
                row = host_work(target, method, tokens, Path(tmp))
                rows.append(row)
                stages = " ".join(f"{k} {v:.2f}" for k, v in row.stages.items() if k != "forward")
                say(f"  {method:11s} {row.cycles:6d} {row.rows:5.0f} {row.forward_ms:7.2f}ms {row.host_ms:7.2f}ms "
                    f"{row.ratio:7.2f}x {row.wall_ratio:7.2f}x  {stages}")
            ar, plain, same = ar_against_plain(target, tokens, rounds)
            say(f"  AR, not recorded: {ar:.0f} tok/s; a plain greedy loop: {plain:.0f} tok/s; {ar / plain:.2f}x "
                f"(medians of {rounds}, interleaved; {'same output' if same else 'OUTPUTS DIFFER'})")
            say("")
            result["vocabs"][vocab] = {"methods": [r.__dict__ for r in rows], "ar_tok_s": ar, "plain_tok_s": plain,
                                       "ar_vs_plain": ar / plain, "same_output": same}
    return result
