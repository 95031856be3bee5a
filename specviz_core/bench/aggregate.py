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


def budget_auto_summary(suite_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``method:budget=auto`` against the same method with its fixed default budget, per suite."""
    by = {(r["suite"], r["method"]): r for r in suite_rows}
    out = []
    for (suite, method), row in by.items():
        if not method.endswith(":budget=auto"):
            continue
        fixed = by.get((suite, method.removesuffix(":budget=auto")))
        if fixed and fixed["tokens_per_s"]:
            out.append({"suite": suite, "method": method.removesuffix(":budget=auto"),
                        "fixed_tokens_per_s": fixed["tokens_per_s"], "auto_tokens_per_s": row["tokens_per_s"],
                        "gain": round(row["tokens_per_s"] / fixed["tokens_per_s"], 4),
                        "fixed_tau": fixed["tau"], "auto_tau": row["tau"]})
    return out
