"""Reference rows for ``specviz bench``: transformers' own ``generate``, greedy.

- ``hf_prompt_lookup``: ``generate(prompt_lookup_num_tokens=10)``, transformers' prompt lookup decoding;
- ``hf_assisted``: ``generate(assistant_model=draft)``, its draft-model speculative decoding;
- ``hf_greedy``: plain ``generate``, to show the engine's own per-token overhead against transformers' loop.

``hf_prompt_lookup`` and ``hf_assisted`` are also methods a session records cycle by cycle (``drafters/hf_*``):
one name, one decoding. The row takes the method's parameters (``hf_assisted:num_assistant_tokens=5``) and runs
them through transformers' own loop (the assistant settings on the assistant's ``generation_config``, where
``generate`` reads them); a recorded session of the same method and parameters commits the same tokens with the
same acceptance per cycle (``tests/methods/test_hf_generate.py``), so the row is that session's speed without SpecViz's
per-cycle recording.

Target forwards are counted with a forward hook on the target, so tau is comparable with the
engine's (new tokens per target forward; generate's first forward also produces a token).
generate() runs the prompt in its first forward, so the decode time is measured from the first
new token (seen by a streamer) to the end, and covers the tokens after the first forward's.
"""

from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass
from typing import Any

import torch

from specviz_core.drafters.hf.generate import assistant_settings
from specviz_core.methods import CARDS, parse_params
from specviz_core.runtime.models import LoadedModel, synchronize
from specviz_core.session.generate_kwargs import to_generate_kwargs

HF_METHODS = ("hf_prompt_lookup", "hf_assisted", "hf_greedy")

_assistant_copies: dict[int, Any] = {}


def _assistant(target: LoadedModel, draft: LoadedModel) -> Any:
    # The target as its own assistant would be counted twice by the hook: give generate a copy.
    if draft.model is not target.model:
        return draft.model
    key = id(target.model)
    if key not in _assistant_copies:
        _assistant_copies[key] = copy.deepcopy(target.model).eval()
    return _assistant_copies[key]


class _FirstTokens:
    """A streamer that notes when the first new tokens arrive and how many."""

    def __init__(self) -> None:
        self.calls = 0
        self.t_first: float | None = None
        self.n_first = 0

    def put(self, value: torch.Tensor) -> None:
        self.calls += 1
        if self.calls == 2:  # the first call carries the prompt
            self.t_first = time.perf_counter()
            self.n_first = int(value.numel())

    def end(self) -> None:
        pass


@dataclass
class HFRun:
    output_ids: list[int]
    n_forward: int
    total_s: float
    """Wall time of generate(), prompt included."""
    first_s: float
    """Time to the first forward's tokens (the prompt's forward)."""
    n_first: int
    """Tokens the first forward produced."""


@torch.no_grad()
def run(target: LoadedModel, draft: LoadedModel | None, method: str, ids: list[int], max_new_tokens: int,
        params: dict[str, Any] | None = None) -> HFRun:
    """Decode greedily with ``generate``; ``params``: the method's parameters (``key=value`` strings or values)."""
    x = torch.tensor([ids], device=target.device)
    eos = list(target.eos_token_ids) or None
    kwargs: dict[str, Any] = dict(attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=max_new_tokens,
                                  eos_token_id=eos, pad_token_id=eos[0] if eos else 0, num_beams=1)
    settings: dict[str, Any] = {}
    if method in ("hf_prompt_lookup", "hf_assisted"):
        gen_kwargs, settings = to_generate_kwargs(method, parse_params(method, CARDS[method].params_cls, params or {}))
        kwargs.update(gen_kwargs)
    elif method != "hf_greedy":
        raise ValueError(f"unknown reference method {method}")
    if method == "hf_assisted":
        if draft is None:
            raise ValueError("hf_assisted needs a draft model")
        kwargs["assistant_model"] = _assistant(target, draft)
    assistant = assistant_settings(kwargs["assistant_model"], **settings) if settings else contextlib.nullcontext()
    count = [0]

    def hook(module: Any, args: Any, output: Any) -> None:
        count[0] += 1

    handle = target.model.register_forward_hook(hook)
    try:
        synchronize(target.device)
        streamer = _FirstTokens()
        t0 = time.perf_counter()
        with assistant:
            out = target.model.generate(x, streamer=streamer, **kwargs)
        synchronize(target.device)
        secs = time.perf_counter() - t0
    finally:
        handle.remove()
    first = (streamer.t_first - t0) if streamer.t_first is not None else secs
    return HFRun(out[0, len(ids):].tolist(), count[0], secs, first, streamer.n_first)
