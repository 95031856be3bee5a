"""Summaries of a benchmark's rows: per suite, the recording overhead, and budget=auto against the fixed budget."""

from __future__ import annotations

import math
import statistics
from typing import Any

STAGES = ("draft", "forward", "walk", "trim", "harvest", "build", "record")


def suite_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per suite and method: tokens/s over the prompts' median runs, the geometric mean of the
    prompts' speed-ups over AR, tau over all forwards, the stage times weighted by cycles."""
    out = []
    for suite, method in dict.fromkeys((r["suite"], r["method"]) for r in rows):
        rs = [r for r in rows if r["suite"] == suite and r["method"] == method]
        tokens = sum(r["n_tokens"] for r in rs)
        secs = sum(r["rate_s"] for r in rs)
        fwd = sum(r["n_forward"] for r in rs)
        cycles = sum(r["n_cycles"] for r in rs)
        per_cycle = {}
        if cycles:
            for k in STAGES:
                per_cycle[k] = sum(r["share_ms"].get(k, 0.0) * r["n_cycles"] for r in rs) / cycles
        all_ms = sum(per_cycle.values())
        speedups = [r["speedup_vs_ar"] for r in rs if r["speedup_vs_ar"]]
        out.append({
            "suite": suite, "method": method, "prompts": len(rs), "tau": round(tokens / fwd, 3) if fwd else 0.0,
            "tokens_per_s": round(sum(r["rate_tokens"] for r in rs) / secs, 3) if secs else 0.0,
            "speedup_vs_ar": round(math.exp(statistics.mean(math.log(x) for x in speedups)), 4) if speedups else None,
            "identical_to_ar": None if any(r["identical_to_ar"] is None for r in rs)  # sampled: not compared
            else all(r["identical_to_ar"] for r in rs),
            "noisy_prompts": sum(1 for r in rs if r.get("noisy")),
            "share_ms": {k: round(v, 3) for k, v in per_cycle.items()},
            "share": {k: round(v / all_ms, 4) for k, v in per_cycle.items()} if all_ms else {},
            "peak_mem_mb": max((r["peak_mem_mb"] or 0.0) for r in rs) or None,
        })
    return out


def recording_summary(rec_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Recording overhead: decode time with recording on over time with it off, summed over the prompts."""
    if not rec_rows:
        return {}
    on = sum(r["decode_s_on"] for r in rec_rows)
    off = sum(r["decode_s_off"] for r in rec_rows)
    shares = [r["record_share"] for r in rec_rows]
    return {"ratio": round(on / off, 4) if off else None, "overhead": round(on / off - 1, 4) if off else None,
            "record_share_mean": round(statistics.mean(shares), 4), "rows": rec_rows}


def budget_auto_summary(suite_rows: list[dict[str, Any]], rows: list[dict[str, Any]] | None = None
                        ) -> list[dict[str, Any]]:
    """Per suite, each configuration that chose its budget (``auto``) against the same configuration at the fixed
    budgets measured in the same rounds: the paper's, and the best of them all in hindsight."""
    choice = {r["method"]: (r["configuration"], r.get("budget_choice")) for r in rows or [] if "configuration" in r}
    legacy_file = not choice
    if legacy_file:  # a results file written before budget=auto was the default: the labels say it
        for r in suite_rows:
            m = r["method"]
            choice[m] = (m.removesuffix(":budget=auto"), "auto") if m.endswith(":budget=auto") else (m, None)
    out = []
    for r in suite_rows:
        config, how = choice.get(r["method"], (None, None))
        if how != "auto" or not r["tokens_per_s"]:
            continue
        fixed = [f for f in suite_rows if f["suite"] == r["suite"] and f["method"] != r["method"]
                 and choice.get(f["method"], (None, None))[0] == config and f["tokens_per_s"]
                 and choice[f["method"]][1] not in (None, "auto")]
        if legacy_file:  # its fixed row is the plain label
            fixed = [f for f in suite_rows if f["suite"] == r["suite"] and f["method"] == config and f is not r]
        if not fixed:
            continue
        best = max(fixed, key=lambda f: f["tokens_per_s"])
        paper = next((f for f in fixed if choice.get(f["method"], (None, None))[1] in ("paper", None)), None)
        held = held_out_vs_best_fixed(r["suite"], r["method"], [f["method"] for f in fixed], rows or [])
        out.append({
            "suite": r["suite"], "method": config, "auto": r["method"], "auto_tokens_per_s": r["tokens_per_s"],
            "auto_tau": r["tau"], "auto_vs_ar": r.get("speedup_vs_ar"),
            "best_fixed": best["method"], "best_fixed_tokens_per_s": best["tokens_per_s"],
            "vs_best_fixed": round(r["tokens_per_s"] / best["tokens_per_s"], 4),
            "fixed_budgets": len(fixed),
            # The paper's fixed budget (the row before auto was the default): as the summary has always said it.
            "fixed_tokens_per_s": paper["tokens_per_s"] if paper else None, "fixed_tau": paper["tau"] if paper else None,
            "gain": round(r["tokens_per_s"] / paper["tokens_per_s"], 4) if paper else None,
            **held,
        })
    return out


def held_out_vs_best_fixed(suite: str, auto: str, fixed: list[str], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``auto`` against the best fixed budget picked on other rounds than the one compared: for each round k, the
    fixed budget whose suite tokens/s (the mean over the suite's prompts) is highest over the other rounds, against
    ``auto`` in round k; the mean ratio over the rounds. The best of several noisy rows picked and compared on the
    same rounds is biased upward (the winner is partly the luckiest); picked on one round and compared on another,
    it is not. Empty with fewer than two rounds."""
    runs: dict[str, list[list[float]]] = {}
    for r in rows:
        if r.get("suite") == suite and r.get("method") in (auto, *fixed) and r.get("tokens_per_s_runs"):
            runs.setdefault(r["method"], []).append([float(x) for x in r["tokens_per_s_runs"]])
    if auto not in runs or not any(m in runs for m in fixed):
        return {}
    n = min(len(x) for prompts in runs.values() for x in prompts)
    if n < 2 or len({len(p) for p in runs.values()}) != 1:
        return {}
    rate = {m: [sum(p[k] for p in prompts) / len(prompts) for k in range(n)] for m, prompts in runs.items()}
    ratios, picked = [], []
    for k in range(n):
        pick = max((m for m in fixed if m in rate), key=lambda m: sum(rate[m][j] for j in range(n) if j != k))
        picked.append(pick)
        ratios.append(rate[auto][k] / rate[pick][k] if rate[pick][k] > 0 else 0.0)
    return {"vs_best_fixed_held_out": round(sum(ratios) / n, 4), "best_fixed_held_out": picked}
