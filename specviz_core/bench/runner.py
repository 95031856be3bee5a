"""``specviz bench``: every method on every prompt, one process, one model instance, interleaved.

For each prompt, after one warm-up of every method, the methods run in rounds (A B C, A B C,
...), so a slow minute on a shared machine hits every method alike. Per method and prompt:
tau (tokens committed per target forward), tokens/s (median of the repeats, prefill
excluded), the speed-up over AR measured in the same rounds, where each cycle's time goes
(draft, forward, walk, trim, harvest, build, record), peak memory, and whether the output is
token for token AR's. transformers' own ``generate`` gives the reference rows
(``hf_prompt_lookup``, ``hf_assisted``, ``hf_greedy``; see ``bench_hf``). Listed methods also
run a second time in every round with recording on (to a temporary SQLite file), which gives
the recording overhead. The verify-cost curve is measured first and stored for the GUI and
for ``budget=auto``. ``bench_report`` turns the result into tables.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from specviz_core.bench import hf as bench_hf
from specviz_core.bench.suites import Prompt, Suite
from specviz_core.bench.summary import STAGES, budget_auto_summary, recording_summary, suite_summary
from specviz_core.drafters import METHODS, method_class, parse_params
from specviz_core.engine.budget import split_auto
from specviz_core.engine.cost_curve import SIZES, device_name, measure_cost_curve, save_cost_curve
from specviz_core.errors import SpecVizError
from specviz_core.models import LoadedModel
from specviz_core.session.factory import Prepared, build_engine, session_info
from specviz_core.session.request import check_method

#: Methods run when ``--methods`` is not given (``hf_assisted`` and ``draft_tree`` join when there is a draft model).
DEFAULT_METHODS = ("ar", "pld", "hf_prompt_lookup", "tr", "tr:budget=auto", "goose", "goose:budget=auto")
#: Methods also run with recording on, for the recording overhead.
DEFAULT_RECORDED = ("goose:budget=auto",)
TIE_GAP = 1e-3
#: Repeats whose fastest is this many times their slowest are flagged ``noisy`` (a disturbed machine).
NOISY_SPREAD = 1.5


@dataclass(frozen=True)
class MethodSpec:
    """One benchmarked configuration: a method with parameters, e.g. ``goose:budget=auto:top_k=8``."""

    label: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def is_hf(self) -> bool:
        return self.method in bench_hf.HF_METHODS


def parse_method_specs(text: str, extra_params: dict[str, str] | None = None) -> list[MethodSpec]:
    """``ar,pld,goose:budget=auto,isotropic:k=5:budget=auto``; ``extra_params`` (``--param``) go to every
    method that has them."""
    specs, seen = [], set()
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        method, *kvs = item.split(":")
        params: dict[str, Any] = {}
        for kv in kvs:
            key, sep, value = kv.partition("=")
            if not sep or not key:
                raise SpecVizError(f"method parameters take key=value, got {kv!r} in {item!r}")
            params[key.strip()] = value.strip()
        if method in bench_hf.HF_METHODS:
            if params:
                raise SpecVizError(f"{method} takes no parameters")
        else:
            cls = method_class(method)
            fields = cls.params_cls.__dataclass_fields__
            for key, value in (extra_params or {}).items():
                if key in fields and key not in params:
                    params[key] = value
            rest, _ = split_auto(method, cls.params_cls, params)
            parse_params(method, cls.params_cls, rest)  # check now, before the slow part
        label = method + "".join(f":{k}={v}" for k, v in params.items())
        if label in seen:
            continue
        seen.add(label)
        specs.append(MethodSpec(label, method, params))
    if not specs:
        raise SpecVizError("no methods given")
    return specs


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
               max_new_tokens: int, recording: Any = None) -> RunResult:
    """Decode ``ids`` with one method; with ``recording`` (an open Recording), every cycle is recorded."""
    choice = check_method(spec.method, spec.params)
    engine = build_engine(target, choice, ids, draft=draft, max_new_tokens=max_new_tokens)
    controller = engine.budget
    stage = dict.fromkeys(STAGES, 0.0)
    n_cycles = 0
    with PeakMemory(target.device) as mem:
        prefill_ms = engine.prefill()
        if recording is not None:
            from specviz_core.session.run import RecordedRun

            info = session_info(target, choice, ids, max_new_tokens=max_new_tokens)
            t0 = time.perf_counter()
            cycles = (c.record for c in RecordedRun(Prepared(engine, info), recording).run())
        else:
            t0 = time.perf_counter()
            cycles = engine.cycles()
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
    n = len(engine.output_ids)
    rate = (n - n_first, t_end - t_first) if n > n_first else (n, t_end - t0)  # one cycle: count it
    return RunResult(list(engine.output_ids), engine.n_forward, t_end - t0, prefill_ms, stage, n_cycles, mem.peak_mb,
                     rate[0], rate[1], extra)


def run_one(target: LoadedModel, draft: LoadedModel | None, spec: MethodSpec, ids: list[int], max_new_tokens: int,
            recording: Any = None) -> RunResult:
    if spec.is_hf:
        with PeakMemory(target.device) as mem:
            h = bench_hf.run(target, draft, spec.method, ids, max_new_tokens)
        # generate() runs the prompt in its first forward: time the decode from the first new tokens on.
        n_after = len(h.output_ids) - h.n_first
        rate = (n_after, h.total_s - h.first_s) if n_after > 0 else (len(h.output_ids), h.total_s)
        return RunResult(h.output_ids, h.n_forward, h.total_s - h.first_s, h.first_s * 1000.0, {}, 0, mem.peak_mb,
                         rate[0], rate[1], {"e2e_s": h.total_s})
    return run_engine(target, draft, spec, ids, max_new_tokens, recording)


@torch.no_grad()
def compare_to_ar(target: LoadedModel, prompt: list[int], ours: list[int], ar: list[int]) -> str:
    """``identical``; ``tie at i (gap g)`` if the first divergence is a near-tie of AR's top-2 logits; else ``diverged ...``."""
    if ours == ar:
        return "identical"
    i = next((k for k, (a, b) in enumerate(zip(ours, ar)) if a != b), min(len(ours), len(ar)))
    if i == min(len(ours), len(ar)):
        return f"diverged: {len(ours)} tokens against AR's {len(ar)}"
    x = torch.tensor([prompt + ar[:i]], device=target.device)
    top2 = target.model(input_ids=x).logits[0, -1].float().topk(2).values
    gap = float(top2[0] - top2[1])
    kind = "tie" if gap < TIE_GAP else "diverged"
    return f"{kind} at token {i} (top-2 gap {gap:.1e})"


