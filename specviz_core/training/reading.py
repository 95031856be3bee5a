"""Reading a text through the target: at every position its features (the input of its LM head) and its top-k
next-token distribution, batched, in the precision that is fastest here, within a deadline."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from specviz_core.errors import SpecVizError
from specviz_core.runtime.feature_tap import TapOwner, install_feature_tap, lm_head_of
from specviz_core.runtime.models import LoadedModel, Progress

TOPK = 16
"""Target probabilities kept per position (the soft labels)."""
FEATURE_DTYPE = torch.bfloat16
"""How the target's features are kept between reading and training (half the memory of float32; a million
tokens of a 576-wide model is 1.2 GB)."""


@dataclass
class Corpus:
    """Teacher-forced sequences: tokens [T], the target's features [T, H] (or [T, 3H], three layers') and top-k
    [T, k] at each position."""

    tokens: list[torch.Tensor] = field(default_factory=list)
    feats: list[torch.Tensor] = field(default_factory=list)
    top_ids: list[torch.Tensor] = field(default_factory=list)
    top_p: list[torch.Tensor] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    """Per sequence, its first answer position (the rows before ``start - 1`` predict prompt text: no loss there)."""

    @property
    def n_tokens(self) -> int:
        return sum(len(t) for t in self.tokens)

    def split(self, held_out: float) -> tuple[Corpus, Corpus]:
        """(train, held-out): the last sequences held out, at least one."""
        k = max(1, round(len(self.tokens) * held_out)) if len(self.tokens) > 1 else 0
        cut = len(self.tokens) - k
        parts = [(getattr(self, f)[:cut], getattr(self, f)[cut:])
                 for f in ("tokens", "feats", "top_ids", "top_p", "starts")]
        return Corpus(*(p[0] for p in parts)), Corpus(*(p[1] for p in parts))


Stop = Callable[[], bool]
"""Asked between units of work (a generated token, an answer read, a training step): True stops the run."""


class TrainingStopped(SpecVizError):
    """The run was stopped (``stop`` returned True): nothing was saved."""


def _check(stop: Stop | None) -> None:
    if stop is not None and stop():
        raise TrainingStopped("training stopped: no head was saved")


_BF16_FASTER: dict[tuple[int, str], bool] = {}
"""Per model and device: whether reading in bfloat16 was measured faster than in float32."""


def reading_precision(target: LoadedModel) -> Any:
    """bfloat16 autocast where it is measurably faster for this model on this device, else nothing.

    On a CPU with bfloat16 units (AMX, AVX-512 BF16) it read 2.4x faster, with features within 1% of
    float32's and the same top-1 at 98.7% of positions; on an AVX-512 CPU without them oneDNN emulates it
    and it read 4.6x slower (190 against 900 tokens a second), though oneDNN says bfloat16 is supported.
    So it is timed, once per model: two forwards of 256 tokens each way. A model loaded in half precision
    already is read as it is."""
    dev = target.device.type
    if target.dtype != torch.float32 or dev not in ("cpu", "cuda"):
        return contextlib.nullcontext()
    if dev == "cuda" and not torch.cuda.is_bf16_supported():
        return contextlib.nullcontext()
    key = (id(target.model), str(target.device))
    if key not in _BF16_FASTER:
        _BF16_FASTER[key] = _time_read(target, True) * 1.2 < _time_read(target, False)
    return torch.autocast(dev, dtype=torch.bfloat16) if _BF16_FASTER[key] else contextlib.nullcontext()


def read_rate(target: LoadedModel) -> float:
    """Tokens a second the target reads (teacher-forced) here, at the precision it will read in: from the two
    timed forwards of 256 tokens that choose the precision (about a second, once per model)."""
    reading_precision(target)
    key = (id(target.model), str(target.device))
    bf16 = _BF16_FASTER.get(key, False)
    return 256 / _time_read(target, bf16)


@torch.no_grad()
def _time_read(target: LoadedModel, bf16: bool) -> float:
    """Best of two forwards over 256 tokens, in seconds."""
    ids = torch.arange(256, device=target.device)[None] % int(target.model.config.vocab_size)
    best = math.inf
    for _ in range(2):
        ctx = torch.autocast(target.device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        if target.device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        with ctx:
            target.model(input_ids=ids, use_cache=False)
        if target.device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return best


@torch.no_grad()
def teacher_force(target: LoadedModel, sequences: list[tuple[int, list[int]]], progress: Progress | None = None,
                  stop: Stop | None = None, deadline: float | None = None, rows: int = 2048,
                  chunk: int = 256, layers: tuple[int, ...] | None = None) -> Corpus:
    """The target's features and its top-k next-token distribution at every position of each sequence, in
    sequence order; at ``deadline`` (``time.monotonic``) it stops, with the sequences read so far (about the
    first ones: each ``chunk`` is read shortest first; one forward at least, however late, so that a slow
    machine trains on less text rather than on none). Sequences of like length share a forward, padded on
    the right (causal attention: no real row sees the padding), about ``rows`` rows a forward. ``layers``: the
    features are those decoder layers' inputs, concatenated (an eagle3 head's), not the LM head's input."""
    reader = TapOwner()  # the tap keeps the features while this reading runs
    install_feature_tap(target.model, layers, owner=reader)
    lm = lm_head_of(target.model)
    dev = target.device
    order = [k for c in range(0, len(sequences), chunk)  # like lengths together, within chunks kept in order
             for k in sorted(range(c, min(c + chunk, len(sequences))), key=lambda i: len(sequences[i][1]))]
    got: dict[int, tuple[torch.Tensor, ...]] = {}
    i = 0
    while i < len(order) and (deadline is None or time.monotonic() < deadline or not got):
        _check(stop)
        width = len(sequences[order[i]][1])
        j = i + 1
        while j < len(order) and (j - i + 1) * len(sequences[order[j]][1]) <= max(rows, width):
            j += 1
        part = order[i:j]
        width = max(len(sequences[k][1]) for k in part)
        ids = torch.tensor([sequences[k][1] + [sequences[k][1][-1]] * (width - len(sequences[k][1])) for k in part],
                           device=dev)
        with reading_precision(target):
            logits = target.model(input_ids=ids, use_cache=False).logits.float()  # [b, T, V]
        feats = lm._specviz_features.detach()
        top = torch.softmax(logits, dim=-1).topk(min(TOPK, logits.shape[-1]), dim=-1)
        for r, k in enumerate(part):
            n = len(sequences[k][1])
            got[k] = (ids[r, :n].cpu(), feats[r, :n].to(FEATURE_DTYPE).cpu(), top.indices[r, :n].cpu(),
                      top.values[r, :n].cpu())
        i = j
        if progress:
            progress(f"Reading the target's features: {i} of {len(order)} answers", i / len(order))
    c = Corpus()
    for k in sorted(got):  # sequence order (the held-out split takes the last ones)
        tok, f, top_ids, top_p = got[k]
        c.tokens.append(tok)
        c.feats.append(f)
        c.top_ids.append(top_ids)
        c.top_p.append(top_p)
        c.starts.append(sequences[k][0])
    return c
