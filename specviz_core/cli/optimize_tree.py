"""``specviz optimize-tree``: the command line of :mod:`specviz_core.bench.optimize_tree`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from specviz_core.cli.options import add_device_args, atomic_output, check_writable, read_prompt_file
from specviz_core.errors import SpecVizError
from specviz_core.methods import parse_kv, parse_params
from specviz_core.methods.stand import StandParams


def add_parser(sub: Any) -> None:
    o = sub.add_parser(
        "optimize-tree", help="build STAND's static tree from data (count accepted paths on a large tree)",
        description="Decode calibration prompts with STAND on a large tree, count which nodes lie on accepted "
                    "paths, keep the best and save them; record with --param tree=FILE to use the tree.")
    o.add_argument("--method", choices=["stand"], default="stand", help="the method the tree is for (stand)")
    o.add_argument("--prompt-file", type=Path, action="append", required=True,
                   help="a calibration prompt (the whole file is one prompt); repeatable")
    o.add_argument("--out", type=Path, required=True, help="the tree file to write (JSON)")
    o.add_argument("--model", default=None, help="model folder or cached hub id (default: the embedded model)")
    o.add_argument("--large", type=int, default=625, help="rank paths in the large starting tree (default 625)")
    o.add_argument("--keep", type=int, default=80, help="nodes kept in the optimized tree (default 80)")
    o.add_argument("--max-depth", type=int, default=20, help="depth of the large starting tree (default 20, the paper's)")
    o.add_argument("--max-new-tokens", type=int, default=128, help="tokens decoded per sample (default 128)")
    o.add_argument("--temperature", type=float, default=0.0, help="decode at the temperature the tree is for (default 0)")
    o.add_argument("--samples", type=int, default=1, help="samples per prompt, one drafter throughout (default 1)")
    o.add_argument("--seed", type=int, default=0, help="seed of the first sample (default 0)")
    o.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="a STAND parameter; repeatable")
    o.add_argument("--no-chat-template", action="store_true", help="send the prompts as raw text")
    add_device_args(o)
    o.add_argument("--quiet", action="store_true", help="no progress lines")


def cmd_optimize_tree(args: argparse.Namespace) -> int:
    from specviz_core.bench.optimize_tree import optimize_tree
    from specviz_core.runtime.models import encode_prompt
    from specviz_core.session.factory import load_checked_model

    for name, v, lo in (("--large", args.large, 1), ("--keep", args.keep, 1), ("--max-depth", args.max_depth, 1),
                        ("--max-new-tokens", args.max_new_tokens, 1), ("--samples", args.samples, 1)):
        if v < lo:
            raise SpecVizError(f"{name} must be at least {lo}, got {v}")
    if args.temperature < 0:
        raise SpecVizError("temperature must be >= 0")
    texts = [read_prompt_file(f) for f in args.prompt_file]
    check_writable(args.out)  # before the decoding, not after it
    params = parse_kv(args.param)
    parse_params("stand", StandParams, params)  # bad parameters fail before the model loads
    say = (lambda s: None) if args.quiet else (lambda s: print(f"[specviz] {s}", file=sys.stderr, flush=True))
    target = load_checked_model(args.model, args.device, args.dtype)
    chat = False if args.no_chat_template else None
    prompts = [encode_prompt(target, t, chat)[0] for t in texts]
    data = optimize_tree(target, prompts, large=args.large, keep=args.keep, max_depth=args.max_depth,
                         max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed,
                         samples=args.samples, params=params, progress=say)
    try:
        with atomic_output(args.out) as fh:
            fh.write(json.dumps(data, indent=1) + "\n")
    except OSError as e:
        raise SpecVizError(f"cannot write {args.out}: {e.strerror}") from None
    print(f"wrote {args.out}: {data['nodes']} nodes, depth {data['depth']}, from {data['calibration']['cycles']} "
          f"cycles ({data['calibration']['accepted_tokens']} accepted draft tokens); "
          f"use it with: specviz record --method stand --param tree={args.out} ...")
    return 0
