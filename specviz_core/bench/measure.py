"""One decode, measured: tokens/s after the first forward, target forwards, the time of every cycle
stage and peak memory, for an engine method or a transformers reference row."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from specviz_core.bench import hf as bench_hf
from specviz_core.bench.aggregate import STAGES
from specviz_core.bench.specs import MethodSpec
from specviz_core.runtime.models import LoadedModel
from specviz_core.session.spec import check_method, spec_for
from specviz_core.session.session import Session


@dataclass
class RunResult:
    """One decode of one prompt by one method."""

    output_ids: list[int]
    n_forward: int
    decode_s: float
    """Wall time of decoding, prefill excluded, s."""
    prefill_ms: float
    stage_ms: dict[str, float]
    """Summed per stage over the cycles, ms."""
    n_cycles: int
    peak_mem_mb: float | None
    rate_tokens: int = 0
    """Tokens committed after the first target forward that follows the prompt."""
    rate_s: float = 0.0
    """Seconds from the end of that forward to the end of decoding."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens_per_s(self) -> float:
        """Tokens/s after the first forward (generate() fuses that one with the prompt, so no row counts it)."""
        if self.rate_tokens > 0 and self.rate_s > 0:
            return self.rate_tokens / self.rate_s
        return len(self.output_ids) / self.decode_s if self.decode_s > 0 else 0.0


class PeakMemory:
    """Peak memory during a run: the CUDA allocator's peak, or the process's peak RSS (Linux)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def __enter__(self) -> PeakMemory:
        self.peak_mb: float | None = None
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            try:  # writing 5 resets VmHWM (the peak RSS) to the current RSS
                with open("/proc/self/clear_refs", "w") as fh:
                    fh.write("5")
            except OSError:
                pass
        return self

    def __exit__(self, *exc: object) -> None:
        if self.device.type == "cuda":
            self.peak_mb = torch.cuda.max_memory_allocated(self.device) / 2**20
            return
        try:
            with open("/proc/self/status", encoding="utf-8") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        self.peak_mb = int(line.split()[1]) / 1024
        except OSError:
            pass


def run_engine(target: LoadedModel, draft: LoadedModel | None, spec: MethodSpec, ids: list[int],
               max_new_tokens: int, *, temperature: float = 0.0, seed: int = 0, recording: Any = None) -> RunResult:
    """Decode ``ids`` with one method (sampling when ``temperature`` > 0, from ``seed``); with ``recording``
    (an open Recording), every cycle is recorded."""
    choice = check_method(spec.method, spec.params)
    session = Session(spec_for(choice, ids, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
                               draft_model=draft.name if draft is not None else None),
                      target, draft, recording=recording)
    controller = session.engine.budget
    stage = dict.fromkeys(STAGES, 0.0)
    n_cycles = 0
    with PeakMemory(target.device) as mem:
        prefill_ms = session.prefill()
        t0 = time.perf_counter()
        cycles = session.records()
        t_first, n_first = t0, 0
        for rec in cycles:
            if n_cycles == 0:
                t_first, n_first = time.perf_counter(), len(rec.committed_ids)
            n_cycles += 1
            for k, v in rec.timings_ms.items():
                stage[k] = stage.get(k, 0.0) + v
        t_end = time.perf_counter()
    extra: dict[str, Any] = {}
    if controller is not None:
        extra["budget"] = controller.summary()
    out = session.output_ids
    n = len(out)
    rate = (n - n_first, t_end - t_first) if n > n_first else (n, t_end - t0)  # one cycle: count it
    return RunResult(out, session.n_forward, t_end - t0, prefill_ms, stage, n_cycles, mem.peak_mb,
                     rate[0], rate[1], extra)


def run_one(target: LoadedModel, draft: LoadedModel | None, spec: MethodSpec, ids: list[int], max_new_tokens: int,
            *, temperature: float = 0.0, seed: int = 0) -> RunResult:
    """Decode ``ids`` with an engine method or, greedily, with a transformers reference row."""
    if spec.is_hf:
        with PeakMemory(target.device) as mem:
            h = bench_hf.run(target, draft, spec.method, ids, max_new_tokens, spec.params)
        # generate() runs the prompt in its first forward: time the decode from the first new tokens on.
        n_after = len(h.output_ids) - h.n_first
        rate = (n_after, h.total_s - h.first_s) if n_after > 0 else (len(h.output_ids), h.total_s)
        return RunResult(h.output_ids, h.n_forward, h.total_s - h.first_s, h.first_s * 1000.0, {}, 0, mem.peak_mb,
                         rate[0], rate[1], {"e2e_s": h.total_s})
    return run_engine(target, draft, spec, ids, max_new_tokens, temperature=temperature, seed=seed)
