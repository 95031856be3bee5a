"""Draft-model tree: a small causal LM expands the top-W children of each node to depth D.

The draft model keeps its own KV cache over the committed tokens. Each level of
the tree is one draft forward over that level's nodes, with the same tree
attention mask the target uses. After the cycle, the KV of the accepted draft
nodes is kept (the same index-select as the target's trim), so the next cycle
only has to run the tokens the draft model has not seen.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache

from specviz_core.drafters.base import DraftContext, Drafter
from specviz_core.methods.draft_tree import CARD, DraftTreeParams
from specviz_core.runtime import kv
from specviz_core.runtime.attention import tree_masks
from specviz_core.runtime.models import synchronize
from specviz_core.target_rows import host_copy, top_probs
from specviz_core.tree import OFFER_EXTRA, DraftTree


def rows_kept(seen: list[int], ids: list[int]) -> int:
    """How many cached rows a runner keeps on catching up from ``seen`` to ``ids``: their common prefix, short of
    the root (always run again, for the prediction after it)."""
    common = min(len(seen), len(ids))
    if seen[:common] != ids[:common]:  # compared in C first: the usual case is a prefix (one per cycle, long ones)
        common = next(i for i, (a, b) in enumerate(zip(seen, ids)) if a != b)
    return min(common, len(ids) - 1)


#: A catch-up over at least this many rows is timed, the device synchronised around it (once a session: the first
#: draft after a long prompt), so that ``budget=auto`` can price the next long one
#: (:meth:`~specviz_core.engine.budget.BudgetController.catch_up_ms`).
TIMED_CATCH_UP = 256


class CatchUpClock:
    """Times a runner's catch-up when it is long (:data:`TIMED_CATCH_UP` rows or more); ``taken`` hands the last
    timing, (rows, ms), to the cycle's record once."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self._t0: float | None = None
        self._rows = 0
        self._last: tuple[int, float] | None = None

    def start(self, rows: int) -> None:
        self._t0, self._rows = None, rows
        if rows >= TIMED_CATCH_UP:
            synchronize(self.device)
            self._t0 = time.perf_counter()

    def stop(self) -> None:
        if self._t0 is not None:
            synchronize(self.device)
            self._last = (self._rows, (time.perf_counter() - self._t0) * 1000.0)
            self._t0 = None

    def taken(self) -> tuple[int, float] | None:
        last, self._last = self._last, None
        return last


