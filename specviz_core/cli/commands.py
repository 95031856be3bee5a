"""The ``specviz`` command: record, list, export and check sessions (and open the GUI).

Bad input prints one line, ``specviz: error: ...``, and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from specviz_core.cli.bench import add_parser as add_bench_parser
from specviz_core.cli.bench import cmd_bench
from specviz_core.cli.check import add_parser as add_check_parser
from specviz_core.cli.check import cmd_check
from specviz_core.cli.explain import add_parser as add_explain_parser
from specviz_core.cli.explain import cmd_explain
from specviz_core.cli.models import add_parser as add_models_parser
from specviz_core.cli.models import cmd_models
from specviz_core.cli.optimize_tree import add_parser as add_optimize_tree_parser
from specviz_core.cli.optimize_tree import cmd_optimize_tree
from specviz_core.cli.options import (
    Parser,
    add_db_arg,
    add_device_args,
    add_minutes_arg,
    atomic_output,
    budget_arg,
    progress_bar,
    read_prompt_file,
    refuse_overwriting,
    say_plan,
    time_limit,
)
from specviz_core.cli.reproduce import add_parser as add_reproduce_parser
from specviz_core.cli.reproduce import cmd_reproduce
from specviz_core.cli.share import add_parser as add_share_parser
from specviz_core.cli.share import cmd_share
from specviz_core.cli.train_head import add_parser as add_train_head_parser
from specviz_core.cli.train_head import cmd_train_head
from specviz_core.crash import one_line
from specviz_core.errors import SpecVizError
from specviz_core.methods import CARDS, param_specs, parse_kv
from specviz_core.runtime.locations import data_dir
from specviz_core.session.spec import MAX_NEW_TOKENS, SAMPLES, SEED, TEMPERATURE
from specviz_core.viewer.comparison import load_comparison


def _methods_help() -> str:
    lines = ["methods and their parameters (--param key=value):"]
    width = max(len(m) for m in CARDS)
    for mid, cls in CARDS.items():
        lines.append(f"  {mid:<{width}} {cls.description}")
        for f in param_specs(cls.params_cls):
            if f.name == "budget" and isinstance(f.default, int):  # every tree method's default is auto
                lines.append(f"      budget=auto     {f.metadata['help']} auto (the default): chosen each cycle "
                             f"for this device; paper: the method's own, {f.default}; or a number.")
                continue
            lines.append(f"      {f.name}={f.default!s:<8} {f.metadata['help']}")
    return "\n".join(lines)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("specviz")
    except PackageNotFoundError:
        return "(not installed)"


def default_db() -> Path:
    return data_dir() / "sessions.db"


def build_parser(extra: Callable[[Any], None] | None = None) -> argparse.ArgumentParser:
    """The command line; ``extra(subparsers)`` may add commands (the GUI's ``gui`` and ``screenshot``)."""
    p = Parser(
        prog="specviz",
        description="SpecViz: a visual debugger for tree-based speculative decoding. "
        "With no command, opens the window on the default model with a demo prompt (F10 decodes a cycle).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"specviz {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    r = sub.add_parser(
        "record", help="decode one prompt with one method and record every cycle",
        description="Decode one prompt with one method, recording every cycle to an SQLite file.",
        epilog=_methods_help(), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("--method", default=None, help=f"one of: {', '.join(CARDS)} (or give --generate-kwargs)")
    r.add_argument("--generate-kwargs", default=None, metavar="JSON",
                   help="the keyword arguments of your model.generate(...) call as a JSON object, e.g. "
                        "'{\"assistant_model\": \"org/small\", \"max_new_tokens\": 64}': SpecViz picks the matching "
                        "method (hf_assisted, hf_universal, hf_prompt_lookup or ar) and parameters, and refuses what "
                        "it cannot reproduce (docs/hf-assisted.md)")
    r.add_argument("--model", default=None, help="model folder or cached hub id (default: the embedded SmolLM2-135M-Instruct)")
    r.add_argument("--draft-model", default=None,
                   help="draft model (the assistant) sharing the target's tokenizer, or with its own for hf_universal "
                        "('default' for the embedded model)")
    r.add_argument("--draft-head", default=None, metavar="PATH",
                   help="talon, eagle_static and eagle: draft with this EAGLE head, a folder (or cached hub id) in "
                        "EAGLE-1/2's or EAGLE-3's published layout (default: the head train-head made for the model, "
                        "if any); docs/eagle-heads.md")
    g = r.add_mutually_exclusive_group()
    g.add_argument("--prompt", help="the prompt text")
    g.add_argument("--prompt-file", type=Path, help="read the prompt from this file")
    r.add_argument("--max-new-tokens", type=MAX_NEW_TOKENS.parse, default=None,
                   help=f"{MAX_NEW_TOKENS.help} (default {MAX_NEW_TOKENS.default}, or the generate arguments' "
                        "max_new_tokens)")
    r.add_argument("--temperature", type=TEMPERATURE.parse, default=None,
                   help=f"{TEMPERATURE.help} (default {TEMPERATURE.default:g})")
    r.add_argument("--seed", type=SEED.parse, default=None, help=f"{SEED.help} (default {SEED.default})")
    r.add_argument("--samples", type=SAMPLES.parse, default=SAMPLES.default,
                   help=f"{SAMPLES.help} (default {SAMPLES.default})")
    add_minutes_arg(r, "the samples and cycles decoded so far (a sample cut short is marked interrupted)")
    r.add_argument("--budget", type=budget_arg, default=None,
                   help="tree methods: draft tokens verified per cycle, at most: auto (the default: chosen for this "
                   "device from its measured verify cost), paper (the method's own, as its paper fixes it) or a number "
                   "up to 1024")
    r.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="a method parameter; repeatable")
    r.add_argument("--no-chat-template", action="store_true", help="send the prompt as raw text")
    r.add_argument("--fork", metavar="SESSION:CYCLE", help="continue that session of --db from that cycle with the "
                   "settings given here (the rest are the parent's): re-runs and checks its cycles before (docs/fork.md)")
    r.add_argument("--fork-anyway", action="store_true", help="with --fork: go on when a re-run cycle differs")
    add_device_args(r)
    add_db_arg(r, "SQLite file to record to (created if missing)")
    r.add_argument("--quiet", action="store_true", help="no progress bar")

    s = sub.add_parser("sessions", help="list the sessions in a recording")
    add_db_arg(s)
    s.add_argument("--metrics", action="store_true",
                   help="also print each session's draft acceptance rate, mean acceptance length and acceptance by "
                        "draft position (definitions: docs/metrics.md)")

    a = sub.add_parser("audit", help="check a greedy session's output against plain greedy decoding",
                       description="Decode the session's prompt with transformers' own greedy generate on the same "
                       "model (same device and dtype when this machine has them) and report the first token where "
                       "the session differs, with the target's top-2 logit gap there: identical, a numerical tie, "
                       "or a real divergence. Exit 0 for identical, a tie or a sampled session, 1 for a divergence.")
    add_db_arg(a)
    a.add_argument("--session", default=None, help="session id (default: the latest)")
    a.add_argument("--json", action="store_true", help="print the result as one JSON object")

    c = sub.add_parser("compare", help="two or more sessions side by side: numbers, outputs, acceptance",
                       description="Compare sessions of one recording: tokens, forwards, tokens per forward, tokens/s "
                       "and the speed-up against the first session, acceptance by source, whether the outputs are "
                       "identical (or where they first differ) and the accepted-per-cycle distribution.")
    add_db_arg(c)
    c.add_argument("sessions", nargs="+", metavar="SESSION", help="session ids, the baseline first (two or more)")
    c.add_argument("--json", action="store_true", help="print the comparison as one JSON object")

    e = sub.add_parser("export", help="write a session as JSON lines (see docs/record-format.md)")
    add_db_arg(e)
    e.add_argument("--session", default=None, help="session id (default: the latest)")
    e.add_argument("--format", choices=["jsonl"], default="jsonl")
    e.add_argument("--out", type=Path, default=None, help="output file (default: standard output)")
    e.add_argument("--strict", action="store_true",
                   help="fail on a damaged cycle (default: skip it and say so on standard error)")
    add_check_parser(sub)
    add_models_parser(sub)
    add_explain_parser(sub)
    add_optimize_tree_parser(sub)
    add_train_head_parser(sub)
    add_reproduce_parser(sub)
    add_bench_parser(sub)
    add_share_parser(sub)
    if extra is not None:
        extra(sub)
    return p


class _Progress:
    """A progress line on stderr for model loading and conversion."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def __call__(self, stage: str, fraction: float | None) -> None:
        if not self.quiet:
            pct = f" {fraction * 100:3.0f}%" if fraction is not None else ""
            print(f"[specviz]{pct} {stage}", file=sys.stderr, flush=True)


def cmd_record(args: argparse.Namespace) -> int:
    from specviz_core.runtime.locations import resolve_model_path

    if args.fork is not None:
        from specviz_core.cli.fork import cmd_fork

        return cmd_fork(args)
    if args.fork_anyway:
        raise SpecVizError("--fork-anyway applies only with --fork S:C (it lets a fork go on when a re-run cycle "
                           "differs from the recording)")
    spec = record_request(args).check()  # everything that needs no model (nor torch), before the slow part
    limit = time_limit(args)
    for name in (spec.model, spec.draft_model):
        if name not in (None, "default"):
            resolve_model_path(name)  # a wrong path is refused before the recording is created
    from specviz_core.recording.store import Recording, new_session_id
    from specviz_core.runtime.catalog import remember_model
    from specviz_core.session.factory import load_models
    from specviz_core.session.session import Session, summary_line

    if args.samples > 1:
        say_plan(args, f"{args.samples} samples of up to {spec.max_new_tokens:,} tokens each "
                       f"(seeds {spec.seed}..{spec.seed + args.samples - 1})")
    progress = _Progress(args.quiet)
    infos, stopped = [], None
    with Recording(args.db, create=True) as rec:
        target, draft = load_models(spec, progress)
        for name in (spec.model, spec.draft_model if draft is not None else None):
            remember_model(name)  # the window's model picker and `specviz models` list it from now on
        # The samples of one prompt are one group and share one drafter, so its tables persist (best-of-N).
        group, drafter = (new_session_id() if args.samples > 1 else None), None
        for i in range(args.samples):
            if limit.passed():
                stopped = f"{limit.reason} before sample {i + 1} of {args.samples}"
                break
            run = Session(spec.with_seed(spec.seed + i), target, draft, group_id=group, drafter=drafter,
                          progress=progress)
            drafter = run.drafter
            bar = None
            if not args.quiet:  # before the session row exists: a Ctrl-C here leaves no session `running`
                desc = spec.method + (f" {i + 1}/{args.samples}" if args.samples > 1 else "")
                bar = progress_bar(total=spec.max_new_tokens, unit="tok", desc=desc)
            run.record_to(rec)
            try:
                for cycle in run.run():
                    if bar is not None:
                        bar.update(len(cycle.record.committed_ids))
                    if not run.done and limit.passed():
                        run.finish("interrupted", limit.reason)
                        stopped = f"{limit.reason} in sample {i + 1} of {args.samples}"
                        break
            except KeyboardInterrupt:
                done = f" ({i} of {args.samples} samples finished)" if args.samples > 1 else ""
                print(f"specviz: interrupted; the cycles so far are saved{done}", file=sys.stderr)
                return 130
            finally:
                if bar is not None:
                    bar.close()
            infos.append(rec.session(run.info.id))
            if stopped:
                break
    for i, info in enumerate(infos):
        sample = f" (sample {i + 1}/{len(infos)}, seed {info.seed})" if len(infos) > 1 else ""
        print(f"session {info.id}: {info.method} on {Path(info.model).name if info.model != 'default' else 'default model'}{sample}")
        print(summary_line(info))
    if len(infos) > 1:
        print(f"group {group}: tokens/forward by sample: {', '.join(f'{x.tokens_per_forward:.2f}' for x in infos)}")
    if stopped:
        print(f"specviz: stopped: {stopped}; the cycles so far are saved", file=sys.stderr)
    return 0


def record_request(args: argparse.Namespace) -> Any:
    """The session ``specviz record`` asks for: its options, or a pasted generate call with the options on top."""
    from specviz_core.session.generate_kwargs import from_generate_kwargs, parse_generate_kwargs
    from specviz_core.session.spec import SessionRequest

    if args.prompt is None and args.prompt_file is None:
        raise SpecVizError("give --prompt or --prompt-file (or --fork SESSION:CYCLE)")
    prompt = read_prompt_file(args.prompt_file) if args.prompt_file is not None else args.prompt
    method, params, draft = args.method, parse_kv(args.param), args.draft_model
    max_new, temperature = args.max_new_tokens, args.temperature
    if args.generate_kwargs is not None:
        call = from_generate_kwargs(parse_generate_kwargs(args.generate_kwargs))
        if method is not None and method != call.method:
            raise SpecVizError(f"--method {method} disagrees with the generate arguments, which make {call.method}")
        if draft is not None and call.draft_model is not None and draft != call.draft_model:
            raise SpecVizError(f"--draft-model {draft} disagrees with the generate arguments' assistant_model "
                               f"{call.draft_model}")
        method, params, draft = call.method, {**call.params, **params}, draft or call.draft_model
        max_new = max_new if max_new is not None else call.max_new_tokens
        temperature = temperature if temperature is not None else call.temperature
        for note in call.notes:
            print(f"specviz: note: {note}", file=sys.stderr)
        print(f"specviz: the generate arguments make {method}"
              + "".join(f" --param {k}={v}" for k, v in call.params.items()), file=sys.stderr)
    elif method is None:
        raise SpecVizError("give --method, or your generate call's arguments with --generate-kwargs")
    return SessionRequest(
        method=method, prompt=prompt, model=args.model, draft_model=draft, draft_head=args.draft_head, params=params,
        budget=args.budget,
        max_new_tokens=max_new if max_new is not None else MAX_NEW_TOKENS.default,
        temperature=temperature if temperature is not None else TEMPERATURE.default,
        seed=args.seed if args.seed is not None else SEED.default,
        chat_template=False if args.no_chat_template else None, device=args.device, dtype=args.dtype, threads=args.threads,
    )


def cmd_sessions(args: argparse.Namespace) -> int:
    from specviz_core.analysis.compare import fork_label, fork_tree
    from specviz_core.analysis.metrics import session_metrics
    from specviz_core.recording.store import Recording

    damaged: list = []
    with Recording(args.db, read_only=True) as rec:
        sessions = rec.sessions(damaged=damaged)
        metrics = {s.id: session_metrics(rec.cycle_summaries(s.id)) for s in sessions} if args.metrics else {}
    if not sessions and not damaged:
        print("no sessions")
        return 0
    mw, tree = max(10, *(len(s.method) for s in sessions)), fork_tree(sessions)
    iw = max(12, *(2 * d + len(s.id) for s, d in tree)) if tree else 12
    print(f"{'id':<{iw}}  {'created':<19}  {'method':<{mw}}  {'status':<11}  {'tokens':>6}  {'fwd':>5}  {'tau':>5}  {'tok/s':>6}  prompt")
    for s, depth in tree:  # forks right under their parent, indented
        prompt = fork_label(s) or " ".join(s.prompt_text.split())[:40]
        print(f"{'  ' * depth + s.id:<{iw}}  {s.created[:19]:<19}  {s.method:<{mw}}  {s.status:<11}  {s.n_tokens:>6}  "
              f"{s.n_forward:>5}  {s.tokens_per_forward:>5.2f}  {s.tokens_per_s:>6.1f}  {prompt}")
        if args.metrics:
            print(f"    {'tokens per forward':<24}{s.tokens_per_forward:.3f}   (decode forwards; "
                  f"{s.tau_prefill_counted:.3f} with the prefill's forward counted, as the papers count)")
            for line in metrics[s.id].lines():
                print(f"    {line}")
    for d in damaged:
        print(f"{d.session_id:<{iw}}  {'':<19}  {'':<10}  {'damaged':<11}  {d.reason}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from specviz_core.recording.export import export_jsonl
    from specviz_core.recording.store import Recording

    if args.out is not None:
        refuse_overwriting(args.out, [args.db])
    skipped = None if args.strict else []
    with Recording(args.db, read_only=True) as rec:
        if args.out is None:
            export_jsonl(rec, args.session, sys.stdout, skipped)
        else:
            try:
                with atomic_output(args.out) as fh:
                    export_jsonl(rec, args.session, fh, skipped)
            except OSError as e:
                raise SpecVizError(f"cannot write {args.out}: {e.strerror}") from None
    for d in skipped or ():
        print(f"specviz: skipped cycle {d.index} of session {d.session_id}: {d.reason} (--strict fails instead)",
              file=sys.stderr)
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from specviz_core.audit import audit, audit_device
    from specviz_core.recording.store import Recording
    from specviz_core.session.factory import load_checked_model

    with Recording(args.db, read_only=True) as rec:
        info = rec.session(args.session)
        lengths = [s.n_committed for s in rec.cycle_summaries(info.id)]
    model = None
    if info.temperature == 0 and info.output_ids:
        progress = _Progress(args.json)
        model = load_checked_model(info.model, audit_device(info.device), info.dtype, progress)
    result = audit(info, lengths, model, progress=lambda s: _Progress(args.json)(s, None))
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print(f"session {info.id} ({info.method}): {result.message}")
    return 1 if result.verdict == "divergence" else 0



def cmd_compare(args: argparse.Namespace) -> int:
    comparison, vocab = load_comparison(args.db, args.sessions)
    if args.json:
        print(json.dumps({"sessions": comparison.rows(), "first_difference": comparison.first_difference(),
                          "same_prompt": comparison.same_prompt()}))
    else:
        print("\n".join(comparison.text(vocab.text)))
    return 0


def main(argv: Sequence[str] | None = None, extra: Callable[[Any], None] | None = None,
         extra_handlers: dict[str | None, Callable[[argparse.Namespace], int]] | None = None) -> int:
    parser = build_parser(extra)
    args = parser.parse_args(argv)
    def no_command(_: argparse.Namespace) -> int:  # the headless command line: the window is specviz_app's
        parser.print_help()
        return 2

    handlers = {"record": cmd_record, "sessions": cmd_sessions, "export": cmd_export, "check": cmd_check,
                None: no_command, "optimize-tree": cmd_optimize_tree, "bench": cmd_bench, "audit": cmd_audit,
                "compare": cmd_compare, "models": cmd_models, "explain": cmd_explain,
                "train-head": cmd_train_head, "reproduce": cmd_reproduce, "share": cmd_share}
    handlers.update(extra_handlers or {})
    try:
        from specviz_core.runtime import threads

        threads.request(getattr(args, "threads", None))
        return handlers[args.command](args)
    except SpecVizError as e:
        print(f"specviz: error: {' '.join(str(e).splitlines())}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("specviz: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug or an environment we did not foresee: one line here, the traceback in a log
        print(f"specviz: error: {one_line(e)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
