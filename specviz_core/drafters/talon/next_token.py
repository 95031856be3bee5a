"""Where TALON and the EAGLE-style tree get a next-token distribution at every node.

Both tree builders only need "the top-m next tokens and their probabilities
after this node". Two sources give it:

- :class:`ModelSource`: a draft model (any causal LM sharing the target's
  tokenizer) with its own KV cache kept in step with the accepted path (the
  :class:`~specviz_core.drafters.draft_tree.DraftModelRunner`); one draft
  forward per tree layer.
- :class:`TableSource`: the logit n-gram tables of the target's own outputs
  (:mod:`~specviz_core.drafters.talon.ngram_tables`), looked up by the last 4..1 tokens
  of each node's context; no extra model. Every verified row's logits are
  merged in, rejected branches included, so the tables learn what the target
  considered as well as what it chose.

A "draft step" is one layer of expansion: a draft forward for the model, a
batch of table lookups for the table. TALON's draft efficiency delta is draft
steps per target forward.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np
import torch

from specviz_core.drafters.base import DraftContext, Drafter
from specviz_core.drafters.draft_tree import DraftModelRunner, catch_up_facts
from specviz_core.drafters.talon.eagle.heads import load_eagle_head
from specviz_core.drafters.talon.head import HeadRunner, load_head
from specviz_core.drafters.talon.ngram_tables import NGramTables, Tail
from specviz_core.errors import SpecVizError
from specviz_core.methods.card import DRAFT_MODEL, TARGET_AS_DRAFT
from specviz_core.runtime.feature_tap import install_feature_tap
from specviz_core.target_rows import TargetRows, host_candidates, top_probs
from specviz_core.tree import DraftTree

Candidates = tuple[list[int], list[float]]
"""Next-token ids and their probabilities, most probable first."""


class NextTokenSource(ABC):
    kind: ClassVar[str]
    node_source: ClassVar[str]
    """The ``source`` of the nodes it proposes."""

    #: Whether it drafts with a model or a head, on the device: :meth:`top_root` and :meth:`top_level` then give a
    #: level's candidates as tensors there, read back once the tree is complete (:mod:`.levels`).
    on_device: ClassVar[bool] = False

    def __init__(self) -> None:
        self.steps = 0
        self.step_ms = 0.0  # wall time of the draft steps so far, where they were timed

    def start(self, prompt_ids: list[int]) -> None:
        """A new session begins."""

    @abstractmethod
    def root(self, ctx: DraftContext, m: int) -> Candidates:
        """Top-m next tokens after the committed tokens (one draft step)."""

    @abstractmethod
    def expand(self, tree: DraftTree, nodes: list[int], m: int) -> list[Candidates]:
        """Top-m next tokens after each of ``nodes`` (one draft step for the whole layer)."""

    def top_root(self, ctx: DraftContext, m: int) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`root` on the device: the top-m ids and probabilities [1, m], nothing read back."""
        raise NotImplementedError

    def top_level(self, parent_rows: torch.Tensor, tokens: torch.Tensor, depth: int, mask: torch.Tensor, m: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`expand` on the device: one draft step over new tree rows at ``depth`` (``tokens`` [n], their
        parents' rows ``parent_rows`` [n], -1 for the root, ``mask`` [n, r + n] over the rows run this cycle and
        them, as :class:`~specviz_core.drafters.draft_tree.TreeRows` builds it); their top-m ids and probabilities."""
        raise NotImplementedError

    def ran(self, nodes: list[int]) -> None:
        """The tree's nodes of the rows :meth:`top_level` ran this cycle, in their order (once the tree is written)."""

    #: The widest top-k of the target's rows :meth:`harvest` reads.
    harvest_k = 0

    def plain(self, ctx: DraftContext) -> None:
        """A plain cycle: nothing is drafted after the committed tokens ``ctx.ids`` (budget=auto's choice)."""

    def catch_up_rows(self, ids: list[int]) -> int:
        """The rows its model would run before drafting after ``ids`` (:meth:`Drafter.catch_up_rows`)."""
        return 0

    def catch_up_facts(self) -> dict[str, Any]:
        """The cycle's long catch-up, timed, where its model ran one (:func:`catch_up_facts`)."""
        return {}

    def harvest(self, rows: TargetRows) -> None:
        """What the target said after the rows it just ran (prefill chunk or verify block)."""

    def accepted(self, tree: DraftTree, accepted_nodes: list[int]) -> None:
        """The cycle's accepted path."""


class DeviceSource(NextTokenSource):
    """A source that drafts with a model or a head, on the device (:meth:`top_root`, :meth:`top_level`). Its
    :meth:`root` and :meth:`expand` are those steps with each level's candidates read back at once (TALON's way:
    its gate needs the values to choose the next layer); EAGLE's trees read them back once (:mod:`.levels`)."""

    on_device = True

    def __init__(self) -> None:
        super().__init__()
        self._run: list[int] = []  # tree node ids in the order their rows were run this cycle

    def _timed(self, ids_q: Callable[[], tuple[torch.Tensor, torch.Tensor]]) -> list[Candidates]:
        t0 = time.perf_counter()
        cands = host_candidates(*ids_q())  # to the host: the step is done
        self.step_ms += (time.perf_counter() - t0) * 1000.0
        return cands

    def root(self, ctx: DraftContext, m: int) -> Candidates:
        return self._timed(lambda: self.top_root(ctx, m))[0]

    def expand(self, tree: DraftTree, nodes: list[int], m: int) -> list[Candidates]:
        row_of = {nid: r for r, nid in enumerate(self._run)}
        parent_rows = torch.tensor([row_of.get(tree.parents[n], -1) for n in nodes])
        depth = tree.depths[nodes[0]]
        if any(tree.depths[n] != depth for n in nodes):
            raise SpecVizError("a draft step runs one level of the tree: these nodes are at several depths")
        mask = torch.from_numpy(tree_rows_mask(tree, self._run, nodes))
        tokens = torch.tensor([tree.tokens[n] for n in nodes])
        cands = self._timed(lambda: self.top_level(parent_rows, tokens, depth, mask, m))
        self._run = self._run + nodes
        return cands

    def ran(self, nodes: list[int]) -> None:
        self._run = list(nodes)


class ModelSource(DeviceSource):
    kind = "model"
    node_source = "draft"

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.runner = DraftModelRunner(model)

    def start(self, prompt_ids: list[int]) -> None:
        self.runner.reset()

    def catch_up_rows(self, ids: list[int]) -> int:
        return self.runner.pending(ids)

    def catch_up_facts(self) -> dict[str, Any]:
        return catch_up_facts(self.runner.clock)

    def top_root(self, ctx: DraftContext, m: int) -> tuple[torch.Tensor, torch.Tensor]:
        self._run = []
        f0 = self.runner.forwards
        logits = self.runner.catch_up(ctx.ids)[None]  # [1, V]
        self.steps += self.runner.forwards - f0
        return top_probs(logits, m)

    def top_level(self, parent_rows: torch.Tensor, tokens: torch.Tensor, depth: int, mask: torch.Tensor, m: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.runner.forward_level(tokens, [depth] * len(tokens), mask)
        self.steps += 1
        return top_probs(logits, m)

    def accepted(self, tree: DraftTree, accepted_nodes: list[int]) -> None:
        # Keep the draft KV of the accepted prefix the draft model ran; the next catch-up runs the rest.
        row_of = {nid: r for r, nid in enumerate(self._run)}
        rows, toks = [], []
        for nid in accepted_nodes:
            if nid not in row_of:
                break
            rows.append(row_of[nid])
            toks.append(tree.tokens[nid])
        self.runner.keep(rows, toks)
        self._run = []


def tree_rows_mask(tree: DraftTree, run: list[int], nodes: list[int]) -> np.ndarray:
    """[len(nodes), len(run) + len(nodes)]: each new row sees its ancestors among the rows run so far, and itself."""
    row_of = {nid: r for r, nid in enumerate(run + nodes)}
    mask = np.zeros((len(nodes), len(run) + len(nodes)), dtype=bool)
    for i, nid in enumerate(nodes):
        a = nid
        while a != 0:
            mask[i, row_of[a]] = True
            a = tree.parents[a]
    return mask


def verify_rows(tree: DraftTree) -> dict[int, int]:
    """Node id -> row of the target's verify block (the verified nodes in id order, see ``tree.flatten``)."""
    return {nid: r for r, nid in enumerate(i for i, g in enumerate(tree.gated) if not g)}


class HeadSource(DeviceSource):
    """A trained draft head (:mod:`~specviz_core.drafters.talon.head`): one head step per tree layer, on the
    target's features for the committed tokens and the head's own predicted features inside the tree."""

    kind = "head"
    node_source = "head"

    def __init__(self, head: Any, target: Any) -> None:
        super().__init__()
        self.runner = HeadRunner(head, target)
        self.target = target
        install_feature_tap(target.model, head.feature_layers, owner=self)
        self._row_feats: torch.Tensor | None = None  # the root's predicted feature, then each tree row's
        self._tree: DraftTree | None = None
        self._pending: torch.Tensor | None = None  # the verify block's features, until the path is known
        self._prefilled = 0
        self._root_at = 0  # the position of this cycle's root (its features are the verify's first row)

    def start(self, prompt_ids: list[int]) -> None:
        self.runner.reset()
        self._prefilled, self._tree, self._pending = 0, None, None

    def catch_up_rows(self, ids: list[int]) -> int:
        return self.runner.pending(ids)

    def catch_up_facts(self) -> dict[str, Any]:
        return catch_up_facts(self.runner.clock)

    def top_root(self, ctx: DraftContext, m: int) -> tuple[torch.Tensor, torch.Tensor]:
        self._row_feats = self.runner.catch_up(ctx.ids)[None]  # [1, H]
        self._run = []
        self._root_at = len(ctx.ids) - 1
        self.steps += 1
        return self.runner.logits.top(self._row_feats, m)

    def top_level(self, parent_rows: torch.Tensor, tokens: torch.Tensor, depth: int, mask: torch.Tensor, m: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.runner.forward_level(self._row_feats[parent_rows.to(self._row_feats.device) + 1], tokens,
                                      [depth] * len(tokens), mask)
        self._row_feats = torch.cat([self._row_feats, h])
        self.steps += 1
        return self.runner.logits.top(h, m)

    def plain(self, ctx: DraftContext) -> None:
        self._row_feats, self._run = None, []
        self._root_at = len(ctx.ids) - 1  # the head catches up on this cycle's tokens when it next drafts

    def bind(self, tree: DraftTree) -> None:
        self._tree = tree

    def harvest(self, rows: TargetRows) -> None:
        feats = rows.features
        if feats is None or len(feats) != len(rows):
            raise SpecVizError("the target's forward did not give a feature per row: the draft head cannot follow it")
        if self._tree is None:  # a prefill chunk: features of the next prompt positions
            self.runner.add_features(self._prefilled, feats)
            self._prefilled += len(rows)
        else:
            self._pending = feats

    def accepted(self, tree: DraftTree, accepted_nodes: list[int]) -> None:
        if self._pending is not None:  # the target's features of the root and the accepted nodes
            row_of = verify_rows(tree)
            rows = [row_of[n] for n in (0, *accepted_nodes)]
            self.runner.add_features(self._root_at, self._pending[rows])
            self._pending, self._tree = None, None
        self.runner.drop_tree()
        self._run, self._row_feats = [], None


class TableSource(NextTokenSource):
    kind = "table"
    node_source = "table"

    def __init__(self, n_max: int = 4, k: int = 10, rows: str = "all") -> None:
        super().__init__()
        self.tables = NGramTables(n_max, k)
        self.rows = rows
        """``all``: merge every verified row; ``path``: only the root and the accepted path (STAND)."""
        self._prompt: list[int] = []
        self._prefilled = 0  # prompt rows harvested so far
        self._tree: DraftTree | None = None
        self._tails: dict[int, Tail] = {}
        self._pending: TargetRows | None = None  # a verify block's rows, until the accepted path is known
        self.harvest_k = self.tables.k

    def start(self, prompt_ids: list[int]) -> None:
        self._prompt = list(prompt_ids)
        self._prefilled = 0
        self._tree = None
        self._pending = None

    def tail_of(self, tree: DraftTree, node: int) -> Tail:
        """The last n_max tokens of the context ending at ``node`` (committed tokens, then the path)."""
        t = self._tails.get(node)
        if t is None:
            t = (self.tail_of(tree, tree.parents[node]) + (tree.tokens[node],))[-self.tables.n_max:]
            self._tails[node] = t
        return t

    def _lookup(self, tail: Tail, m: int) -> Candidates:
        e, _ = self.tables.lookup(tail)
        return ([], []) if e is None else (e.ids[:m], e.probs[:m])

    def root(self, ctx: DraftContext, m: int) -> Candidates:
        self._tails = {0: self.tables.tail(ctx.ids)}
        self.steps += 1
        return self._lookup(self._tails[0], m)

    def expand(self, tree: DraftTree, nodes: list[int], m: int) -> list[Candidates]:
        self._tree = tree
        self.steps += 1
        return [self._lookup(self.tail_of(tree, n), m) for n in nodes]

    def bind(self, tree: DraftTree) -> None:
        """The tree whose verify block the next harvest will bring."""
        self._tree = tree

    def harvest(self, rows: TargetRows) -> None:
        if self._tree is not None and self.rows == "path":
            self._pending, self._tree = rows, None
            return
        ids, probs = (a.tolist() for a in rows.top(self.tables.k))
        if self._tree is None:  # a prefill chunk: the next rows of the prompt
            start = self._prefilled
            for i in range(len(ids)):
                self.tables.update(self.tables.tail(self._prompt[: start + i + 1]), ids[i], probs[i])
            self._prefilled += len(ids)
            return
        tree = self._tree
        for nid, row in verify_rows(tree).items():
            self.tables.update(self.tail_of(tree, nid), ids[row], probs[row])
        self._tree = None

    def _merge_rows(self, tree: DraftTree, rows: TargetRows, nodes: list[int]) -> None:
        row_of = verify_rows(tree)
        ids, probs = (a.tolist() for a in rows.select([row_of[n] for n in nodes]).top(self.tables.k))
        for n, i, p in zip(nodes, ids, probs):
            self.tables.update(self.tail_of(tree, n), i, p)

    def accepted(self, tree: DraftTree, accepted_nodes: list[int]) -> None:
        if self._pending is not None:
            self._merge_rows(tree, self._pending, [0] + list(accepted_nodes))
            self._pending = None


def resolve_drafter(drafter: str, target: Any, head: str = "") -> str:
    """``auto``: a head when one is given (``head``) or the model has one trained, else the tables; other values as
    they are."""
    if drafter != "auto":
        return drafter
    if head:
        return "head"
    from specviz_core.runtime.head_files import head_info

    return "head" if target is not None and head_info(target) is not None else "table"


class SourcedDrafter(Drafter):
    """A tree drafter that reads next-token distributions from a draft head, a draft model or the n-gram tables."""

    def __init__(self, params: Any, target: Any, draft_model: Any = None) -> None:
        params = self.resolve_params(params, target)
        super().__init__(params, target, draft_model)
        if params.drafter == "model":
            if draft_model is None:
                raise SpecVizError(
                    f"{self.method_id} with drafter=model needs {DRAFT_MODEL} (a model sharing the target's "
                    f"tokenizer; {TARGET_AS_DRAFT}); drafter=table needs no draft model")
            self.source: NextTokenSource = ModelSource(draft_model)
        elif params.drafter == "head":
            head = load_eagle_head(params.head, target) if params.head else load_head(target)
            if head is None:
                raise SpecVizError(f"{self.method_id} with drafter=head needs a draft head trained for this model: "
                                   f"specviz train-head --model {target.name} (drafter=table needs none)")
            self.source = HeadSource(head, target)
        else:
            self.source = TableSource()
        self.steps_total = 0
        self.cycles = 0
        self.reads_wait = getattr(getattr(target, "device", None), "type", "cpu") != "cpu"
        """Whether reading a value back waits for the device (a GPU): a tree drafted on the device then reads nothing
        until it is complete, not even whether it could stop early (it drafts on, and the tree written down is the
        same). On a CPU a read costs nothing."""

    @classmethod
    def resolve_params(cls, params: Any, target: Any) -> Any:
        return replace(params, drafter=resolve_drafter(params.drafter, target, params.head))

    def start(self, prompt_ids: list[int]) -> None:
        self.source.start(prompt_ids)
        self.steps_total = 0
        self.cycles = 0

    def harvest(self, rows: TargetRows) -> None:
        self.source.harvest(rows)

    @property
    def harvest_k(self) -> int:  # type: ignore[override]
        return self.source.harvest_k

    def skip(self, ctx: DraftContext) -> DraftTree:
        steps0 = self.begin(ctx)
        self.source.plain(ctx)
        tree = DraftTree(root_token=ctx.ids[-1], mode="ar")
        self.finish(tree, steps0)
        return tree

    def catch_up_rows(self, ids: list[int]) -> int:
        return self.source.catch_up_rows(ids)

    def draft_cost_key(self) -> str | None:
        if isinstance(self.source, HeadSource):
            head = self.source.runner.head
            return f"head:{getattr(head, 'source', None) or head.layout}"
        if isinstance(self.source, ModelSource):
            return f"model:{self.draft_model.name}"
        return None

    def begin(self, ctx: DraftContext) -> int:
        """Start a cycle; returns the step count to measure this cycle's draft steps from."""
        self._ms0 = getattr(self.source, "step_ms", 0.0)
        return self.source.steps

    def finish(self, tree: DraftTree, steps0: int) -> None:
        """End a cycle's drafting: the delta bookkeeping every TALON/EAGLE record carries."""
        if isinstance(self.source, (TableSource, HeadSource)):
            self.source.bind(tree)
        steps = self.source.steps - steps0
        self.steps_total += steps
        self.cycles += 1
        tree.state.update({
            "drafter": self.source.kind,
            "draft_steps": steps,
            "delta": self.steps_total / self.cycles,
        })
        if self.source.kind == "model":
            tree.state["draft_forwards"] = steps
        if isinstance(self.source, HeadSource):  # c = a head step's time over a target forward's (the summary)
            tree.state["draft_step_ms"] = (self.source.step_ms - self._ms0) / steps if steps else 0.0
        tree.state.update(self.source.catch_up_facts())

    def accepted(self, tree: DraftTree, accepted_nodes: list[int], committed: list[int]) -> dict[str, Any]:
        self.source.accepted(tree, accepted_nodes)
        return {}

    def stats(self) -> dict[str, Any]:
        out = {"drafter": self.source.kind, "draft_steps": self.steps_total,
               "delta": self.steps_total / self.cycles if self.cycles else 0.0}
        if isinstance(self.source, HeadSource):  # which head: its layout, and its folder when one was given
            head = self.source.runner.head
            out["head_layout"] = head.layout
            if getattr(head, "source", None):
                out["head"] = head.source
        return out
