"""STAND: stochastic adaptive n-gram drafting (seed 002, Section 4).

- Logit n-gram tables (1- to 4-grams) store the target's top-10 next-token
  probabilities after each n-gram seen on the decoded trajectory, merged as a
  running mean and re-truncated to the top 10
  (:mod:`~specviz_core.drafters.talon.ngram_tables`). Only the committed trajectory is
  merged (the root and the accepted path of every cycle, and the prompt): each
  merge is one occurrence of the n-gram, which is what the running mean averages.
- Lookup from the longest n-gram (4 down to 1) ending each node's context.
- A static tree of rank paths. With temperature > 0 the children of a node are
  drawn without replacement from the stored distribution (tempered, renormalised
  over its support) by Gumbel-top-k: rank r is the r-th draw. The Gumbel noise
  is drawn in bulk from the session generator, cached and consumed once, and
  refilled when used up. The walk knows each child's q and removes rejected
  siblings from it, so sampling stays lossless. At temperature 0 rank r is the
  r-th most probable token.
- The tree, as the paper runs it, is optimized from data: for the default model
  SpecViz ships one (``resources/trees/stand-smollm2-135m-instruct.json``, made
  by ``specviz optimize-tree`` from a 625-node depth-20 tree on calibration
  prompts that are not the bench prompts, at T=0.7, tables reset per prompt) and
  ``tree=auto`` (the default) uses it on that model; on another model, ``auto``
  is the Token Recycling heuristic tree (``tree=heuristic``, the paper's
  ablation), until ``specviz optimize-tree`` makes one (``--param tree=FILE``).
  The paper calibrates per workload: ``tree=code_editing`` (or any built-in
  suite's name) is the default model's tree optimized on that suite's held-out
  prompts (``resources/suites/calibration/``), shipped beside the general one.
- The tables live as long as the drafter: ``specviz record --samples N`` decodes
  N samples of one prompt with one drafter, so later samples draft from the
  earlier ones (best-of-N).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from specviz_core.drafters.base import DraftContext, Drafter
from specviz_core.drafters.talon.next_token import TableSource
from specviz_core.drafters.token_recycling import rank_template
from specviz_core.errors import SpecVizError
from specviz_core.methods.stand import CARD, StandParams
from specviz_core.target_rows import TargetRows
from specviz_core.tree import DraftTree

TREE_FORMAT = "specviz-tree"
RankPath = tuple[int, ...]


class GumbelCache:
    """Standard Gumbel noise drawn in bulk from the session generator; every value is used once."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.buf = torch.empty(0)
        self.pos = 0
        self.refills = 0

    def reset(self) -> None:
        self.buf, self.pos = torch.empty(0), 0

    def take(self, n: int, generator: torch.Generator) -> torch.Tensor:
        if self.pos + n > len(self.buf):
            u = torch.rand(max(self.size, n), generator=generator, dtype=torch.float64)
            u = u.clamp(min=1e-300)  # rand is in [0, 1): keep log(0) out
            self.buf, self.pos = -torch.log(-torch.log(u)), 0
            self.refills += 1
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out


def gumbel_topk(log_q: torch.Tensor, k: int, noise: torch.Tensor) -> list[int]:
    """k indices drawn without replacement from softmax(log_q) ([n]), in draw order (Gumbel-top-k, Kool et al. 2019)."""
    return torch.topk(log_q.double() + noise[: len(log_q)], min(k, len(log_q))).indices.tolist()


def check_tree(paths: list[RankPath], top_k: int, where: str) -> list[RankPath]:
    """A valid rank-path tree: no duplicates, every path's parent and lower-ranked siblings present."""
    seen = set(paths)
    if len(seen) != len(paths):
        raise SpecVizError(f"{where}: the tree repeats a rank path")
    for p in paths:
        if not p or any((not isinstance(r, int)) or r < 0 or r >= top_k for r in p):
            raise SpecVizError(f"{where}: bad rank path {list(p)} (ranks must be 0..{top_k - 1})")
        if len(p) > 1 and p[:-1] not in seen:
            raise SpecVizError(f"{where}: rank path {list(p)} has no parent {list(p[:-1])}")
        if p[-1] > 0 and p[:-1] + (p[-1] - 1,) not in seen:
            # Stochastic drafting draws siblings in rank order: a gap would hide a drawn token from the walk.
            raise SpecVizError(f"{where}: rank path {list(p)} without its lower-ranked sibling")
    return sorted(paths, key=lambda p: (len(p), p))


