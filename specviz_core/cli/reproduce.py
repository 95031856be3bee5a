"""``specviz reproduce``: the command line of :mod:`specviz_core.bench.reproduce`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from specviz_core.cli.options import (
    add_device_args,
    add_minutes_arg,
    atomic_output,
    check_writable,
    counted,
    progress_bar,
    say_plan,
    stopped_early,
    time_limit,
)
from specviz_core.errors import SpecVizError


def add_parser(sub: Any) -> None:
    r = sub.add_parser(
        "reproduce", help="check a seed paper's central claims on this model: the paper's figure against ours",
        description="Run a seed paper's central, hardware-independent claims (tokens per target forward, acceptance) "
                    "on the current model and print the paper's figure against ours, claim by claim, with whether "
                    "it holds here. TALON's claims need a draft head: specviz train-head.")
    r.add_argument("--paper", choices=("goose", "talon", "stand", "all"), required=True,
                   help="goose (spine trees), talon (budget trees on a draft head), stand (stochastic n-grams), or all")
    r.add_argument("--quick", action="store_true",
                   help="the quick suite (3 prompts) and 48-token sessions instead of every suite and 96 tokens")
    r.add_argument("--model", default=None, help="model folder or cached hub id (default: the embedded model)")
    r.add_argument("--draft-head", metavar="PATH", default=None,
                   help="TALON's claims on this EAGLE head (a folder in EAGLE-1/2's or EAGLE-3's published layout) "
                        "instead of the head train-head made for the model")
    r.add_argument("--out", type=Path, default=None, help="write the claims as JSON here")
    r.add_argument("--chart", type=Path, default=None, help="write a chart of paper against ours here (.svg)")
    add_minutes_arg(r, "the claims over the prompts finished (each claim's data lists them)")
    add_device_args(r)
    r.add_argument("--quiet", action="store_true", help="no progress bar")


def verdict(holds: bool | None) -> str:
    return {True: "holds", False: "does not hold", None: "n/a"}[holds]


def claim_lines(result: dict[str, Any]) -> list[str]:
    rows = [("claim", "paper", "ours", "here")]
    rows += [(c["name"], c["paper_figure"], c["ours"], verdict(c["holds"])) for c in result["claims"]]
    w = [min(64, max(len(r[i]) for r in rows)) for i in range(3)]
    out = [(f"{result['paper']} on {result['model']} ({', '.join(result['suites'])}; {result['max_new_tokens']} new "
           f"tokens a session)")]
    for r in rows:
        out.append(f"  {r[0][:w[0]]:<{w[0]}}  {r[1][:w[1]]:<{w[1]}}  {r[2]:<{w[2]}}  {r[3]}")
    notes: dict[str, list[str]] = {}  # note -> the claims it explains, each note once
    for c in result["claims"]:
        if c.get("note"):
            notes.setdefault(c["note"], []).append(c["name"])
    lines = [f"  {', '.join(names)}: {note}" if len(names) == 1 else f"  {note} ({len(names)} claims)"
             for note, names in notes.items()]
    causes = [f"  {c['name']}: {c['cause']}" for c in result["claims"] if c.get("cause") and c["holds"] is False]
    return out + (["notes:", *lines] if lines else []) + (["why it does not hold here:", *causes] if causes else [])


def cmd_reproduce(args: argparse.Namespace) -> int:
    for path in (args.out, args.chart):
        if path is not None:
            check_writable(path)
    if args.chart is not None and args.chart.suffix.lower() != ".svg":
        raise SpecVizError(f"--chart writes an SVG file: give a name ending in .svg, not {args.chart.name}")
    limit = time_limit(args)
    papers = ("goose", "talon", "stand") if args.paper == "all" else (args.paper,)
    head = ""
    if "talon" in papers:
        if getattr(args, "draft_head", None):
            from specviz_core.runtime.head_files import check_head_folder

            head = check_head_folder(args.draft_head)
        else:
            _refuse_without_a_head(args.model, args.paper)

    from specviz_core.bench.reproduce import reproduce
    from specviz_core.bench.reproduce.chart import chart_svg
    from specviz_core.bench.reproduce.claims import Work, prompts_of, sessions_per_prompt
    from specviz_core.bench.suites import load_suites
    from specviz_core.session.factory import load_checked_model

    suites = load_suites("quick" if args.quick else "all")
    n_prompts = sum(len(s.prompts) for s in suites)
    planned = {p: n_prompts * sessions_per_prompt(p, args.quick) for p in papers}
    say_plan(args, f"up to {counted(sum(planned.values()), 'session')}: {counted(n_prompts, 'prompt')} x "
                   + ", ".join(f"{planned[p] // n_prompts} for {p}" for p in papers))
    say = (lambda s: None) if args.quiet else (lambda s: print(f"[specviz] {s}", file=sys.stderr, flush=True))
    target = load_checked_model(args.model, args.device, args.dtype, lambda s, f: say(s))
    from specviz_core.drafters.stand import is_default_model

    total = sum(n_prompts * sessions_per_prompt(p, args.quick, is_default_model(target)) for p in papers)
    bar = None if args.quiet else progress_bar(total=total, unit="session", dynamic_ncols=True)

    def tick(what: str) -> None:
        if bar is not None:
            bar.set_description_str(what[:50], refresh=False)
            bar.update(1)

    work = Work(limit, tick)
    t0 = time.monotonic()
    results = []
    try:
        prompts = prompts_of(target, suites)
        for paper in papers:
            results.append(reproduce(target, paper, quick=args.quick, work=work, prompts=prompts,
                                     say=lambda s: None, head=head))
            if bar is not None:
                bar.clear()
            print("\n".join(claim_lines(results[-1])), flush=True)
            if work.stopped is not None:
                break
    finally:
        if bar is not None:
            bar.close()
    print(f"({(time.monotonic() - t0) / 60:.1f} min)")
    doc = {"results": results, "minutes": round((time.monotonic() - t0) / 60, 2)}
    if work.stopped is not None:
        doc["stopped"] = work.stopped
    for path, text in ((args.out, json.dumps(doc, indent=1) + "\n"),
                       (args.chart, chart_svg(results) if args.chart is not None else "")):
        if path is None:
            continue
        try:
            with atomic_output(path) as fh:
                fh.write(text)
        except OSError as e:
            raise SpecVizError(f"cannot write {path}: {e.strerror}") from None
        print(f"wrote {path}")
    if work.stopped is None:
        return 0
    last = results[-1]
    return stopped_early(work.stopped, f"{last['paper']}'s claims are over the {last['prompts_finished']} of "
                         f"{last['prompts_planned']} prompts finished"
                         + (f"; not run: {', '.join(papers[len(results):])}" if len(results) < len(papers) else ""))


def _refuse_without_a_head(model: str | None, paper: str) -> None:
    """TALON's claims need a trained head: refused before any model loads, not after the other papers ran."""
    from specviz_core.runtime.head_files import head_info_for
    from specviz_core.runtime.models import resolve_model_path

    if model not in (None, "default"):
        resolve_model_path(model)  # a wrong path is refused as such, not as a missing head
    if head_info_for(model) is None:
        name = model or "the default model"
        others = " (or give --paper goose or stand)" if paper == "all" else ""
        raise SpecVizError(f"TALON's claims are about a trained draft head and {name} has none: run specviz "
                           f"train-head{' --model ' + model if model else ''} first (about 10 minutes), or give "
                           f"--draft-head{others}")
