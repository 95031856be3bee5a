"""Hand-built cycles of other shapes for the GUI tests: a TALON cycle (61 verified nodes and ~140 gated ones), a
grid of chains filling a large rectangle, and a Token Recycling static tree, with masks, positions and KV keep lists
that agree (see ``gui_records.tree_record``).
"""

from __future__ import annotations

import random

from gui_records import WORDS, single_cycle_source, tree_record, word_id
from specviz_core.records import CycleRecord
from specviz_core.viewer.sources import LiveSource


def talon_cycle(budget: int = 60, top_k: int = 10, gated_per_layer: int = 17, accepted: int = 4, *,
                cache_len: int = 120, index: int = 0, seed: int = 3) -> CycleRecord:
    """TALON's shape: the root's top-``top_k`` children, then layers of the best candidates by path probability
    until ``budget`` draft nodes are verified; each layer's best cut candidates (up to ``gated_per_layer``) are
    gated. The first ``accepted`` nodes of the deepest chain are accepted."""
    rng = random.Random(seed)
    parents, score, gated = [-1], [1.0], set()
    frontier = [0]
    layer_sizes = [top_k, 9, 9, 8, 7, 6, 5, 4, 3, 2, 1, 1, 1, 1, 1]
    used = 0
    for size in layer_sizes:
        if used >= budget or not frontier:
            break
        pool = [(score[p] * rng.uniform(0.02, 0.9) / (1 + r), p) for p in frontier for r in range(12)]
        pool.sort(key=lambda c: -c[0])
        keep = pool[:min(size, budget - used)]
        cut = pool[len(keep):len(keep) + gated_per_layer]
        nxt = []
        for s, p in keep:
            parents.append(p)
            score.append(s)
            nxt.append(len(parents) - 1)
        for s, p in cut:
            parents.append(p)
            score.append(s)
            gated.add(len(parents) - 1)
        used += len(keep)
        frontier = nxt[: max(1, len(nxt) // 2 + 1)]
    order = sorted(range(len(parents)), key=lambda i: parents[i])  # parents before children for tree_record
    new_id = {old: new for new, old in enumerate(sorted(order, key=lambda i: (depth_of(parents, i), i)))}
    par = [-1] * len(parents)
    for old, new in new_id.items():
        par[new] = new_id[parents[old]] if parents[old] >= 0 else -1
    gated = frozenset(new_id[g] for g in gated)
    tokens = [rng.randrange(3, len(WORDS)) for _ in par]
    # The accepted path: from the root down the first verified child each time.
    path, node = [], 0
    for _ in range(accepted):
        kids = [i for i, p in enumerate(par) if p == node and i not in gated]
        if not kids:
            break
        node = kids[0]
        path.append(node)
    sources = ["root"] + ["table"] * (len(par) - 1)
    rec = tree_record(par, sources, tokens, accepted_path=tuple(path), bonus_token=rng.randrange(3, len(WORDS)),
                      cache_len=cache_len, index=index, gated=gated, seed=seed)
    return rec.replace(state={"delta": 9.0, "depth": 9, "nodes": used, "gated": len(gated), "mu": 0.03})


def depth_of(parents: list[int], i: int) -> int:
    d = 0
    while parents[i] >= 0:
        i = parents[i]
        d += 1
    return d


def talon_source(**kw) -> LiveSource:
    return single_cycle_source(talon_cycle(**kw), method="talon")


def grid_cycle(rows: int = 24, depth: int = 20, path_row: int = 23, *, cache_len: int = 12) -> CycleRecord:
    """The root's ``rows`` children, each the start of a chain ``depth`` long: nodes fill a rectangle up to its
    bottom-right corner. The chain of row ``path_row`` (0 at the top) is the accepted path, its tokens "spine"."""
    parents, sources, path = [-1], ["root"], []
    for r in range(rows):
        for d in range(depth):
            parents.append(0 if d == 0 else len(parents) - 1)
            sources.append("spine" if r == path_row else "branch")
            if r == path_row:
                path.append(len(parents) - 1)
    tokens = [3 + (7 * i) % (len(WORDS) - 3) for i in range(len(parents))]
    return tree_record(parents, sources, tokens, accepted_path=tuple(path), bonus_token=word_id("home"),
                       cache_len=cache_len, mode="bypass")
