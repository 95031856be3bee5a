"""``specviz optimize-tree``: the command line of :mod:`specviz_core.bench.optimize_tree`."""

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
    read_prompt_file,
    say_plan,
    stopped_early,
    time_limit,
)
from specviz_core.errors import SpecVizError
from specviz_core.methods import parse_kv
from specviz_core.session.spec import MAX_NEW_TOKENS, SAMPLES, SEED, TEMPERATURE

#: The largest starting tree: every cycle verifies all of it, so its size is the cost of every forward.
MAX_LARGE = 4096


def add_parser(sub: Any) -> None:
    o = sub.add_parser(
        "optimize-tree", help="build STAND's static tree from data (count accepted paths on a large tree)",
        description="Decode calibration prompts with STAND on a large tree, count which nodes lie on accepted "
                    "paths, keep the best and save them; record with --param tree=FILE to use the tree.")
    o.add_argument("--method", choices=["stand"], default="stand", help="the method the tree is for (stand)")
    o.add_argument("--prompt-file", type=Path, action="append", default=[],
                   help="a calibration prompt (a text file is one prompt; a .json file is a suite of them); repeatable")
    o.add_argument("--suite", default=None,
                   help="calibration prompts from suites, as specviz bench takes them (names or .json files, "
                        "comma-separated); calibration/NAME is the shipped held-out set of built-in suite NAME "
                        "(prompts of its kind that the bench does not use)")
    o.add_argument("--out", type=Path, required=True, help="the tree file to write (JSON)")
    o.add_argument("--model", default=None, help="model folder or cached hub id (default: the embedded model)")
    o.add_argument("--large", type=bounded_int(1, MAX_LARGE), default=625,
                   help=f"rank paths in the large starting tree, each verified at every cycle (default 625, "
                        f"at most {MAX_LARGE:,})")
    o.add_argument("--keep", type=bounded_int(1, MAX_LARGE), default=80,
                   help="nodes kept in the optimized tree, at most --large (default 80)")
    o.add_argument("--max-depth", type=bounded_int(1, 256), default=20,
                   help="depth of the large starting tree (default 20, the paper's)")
    o.add_argument("--max-new-tokens", type=MAX_NEW_TOKENS.parse, default=128,
                   help="tokens decoded per sample (default 128)")
    o.add_argument("--temperature", type=TEMPERATURE.parse, default=0.0,
                   help="decode at the temperature the tree is for (default 0)")
    o.add_argument("--samples", type=SAMPLES.parse, default=1,
                   help="samples per prompt, one drafter throughout (default 1)")
    o.add_argument("--seed", type=SEED.parse, default=0, help="seed of the first sample (default 0)")
    add_minutes_arg(o, "a tree from the cycles decoded so far")
    o.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="a STAND parameter; repeatable")
    o.add_argument("--no-chat-template", action="store_true", help="send the prompts as raw text")
    add_device_args(o)
    o.add_argument("--quiet", action="store_true", help="no progress bar")


def cmd_optimize_tree(args: argparse.Namespace) -> int:
    if args.keep > args.large:
        raise SpecVizError(f"--keep {args.keep} is more than the large tree's {args.large} nodes (--large): keep fewer")
    if not args.prompt_file and not args.suite:
        raise SpecVizError("give the calibration prompts: --prompt-file FILE (repeatable) or --suite NAME")
    from specviz_core.bench.suites import load_suites, prompt_file_suite

    entries = [p for f in args.prompt_file
               for p in (prompt_file_suite(f).prompts if f.suffix == ".json" else [read_prompt_file(f)])]
    entries += [p for s in (load_suites(args.suite) if args.suite else []) for p in s.prompts]
    texts = entries
    check_writable(args.out)  # before the decoding, not after it
    params = parse_kv(args.param)
    limit = time_limit(args)

    from specviz_core.bench.optimize_tree import check_choice, optimize_tree

    check_choice(params)  # bad parameters, tree= and budget=auto fail before the model loads
    n = len(texts) * args.samples
    say_plan(args, f"{counted(len(texts), 'prompt')} x {counted(args.samples, 'sample')} of up to {args.max_new_tokens:,} tokens, every cycle "
                   f"verifying a {args.large:,}-node tree of depth up to {args.max_depth}")

    from specviz_core.runtime.models import encode_prompt
    from specviz_core.session.factory import load_checked_model

    load_say = (lambda s, f: None) if args.quiet else (lambda s, f: print(f"[specviz] {s}", file=sys.stderr, flush=True))
    target = load_checked_model(args.model, args.device, args.dtype, load_say)
    chat = False if args.no_chat_template else None
    prompts = [encode_prompt(target, t, chat)[0] if isinstance(t, str) else t.encode(target, chat) for t in texts]
    bar = None if args.quiet else progress_bar(total=n * args.max_new_tokens, unit="tok", dynamic_ncols=True)

    def progress(what: str, tokens: int) -> None:
        if bar is not None:
            bar.set_description_str(what, refresh=False)
            bar.update(tokens)

    try:
        data = optimize_tree(target, prompts, large=args.large, keep=args.keep, max_depth=args.max_depth,
                             max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed,
                             samples=args.samples, params=params, progress=progress, limit=limit)
    finally:
        if bar is not None:
            bar.close()
    if "calibration" not in data:  # stopped before the first cycle: no counts, no tree
        stopped = data["stopped"]
        print(f"specviz: {'interrupted' if stopped == 'interrupted' else 'stopped: ' + stopped} before any cycle was "
              f"decoded: no tree written", file=sys.stderr)
        return 130 if stopped == "interrupted" else 1
    stopped = data["calibration"].get("stopped")
    try:
        with atomic_output(args.out) as fh:
            fh.write(json.dumps(data, indent=1) + "\n")
    except OSError as e:
        raise SpecVizError(f"cannot write {args.out}: {e.strerror}") from None
    cal = data["calibration"]
    print(f"wrote {args.out}: {data['nodes']} nodes, depth {data['depth']}, from {cal['cycles']} "
          f"cycles ({cal['accepted_tokens']} accepted draft tokens); "
          f"use it with: specviz record --method stand --param tree={args.out} ...")
    return stopped_early(stopped, f"the tree counts the {cal['cycles']} cycles decoded "
                                  f"({cal.get('samples_finished')} of {counted(n, 'sample')} finished)")
