"""The ``specviz bench`` command: argument parsing, progress, and writing the results (logic in ``bench``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from specviz_core.cli.options import (
    add_device_args,
    add_minutes_arg,
    atomic_output,
    bounded_int,
    check_writable,
    counted,
    progress_bar,
    say_plan,
    stopped_early,
    time_limit,
)
from specviz_core.errors import SpecVizError
from specviz_core.methods import parse_kv
from specviz_core.session.spec import MAX_NEW_TOKENS, SEED, TEMPERATURE

#: Interleaved repeats per prompt when --repeats is not given.
REPEATS = 2
METHODS_HELP = (
    "comma-separated method ids, each with optional :key=value parameters, e.g. "
    "ar,pld,goose,goose:budget=paper,isotropic:branching_factor=5 (a tree method's budget is auto, chosen for this "
    "device, unless :budget=paper or a number says otherwise); reference rows: hf_prompt_lookup, hf_assisted (needs "
    "--draft-model), hf_greedy (default: ar,pld,hf_prompt_lookup,tr,tr:budget=paper,goose,goose:budget=paper; "
    "with --draft-model also draft_tree and hf_assisted)"
)


def add_parser(sub: Any) -> None:
    b = sub.add_parser(
        "bench", help="benchmark methods against AR and transformers' own speculative decoding",
        description="Run every method on every prompt in one process, interleaved, after a warm-up; print a table "
        "and write the results as JSON. With --report, print (and --markdown write) the tables of an earlier results file.",
    )
    b.add_argument("--model", default=None, help="target model folder or cached hub id (default: the embedded model)")
    b.add_argument("--draft-model", default=None, help="draft model for draft_tree and hf_assisted ('default' for the embedded model)")
    b.add_argument("--methods", default=None, help=METHODS_HELP)
    b.add_argument("--fixed-budgets", default=None, metavar="LIST",
                   help="also run every tree method whose budget is auto at these fixed budgets, in the same rounds "
                   "(e.g. 4,8,16,32,paper), and report auto against the best of them")
    b.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a parameter for every method that has it, e.g. budget=auto; repeatable")
    g = b.add_mutually_exclusive_group()
    g.add_argument("--suite", default=None,
                   help="built-in suite (code_editing, summarising, qa, chat, multi_turn; translation, math, rag, news; "
                   "quick: three short prompts), several with commas, 'all' (the first five), 'workloads' (the next "
                   "four), or a suite .json file (default: all)")
    g.add_argument("--prompt-file", type=Path, default=None, help="one prompt from a text file (or a suite .json file)")
    b.add_argument("--max-new-tokens", type=MAX_NEW_TOKENS.parse, default=None,
                   help="new tokens per prompt (default 40; 128 with --host-work)")
    b.add_argument("--repeats", type=bounded_int(1, 1000), default=None,
                   help=f"interleaved repeats per prompt; tokens/s is their median (default {REPEATS}; 3 or more for a busy machine)")
    b.add_argument("--temperature", type=TEMPERATURE.parse, default=0.0,
                   help="0: greedy, outputs checked against AR's (default); > 0: sampling, repeat i uses seed + i, "
                   "tau is the mean over the repeats")
    b.add_argument("--seed", type=SEED.parse, default=0, help="first sampling seed (default 0)")
    b.add_argument("--record-methods", default=None,
                   help="methods also run with recording on, for the recording overhead ('none' to skip; "
                   "default: goose:budget=auto)")
    add_minutes_arg(b, "the results of every prompt whose runs all finished")
    b.add_argument("--no-warmup", action="store_true", help="skip the warm-up run of every method")
    b.add_argument("--no-cost-curve", action="store_true", help="skip measuring the verify-cost curve")
    add_device_args(b)
    b.add_argument("--out", type=Path, default=None, help="write the results JSON here (required unless --report)")
    b.add_argument("--host-work", action="store_true",
                   help="no comparison: print each method's host work a cycle (every recorded stage but the forward) "
                   "beside its forward on a 2-layer random model, with a 96- and a 49,152-token vocabulary, and AR's "
                   "tokens/s beside a plain greedy loop over the same model (--max-new-tokens, default here 128; "
                   "--repeats, default 5)")
    b.add_argument("--report", type=Path, default=None, metavar="RESULTS", help="no run: print the tables of this results file")
    b.add_argument("--markdown", type=Path, default=None, help="also write the tables into this markdown file (between its bench markers)")
    b.add_argument("--chart", default=None, help="with --markdown: link this chart image above the tables")
    b.add_argument("--per-prompt", action="store_true", help="print a row per prompt instead of per suite")
    b.add_argument("--quiet", action="store_true", help="no progress bar")


def cmd_bench(args: argparse.Namespace) -> int:
    from specviz_core.bench import runner as bench
    from specviz_core.bench.specs import (
        DEFAULT_METHODS,
        DEFAULT_RECORDED,
        add_fixed_budgets,
        parse_budgets,
        parse_method_specs,
    )

    if args.host_work:
        from specviz_core.bench import host_work

        host_work.run(tokens=args.max_new_tokens or 128, rounds=args.repeats or 5)
        return 0
    if args.report is not None:
        try:
            res = json.loads(args.report.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise SpecVizError(f"cannot read the results file {args.report}: {e}") from None
        _finish(res, args)
        return 0
    if args.out is None:
        raise SpecVizError("--out is required (where to write the results JSON)")
    from specviz_core.bench.suites import load_suites, prompt_file_suite

    suites = [prompt_file_suite(args.prompt_file)] if args.prompt_file is not None else load_suites(args.suite or "all")
    if args.methods is not None and not args.methods.strip(","):
        raise SpecVizError("--methods is empty: name at least one method, e.g. --methods ar,goose")
    methods_text = args.methods if args.methods is not None else ",".join(
        m for m in DEFAULT_METHODS + (("draft_tree", "hf_assisted") if args.draft_model else ())
        if not (args.temperature > 0 and m.startswith("hf_")))  # the reference rows are greedy only
    specs = parse_method_specs(methods_text, parse_kv(args.param))
    if args.fixed_budgets is not None:
        specs = add_fixed_budgets(specs, parse_budgets(args.fixed_budgets))
    if args.record_methods is None:
        recorded = [s.label for s in specs if s.label in DEFAULT_RECORDED]
    elif args.record_methods.strip().lower() == "none":
        recorded = []
    else:
        recorded = [s.label for s in parse_method_specs(args.record_methods, parse_kv(args.param))]
        unknown = [r for r in recorded if r not in {s.label for s in specs}]
        if unknown:
            raise SpecVizError(f"--record-methods must be among --methods; not there: {', '.join(unknown)}")
    cfg = bench.BenchConfig(methods=specs, suites=suites, max_new_tokens=args.max_new_tokens or 40,
                            repeats=REPEATS if args.repeats is None else args.repeats, warmup=not args.no_warmup,
                            recorded=recorded, cost_curve=not args.no_cost_curve, temperature=args.temperature,
                            seed=args.seed)
    check_writable(args.out)  # before the models load and the prompts decode, and no empty file left behind
    limit = time_limit(args)
    n_prompts = sum(len(s.prompts) for s in suites)
    specs_run, recorded_run = bench.run_specs(cfg)
    say_plan(args, f"{counted(bench.planned_runs(cfg), 'run')} of up to {cfg.max_new_tokens:,} tokens: "
                   f"{counted(n_prompts, 'prompt')} x {counted(len(specs_run), 'method')} x "
                   f"{counted(cfg.repeats, 'repeat')}, {len(recorded_run)} recorded once a prompt"
                   f"{', a warm-up of each first' if cfg.warmup else ''}")

    from specviz_core.session.factory import load_checked_model, load_draft

    set_threads(args.threads)

    def say(stage: str, fraction: float | None) -> None:
        if not args.quiet:
            print(f"[specviz] {stage}", file=sys.stderr, flush=True)

    target = load_checked_model(args.model, args.device, args.dtype, say)
    draft = load_draft(target, args.draft_model, args.device, args.dtype, say) if args.draft_model else None
    bar = None
    if not args.quiet:
        bar = progress_bar(total=1, unit="run", dynamic_ncols=True, leave=True)

    def progress(what: str, done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.n = done
            bar.set_description_str(what[:60])
            bar.refresh()

    try:
        res = bench.run_bench(target, draft, cfg, progress=progress, log=lambda s: say(s, None), limit=limit)
    finally:
        if bar is not None:
            bar.close()
    with atomic_output(args.out) as fh:
        fh.write(json.dumps(res, indent=1))
    _finish(res, args)
    print(f"results: {args.out}")
    return stopped_early(res.get("stopped"),
                         f"the {res['config'].get('prompts_finished')} of {n_prompts} prompts finished are in {args.out}")


def set_threads(threads: int | None) -> None:
    """``--threads``: the CPU threads of the models this process loads (None: chosen for the machine)."""
    from specviz_core.runtime import threads as cpu_threads

    cpu_threads.request(threads)


def _finish(res: dict[str, Any], args: argparse.Namespace) -> None:
    from specviz_core.bench import report as bench_report
    from specviz_core.bench.aggregate import budget_auto_summary

    if res.get("suites"):  # a results file from an earlier version is summarised as this one would
        res["budget_auto"] = budget_auto_summary(res["suites"], res.get("rows"))
    print("\n".join(bench_report.summary_lines(res, per_prompt=args.per_prompt)))
    if args.markdown is not None:
        try:
            bench_report.write_markdown(res, args.markdown, args.chart)
        except OSError as e:
            raise SpecVizError(f"cannot write {args.markdown}: {e.strerror}") from None
        print(f"tables written to {args.markdown}")
