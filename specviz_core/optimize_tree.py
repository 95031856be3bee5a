"""STAND's data-driven static tree (seed 002, Section 4.2): decode with a large tree, keep what got accepted.

Decode calibration prompts with STAND and a large tree (625 rank paths by
default), count how often each rank path lies on an accepted path, keep the
best 80 and save them as a tree file (``--param tree=tree.json`` uses it).

The kept nodes must form a tree that stochastic drafting can fill: every path's
parent and its lower-ranked siblings must be kept too (siblings are drawn in
rank order). A node is only accepted when its parent is, so a parent's count is
at least any child's; a lower-ranked sibling may have a smaller count than a
higher one, so each node is ranked by the largest count among itself and its
higher-ranked siblings. Sorting by that (ties: shallower first, then by path)
puts every parent and lower sibling before the node, and any prefix of the
order is a valid tree.
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .drafters.base import parse_kv, parse_params
from .drafters.stand import RankPath, StandDrafter, StandParams, check_tree, tree_file
from .engine import DecodeConfig, Engine
from .errors import SpecVizError

# Rank weights of the large starting tree: flatter than Token Recycling's, so it reaches deep
# (a tree optimized for STAND can be a long narrow chain; the paper's reached depth 13).
LARGE_TREE_WEIGHTS = (0.8, 0.3, 0.15, 0.08, 0.05, 0.03, 0.02, 0.015, 0.01, 0.008)


def large_tree(size: int, max_depth: int, top_k: int) -> list[RankPath]:
    """The ``size`` rank paths with the largest products of LARGE_TREE_WEIGHTS (best first, so closed)."""
    w = [LARGE_TREE_WEIGHTS[min(r, len(LARGE_TREE_WEIGHTS) - 1)] / (1 + max(0, r - 9)) for r in range(top_k)]
    heap: list[tuple[float, RankPath]] = [(-w[0], (0,))]
    chosen: list[RankPath] = []
    while heap and len(chosen) < size:
        neg, path = heapq.heappop(heap)
        chosen.append(path)
        if path[-1] + 1 < top_k:  # the next sibling
            heapq.heappush(heap, (neg / w[path[-1]] * w[path[-1] + 1], path[:-1] + (path[-1] + 1,)))
        if len(path) < max_depth:  # the first child
            heapq.heappush(heap, (neg * w[0], path + (0,)))
    return check_tree(chosen, top_k, "large tree")


def select_tree(paths: Sequence[RankPath], counts: dict[RankPath, int], keep: int) -> list[RankPath]:
    """The best ``keep`` paths by accepted count, closed under parents and lower-ranked siblings."""
    lifted: dict[RankPath, int] = {}
    for p in sorted(paths, key=lambda p: (-len(p), p[:-1], -p[-1])):  # higher siblings first
        lifted[p] = max(counts.get(p, 0), lifted.get(p[:-1] + (p[-1] + 1,), 0))
    order = sorted(paths, key=lambda p: (-lifted[p], len(p), p))
    return sorted(order[:keep], key=lambda p: (len(p), p))


def optimize_tree(target: Any, prompts: list[list[int]], *, large: int = 625, keep: int = 80, max_depth: int = 16,
                  max_new_tokens: int = 128, temperature: float = 0.0, seed: int = 0, samples: int = 1,
                  params: dict[str, Any] | None = None,
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Decode every prompt ``samples`` times with one STAND drafter on a large tree; return the tree file's JSON."""
    base: StandParams = parse_params("stand", StandParams, dict(params or {}))
    if base.tree:
        raise SpecVizError("optimize-tree starts from its own large tree: do not pass tree=")
    paths = large_tree(large, max_depth, base.top_k)
    drafter = StandDrafter(base, target)
    drafter.template = paths  # decode on the large tree
    drafter.children = Counter(p[:-1] for p in paths)
    counts: Counter[RankPath] = Counter()
    cycles = tokens = 0
    for i, prompt in enumerate(prompts):
        for s in range(samples):
            engine = Engine(target, drafter, prompt, DecodeConfig(max_new_tokens=max_new_tokens,
                                                                 temperature=temperature, seed=seed + s))
            for rec in engine.cycles():
                counts.update(drafter.paths[n] for n in rec.accepted_path)
                cycles += 1
            tokens += len(engine.output_ids)
            if progress is not None:
                progress(f"prompt {i + 1}/{len(prompts)} sample {s + 1}/{samples}: {len(engine.output_ids)} tokens, "
                         f"{engine.n_forward} forwards, {len(engine.output_ids) / engine.n_forward:.2f} tokens/forward")
    kept = select_tree(paths, counts, keep)
    meta = {"large_tree": len(paths), "large_tree_depth": max(len(p) for p in paths), "keep": keep,
            "prompts": len(prompts), "samples": samples, "temperature": temperature, "seed": seed,
            "max_new_tokens": max_new_tokens, "cycles": cycles, "tokens": tokens,
            "accepted_tokens": sum(counts.values()), "model": getattr(target, "name", "?")}
    return tree_file(kept, [counts.get(p, 0) for p in kept], meta)


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
    o.add_argument("--max-depth", type=int, default=16, help="depth of the large starting tree (default 16)")
    o.add_argument("--max-new-tokens", type=int, default=128, help="tokens decoded per sample (default 128)")
    o.add_argument("--temperature", type=float, default=0.0, help="decode at the temperature the tree is for (default 0)")
    o.add_argument("--samples", type=int, default=1, help="samples per prompt, one drafter throughout (default 1)")
    o.add_argument("--seed", type=int, default=0, help="seed of the first sample (default 0)")
    o.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="a STAND parameter; repeatable")
    o.add_argument("--no-chat-template", action="store_true", help="send the prompts as raw text")
    o.add_argument("--device", default=None)
    o.add_argument("--dtype", default=None)
    o.add_argument("--quiet", action="store_true", help="no progress lines")


