"""`specviz explain`: why a recorded session is (or is not) faster than plain decoding on this machine."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from specviz_core.cli.options import add_db_arg, progress_bar
from specviz_core.errors import SpecVizError


def add_parser(sub: Any) -> None:
    x = sub.add_parser("explain", help="why a session is (or is not) faster than plain decoding: the time arithmetic",
                       description="Split a session's cycle time into draft, verify forward and bookkeeping, in units "
                       "of one plain 1-token forward (from the device's measured verify-cost curve, or the AR session "
                       "of the same prompt when the recording has one), and say with the cost curve which draft "
                       "budget would have been fastest (definitions: docs/metrics.md).")
    add_db_arg(x)
    x.add_argument("--session", default=None, help="session id (default: the latest)")
    x.add_argument("--measure", action="store_true",
                   help="measure the cost curve of the session's model and device first if none is kept (loads the "
                        "model; about a minute on a CPU)")
    x.add_argument("--cycles", action="store_true", help="also print one line per cycle")
    x.add_argument("--cycle", type=int, default=None, metavar="N",
                   help="also explain cycle N as the window's 'Why did this cycle stop' does: why its walk stopped, "
                        "what its method decided, and its time (negative counts from the end)")
    x.add_argument("--json", action="store_true", help="print the result as one JSON object")


def _measure(info: Any, quiet: bool) -> dict[str, Any]:
    from specviz_core.audit import audit_device
    from specviz_core.engine.cost_curve import ensure_cost_curve
    from specviz_core.session.factory import load_checked_model

    def stage(text: str, fraction: float | None) -> None:
        if not quiet:
            print(f"[specviz] {text}", file=sys.stderr, flush=True)

    target = load_checked_model(info.model, audit_device(info.device), info.dtype, stage)
    bar = None
    if not quiet:

        bar = progress_bar(total=1, desc="cost curve", unit="round")

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.n = done
            bar.refresh()

    try:
        return ensure_cost_curve(target, quick=False, progress=progress)
    finally:
        if bar is not None:
            bar.close()


def cmd_explain(args: argparse.Namespace) -> int:
    from specviz_core.analysis.timing import CostCurve, cycle_cost, session_cost
    from specviz_core.recording.store import Recording
    from specviz_core.viewer.sources import RecordingSource, session_curve

    with Recording(args.db, read_only=True) as rec:
        source = RecordingSource(rec, args.session)
        info, summaries = source.info, source.summaries()
        ar_tps, ar_note, ar_fwd = source.ar_baseline()
        record = _one_cycle(rec, info, args.cycle) if args.cycle is not None else None
    stored, _ = session_curve(info)
    if stored is None and args.measure:
        stored = _measure(info, args.json)
    curve = CostCurve.from_dict(stored) if stored is not None else None
    ar_ms = 1000.0 / ar_tps if ar_tps and info.method != "ar" else None
    if curve is None and ar_ms is None:
        raise SpecVizError(f"no cost curve kept for {info.model} on {info.device} ({info.dtype}) and no AR session of "
                           "this prompt in the recording: add --measure to measure the curve (loads the model)")
    cost = session_cost(summaries, curve, ar_ms, ar_note, ar_fwd)
    cycles = [cycle_cost(s, curve, cost.ar_forward_ms) for s in summaries if not s.damaged and s.timings_ms]
    why = _why(info, record, curve, cost.ar_forward_ms) if record is not None else None
    if args.json:
        out = {"session": info.id, "method": info.method, **cost.to_json()}
        if args.cycles:
            out["cycle_costs"] = [c.to_json() for c in cycles]
        if why is not None:
            out["cycle"] = why
        print(json.dumps(out))
        return 0
    print(f"session {info.id} ({info.method}, {info.device}, {info.dtype}): {cost.cycles} cycles, {cost.tokens} tokens")
    print(f"  per cycle: draft {cost.draft_ms:.1f} ms + verify forward {cost.forward_ms:.1f} ms + bookkeeping "
          f"{cost.bookkeeping_ms:.1f} ms = {cost.cycle_ms:.1f} ms; t_ar {cost.ar_forward_ms:.1f} ms")
    print(f"  {cost.sentence}")
    if curve is None:
        print("  (no cost curve kept for this model and device: --measure measures one)")
    if args.cycles:
        for c in cycles:
            print(f"  cycle {c.index}: {c.sentence}")
    if why is not None:
        print(f"cycle {why['index']} ({why['mode']}, {why['verified']} verified, {why['committed']} committed)")
        for line in (f"Why it stopped: {why['why']}", *why["notes"], f"Time: {why['time']}"):
            print(f"  {line}")
    return 0


def _one_cycle(rec: Any, info: Any, index: int) -> Any:
    """Cycle ``index`` of the session (negative: from the end), or a one-line error."""
    n = rec.n_cycles(info.id)
    at = index + n if index < 0 else index
    if not 0 <= at < n:
        raise SpecVizError(f"session {info.id} has {n} cycles (0 to {n - 1}): there is no cycle {index}")
    return rec.cycle(info.id, at)


def _why(info: Any, record: Any, curve: Any, t_ar: float) -> dict[str, Any]:
    """What the window's 'Why did this cycle stop' says of ``record``: its stop, its method's notes, its time."""
    from specviz_core.analysis.stop_cause import method_notes, stop_cause
    from specviz_core.analysis.timing import cycle_cost
    from specviz_core.runtime.vocab import load_token_text

    text = load_token_text(info.tokenizer or info.model)  # ids where the tokenizer is not on this machine
    drafted = sum(1 for n in record.nodes if n.id != 0)
    return {"index": record.index, "mode": record.mode, "verified": record.n_verified,
            "committed": len(record.committed_ids),
            "why": stop_cause(record).sentence(lambda t: repr(text.label(t))),
            "notes": method_notes(record.state, record.n_verified, drafted),
            "time": cycle_cost(record, curve, t_ar).sentence}
