"""Goose's trees: the anisotropic spine tree (Algorithm 1, as the official code builds it) and the
isotropic control of Section 5.3.

Spine tree, with a node budget B that counts the root:

1. the spine: ``m = min(len(chain), int(B * ratio))`` context-matched tokens in a chain;
2. the branch budget ``B - 1 - m`` splits into a spine share ``max(1, int(branch budget * rho))`` and
   the rest for the root (all of it for the root when there is no spine);
3. root branches: the root's best successors, skipping the spine's first token, while the share lasts
   and the score is at least ``min_score``;
4. spine branches: the spine share over the spine nodes by the 1/i harmonic rule (every node at least
   one while the share lasts), skipping each node's own next spine token;
5. breadth first from those branches, oldest first: a node drafted at score s gets
   ``min(ceil(remaining * s), K // depth)`` children (at least one), while the budget lasts; a node
   is extended only while its depth is below ``max_branch_depth`` (from the root in the official
   code, from the node the branch forks off with ``branch_depth_from=fork``).

Candidates cut by ``min_score`` or the budget within a node's allowance are kept as gated leaves so
the tree view shows what was cut; they never change the verified tree.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from specviz_core.drafters.goose.table import Successors
from specviz_core.tree import DraftTree

#: (token, previous token or None) -> successors, best first.
Lookup = Callable[[int, "int | None"], Successors]


@dataclass(frozen=True)
class BranchRules:
    """The settings the builders read."""

    min_score: float
    top_k: int
    max_branch_depth: int
    spine_branch_ratio: float = 0.5
    branching_factor: int = 3
    depth_from_fork: bool = False


@dataclass
class TreeShape:
    """How a cycle's budget was spent (recorded in the cycle's state)."""

    node_budget: int
    """B for this cycle, root included."""
    spine_len: int = 0
    root_share: int = 0
    spine_share: int = 0
    allowances: list[int] = field(default_factory=list)
    """Branch allowance of each spine node (harmonic split of the spine share)."""


def spine_ratio_tier(p_s: float, tiers: Sequence[float] = (0.15, 0.30, 0.50)) -> float:
    """Table 5: EMA p_s < 0.2 -> tiers[0], < 0.4 -> tiers[1], else tiers[2]."""
    return tiers[0] if p_s < 0.2 else tiers[1] if p_s < 0.4 else tiers[2]


def harmonic_split(total: int, n: int) -> list[int]:
    """``total`` children over ``n`` spine nodes with weights 1/i: node i gets
    ``min(max(1, int(total * (1/i) / H_n)), what is left)``, earlier nodes first."""
    weights = [1.0 / (i + 1) for i in range(n)]
    norm = sum(weights)
    out, left = [], total
    for w in weights:
        share = min(max(1, int(total * w / norm)), left) if left > 0 else 0
        out.append(share)
        left -= share
    return out


class _Builder:
    """A draft tree under construction, with each node's fork depth and the count of verified nodes."""

    def __init__(self, tree: DraftTree, lookup: Lookup, rules: BranchRules) -> None:
        self.tree = tree
        self.lookup = lookup
        self.rules = rules
        self.fork = {0: 0}
        self.n_nodes = sum(1 for g in tree.gated if not g)  # verified, root included

    def add(self, parent: int, token: int, source: str, score: float, fork: int) -> int:
        nid = self.tree.add(parent, token, source, score)
        self.fork[nid] = fork if self.rules.depth_from_fork else 0
        self.n_nodes += 1
        return nid

    def gate(self, parent: int, cands: Successors, room: int, skip: int | None = None) -> None:
        """Keep up to ``room`` cut candidates as gated leaves of ``parent``."""
        for tok, score in cands:
            if room <= 0:
                break
            if tok != skip:
                self.tree.add(parent, tok, "branch", score, gated=True)
                room -= 1

    def depth(self, node: int) -> int:
        """Depth the limits apply to: from the root, or from the fork."""
        return self.tree.depths[node] - self.fork[node]

    def successors(self, node: int, root_prev: int | None) -> Successors:
        t = self.tree
        return self.lookup(t.tokens[node], root_prev if node == 0 else t.tokens[t.parents[node]])

    def grow(self, frontier: deque, budget: int, root_prev: int | None) -> None:
        """Breadth-first extension of the frontier's branches within the budget (Step 4)."""
        r = self.rules
        remaining = budget - self.n_nodes
        while frontier and remaining > 0:
            node, score = frontier.popleft()
            depth = self.depth(node)
            cands = self.successors(node, root_prev)
            width = max(1, min(len(cands), math.ceil(remaining * score)))
            width = min(width, max(1, r.top_k // depth))
            for j, (tok, child_score) in enumerate(cands[:width]):
                if remaining <= 0 or child_score < r.min_score:
                    self.gate(node, cands[j:width], width - j)
                    break
                child = self.add(node, tok, "branch", child_score, self.fork[node])
                remaining -= 1
                if depth + 1 < r.max_branch_depth:
                    frontier.append((child, child_score))


def build_spine_tree(tree: DraftTree, lookup: Lookup, chain: Sequence[int], budget: int, ratio: float,
                     rules: BranchRules, root_prev: int | None) -> TreeShape:
    """Algorithm 1 on ``tree`` (the root only so far). ``budget``: this cycle's B, root included."""
    b = _Builder(tree, lookup, rules)
    m = min(len(chain), int(budget * ratio)) if chain else 0
    spine = [0] + tree.add_chain(list(chain[:m]), "spine")
    b.n_nodes += m
    for s in spine[1:]:
        b.fork[s] = 0
    branch_budget = budget - 1 - m
    if m > 0 and branch_budget > 0:
        spine_share = max(1, int(branch_budget * rules.spine_branch_ratio))
        root_share = branch_budget - spine_share
    else:
        spine_share, root_share = 0, branch_budget
    shape = TreeShape(budget, m, root_share, spine_share)
    frontier: deque = deque()

    # Step 2: alternatives to the spine's first token at the root.
    first = chain[0] if len(chain) else None
    attached = 0
    cands = b.successors(0, root_prev)
    for j, (tok, score) in enumerate(cands):
        if attached >= root_share:
            break
        if score < rules.min_score:
            b.gate(0, cands[j:], root_share - attached, skip=first)
            break
        if tok == first:
            continue
        node = b.add(0, tok, "branch", score, 0)
        attached += 1
        if b.depth(node) < rules.max_branch_depth:
            frontier.append((node, score))

    # Step 3: branches off every spine node, wider near the root.
    if spine_share > 0:
        shape.allowances = harmonic_split(spine_share, m)
        for i, allowance in enumerate(shape.allowances, start=1):
            if allowance <= 0:
                continue
            node = spine[i]
            nxt = tree.tokens[spine[i + 1]] if i + 1 < len(spine) else None
            fork = tree.depths[node]
            attached = 0
            cands = b.successors(node, root_prev)
            for j, (tok, score) in enumerate(cands):
                if attached >= allowance:
                    break
                if tok == nxt:
                    continue
                if score < rules.min_score:
                    b.gate(node, cands[j:], allowance - attached, skip=nxt)
                    break
                child = b.add(node, tok, "branch", score, fork)
                attached += 1
                if b.depth(child) < rules.max_branch_depth:
                    frontier.append((child, score))

    # Step 4: breadth-first extension.
    b.grow(frontier, budget, root_prev)
    return shape


def build_isotropic_tree(tree: DraftTree, lookup: Lookup, budget: int, rules: BranchRules,
                         root_prev: int | None) -> TreeShape:
    """Section 5.3's control: a balanced ``branching_factor``-ary tree from the adjacency table alone, breadth
    first, within the same budget (root included) and depth limit; no spine."""
    b = _Builder(tree, lookup, rules)
    k = rules.branching_factor
    remaining = budget - 1
    frontier: deque = deque([0])
    while frontier and remaining > 0:
        node = frontier.popleft()
        depth = b.depth(node)
        attached = 0
        cands = b.successors(node, root_prev)
        for j, (tok, score) in enumerate(cands):
            if attached >= k:
                break
            if remaining <= 0 or score < rules.min_score:
                b.gate(node, cands[j:], k - attached)
                break
            child = b.add(node, tok, "branch", score, b.fork[node])
            attached += 1
            remaining -= 1
            if depth + 1 < rules.max_branch_depth:
                frontier.append(child)
    return TreeShape(budget, 0, budget - 1, 0)
