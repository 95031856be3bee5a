"""What Goose's two sources offered at a node, for "why did this cycle stop": the spine (the context match's
chain) and the branches (the adjacency table's successors), each candidate with its fate."""

from __future__ import annotations

from collections.abc import Sequence

from specviz_core.drafters.goose.tree import BranchRules, Lookup
from specviz_core.tree import DraftTree


def offer_goose(tree: DraftTree, nodes: list[int], chain: Sequence[int], lookup: Lookup | None, rules: BranchRules,
                node_budget: int, root_prev: int | None) -> None:
    """Fill ``tree.offers`` for ``nodes``. The spine offers the chain's next token (``budget`` when the spine ratio
    or the budget cut the chain there); in a tree the table offers its successors: ``drafted``, ``gate`` (below
    ``min_score``), ``budget`` (the node budget was spent, or the node is at the depth limit) or ``width``."""
    spine_len = sum(1 for i, s in enumerate(tree.sources) if s == "spine" and not tree.gated[i])
    full = tree.n_verified >= node_budget
    for n in nodes:
        src = tree.sources[n]
        kids = [c for c in tree.children(n)]
        if n == 0 or src == "spine":
            i = tree.depths[n]
            if i < len(chain):
                tree.offer(n, "spine", [chain[i]], [1.0], ["drafted" if i < spine_len else "budget"])
            elif chain:  # the copy ended here
                tree.offer(n, "spine", [], [], [])
        if node_budget <= 0 or lookup is None:  # a chain, bypass or AR route drafts no branches
            continue
        prev = root_prev if n == 0 else tree.tokens[tree.parents[n]]
        cands = lookup(tree.tokens[n], prev)
        if not cands:
            continue
        nxt = {tree.tokens[c] for c in kids if tree.sources[c] == "spine"}
        drafted = {tree.tokens[c] for c in kids if tree.sources[c] == "branch" and not tree.gated[c]}
        gated = {tree.tokens[c] for c in kids if tree.sources[c] == "branch" and tree.gated[c]}
        deep = src == "branch" and tree.depths[n] >= rules.max_branch_depth
        toks, scores, fates = [], [], []
        for tok, score in cands:
            if tok in nxt:
                continue  # the spine's own next token is not a branch
            if tok in drafted:
                fate = "drafted"
            elif score < rules.min_score:
                fate = "gate"
            elif tok in gated or deep or full:
                fate = "budget"
            else:
                fate = "width"
            toks.append(tok)
            scores.append(score)
            fates.append(fate)
        tree.offer(n, "branch", toks, scores, fates, threshold=rules.min_score)