def cmd_optimize_tree(args: argparse.Namespace) -> int:
    from .models import encode_prompt, load_model

    for name, v, lo in (("--large", args.large, 1), ("--keep", args.keep, 1), ("--max-depth", args.max_depth, 1),
                        ("--max-new-tokens", args.max_new_tokens, 1), ("--samples", args.samples, 1)):
        if v < lo:
            raise SpecVizError(f"{name} must be at least {lo}, got {v}")
    if args.temperature < 0:
        raise SpecVizError("temperature must be >= 0")
    texts = []
    for f in args.prompt_file:
        try:
            texts.append(f.read_text(encoding="utf-8"))
        except OSError as e:
            raise SpecVizError(f"cannot read the prompt file: {e.strerror}: {f}") from None
        if not texts[-1].strip():
            raise SpecVizError(f"the prompt file is empty: {f}")
    params = parse_kv(args.param)
    parse_params("stand", StandParams, params)  # bad parameters fail before the model loads
    say = (lambda s: None) if args.quiet else (lambda s: print(f"[specviz] {s}", file=sys.stderr, flush=True))
    target = load_model(args.model, device=args.device, dtype=args.dtype)
    chat = False if args.no_chat_template else None
    prompts = [encode_prompt(target, t, chat)[0] for t in texts]
    data = optimize_tree(target, prompts, large=args.large, keep=args.keep, max_depth=args.max_depth,
                         max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed,
                         samples=args.samples, params=params, progress=say)
    try:
        args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    except OSError as e:
        raise SpecVizError(f"cannot write {args.out}: {e.strerror}") from None
    print(f"wrote {args.out}: {data['nodes']} nodes, depth {data['depth']}, from {data['calibration']['cycles']} "
          f"cycles ({data['calibration']['accepted_tokens']} accepted draft tokens); "
          f"use it with: specviz record --method stand --param tree={args.out} ...")
    return 0