def load_tree(path: str, top_k: int) -> tuple[RankPath, ...]:
    """Rank paths from a tree file written by ``specviz optimize-tree``."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise SpecVizError(f"cannot read the tree file: {e.strerror}: {path}") from None
    except json.JSONDecodeError as e:
        raise SpecVizError(f"{path} is not a tree file (bad JSON: {e.msg})") from None
    if not isinstance(data, dict) or data.get("format") != TREE_FORMAT or not isinstance(data.get("paths"), list):
        raise SpecVizError(f"{path} is not a tree file written by specviz optimize-tree")
    try:
        paths = [tuple(p) for p in data["paths"]]
    except TypeError:
        raise SpecVizError(f"{path}: paths must be lists of ranks") from None
    return tuple(check_tree(paths, top_k, path))


AUTO, OPTIMIZED, HEURISTIC = "auto", "optimized", "heuristic"
SHIPPED_TREE = "stand-smollm2-135m-instruct.json"
SHIPPED_FOR = "smollm2-135m-instruct"


#: Built-in suites with a tree of their own for the default model (``tree=NAME``): optimized on the suite's held-out
#: calibration prompts (``specviz optimize-tree --suite calibration/NAME``), as the paper calibrates per workload.
SUITE_TREES = ("code_editing", "summarising", "qa", "chat", "multi_turn")


def suite_tree_file(suite: str) -> str:
    return SHIPPED_TREE.replace(".json", f"-{suite}.json")


def shipped_tree(top_k: int, suite: str | None = None) -> tuple[RankPath, ...]:
    """The optimized tree shipped for the default model: the general one, or ``suite``'s."""
    from specviz_resources import files

    name = suite_tree_file(suite) if suite else SHIPPED_TREE
    with files("trees", name).open("r", encoding="utf-8") as fh:
        data = json.load(fh)
    return tuple(check_tree([tuple(p) for p in data["paths"]], top_k, name))


def is_default_model(target: Any) -> bool:
    """The model the shipped tree was optimized for (the embedded default, or the same model from a folder)."""
    return any(SHIPPED_FOR in str(getattr(target, k, "")).lower() for k in ("name", "path")) or \
        str(getattr(target, "name", "")) == "default"


def default_tree(size: int, max_depth: int, top_k: int) -> list[RankPath]:
    """Token Recycling's heuristic tree (the paper's "heuristic" baseline): best rank-weight products."""
    return check_tree(rank_template(size, max_depth, top_k), top_k, "default tree")


