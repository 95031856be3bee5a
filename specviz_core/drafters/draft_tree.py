"""Draft-model tree: a small causal LM expands the top-W children of each node to depth D.

The draft model keeps its own KV cache over the committed tokens. Each level of
the tree is one draft forward over that level's nodes, with the same tree
attention mask the target uses. After the cycle, the KV of the accepted draft
nodes is kept (the same index-select as the target's trim), so the next cycle
only has to run the tokens the draft model has not seen.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from transformers import DynamicCache

from specviz_core.drafters.base import DraftContext, Drafter
from specviz_core.methods.draft_tree import CARD, DraftTreeParams
from specviz_core.runtime import kv
from specviz_core.runtime.attention import tree_masks
from specviz_core.target_rows import host_candidates, top_probs
from specviz_core.tree import OFFER_EXTRA, DraftTree


def rows_kept(seen: list[int], ids: list[int]) -> int:
    """How many cached rows a runner keeps on catching up from ``seen`` to ``ids``: their common prefix, short of
    the root (always run again, for the prediction after it)."""
    common = 0
    for a, b in zip(seen, ids):
        if a != b:
            break
        common += 1
    return min(common, len(ids) - 1)


class DraftModelRunner:
    """A draft model with a KV cache that follows the committed tokens."""

    def __init__(self, model: Any) -> None:
        self.loaded = model
        self.cache = DynamicCache()
        self.seen: list[int] = []  # tokens whose KV is in the cache, in order
        self.row_depths: list[int] = []  # depth of every draft-tree row run since the last catch-up or keep
        self.forwards = 0

    def reset(self) -> None:
        self.cache = DynamicCache()
        self.seen = []
        self.row_depths = []
        self.forwards = 0

    @torch.no_grad()
    def catch_up(self, ids: list[int]) -> torch.Tensor:
        """Run every committed token the cache lacks; return the logits after ``ids[-1]`` ([V])."""
        common = rows_kept(self.seen, ids)
        kv.crop(self.cache, common)
        self.seen = self.seen[:common]
        new = ids[common:]
        dev = self.loaded.device
        out = self.loaded.model(
            input_ids=torch.tensor([new], device=dev),  # [1, m]
            position_ids=torch.arange(common, common + len(new), device=dev)[None],  # [1, m]
            **kv.cache_arg(self.loaded.model, self.cache),
            use_cache=True,
        )
        self.forwards += 1
        self.cache = kv.returned_cache(out)
        self.seen = list(ids)
        self.row_depths = []
        return out.logits[0, -1].float()

    @torch.no_grad()
    def forward_level(self, tokens: list[int], depths: list[int], tree_mask: np.ndarray) -> torch.Tensor:
        """One forward over draft-tree rows: ``tree_mask`` [m, r + m] over the r rows run so far plus these.

        The root is the last committed token, at position ``len(seen) - 1``; a node
        at depth d sits at ``len(seen) - 1 + d``. Returns logits [m, V].
        """
        base = len(self.seen)
        dev = self.loaded.device
        self.row_depths = self.row_depths + list(depths)
        rows = base - 1 + np.asarray(depths)  # [m] positions
        cols = base - 1 + np.asarray(self.row_depths)  # [r + m]
        # [1, 1, m, base + r + m], or one per layer type (sliding windows)
        mask = tree_masks(self.loaded.attention, tree_mask, base, self.loaded.dtype, dev, rows, cols)
        out = self.loaded.model(
            input_ids=torch.tensor([tokens], device=dev),
            position_ids=torch.from_numpy(rows).to(dev)[None],  # [1, m]
            attention_mask=mask,
            **kv.cache_arg(self.loaded.model, self.cache),
            use_cache=True,
        )
        self.forwards += 1
        self.cache = kv.returned_cache(out)
        return out.logits[0].float()

    def keep(self, rows: list[int], tokens: list[int]) -> None:
        """Keep the committed KV plus these draft-tree rows (an accepted prefix), drop the rest."""
        kv.trim(self.cache, len(self.seen), rows)
        self.seen = self.seen + list(tokens)
        self.row_depths = []


class DraftTreeDrafter(Drafter):
    card = CARD

    def __init__(self, params: DraftTreeParams, target, draft_model) -> None:
        super().__init__(params, target, draft_model)
        self.runner = DraftModelRunner(draft_model)
        self._rows: dict[int, int] = {}  # node id -> row in the draft cache after the committed tokens

    def start(self, prompt_ids: list[int]) -> None:
        self.runner.reset()

    def draft(self, ctx: DraftContext) -> DraftTree:
        p: DraftTreeParams = self.params
        forwards0 = self.runner.forwards
        tree = DraftTree(root_token=ctx.ids[-1], mode="tree")
        self._rows = {}
        logits = self.runner.catch_up(ctx.ids)[None]  # [1, V]
        frontier = [0]  # nodes whose children we expand; their logits are in `logits`
        path_score = {0: 1.0}
        used = 0
        run_rows: list[int] = []  # node ids in draft-cache row order
        max_depth = min(p.depth, ctx.max_depth)
        for depth in range(1, max_depth + 1):
            # The top W are drafted; a few more are read so a record can say what the width left out.
            top_ids, top_q = (list(c) for c in zip(*host_candidates(*top_probs(logits, p.width + OFFER_EXTRA))))
            cand = []
            for i, parent in enumerate(frontier):
                for tok, q in zip(top_ids[i][: p.width], top_q[i][: p.width]):
                    cand.append((path_score[parent] * q, parent, tok, q))
            cand.sort(key=lambda c: -c[0])
            room = self.cycle_budget(ctx) - used
            new_nodes, fate = [], {}
            for rank, (score, parent, tok, q) in enumerate(cand):
                nid = tree.add(parent, tok, "draft", q, gated=rank >= room or tree.gated[parent])
                path_score[nid] = score
                fate[(parent, tok)] = "budget" if tree.gated[nid] else "drafted"
                if not tree.gated[nid]:
                    new_nodes.append(nid)
            for i, parent in enumerate(frontier):
                tree.offer(parent, "draft", top_ids[i], top_q[i], [fate.get((parent, t), "width") for t in top_ids[i]])
            used += len(new_nodes)
            if depth == max_depth or not new_nodes:
                break
            # Rows for this level: each sees its ancestors among the rows run so far, and itself.
            all_rows = run_rows + new_nodes
            row_of = {nid: r for r, nid in enumerate(all_rows)}
            mask = np.zeros((len(new_nodes), len(all_rows)), dtype=bool)
            for i, nid in enumerate(new_nodes):
                a = nid
                while a != 0:
                    mask[i, row_of[a]] = True
                    a = tree.parents[a]
            logits = self.runner.forward_level(
                [tree.tokens[n] for n in new_nodes], [tree.depths[n] for n in new_nodes], mask
            )
            run_rows = all_rows
            frontier = new_nodes
        self._rows = {nid: r for r, nid in enumerate(run_rows)}
        tree.state = {"draft_forwards": self.runner.forwards - forwards0}
        return tree

    def skip(self, ctx: DraftContext) -> DraftTree:
        self._rows = {}
        tree = DraftTree(root_token=ctx.ids[-1], mode="ar")
        tree.state = {"draft_forwards": 0}
        return tree

    def draft_cost_key(self) -> str | None:
        return f"model:{self.draft_model.name}"

    def accepted(self, tree: DraftTree, accepted_nodes: list[int], committed: list[int]) -> dict[str, Any]:
        # Keep the draft KV of the accepted prefix that the draft model actually ran.
        rows, toks = [], []
        for nid in accepted_nodes:
            if nid not in self._rows:
                break
            rows.append(self._rows[nid])
            toks.append(tree.tokens[nid])
        self.runner.keep(rows, toks)
        return {}
