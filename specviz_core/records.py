"""Immutable records of a decode session: one type, three users (views, recorder, replay).

A record holds Python and numpy values only, never a live tensor, so it can be
drawn, stored and compared without torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

#: Cycle modes: one token per forward, a linear chain, a tree, a Goose bypass chain.
MODES = ("ar", "chain", "tree", "bypass")

#: Node sources. ``root`` is the anchor; ``ar`` marks a bonus-only cycle.
SOURCES = ("root", "spine", "branch", "draft", "ngram", "recycle", "table", "head")

#: What became of a candidate a source offered below a node (``state["offers"]``, see ``DraftTree.offer``):
#: drafted (verified), cut by a confidence gate, cut by the budget or a depth limit, or left out by the tree's width.
FATES = ("drafted", "gate", "budget", "width")

#: Session statuses.
STATUSES = ("running", "complete", "interrupted", "failed")


class Node(NamedTuple):
    """One node of a draft tree. Node 0 is the root (the last committed token).

    A named tuple, not a frozen dataclass: a cycle builds one a node (60-80 of them for a paper's tree), and a frozen
    dataclass's constructor costs five times a tuple's (1.2 against 0.25 us), a tenth of a cycle's host work on a
    small model. :meth:`replace` makes a changed copy."""

    id: int
    """Node id, 0 for the root; a parent's id is always smaller than its children's."""
    parent: int
    """Parent node id; -1 for the root."""
    token: int
    """Token id proposed at this node."""
    source: str
    """Who proposed it: ``root``, ``spine``, ``branch``, ``draft``, ``ngram``, ``recycle``, ..."""
    depth: int
    """Distance from the root in tokens (root is 0)."""
    score: float
    """The drafter's confidence in this node (a probability or a path score; 1.0 if none)."""
    verified: bool
    """Sent to the target in this cycle's forward pass."""
    gated: bool = False
    """Considered and cut by a confidence gate or the budget (never verified)."""
    accepted: bool = False
    """On the accepted path (the root counts as accepted)."""
    target_token: int = -1
    """The token the target chose after this node (argmax, or the sampled one); -1 if not verified."""
    target_prob: float | None = None
    """The target's probability of this node's token given its parent; None for the root or unverified."""

    def as_dict(self) -> dict[str, Any]:
        """The node's fields by name (a recording's export writes them so)."""
        return dict(zip(Node._fields, self))

    def replace(self, **changes: Any) -> Node:
        """A copy with ``changes``, as :meth:`CycleRecord.replace` makes one of a record."""
        return self._replace(**changes)


@dataclass(frozen=True, slots=True)
class CycleDecisions:
    """What a cycle decided from this machine's clock or load (``budget=auto``'s choice, the padded block size),
    read from its record: a fork's re-run applies these instead of deciding again, so a recording re-runs exactly on
    any machine (docs/record-format.md). Where the record holds them: ``state["budget"]`` (the choice, ``ceiling``,
    the budget the drafter was asked for, and ``depth``, how deep), ``verify_order`` (the nodes kept) and
    ``state["padded_to"]``."""

    ceiling: int | None
    """The budget the drafter was asked to draft up to; None: its own tree."""
    kept: frozenset[int] | None
    """With ``budget=auto``: the node ids verified (root included); every other node it was offered, it cut. None:
    no budget choice was made (the method's own or a fixed budget)."""
    rows_run: int
    """The rows the verify forward ran: the verified rows plus any padding."""
    budget_state: dict[str, Any] | None
    """The choice as the cycle's state records it (``state["budget"]``)."""
    depth: int | None = None
    """With ``budget=auto`` where drafting costs: the depth the drafter was asked to draft to; None: its own."""

    @classmethod
    def of(cls, record: CycleRecord) -> CycleDecisions:
        b = record.state.get("budget")
        budget = b if isinstance(b, dict) else None
        ceiling = budget.get("ceiling") if budget is not None else None
        depth = budget.get("depth") if budget is not None else None
        padded = record.state.get("padded_to")
        return cls(
            ceiling=int(ceiling) if isinstance(ceiling, int) and not isinstance(ceiling, bool) else None,
            kept=frozenset(record.verify_order) if budget is not None else None,
            rows_run=max(record.n_verified, int(padded) if isinstance(padded, int) else 0),
            budget_state=dict(budget) if budget is not None else None,
            depth=int(depth) if isinstance(depth, int) and not isinstance(depth, bool) else None,
        )


@dataclass(frozen=True, slots=True, eq=False)
class CycleRecord:
    """Everything one decode cycle did. Shapes: n = number of verified nodes."""

    index: int
    """Cycle number in the session, from 0."""
    mode: str
    """``ar``, ``chain``, ``tree`` or ``bypass``."""
    cache_len: int
    """KV positions in the cache before the forward (every committed token but the root)."""
    nodes: tuple[Node, ...]
    """Every node: verified and gated, root first."""
    verify_order: tuple[int, ...]
    """Node ids in the order they were sent to the target, root first. Length n."""
    mask: np.ndarray
    """[n, n] bool: row i may attend to column j (tree part; every row also sees all cached positions)."""
    positions: tuple[int, ...]
    """Position id of each verify-order row: ``cache_len + depth``."""
    accepted_path: tuple[int, ...]
    """Node ids of the accepted draft nodes, root excluded, in depth order."""
    bonus_token: int
    """The token the target produced after the last accepted node."""
    committed_ids: tuple[int, ...]
    """Tokens committed by this cycle: accepted tokens then the bonus (cut at EOS / max tokens)."""
    kv_keep: tuple[int, ...]
    """Indices into ``verify_order`` whose KV was kept after the cycle (root first)."""
    target_topk: tuple[tuple[tuple[int, float], ...], ...] = ()
    """Per verify-order row: the target's top-5 (token, probability) after that node."""
    state: dict[str, Any] = field(default_factory=dict)
    """Method state worth showing (match span, spine ratio, EMA, draft forwards, ...)."""
    timings_ms: dict[str, float] = field(default_factory=dict)
    """Wall time of each step in ms: ``draft``, ``forward``, ``walk``, ``trim``, ``harvest``, ``build``, ``record``."""

    def __post_init__(self) -> None:
        mask = np.ascontiguousarray(self.mask, dtype=bool)
        mask.setflags(write=False)
        object.__setattr__(self, "mask", mask)

    # -- derived views, cheap to compute and never stored twice -------------
    @property
    def n_verified(self) -> int:
        """Number of tokens in the verify block (root included)."""
        return len(self.verify_order)

    @property
    def n_accepted(self) -> int:
        """Draft tokens accepted (the bonus token excluded)."""
        return len(self.accepted_path)

    @property
    def decisions(self) -> CycleDecisions:
        """What this cycle decided from the machine's clock or load (see :class:`CycleDecisions`)."""
        return CycleDecisions.of(self)

    @property
    def node_by_id(self) -> dict[int, Node]:
        return {n.id: n for n in self.nodes}

    def replace(self, **changes: Any) -> CycleRecord:
        return dataclasses.replace(self, **changes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CycleRecord):
            return NotImplemented
        for f in dataclasses.fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if f.name == "mask":
                if a.shape != b.shape or not np.array_equal(a, b):
                    return False
            elif a != b:
                return False
        return True

    __hash__ = None  # type: ignore[assignment]


#: The ``stats`` key of the verify-cost curve a session started with (``{"n": [...], "ms": [...]}``): what its budget
#: was chosen from and what its speed-up is estimated with, wherever it is replayed.
COST_CURVE = "cost_curve"


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A recorded session's header: what ran, on what, and how it ended."""

    id: str
    """Session id (a short unique string)."""
    model: str
    """The target model's path or hub id."""
    tokenizer: str
    """Where the tokenizer came from (usually the model's path)."""
    method: str
    """Method id (``ar``, ``pld``, ``tr``, ``draft_tree``, ...)."""
    params: dict[str, Any]
    """Every method parameter, defaults included."""
    prompt_ids: tuple[int, ...]
    """The prompt as token ids (after the chat template, if used)."""
    prompt_text: str
    """The prompt as the user typed it."""
    temperature: float
    """0 for greedy."""
    seed: int
    """Seed of the session's single ``torch.Generator``."""
    device: str
    """``cpu`` or ``cuda:0``..."""
    dtype: str
    """The target's dtype, e.g. ``float32``."""
    attention: str = ""
    """The attention kernel and the layers' pattern, e.g. ``sdpa; full`` or ``eager; full + sliding window 4096``."""
    status: str = "running"
    """``running``, ``complete``, ``interrupted`` or ``failed``."""
    created: str = ""
    """ISO-8601 creation time (UTC)."""
    draft_model: str | None = None
    """The draft model's path, if the method uses one."""
    chat_template: bool = False
    """Whether the prompt went through the tokenizer's chat template."""
    max_new_tokens: int = 0
    """The session's token limit."""
    group_id: str | None = None
    """Sessions recorded together (several samples of one prompt) share a group."""
    output_ids: tuple[int, ...] = ()
    """Every committed token after the prompt."""
    n_cycles: int = 0
    """Cycles recorded."""
    n_tokens: int = 0
    """New tokens committed (the length of ``output_ids``)."""
    n_forward: int = 0
    """Target forward passes in decoding (prefill excluded)."""
    decode_ms: float = 0.0
    """Wall time of all cycles, ms (prefill excluded)."""
    prefill_ms: float = 0.0
    """Wall time of the prefill forward, ms."""
    stop_reason: str = ""
    """``eos``, ``max_new_tokens``, ``context``, ``interrupted`` or an error message."""
    stats: dict[str, Any] = field(default_factory=dict)
    """Session statistics computed at the end (method specific)."""
    parent_session: str | None = None
    """A fork's parent session (``specviz record --fork``); None for a session decoded from its prompt alone."""
    fork_cycle: int | None = None
    """A fork's first cycle with its own settings: the cycles before it re-ran the parent's (docs/fork.md)."""

    @property
    def tokens_per_forward(self) -> float:
        """Tokens committed per target forward (tau), the bonus included: decode forwards only (the prefill's
        forward is not counted; a first token it gave is). Not :attr:`CycleRecord.n_accepted`'s mean, which counts
        the accepted draft tokens alone."""
        return self.n_tokens / self.n_forward if self.n_forward else 0.0

    @property
    def tau_prefill_counted(self) -> float:
        """Tokens per target forward with the prefill's forward counted, as the papers and the official code count
        it. A ``generate`` call recorded by ``specviz.record`` ran its prompt inside its first cycle's forward."""
        forwards = self.n_forward + (0 if self.stats.get("recorded_by") == "specviz.record" else 1)
        return self.n_tokens / forwards if self.n_tokens else 0.0

    @property
    def tokens_per_s(self) -> float:
        return 1000.0 * self.n_tokens / self.decode_ms if self.decode_ms > 0 else 0.0