class StandDrafter(Drafter):
    card = CARD

    def __init__(self, params: StandParams, target, draft_model=None) -> None:
        super().__init__(params, target, draft_model)
        which = params.tree or AUTO
        if which == AUTO:
            which = OPTIMIZED if is_default_model(target) and params.top_k == 10 else HEURISTIC
        shipped = which == OPTIMIZED or which in SUITE_TREES
        self.tree_used = which if which in (OPTIMIZED, HEURISTIC, *SUITE_TREES) else "file"
        """The tree this drafter runs on: ``optimized`` (shipped), a suite's (shipped), ``heuristic`` or ``file``."""
        if which == HEURISTIC:
            self.template: list[RankPath] = default_tree(params.budget, params.max_depth, params.top_k)
        elif shipped:  # cut to a smaller budget breadth first
            self.template = list(shipped_tree(params.top_k, None if which == OPTIMIZED else which))[: params.budget]
        else:  # a tree from a file keeps its own shape
            self.template = list(load_tree(which, params.top_k))
        self._cut: dict[int, list[RankPath]] = {}  # smaller trees for budget=auto, by size
        self.children: dict[RankPath, int] = {}  # rank path -> number of children in the template
        for p in self.template:
            self.children[p[:-1]] = self.children.get(p[:-1], 0) + 1
        self.source = TableSource(params.ngram_max, params.top_k, rows="path")
        self.noise = GumbelCache(params.noise_cache)
        self.vocab = target.vocab_size
        self.paths: dict[int, RankPath] = {}
        """Node id -> rank path, for the last tree (the tree optimizer counts accepted paths with it)."""
        self.counts = {"verified": 0, "accepted": 0, "cycles": 0}

    @property
    def tables(self):
        return self.source.tables

    def _smaller(self, size: int) -> list[RankPath]:
        """A ``size``-node tree: the heuristic one of that size, or the file's tree cut breadth-first
        (a breadth-first prefix keeps every parent and lower-ranked sibling)."""
        if size not in self._cut:
            self._cut[size] = (self.template[:size] if self.tree_used != HEURISTIC
                               else default_tree(size, self.params.max_depth, self.params.top_k))
        return self._cut[size]

    def start(self, prompt_ids: list[int]) -> None:
        self.source.start(prompt_ids)
        self.noise.reset()

    def harvest(self, rows: TargetRows) -> None:
        self.source.harvest(rows)

    @property
    def harvest_k(self) -> int:  # type: ignore[override]
        return self.source.harvest_k

    def draft(self, ctx: DraftContext) -> DraftTree:
        p: StandParams = self.params
        tree = DraftTree(root_token=ctx.ids[-1], mode="tree")
        stochastic = p.stochastic and ctx.temperature > 0
        self.source.root(ctx, p.top_k)  # sets the root's context
        self.paths = {0: ()}
        node_of: dict[RankPath, int] = {(): 0}
        hits = [0] * (p.ngram_max + 1)  # lookups answered by each n-gram length (0: none)
        template, children = self.template, self.children
        size = ctx.budget if ctx.budget is not None else len(template)
        if size < len(template):  # budget=auto: a smaller tree this cycle
            template = self._smaller(size)
            children = {}
            for t in template:
                children[t[:-1]] = children.get(t[:-1], 0) + 1
        for path in [()] + template:  # parents before children
            nid = node_of.get(path)
            want = children.get(path, 0)
            if nid is None or want == 0 or tree.depths[nid] >= ctx.max_depth:
                continue
            entry, n = self.tables.lookup(self.source.tail_of(tree, nid))
            hits[n] += 1
            if entry is None:
                continue
            if stochastic:
                q_sup = torch.tensor(entry.probs, dtype=torch.float64) ** (1.0 / ctx.temperature)
                q_sup = q_sup / q_sup.sum()
                k = min(want, len(entry.ids))
                picks = gumbel_topk(torch.log(q_sup), k, self.noise.take(len(entry.ids), ctx.generator))
                q = torch.zeros(self.vocab, dtype=torch.float32)  # [V], shared by the siblings
                q[entry.ids] = q_sup.float()
            else:
                picks = list(range(min(want, len(entry.ids))))
            for r, i in enumerate(picks):
                child = tree.add(nid, entry.ids[i], "table", entry.probs[i])
                node_of[path + (r,)] = child
                self.paths[child] = path + (r,)
                if stochastic:
                    tree.draft_q[child] = q
        if tree.n_verified == 1:
            tree.mode = "ar"
        self.source.bind(tree)
        tree.state = {"stochastic": stochastic, "table_entries": len(self.tables),
                      "lookups_by_n": hits[1:], "lookups_missed": hits[0], "noise_refills": self.noise.refills}
        return tree

    def accepted(self, tree: DraftTree, accepted_nodes: list[int], committed: list[int]) -> dict[str, Any]:
        self.source.accepted(tree, accepted_nodes)
        self.counts["verified"] += tree.n_verified - 1
        self.counts["accepted"] += len(accepted_nodes)
        self.counts["cycles"] += 1
        return {}

    def stats(self) -> dict[str, Any]:
        c = self.counts
        return dict(c, acceptance=c["accepted"] / c["verified"] if c["verified"] else 0.0,
                    table_entries=len(self.tables), template_nodes=len(self.template))


def tree_file(paths: list[RankPath], counts: list[int], meta: dict[str, Any]) -> dict[str, Any]:
    """The JSON a tree file holds (``specviz optimize-tree`` writes it; ``--param tree=`` reads it)."""
    return {"format": TREE_FORMAT, "version": 1, "method": "stand", "nodes": len(paths),
            "depth": max((len(p) for p in paths), default=0), "paths": [list(p) for p in paths],
            "counts": counts, "calibration": meta}

