"""STAND's data-driven static tree (seed 002, Section 4.2): decode with a large tree, keep what got accepted.

Decode calibration prompts with STAND and a large tree (625 rank paths, depth
20, by default, as the paper starts), at the temperature the tree is for, count
how often each rank path lies on an accepted path, keep the best 80 and save
them as a tree file (``--param tree=tree.json`` uses it). The n-gram tables start
empty for every prompt and carry over between that prompt's samples, as STAND
runs (a prompt group shares its tables, prompts do not).

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

import heapq
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from specviz_core.drafters.stand import RankPath, StandDrafter, StandParams, check_tree, tree_file
from specviz_core.errors import SpecVizError
from specviz_core.runtime.time_limit import TimeLimit
from specviz_core.session.spec import check_method, spec_for
from specviz_core.session.session import Session

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


def check_choice(params: dict[str, Any] | None) -> Any:
    """STAND's checked settings for the calibration, refused before any model loads."""
    params = dict(params or {})
    if str(params.get("budget", "")).strip().lower() == "auto":
        raise SpecVizError("optimize-tree decodes on its own large tree: budget=auto does not apply")
    params.setdefault("budget", "paper")  # its own large tree, not the default auto
    choice = check_method("stand", params)
    if choice.params.tree not in ("", "auto"):
        raise SpecVizError("optimize-tree starts from its own large tree: do not pass tree=")
    return choice


def optimize_tree(target: Any, prompts: list[list[int]], *, large: int = 625, keep: int = 80, max_depth: int = 20,
                  max_new_tokens: int = 128, temperature: float = 0.0, seed: int = 0, samples: int = 1,
                  params: dict[str, Any] | None = None, progress: Callable[[str, int], None] | None = None,
                  limit: TimeLimit | None = None) -> dict[str, Any]:
    """Decode every prompt ``samples`` times with one STAND drafter on a large tree; return the tree file's JSON.

    ``progress(what, tokens)`` follows every cycle (its committed tokens). ``limit`` is checked before every cycle;
    once it passes, or on Ctrl-C, decoding stops and the tree counts the cycles decoded so far, its ``calibration``
    saying why it stopped (``stopped``: the limit's reason or ``interrupted``). With no cycle decoded it returns only ``stopped`` and ``cycles`` (0)."""
    choice = check_choice(params)
    base: StandParams = choice.params
    limit = limit or TimeLimit(None)
    paths = large_tree(large, max_depth, base.top_k)
    counts: Counter[RankPath] = Counter()
    cycles = tokens = done = 0
    stopped = None
    try:
        for i, prompt in enumerate(prompts):
            drafter = StandDrafter(base, target)  # fresh tables per prompt; its samples share them
            drafter.template = paths  # decode on the large tree
            drafter.children = Counter(p[:-1] for p in paths)
            for s in range(samples):
                session = Session(spec_for(choice, prompt, max_new_tokens=max_new_tokens, temperature=temperature,
                                           seed=seed + s), target, drafter=drafter)
                what = f"prompt {i + 1}/{len(prompts)} sample {s + 1}/{samples}"
                while not session.done:
                    if limit.passed():
                        raise _TimeUp
                    rec = session.step().record
                    counts.update(drafter.paths[n] for n in rec.accepted_path)
                    cycles += 1
                    tokens += len(rec.committed_ids)
                    if progress is not None:
                        progress(what, len(rec.committed_ids))
                done += 1
    except _TimeUp:
        stopped = limit.reason
    except KeyboardInterrupt:
        stopped = "interrupted"
    if not cycles:
        return {"stopped": stopped or "nothing decoded", "cycles": 0}
    kept = select_tree(paths, counts, keep)
    meta = {"large_tree": len(paths), "large_tree_depth": max(len(p) for p in paths), "keep": keep,
            "prompts": len(prompts), "samples": samples, "temperature": temperature, "seed": seed,
            "max_new_tokens": max_new_tokens, "cycles": cycles, "tokens": tokens, "tables": "reset per prompt",
            "accepted_tokens": sum(counts.values()), "model": getattr(target, "name", "?"),
            "samples_finished": done, "samples_planned": len(prompts) * samples}
    if stopped is not None:
        meta["stopped"] = stopped
    return tree_file(kept, [counts.get(p, 0) for p in kept], meta)


class _TimeUp(Exception):
    """The time limit passed: no more cycles; the counts so far make the tree."""
