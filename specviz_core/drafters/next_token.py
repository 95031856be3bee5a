"""Where TALON and the EAGLE-style tree get a next-token distribution at every node.

Both tree builders only need "the top-m next tokens and their probabilities
after this node". Two sources give it:

- :class:`ModelSource`: a draft model (any causal LM sharing the target's
  tokenizer) with its own KV cache kept in step with the accepted path (the
  :class:`~specviz_core.drafters.draft_tree.DraftModelRunner`); one draft
  forward per tree layer.
- :class:`TableSource`: the logit n-gram tables of the target's own outputs
  (:mod:`~specviz_core.drafters.ngram_tables`), looked up by the last 4..1 tokens
  of each node's context; no extra model. Every verified row's logits are
  merged in, rejected branches included, so the tables learn what the target
  considered as well as what it chose.

A "draft step" is one layer of expansion: a draft forward for the model, a
batch of table lookups for the table. TALON's draft efficiency delta is draft
steps per target forward.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
import torch

from ..errors import SpecVizError
from ..tree import DraftTree
from .base import DraftContext, Drafter
from .draft_tree import DraftModelRunner
from .ngram_tables import NGramTables, Tail

Candidates = tuple[list[int], list[float]]
"""Next-token ids and their probabilities, most probable first."""


class NextTokenSource(ABC):
    kind: ClassVar[str]
    node_source: ClassVar[str]
    """The ``source`` of the nodes it proposes."""

    def __init__(self) -> None:
        self.steps = 0

    def start(self, prompt_ids: list[int]) -> None:
        """A new session begins."""

    @abstractmethod
    def root(self, ctx: DraftContext, m: int) -> Candidates:
        """Top-m next tokens after the committed tokens (one draft step)."""

    @abstractmethod
    def expand(self, tree: DraftTree, nodes: list[int], m: int) -> list[Candidates]:
        """Top-m next tokens after each of ``nodes`` (one draft step for the whole layer)."""

    def harvest(self, tokens: torch.Tensor, logits: torch.Tensor, prev: torch.Tensor | None) -> None:
        """The target's logits for the rows it just ran (prefill chunk or verify block)."""

    def accepted(self, tree: DraftTree, accepted_nodes: list[int]) -> None:
        """The cycle's accepted path."""


class ModelSource(NextTokenSource):
    kind = "model"
    node_source = "draft"

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.runner = DraftModelRunner(model)
        self._run: list[int] = []  # node ids in draft-cache row order this cycle

    def start(self, prompt_ids: list[int]) -> None:
        self.runner.reset()

    def _top(self, logits: torch.Tensor, m: int) -> list[Candidates]:
        top = torch.softmax(logits, dim=-1).topk(min(m, logits.shape[-1]), dim=-1)  # [r, m]
        return list(zip(top.indices.tolist(), top.values.tolist()))

    def root(self, ctx: DraftContext, m: int) -> Candidates:
        self._run = []
        f0 = self.runner.forwards
        logits = self.runner.catch_up(ctx.ids)[None]  # [1, V]
        self.steps += self.runner.forwards - f0
        return self._top(logits, m)[0]

    def expand(self, tree: DraftTree, nodes: list[int], m: int) -> list[Candidates]:
        rows = self._run + nodes
        row_of = {nid: r for r, nid in enumerate(rows)}
        mask = np.zeros((len(nodes), len(rows)), dtype=bool)  # each row sees its ancestors and itself
        for i, nid in enumerate(nodes):
            a = nid
            while a != 0:
                mask[i, row_of[a]] = True
                a = tree.parents[a]
        logits = self.runner.forward_level([tree.tokens[n] for n in nodes], [tree.depths[n] for n in nodes], mask)
        self._run = rows
        self.steps += 1
        return self._top(logits, m)

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
        self._pending: torch.Tensor | None = None  # a verify block's logits, until the accepted path is known

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

    def harvest(self, tokens: torch.Tensor, logits: torch.Tensor, prev: torch.Tensor | None) -> None:
        if self._tree is not None and self.rows == "path":
            self._pending, self._tree = logits, None
            return
        ids, probs = self.tables.topk(logits)
        if self._tree is None:  # a prefill chunk: the next rows of the prompt
            start = self._prefilled
            for i in range(len(ids)):
                self.tables.update(self.tables.tail(self._prompt[: start + i + 1]), ids[i], probs[i])
            self._prefilled += len(ids)
            return
        tree = self._tree
        order = [i for i, g in enumerate(tree.gated) if not g]  # the verify order (see tree.flatten)
        for row, nid in enumerate(order):
            self.tables.update(self.tail_of(tree, nid), ids[row], probs[row])
        self._tree = None

    def _merge_rows(self, tree: DraftTree, logits: torch.Tensor, nodes: list[int]) -> None:
        row_of = {nid: r for r, nid in enumerate(i for i, g in enumerate(tree.gated) if not g)}
        ids, probs = self.tables.topk(logits[[row_of[n] for n in nodes]])
        for n, i, p in zip(nodes, ids, probs):
            self.tables.update(self.tail_of(tree, n), i, p)

    def accepted(self, tree: DraftTree, accepted_nodes: list[int]) -> None:
        if self._pending is not None:
            self._merge_rows(tree, self._pending, [0] + list(accepted_nodes))
            self._pending = None


class SourcedDrafter(Drafter):
    """A tree drafter that reads next-token distributions from a draft model or from the n-gram tables."""

    def __init__(self, params: Any, target: Any, draft_model: Any = None) -> None:
        super().__init__(params, target, draft_model)
        if params.drafter == "model":
            if draft_model is None:
                raise SpecVizError(
                    f"{self.method_id} with drafter=model needs --draft-model (a model sharing the target's "
                    "tokenizer; the target itself works, e.g. --draft-model default); "
                    "drafter=table needs no draft model")
            self.source: NextTokenSource = ModelSource(draft_model)
        else:
            self.source = TableSource()
        self.steps_total = 0
        self.cycles = 0

    @classmethod
    def wants_draft_model(cls, params: Any) -> bool:
        return params.drafter == "model"

    def start(self, prompt_ids: list[int]) -> None:
        self.source.start(prompt_ids)
        self.steps_total = 0
        self.cycles = 0

    def harvest(self, tokens: torch.Tensor, logits: torch.Tensor, prev: torch.Tensor | None = None) -> None:
        self.source.harvest(tokens, logits, prev)

    def begin(self, ctx: DraftContext) -> int:
        """Start a cycle; returns the step count to measure this cycle's draft steps from."""
        return self.source.steps

    def finish(self, tree: DraftTree, steps0: int) -> None:
        """End a cycle's drafting: the delta bookkeeping every TALON/EAGLE record carries."""
        if isinstance(self.source, TableSource):
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

    def accepted(self, tree: DraftTree, accepted_nodes: list[int], committed: list[int]) -> dict[str, Any]:
        self.source.accepted(tree, accepted_nodes)
        return {}

    def stats(self) -> dict[str, Any]:
        return {"drafter": self.source.kind, "draft_steps": self.steps_total,
                "delta": self.steps_total / self.cycles if self.cycles else 0.0}
