"""What a Goose session counts: the official decoder's statistics, plus the paper's Proposition 1 and
the share of accepted tokens by path category (Section 4.2, 5.4).

Routes (the official ``DecodeStats``): ``spine_tree`` (a tree with a spine), ``branch_tree`` (a tree
of adjacency branches only), ``chain`` (a context match verified as a chain because the table had
nothing for the root), ``ar``; SpecViz adds ``prefill`` (cycle 0: the official prefill's last
position, which yields the first token with no draft) and ``bypass`` (Algorithm 2's linear bypass,
with ``confident_match=bypass``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from specviz_core.tree import DraftTree

ROUTES = ("prefill", "spine_tree", "branch_tree", "chain", "bypass", "ar")
PATHS = ("pure_spine", "spine_continuation", "pure_branch")
#: Section 5.4: spine continuation contributes 12-44% of accepted tokens (Llama-3-8B).
PAPER_CONTINUATION_SHARE = (0.12, 0.44)


def path_category(sources: Sequence[str]) -> str:
    """``none``, ``pure_spine``, ``spine_continuation`` (spine then branch) or ``pure_branch``."""
    if not sources:
        return "none"
    if "branch" not in sources:
        return "pure_spine"
    return "spine_continuation" if "spine" in sources else "pure_branch"


@dataclass(frozen=True)
class TreeShapeSample:
    """One tree cycle's shape for Proposition 1: spine length m, branch widths w_i at spine node i (i = 0 is the
    root) and the deepest branch chain below each (tokens, from the fork), with the tokens the cycle committed."""

    m: int
    widths: tuple[int, ...]
    depths: tuple[int, ...]
    tau: int


def shape_sample(tree: DraftTree, n_committed: int) -> TreeShapeSample:
    parents, sources, gated = tree.parents, tree.sources, tree.gated
    # Each verified node's height (1 for a leaf), children before parents: ids are created parent-first.
    height = [1] * len(tree)
    first_spine: dict[int, int] = {}  # a node's first verified spine child
    for i in range(len(tree) - 1, 0, -1):
        if gated[i]:
            continue
        p = parents[i]
        if height[i] + 1 > height[p]:
            height[p] = height[i] + 1
        if sources[i] == "spine":
            first_spine[p] = i  # the loop runs backwards: the last written is the first child
    spine = [0]
    while spine[-1] in first_spine:
        spine.append(first_spine[spine[-1]])
    at = {s: k for k, s in enumerate(spine[:-1] if len(spine) > 1 else spine)}
    widths, depths = [0] * len(at), [0] * len(at)
    for i in range(1, len(tree)):
        k = at.get(parents[i])
        if k is not None and not gated[i] and sources[i] == "branch":
            widths[k] += 1
            depths[k] = max(depths[k], height[i])
    return TreeShapeSample(len(spine) - 1, tuple(widths), tuple(depths), n_committed)


def yield_bound(p_s: float, p_t: float, m: int, widths: Sequence[int], depths: Sequence[int]) -> float:
    """Proposition 1: E[tau] >= sum_{i=1..m} p_s^i + sum_{i=0..m-1} p_s^i (1 - p_s) phi_i (1 + l_i) + 1.

    phi_i = 1 - (1 - p_t)^{w_i}; l_i = sum_{k=1..L_i-1} p_t^k with L_i the deepest branch chain at spine node
    i as built (the paper takes L_i = D from the fork; the official code limits depth from the root, so deep
    spine nodes get short branches). m = 0 (a tree with no spine) is SpecViz's extension, not the paper's:
    the root's branches alone, phi_0 (1 + l_0) + 1.
    """
    def ell(i: int) -> float:
        return sum(p_t ** k for k in range(1, (depths[i] if i < len(depths) else 0)))

    def phi(i: int) -> float:
        return 1 - (1 - p_t) ** (widths[i] if i < len(widths) else 0)

    if m == 0:
        return phi(0) * (1 + ell(0)) + 1
    spine = sum(p_s ** i for i in range(1, m + 1))
    synergy = sum(p_s ** i * (1 - p_s) * phi(i) * (1 + ell(i)) for i in range(m))
    return spine + synergy + 1


def yield_distribution(p_s: float, p_t: float, m: int, widths: Sequence[int], depths: Sequence[int]) -> list[float]:
    """The distribution of one cycle's yield (tokens committed, the bonus included) under Proposition 1's own
    model, whose mean :func:`yield_bound` is: spine tokens accepted i.i.d. with ``p_s``; where the spine breaks at
    node i, each of its ``w_i`` branches accepted independently with ``p_t`` (phi_i), and a branch that is accepted
    runs on as a chain of up to ``L_i - 1`` more tokens, each ``p_t``. ``out[t]`` is P(yield = t)."""
    m = max(m, 0)

    def branch(i: int) -> list[tuple[int, float]]:  # (extra tokens past the spine, probability) at a break at node i
        w = widths[i] if i < len(widths) else 0
        depth = depths[i] if i < len(depths) else 0
        phi = 1 - (1 - p_t) ** w
        out = [(0, 1 - phi)]
        if phi > 0 and depth > 0:
            for k in range(depth):  # the branch token and k more of its chain
                more = p_t ** k * ((1 - p_t) if k < depth - 1 else 1.0)
                out.append((1 + k, phi * more))
        return out

    dist = [0.0] * (m + 2 + max(list(depths) + [0]))
    for i in range(m):  # the spine accepts i tokens, then its (i+1)-th is rejected
        stop = p_s ** i * (1 - p_s)
        for extra, q in branch(i):
            dist[i + extra + 1] += stop * q
    if m == 0:
        for extra, q in branch(0):
            dist[extra + 1] += q
    else:
        dist[m + 1] += p_s ** m  # the whole spine accepted: its bonus
    return dist


def chance_at_most(dists: Sequence[Sequence[float]], total: int) -> float:
    """P(the sum of independent yields, one per distribution, is at most ``total``)."""
    acc = [1.0]
    for d in dists:
        nxt = [0.0] * (len(acc) + len(d) - 1)
        for a, pa in enumerate(acc):
            if pa:
                for b, pb in enumerate(d):
                    if pb:
                        nxt[a + b] += pa * pb
        acc = nxt
    return min(1.0, sum(acc[: max(0, total) + 1]))


@dataclass
class GooseCounters:
    """Per-session counts (reset by ``GooseDrafter.start``)."""

    routes: Counter = field(default_factory=Counter)
    draft_nodes: int = 0
    spine_nodes: int = 0
    branch_nodes: int = 0
    spine_accepted: int = 0
    branch_accepted: int = 0
    bonus_tokens: int = 0
    spine_continuations: int = 0
    spine_continuation_tokens: int = 0
    extended_cycles: int = 0
    ratio_binding_cycles: int = 0
    accepted_by_path: Counter = field(default_factory=Counter)
    # Proposition 1's p_s: spine nodes of spine-tree cycles only (chain and bypass routes excluded).
    tree_spine_nodes: int = 0
    tree_spine_accepted: int = 0
    tree_branch_nodes: int = 0
    tree_branch_accepted: int = 0
    tokens: int = 0
    first_tokens: int = 0
    first_forward_is_prefill: bool = True
    spine_shapes: list[TreeShapeSample] = field(default_factory=list)
    branch_shapes: list[TreeShapeSample] = field(default_factory=list)

    def as_stats(self) -> dict[str, Any]:
        cycles = sum(self.routes.values())
        p_s = self.tree_spine_accepted / self.tree_spine_nodes if self.tree_spine_nodes else 0.0
        p_t = self.tree_branch_accepted / self.tree_branch_nodes if self.tree_branch_nodes else 0.0
        accepted = self.spine_accepted + self.branch_accepted
        out: dict[str, Any] = {f"{r}_cycles": self.routes.get(r, 0) for r in ROUTES}
        out.update(
            draft_nodes=self.draft_nodes, spine_nodes=self.spine_nodes, branch_nodes=self.branch_nodes,
            spine_accepted=self.spine_accepted, branch_accepted=self.branch_accepted, bonus_tokens=self.bonus_tokens,
            spine_continuations=self.spine_continuations, spine_continuation_tokens=self.spine_continuation_tokens,
            extended_cycles=self.extended_cycles, p_s=p_s, p_t=p_t,
            accepted_by_path={k: self.accepted_by_path.get(k, 0) for k in PATHS},
            accepted_share_by_path={k: (self.accepted_by_path.get(k, 0) / accepted if accepted else 0.0) for k in PATHS},
            continuation_token_share=self.spine_continuation_tokens / accepted if accepted else 0.0,
            paper_continuation_share=list(PAPER_CONTINUATION_SHARE),
            spine_ratio_binding_cycles=self.ratio_binding_cycles,
            spine_ratio_tier_binding="binding" if self.ratio_binding_cycles else "not binding",
        )
        # tau both ways: with the prefill's forward and token counted (the official compression_ratio), and over
        # the decoding cycles after the first token only.
        if self.first_forward_is_prefill:
            out["tau_prefill_counted"] = self.tokens / cycles if cycles else 0.0
            rest = cycles - 1
            out["tau_after_prefill"] = (self.tokens - self.first_tokens) / rest if rest > 0 else 0.0
        else:  # draft_first_cycle: the prompt's last token was drafted from; the official would spend a prefill
            out["tau_prefill_counted"] = self.tokens / (cycles + 1) if cycles else 0.0
            out["tau_after_prefill"] = self.tokens / cycles if cycles else 0.0
        if self.spine_shapes:
            shapes = self.spine_shapes
            bounds = [yield_bound(p_s, p_t, s.m, s.widths, s.depths) for s in shapes]
            out["yield_bound"] = sum(bounds) / len(bounds)
            out["measured_tree_tau"] = sum(s.tau for s in shapes) / len(shapes)
            out["yield_cycles"] = len(shapes)
            if out["yield_bound"] > out["measured_tree_tau"]:
                # How likely a yield this low is under the proposition's own model, over this many cycles: a
                # bound on the mean can sit above the mean of a few cycles by chance alone.
                dists = [yield_distribution(p_s, p_t, s.m, s.widths, s.depths) for s in shapes]
                out["yield_low_chance"] = chance_at_most(dists, sum(s.tau for s in shapes))
        if self.branch_shapes:
            bounds = [yield_bound(p_s, p_t, 0, s.widths, s.depths) for s in self.branch_shapes]
            out["yield_bound_no_spine_extension"] = sum(bounds) / len(bounds)
            out["measured_branch_tree_tau"] = sum(s.tau for s in self.branch_shapes) / len(self.branch_shapes)
        return out