def machine_info(target: LoadedModel) -> dict[str, Any]:
    import transformers

    return {
        "device": str(target.device), "device_name": device_name(target.device), "dtype": str(target.dtype).removeprefix("torch."),
        "cpu": device_name(torch.device("cpu")), "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
        "transformers": transformers.__version__,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def _median_run(runs: Sequence[RunResult]) -> RunResult:
    by_speed = sorted(runs, key=lambda r: r.tokens_per_s)
    return by_speed[(len(by_speed) - 1) // 2]


def _stage_summary(runs: Sequence[RunResult]) -> tuple[dict[str, float], dict[str, float]]:
    """Mean ms per cycle of every stage, and each stage's share of the cycle time."""
    cycles = sum(r.n_cycles for r in runs)
    if not cycles:
        return {}, {}
    total = {k: sum(r.stage_ms.get(k, 0.0) for r in runs) for k in STAGES}
    per_cycle = {k: round(v / cycles, 3) for k, v in total.items()}
    all_ms = sum(total.values())
    share = {k: round(v / all_ms, 4) if all_ms else 0.0 for k, v in total.items()}
    return per_cycle, share


Progress = Callable[[str, int, int], None]


@dataclass
class BenchConfig:
    methods: list[MethodSpec]
    suites: list[Suite]
    max_new_tokens: int = 40
    repeats: int = 2
    warmup: bool = True
    recorded: list[str] = field(default_factory=lambda: list(DEFAULT_RECORDED))
    """Labels of methods also run with recording on."""
    cost_curve: bool = True
    cost_sizes: tuple[int, ...] = SIZES


def run_bench(target: LoadedModel, draft: LoadedModel | None, cfg: BenchConfig,
              progress: Progress | None = None, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the whole benchmark; returns the results dict (see ``docs/benchmarks.md`` for its fields)."""
    progress = progress or (lambda what, done, total: None)
    log = log or (lambda s: None)
    started = time.perf_counter()
    specs = cfg.methods
    if cfg.repeats < 1:
        raise SpecVizError("--repeats must be at least 1")
    if cfg.max_new_tokens < 1:
        raise SpecVizError("--max-new-tokens must be at least 1")
    for spec in specs:
        needs = spec.method == "hf_assisted" or (not spec.is_hf and METHODS[spec.method].needs_draft_model)
        if needs and draft is None:
            raise SpecVizError(f"{spec.label} needs --draft-model")
    labels = [s.label for s in specs]
    if "ar" not in labels:
        specs = [MethodSpec("ar", "ar")] + specs  # every speed-up is measured against AR in the same rounds
    recorded = [s for s in specs if s.label in cfg.recorded and not s.is_hf]
    results: dict[str, Any] = {"machine": machine_info(target)}

    if cfg.cost_curve:
        log("measuring the verify-cost curve")
        curve = measure_cost_curve(target, cfg.cost_sizes, progress=lambda d, t: progress("cost curve", d, t))
        try:
            curve["stored_at"] = str(save_cost_curve(curve))
        except OSError:
            pass
        results["cost_curve"] = curve

    prompts = [(suite, p) for suite in cfg.suites for p in suite.prompts]
    encoded = {p.label: p.encode(target) for _, p in prompts}
    runs_per_round = len(specs) + len(recorded)
    total = (runs_per_round if cfg.warmup else 0) + len(prompts) * (cfg.repeats * len(specs) + len(recorded))
    done = 0
    with tempfile.TemporaryDirectory(prefix="specviz-bench-") as tmp:
        from specviz_core.recording.store import Recording

        rec = Recording(Path(tmp) / "bench.db", create=True) if recorded else None
        try:
            if cfg.warmup and prompts:
                ids = encoded[prompts[0][1].label]
                n = min(16, cfg.max_new_tokens)
                for spec in specs:
                    progress(f"warm-up {spec.label}", done, total)
                    run_one(target, draft, spec, ids, n)
                    done += 1
                for spec in recorded:
                    progress(f"warm-up {spec.label}+rec", done, total)
                    run_engine(target, draft, spec, ids, n, rec)
                    done += 1
            rows, rec_rows = [], []
            for suite, prompt in prompts:
                ids = encoded[prompt.label]
                runs: dict[str, list[RunResult]] = {s.label: [] for s in specs}
                rec_runs: dict[str, list[RunResult]] = {s.label: [] for s in recorded}
                for r in range(cfg.repeats):
                    for spec in specs:
                        progress(f"{prompt.label} {spec.label} {r + 1}/{cfg.repeats}", done, total)
                        runs[spec.label].append(run_one(target, draft, spec, ids, cfg.max_new_tokens))
                        done += 1
                    # Recording on, once per prompt, right after the same method's run with it off.
                    for spec in recorded if r == 0 else []:
                        progress(f"{prompt.label} {spec.label} with recording", done, total)
                        rec_runs[spec.label].append(run_engine(target, draft, spec, ids, cfg.max_new_tokens, rec))
                        done += 1
                rows += _prompt_rows(target, suite, prompt, ids, specs, runs)
                rec_rows += _recording_rows(suite, prompt, runs, rec_runs)
        finally:
            if rec is not None:
                rec.close()
    progress("done", total, total)
    results["config"] = {
        "model": target.name, "model_path": target.path, "draft_model": draft.name if draft is not None else None,
        "methods": [s.label for s in specs], "recorded": [s.label for s in recorded],
        "suites": [s.name for s in cfg.suites], "max_new_tokens": cfg.max_new_tokens, "repeats": cfg.repeats,
        "warmup": cfg.warmup, "argv": sys.argv[1:],
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "wall_s": round(time.perf_counter() - started, 1),
    }
    results["rows"] = rows
    results["suites"] = suite_summary(rows)
    results["recording"] = recording_summary(rec_rows)
    results["budget_auto"] = budget_auto_summary(results["suites"])
    results["checks"] = {
        "all_identical": all(r["identical_to_ar"] for r in rows),
        "not_identical": [f"{r['suite']}/{r['prompt']} {r['method']}: {r['check']}" for r in rows if not r["identical_to_ar"]],
    }
    return results


def _prompt_rows(target: LoadedModel, suite: Suite, prompt: Prompt, ids: list[int], specs: list[MethodSpec],
                 runs: dict[str, list[RunResult]]) -> list[dict[str, Any]]:
    ar_runs = runs["ar"]
    ar_out = ar_runs[0].output_ids
    rows = []
    for spec in specs:
        rs = runs[spec.label]
        med = _median_run(rs)
        outputs = {tuple(r.output_ids) for r in rs}
        check = compare_to_ar(target, ids, rs[0].output_ids, ar_out)
        if len(outputs) > 1:
            check += "; repeats differ"
        per_cycle, share = _stage_summary(rs)
        tps = statistics.median(r.tokens_per_s for r in rs)
        # Paired by round: a busy moment on a shared machine slows a whole round, not one method.
        ratios = [r.tokens_per_s / a.tokens_per_s for r, a in zip(rs, ar_runs) if a.tokens_per_s > 0]
        speeds = [r.tokens_per_s for r in rs]
        row = {
            "suite": suite.name, "prompt": prompt.id, "method": spec.label, "base_method": spec.method,
            "params": dict(spec.params),
            "tau": round(len(med.output_ids) / med.n_forward, 3) if med.n_forward else 0.0,
            "tokens_per_s": round(tps, 3),
            "speedup_vs_ar": round(statistics.median(ratios), 4) if ratios else None,
            "identical_to_ar": check == "identical" and len(outputs) == 1,
            "check": check,
            "share_ms": per_cycle, "share": share,
            "tokens_per_s_runs": [round(x, 3) for x in speeds],
            "noisy": max(speeds) > NOISY_SPREAD * min(speeds) if min(speeds) > 0 else True,
            "rate_tokens": med.rate_tokens, "rate_s": round(med.rate_s, 4),
            "tokens_per_s_e2e": round(len(med.output_ids) / med.extra.get("e2e_s", med.decode_s + med.prefill_ms / 1000.0), 3),
            "n_tokens": len(med.output_ids), "n_forward": med.n_forward, "n_cycles": med.n_cycles,
            "decode_s": round(med.decode_s, 4), "prefill_ms": round(med.prefill_ms, 2),
            "prompt_tokens": len(ids),
            "peak_mem_mb": round(max(r.peak_mem_mb for r in rs), 1) if all(r.peak_mem_mb for r in rs) else None,
        }
        if "budget" in med.extra:
            row["budget"] = med.extra["budget"]
        rows.append(row)
    return rows


def _recording_rows(suite: Suite, prompt: Prompt, runs: dict[str, list[RunResult]],
                    rec_runs: dict[str, list[RunResult]]) -> list[dict[str, Any]]:
    """Each recorded run against the unrecorded run of the same method just before it (same round)."""
    out = []
    for label, rs in rec_runs.items():
        on, off = rs[0], runs[label][0]
        per_cycle, share = _stage_summary(rs)
        out.append({"suite": suite.name, "prompt": prompt.id, "method": label,
                    "tokens_per_s_off": round(off.tokens_per_s, 3), "tokens_per_s_on": round(on.tokens_per_s, 3),
                    "decode_s_off": round(off.decode_s, 4), "decode_s_on": round(on.decode_s, 4),
                    "record_ms_per_cycle": per_cycle.get("record", 0.0), "record_share": share.get("record", 0.0)})
    return out
