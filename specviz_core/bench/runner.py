"""``specviz bench``: every method on every prompt, one process, one model instance, interleaved.

For each prompt, after one warm-up of every method, the methods run in rounds (A B C, A B C,
...), so a slow minute on a shared machine hits every method alike. Per method and prompt:
tau (tokens committed per target forward), tokens/s (median of the repeats, prefill
excluded), the speed-up over AR measured in the same rounds, where each cycle's time goes
(draft, forward, walk, trim, harvest, build, record), peak memory, and whether the output is
token for token AR's (greedy; with a temperature, repeat i samples from seed + i, tau is the
mean over the repeats and nothing is compared). transformers' own ``generate`` gives the greedy
reference rows (``hf_prompt_lookup``, ``hf_assisted``, ``hf_greedy``; see ``hf``). Listed methods
also run a second time in every round with recording on (to a temporary SQLite file), which
gives the recording overhead. The verify-cost curve is measured first and stored for the GUI
and for ``budget=auto``. One run is measured in ``measure``; ``report`` turns the result into tables.
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

from specviz_core.bench.aggregate import STAGES, budget_auto_summary, recording_summary, suite_summary
from specviz_core.bench.measure import RunResult, run_engine, run_one
from specviz_core.bench.specs import DEFAULT_RECORDED, MethodSpec
from specviz_core.bench.suites import Prompt, Suite
from specviz_core.engine.cost_curve import SIZES, device_name, measure_cost_curve
from specviz_core.errors import SpecVizError
from specviz_core.methods import CARDS
from specviz_core.runtime.cost_files import save_cost_curve
from specviz_core.runtime.models import LoadedModel
from specviz_core.runtime.time_limit import TimeLimit

TIE_GAP = 1e-3
#: Repeats whose fastest is this many times their slowest are flagged ``noisy`` (a disturbed machine).
NOISY_SPREAD = 1.5


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
    temperature: float = 0.0
    """0: greedy, every output checked against AR's; > 0: sampling, repeat i from seed ``seed + i``."""
    seed: int = 0

    def __post_init__(self) -> None:  # checked when made, before any model is loaded
        if self.repeats < 1 or self.max_new_tokens < 1:
            raise SpecVizError("--repeats and --max-new-tokens must be at least 1")
        if self.temperature < 0:
            raise SpecVizError("--temperature must be >= 0")
        if self.temperature > 0 and any(s.is_hf for s in self.methods):
            raise SpecVizError("the reference rows (hf_*) decode greedily: leave them out of --methods with --temperature")


def run_specs(cfg: BenchConfig) -> tuple[list[MethodSpec], list[MethodSpec]]:
    """The methods run (AR first when not named: every speed-up is measured against it in the same rounds) and
    those also run with recording on."""
    specs = cfg.methods if "ar" in [s.label for s in cfg.methods] else [MethodSpec("ar", "ar")] + cfg.methods
    return specs, [s for s in specs if s.label in cfg.recorded and not s.is_hf]


def planned_runs(cfg: BenchConfig) -> int:
    """Decoding runs of the whole benchmark (warm-up included), known before any model loads."""
    specs, recorded = run_specs(cfg)
    prompts = sum(len(s.prompts) for s in cfg.suites)
    warmup = len(specs) + len(recorded) if cfg.warmup and prompts else 0
    return warmup + prompts * (cfg.repeats * len(specs) + len(recorded))


class _TimeUp(Exception):
    """The time limit passed: no more runs; the prompts finished so far are the result."""