class TreeRows:
    """The rows of a draft tree a model has run this cycle, kept on the device: each row's ancestors among them and
    itself, so that a level's tree mask is built from its parents' rows without reading a value back."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.ancestors = torch.zeros((0, 0), dtype=torch.bool, device=device)  # [r, r]
        self.root = torch.full((1,), -1, dtype=torch.long, device=device)
        """The root's "row": it has none (its KV is the committed tokens')."""

    def __len__(self) -> int:
        return self.ancestors.shape[0]

    def add(self, parent_rows: torch.Tensor) -> torch.Tensor:
        """New rows whose parents are ``parent_rows`` ([n]; -1 for the root): their tree mask [n, r + n] over the
        rows run so far and themselves."""
        n, r = len(parent_rows), len(self)
        mask = torch.zeros((n, r + n), dtype=torch.bool, device=self.device)
        if r:
            mask[:, :r] = self.ancestors[parent_rows.clamp(min=0)] & (parent_rows >= 0)[:, None]
        mask[:, r:] = torch.eye(n, dtype=torch.bool, device=self.device)
        self.ancestors = torch.cat([torch.nn.functional.pad(self.ancestors, (0, n)), mask])
        return mask

    def last(self, n: int) -> torch.Tensor:
        """The row indexes of the last ``n`` rows added ([n])."""
        return torch.arange(len(self) - n, len(self), device=self.device)


class DraftModelRunner:
    """A draft model with a KV cache that follows the committed tokens."""

    def __init__(self, model: Any) -> None:
        self.loaded = model
        self.cache = DynamicCache()
        self.seen: list[int] = []  # tokens whose KV is in the cache, in order
        self.row_depths: list[int] = []  # depth of every draft-tree row run since the last catch-up or keep
        self.forwards = 0
        self.clock = CatchUpClock(model.device)

    def reset(self) -> None:
        self.cache = DynamicCache()
        self.seen = []
        self.row_depths = []
        self.forwards = 0

    def pending(self, ids: list[int]) -> int:
        """The rows :meth:`catch_up` would run to follow ``ids`` now."""
        return len(ids) - rows_kept(self.seen, ids)

    @torch.no_grad()
    def catch_up(self, ids: list[int]) -> torch.Tensor:
        """Run every committed token the cache lacks; return the logits after ``ids[-1]`` ([V])."""
        common = rows_kept(self.seen, ids)
        kv.crop(self.cache, common)
        self.seen = self.seen[:common]
        new = ids[common:]
        dev = self.loaded.device
        self.clock.start(len(new))
        model = self.loaded.model
        out = model(
            input_ids=torch.tensor([new], device=dev),  # [1, m]
            position_ids=torch.arange(common, common + len(new), device=dev)[None],  # [1, m]
            **kv.cache_arg(model, self.cache),
            # only the last row's logits are read: over a long prompt the LM head's would be rows x vocabulary
            **({"logits_to_keep": 1} if len(new) > 1 and model._supports_logits_to_keep() else {}),
            use_cache=True,
        )
        self.clock.stop()
        self.forwards += 1
        self.cache = kv.returned_cache(out)
        self.seen = list(ids)
        self.row_depths = []
        return out.logits[0, -1].float()

    @torch.no_grad()
    def forward_level(self, tokens: list[int] | torch.Tensor, depths: list[int],
                      tree_mask: np.ndarray | torch.Tensor) -> torch.Tensor:
        """One forward over draft-tree rows: ``tree_mask`` [m, r + m] over the r rows run so far plus these.

        The root is the last committed token, at position ``len(seen) - 1``; a node
        at depth d sits at ``len(seen) - 1 + d``. ``tokens`` and ``tree_mask`` may be tensors on the device (a
        tree built there): nothing is read back. Returns logits [m, V].
        """
        base = len(self.seen)
        dev = self.loaded.device
        self.row_depths = self.row_depths + list(depths)
        rows = base - 1 + np.asarray(depths)  # [m] positions
        cols = base - 1 + np.asarray(self.row_depths)  # [r + m]
        # [1, 1, m, base + r + m], or one per layer type (sliding windows)
        mask = tree_masks(self.loaded.attention, tree_mask, base, self.loaded.dtype, dev, rows, cols)
        ids = tokens.to(dev) if isinstance(tokens, torch.Tensor) else torch.tensor(tokens, device=dev)
        out = self.loaded.model(
            input_ids=ids[None],  # [1, m]
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


def catch_up_facts(clock: CatchUpClock) -> dict[str, Any]:
    """A cycle's record of its runner's long catch-up, where there was one: ``catch_up_rows`` and ``catch_up_ms``."""
    timed = clock.taken()
    return {} if timed is None else {"catch_up_rows": timed[0], "catch_up_ms": round(timed[1], 3)}


class DraftTreeDrafter(Drafter):
    card = CARD

    def __init__(self, params: DraftTreeParams, target, draft_model) -> None:
        super().__init__(params, target, draft_model)
        self.runner = DraftModelRunner(draft_model)
        self._rows: dict[int, int] = {}  # node id -> row in the draft cache after the committed tokens

    def start(self, prompt_ids: list[int]) -> None:
        self.runner.reset()

    def draft(self, ctx: DraftContext) -> DraftTree:
        """Level by level on the device, as EAGLE's official code builds its tree: each level's top candidates, their
        path scores (the parent's times q, in float64 as the host multiplies them), the best ``room`` of them by a
        stable sort, their tokens and their rows' ancestors, all without reading a value back; then one copy of every
        level's candidates, from which the tree (drafted, cut by the budget, left out by the width) is written down
        in the order the levels chose. How many nodes a level keeps depends only on sizes the host knows."""
        p: DraftTreeParams = self.params
        forwards0 = self.runner.forwards
        logits = self.runner.catch_up(ctx.ids)[None]  # [1, V]
        dev = logits.device
        budget, max_depth = self.cycle_budget(ctx), min(p.depth, ctx.max_depth)
        levels: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # top ids [f, s], q [f, s], order [f*w]
        scores = torch.ones(1, dtype=torch.float64, device=dev)  # the frontier's path scores
        rows = TreeRows(dev)
        frontier_rows = rows.root
        used, n_frontier, kept = 0, 1, []
        for depth in range(1, max_depth + 1):
            # The top W are drafted; a few more are read so a record can say what the width left out.
            ids, q = top_probs(logits, p.width + OFFER_EXTRA)  # [f, s]
            w = min(p.width, ids.shape[1])
            path = (scores[:, None] * q[:, :w].double()).reshape(-1)  # [f * w], frontier-major as the host lists them
            order = torch.sort(path, descending=True, stable=True).indices
            levels.append((ids, q, order))
            n_new = min(max(budget - used, 0), n_frontier * w)
            used += n_new
            kept.append(n_new)
            if depth == max_depth or n_new == 0:
                break
            pick = order[:n_new]
            parent_i = torch.div(pick, w, rounding_mode="floor")
            tokens = ids[parent_i, pick % w]  # [n_new]
            mask = rows.add(frontier_rows[parent_i])
            logits = self.runner.forward_level(tokens, [depth] * n_new, mask)
            scores, frontier_rows = path[pick], rows.last(n_new)
            n_frontier = n_new
        tree = self._write_down(ctx, levels, kept)
        tree.state = {"draft_forwards": self.runner.forwards - forwards0, **catch_up_facts(self.runner.clock)}
        return tree

    def _write_down(self, ctx: DraftContext, levels: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
                    kept: list[int]) -> DraftTree:
        """The tree the levels chose, from one copy of their candidates: each level's candidates in the order it
        ranked them (past the ``kept`` best, cut by the budget), and each parent's offers (past the width, left
        out). Remembers the draft-cache row of every node the draft model ran (every level's but the last)."""
        tree = DraftTree(root_token=ctx.ids[-1], mode="tree")
        parts = [t.reshape(1, -1).double() for level in levels for t in level]
        flat = host_copy(*parts) if parts else []
        frontier, run_rows = [0], []
        for li, n_keep in enumerate(kept):
            ids_flat, q_flat, order = flat[3 * li][0], flat[3 * li + 1][0], flat[3 * li + 2][0]
            s = len(ids_flat) // len(frontier)
            ids = ids_flat.astype(np.int64).reshape(len(frontier), s).tolist()
            q = q_flat.reshape(len(frontier), s).tolist()
            w = min(self.params.width, s)
            new_nodes, fate = [], {}
            for rank, c in enumerate(order.astype(np.int64).tolist()):
                i, k = divmod(c, w)
                parent, tok = frontier[i], ids[i][k]
                nid = tree.add(parent, tok, "draft", q[i][k], gated=rank >= n_keep)
                fate[(parent, tok)] = "budget" if tree.gated[nid] else "drafted"
                if not tree.gated[nid]:
                    new_nodes.append(nid)
            for i, parent in enumerate(frontier):
                tree.offer(parent, "draft", ids[i], q[i], [fate.get((parent, t), "width") for t in ids[i]])
            if li < len(kept) - 1:
                run_rows += new_nodes
            frontier = new_nodes
        self._rows = {nid: r for r, nid in enumerate(run_rows)}
        return tree

    def skip(self, ctx: DraftContext) -> DraftTree:
        self._rows = {}
        tree = DraftTree(root_token=ctx.ids[-1], mode="ar")
        tree.state = {"draft_forwards": 0}
        return tree

    def draft_cost_key(self) -> str | None:
        return f"model:{self.draft_model.name}"

    def catch_up_rows(self, ids: list[int]) -> int:
        return self.runner.pending(ids)

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