def run_bench(target: LoadedModel, draft: LoadedModel | None, cfg: BenchConfig,
              progress: Progress | None = None, log: Callable[[str], None] | None = None,
              limit: TimeLimit | None = None) -> dict[str, Any]:
    """Run the whole benchmark; returns the results dict (see ``docs/benchmarks.md`` for its fields).

    ``limit`` is checked before every run: once it passes, or on Ctrl-C, the benchmark stops and the results hold
    the prompts whose runs all finished, with ``stopped`` saying why (``interrupted`` for Ctrl-C)."""
    progress = progress or (lambda what, done, total: None)
    log = log or (lambda s: None)
    limit = limit or TimeLimit(None)
    started = time.perf_counter()
    specs = cfg.methods
    for spec in specs:
        needs = spec.method == "hf_assisted" or (not spec.is_hf and CARDS[spec.method].needs_draft_model)
        if needs and draft is None:
            raise SpecVizError(f"{spec.label} needs --draft-model")
    specs, recorded = run_specs(cfg)
    results: dict[str, Any] = {"machine": machine_info(target)}
    prompts = [(suite, p) for suite in cfg.suites for p in suite.prompts]
    total, done, stopped = planned_runs(cfg), 0, None
    rows: list[dict[str, Any]] = []
    rec_rows: list[dict[str, Any]] = []

    def next_run(what: str) -> None:
        if limit.passed():
            raise _TimeUp
        progress(what, done, total)

    with tempfile.TemporaryDirectory(prefix="specviz-bench-") as tmp:
        from specviz_core.recording.store import Recording

        rec = Recording(Path(tmp) / "bench.db", create=True) if recorded else None
        try:
            if cfg.cost_curve:
                log("measuring the verify-cost curve")
                curve = measure_cost_curve(target, cfg.cost_sizes, progress=lambda d, t: progress("cost curve", d, t))
                try:
                    curve["stored_at"] = str(save_cost_curve(curve))
                except OSError:
                    pass
                results["cost_curve"] = curve
            encoded = {p.label: p.encode(target) for _, p in prompts}
            if cfg.warmup and prompts:
                ids = encoded[prompts[0][1].label]
                n = min(16, cfg.max_new_tokens)
                for spec in specs:
                    next_run(f"warm-up {spec.label}")
                    run_one(target, draft, spec, ids, n, temperature=cfg.temperature, seed=cfg.seed)
                    done += 1
                for spec in recorded:
                    next_run(f"warm-up {spec.label}+rec")
                    run_engine(target, draft, spec, ids, n, temperature=cfg.temperature, seed=cfg.seed, recording=rec)
                    done += 1
            for suite, prompt in prompts:
                ids = encoded[prompt.label]
                runs: dict[str, list[RunResult]] = {s.label: [] for s in specs}
                rec_runs: dict[str, list[RunResult]] = {s.label: [] for s in recorded}
                for r in range(cfg.repeats):
                    sampling = {"temperature": cfg.temperature, "seed": cfg.seed + r}
                    for spec in specs:
                        next_run(f"{prompt.label} {spec.label} {r + 1}/{cfg.repeats}")
                        runs[spec.label].append(run_one(target, draft, spec, ids, cfg.max_new_tokens, **sampling))
                        done += 1
                    # Recording on, once per prompt, right after the same method's run with it off.
                    for spec in recorded if r == 0 else []:
                        next_run(f"{prompt.label} {spec.label} with recording")
                        rec_runs[spec.label].append(
                            run_engine(target, draft, spec, ids, cfg.max_new_tokens, **sampling, recording=rec))
                        done += 1
                new_rows = _prompt_rows(target, suite, prompt, ids, specs, runs, cfg)
                rows, rec_rows = rows + new_rows, rec_rows + _recording_rows(suite, prompt, runs, rec_runs)
        except _TimeUp:
            stopped = limit.reason
        except KeyboardInterrupt:
            stopped = "interrupted"
        finally:
            if rec is not None:
                rec.close()
    if stopped is None:
        progress("done", total, total)
    else:
        results["stopped"] = stopped
    results["config"] = {
        "model": target.name, "model_path": target.path, "draft_model": draft.name if draft is not None else None,
        "methods": [s.label for s in specs], "recorded": [s.label for s in recorded],
        "fixed_budget_sweep": [s.label for s in specs if s.sweep],
        "suites": [s.name for s in cfg.suites], "max_new_tokens": cfg.max_new_tokens, "repeats": cfg.repeats,
        "warmup": cfg.warmup, "temperature": cfg.temperature, "seed": cfg.seed, "argv": sys.argv[1:],
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "wall_s": round(time.perf_counter() - started, 1),
        "prompts_planned": len(prompts), "prompts_finished": len({(r["suite"], r["prompt"]) for r in rows}),
    }
    results["rows"] = rows
    results["suites"] = suite_summary(rows)
    results["recording"] = recording_summary(rec_rows)
    results["budget_auto"] = budget_auto_summary(results["suites"], results["rows"])
    results["checks"] = {  # sampled outputs are not compared (identical_to_ar is None)
        "all_identical": all(r["identical_to_ar"] for r in rows) if cfg.temperature == 0 else None,
        "not_identical": [f"{r['suite']}/{r['prompt']} {r['method']}: {r['check']}" for r in rows
                          if r["identical_to_ar"] is False],
    }
    return results


def _prompt_rows(target: LoadedModel, suite: Suite, prompt: Prompt, ids: list[int], specs: list[MethodSpec],
                 runs: dict[str, list[RunResult]], cfg: BenchConfig) -> list[dict[str, Any]]:
    ar_runs = runs["ar"]
    ar_out = ar_runs[0].output_ids
    rows = []
    for spec in specs:
        rs = runs[spec.label]
        med = _median_run(rs)
        outputs = {tuple(r.output_ids) for r in rs}
        if cfg.temperature > 0:
            check = f"sampled (temperature {cfg.temperature:g}, seeds {cfg.seed}-{cfg.seed + len(rs) - 1})"
            identical = None
            tau = statistics.mean(len(r.output_ids) / r.n_forward for r in rs if r.n_forward)
        else:
            check = compare_to_ar(target, ids, rs[0].output_ids, ar_out)
            if len(outputs) > 1:
                check += "; repeats differ"
            identical = check == "identical" and len(outputs) == 1
            tau = len(med.output_ids) / med.n_forward if med.n_forward else 0.0
        per_cycle, share = _stage_summary(rs)
        tps = statistics.median(r.tokens_per_s for r in rs)
        # Paired by round: a busy moment on a shared machine slows a whole round, not one method.
        ratios = [r.tokens_per_s / a.tokens_per_s for r, a in zip(rs, ar_runs) if a.tokens_per_s > 0]
        speeds = [r.tokens_per_s for r in rs]
        row = {
            "suite": suite.name, "prompt": prompt.id, "method": spec.label, "base_method": spec.method,
            "params": dict(spec.params), "configuration": spec.base,
            "budget_choice": ("auto" if spec.is_auto else str(spec.params.get("budget", "paper")).strip().lower())
            if spec.has_budget else None,
            "tau": round(tau, 3),
            "tokens_per_s": round(tps, 3),
            "speedup_vs_ar": round(statistics.median(ratios), 4) if ratios else None,
            "identical_to_ar": identical,
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
