"""What a cycle's ``state`` holds, typed: one dataclass per feature, each fact a field with its meaning, its writers
and whether it depends on the host (its clock, its load, its stored cost curve) rather than on the model's numbers.

A record keeps ``state`` as the JSON object it is stored as, so every recording, old or new, opens as it is;
:func:`typed_state` reads it into these types (a key no group declares is kept aside in ``extra``). The facts a
drafter or the engine writes are checked against the groups here (tests/methods/test_cycle_state.py), the record
format's table of them is generated from here (``python -m specviz_core.cycle_state``; tests/project/test_docs.py
checks docs/record-format.md), and the golden comparison drops the host-dependent ones by their mark.

A new fact about a cycle: its field in its feature's group below (or a new group, listed in :data:`GROUPS`), then
the writer sets it in ``tree.state``; then the table in docs/record-format.md is printed again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

ALL = "*"
"""Written for every method (by the engine)."""


def fact(doc: str, *, host: bool = False) -> Any:
    """A fact of a cycle: ``doc`` says what it holds; ``host``: it depends on the machine (timings, load, the stored
    cost curve), so two machines decoding the same cycle may record it differently."""
    return field(default=None, metadata={"doc": doc, "host": host})


@dataclass(frozen=True)
class Facts:
    """A feature's facts of one cycle; a field is None where the cycle did not record it."""

    title: ClassVar[str]
    """The feature, in a few words."""
    writers: ClassVar[tuple[str, ...]]
    """The methods that write it (:data:`ALL`: the engine, for every method)."""

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def read(cls, state: dict[str, Any]) -> Facts:
        return cls(**{k: state[k] for k in cls.keys() if k in state})

    @classmethod
    def writes_for(cls, method: str) -> bool:
        return ALL in cls.writers or method in cls.writers


@dataclass(frozen=True)
class EngineFacts(Facts):
    title = "every method (the engine)"
    writers = (ALL,)
    budget: dict[str, Any] | None = fact(
        "`budget=auto`'s choice: `chosen` draft nodes verified of `candidates` offered, `ceiling` the budget the "
        "drafter was asked for, `expected_tokens`, `expected_ms`, `gain_vs_ar`, `paper`, `calibration` (accepted over "
        "expected draft tokens in the session's earlier trees, which scaled the expectation), `draft_ms` (the cycle's "
        "drafting, priced), `depth` (how deep the drafter was asked to draft, where a draft step costs); "
        "`plain` when it drafted nothing, the session's drafts not paying their cost (or, with `catch_up`, "
        "`catch_up_ms` and `room`: the draft head or model would first have run over that many committed tokens, "
        "priced so, more than drafts could repay in the `room` tokens left; or, with `try_ms`, `room` and `waited`: "
        "trying a draft again, priced so, would cost more than drafts could save in the `room` tokens left at one "
        "chance in the `waited` plain cycles that they now pay); `prior` when the device's "
        "prior priced it; `flat` when a flat curve kept the method's own tree (older recordings: `measuring`). A "
        "decision a fork's re-run applies instead of deciding again (`CycleDecisions`; [fork.md](fork.md))")
    padded_to: int | None = fact(
        "the rows the verify forward ran, when more than it verified: the device's stored cost curve priced the "
        "bigger block lower; the padding rows change no logit ([benchmarks.md](benchmarks.md#budgetauto))", host=True)
    from_prefill: bool | None = fact(
        "true on a cycle 0 that verified only its root and took its token from the prefill's last row, with no "
        "forward of its own ([metrics.md](metrics.md#tokens-per-forward-two-ways))")
    offers: dict[str, list[dict[str, Any]]] | None = fact(
        "node id (a string) -> a list of `{source, tokens, scores, fates, threshold?, note?}`: each source's "
        "candidates below that node, best first, with the fate of each (`drafted`, `gate`, `budget`, `width`); "
        "`note`: `rerank` when the `budget` fates are EAGLE-2's reranking on path probability (`eagle`; `threshold` "
        "is the cut line), or, on an empty list, why nothing was drafted below the node; kept at the root and the "
        "accepted nodes only ([metrics.md](metrics.md#why-a-cycle-stopped))")
    prefill_in_forward: int | None = fact(
        "`specviz.record`'s cycle 0: the prompt tokens its forward ran before the root (generate prefills inside "
        "its first forward)")


@dataclass(frozen=True)
class ContextMatchFacts(Facts):
    title = "a context match (prompt lookup, Goose)"
    writers = ("pld", "goose", "isotropic", "hf_prompt_lookup")
    match: dict[str, Any] | None = fact(
        "where the draft was copied from: `ngram` (the matched suffix's length), `match_span` and `copy_span` "
        "(`[start, end)` token spans of prompt + output); null when nothing matched")


@dataclass(frozen=True)
class GooseFacts(Facts):
    title = "Goose"
    writers = ("goose", "isotropic")
    match_len: int | None = fact("tokens the context match offered before any extension")
    consensus: bool | None = fact("two matches agreed on the continuation (confidence 1)")
    confidence: float | None = fact("the match's confidence, which sets the spine ratio's tier")
    spine_len: int | None = fact("tokens on the spine")
    extension_spans: list[list[int]] | None = fact("the spans repeated matching appended to the chain")
    chain_extended: bool | None = fact("repeated matching grew the chain this cycle")
    chain_len: int | None = fact("the chain's length after extension")
    node_budget: int | None = fact("the node budget of this cycle's tree")
    spine_ratio: float | None = fact("r: the share of the node budget the spine may take")
    spine_ratio_tier: float | None = fact("the confidence tier r was taken from")
    ratio_binding: bool | None = fact("r cut the spine shorter than the chain")
    root_share: int | None = fact("branch nodes the budget left beyond the spine that went to the root")
    spine_share: int | None = fact("branch nodes the budget left beyond the spine that went along the spine")
    route: str | None = fact("what the cycle drafted: `spine_tree`, `branch_tree`, `chain`, `bypass` (a confident "
                             "chain verified alone), `ar` or `prefill` (after the cycle: what was verified)")
    path: str | None = fact("how the accepted path ran: `spine_continuation` or `pure_branch`")
    ema_p_s: float | None = fact("the running spine acceptance p_s before this cycle")
    ema_p_s_after: float | None = fact("p_s after this cycle")
    spine_accepted: int | None = fact("spine tokens accepted")
    branch_accepted: int | None = fact("branch tokens accepted")
    spine_nodes: int | None = fact("spine nodes verified")
    branch_nodes: int | None = fact("branch nodes verified")
    continuation_tokens: int | None = fact("tokens a branch off the accepted spine continued with")
    spine_broke_at: int | None = fact("the spine depth (1 first) where the target disagreed (null: it did not break)")
    spine_continuation: bool | None = fact("a branch continued past the accepted spine")


@dataclass(frozen=True)
class TalonFacts(Facts):
    title = "TALON, EAGLE's static tree and EAGLE-2's dynamic tree"
    writers = ("talon", "eagle_static", "eagle")
    drafter: str | None = fact("where the distributions came from: `head`, `table` or `model`")
    draft_steps: int | None = fact("draft forwards, or table lookup layers, this cycle")
    delta: float | None = fact("draft steps per target forward so far")
    draft_step_ms: float | None = fact("a draft head step's mean wall time this cycle, ms", host=True)
    depth: int | None = fact("the tree's depth")
    nodes: int | None = fact("draft nodes in the tree")
    layer_widths: list[int] | None = fact("TALON: nodes kept per layer")
    width: int | None = fact("TALON: the widest layer")
    gated: int | None = fact("TALON: candidates the `mu` gate cut (of those drafted: each parent's most probable, as "
                             "many as the budget had room for; older recordings: the gated nodes shown)")
    layer_passed: list[int] | None = fact("TALON: candidates per layer the gate let through (the root layer: its "
                                          "top-K), before the budget cut: where it exceeds `layer_widths`, the budget "
                                          "set the layer's width")
    ended_by: str | None = fact("TALON: what ended the tree: `budget` (N nodes drafted), `depth` (the context's "
                                "end) or `empty` (no candidates)")
    mu: float | None = fact("TALON: the gate's margin below the layer's best path probability")
    anchor: float | None = fact("TALON: m_d, the best path probability of the last layer grown (the gate's anchor)")
    pruned: int | None = fact("`eagle_static`: candidates pruned to the budget")
    chosen_from_cut: int | None = fact("`eagle_static` with `rerank=all` (EAGLE-2's reranking): expanded candidates "
                                       "the final pruning kept")
    candidates: int | None = fact("`eagle`: candidates drafted at every level, before the reranking")
    expanded: int | None = fact("`eagle`: nodes expanded (drafted below), the root included")
    rerank_cut: float | None = fact("`eagle`: the path probability of the last candidate the reranking kept (the "
                                    "cut line; null when it kept every one)")
    stopped_early: int | None = fact("`eagle`: the level whose frontier drafting stopped at, no deeper candidate "
                                     "able to enter the verified tree (absent: it drafted to its depth)")


@dataclass(frozen=True)
class DraftModelFacts(Facts):
    title = "a draft model or head"
    writers = ("draft_tree", "talon", "eagle_static", "eagle")
    draft_forwards: int | None = fact("forwards of the draft model this cycle")
    catch_up_rows: int | None = fact("the committed tokens the draft head or model ran before drafting, where there "
                                     "were 256 or more (its first draft after a long prompt; timed: `catch_up_ms`)")
    catch_up_ms: float | None = fact("that catch-up's wall time, ms (`budget=auto` prices the next from it)",
                                     host=True)


@dataclass(frozen=True)
class StandFacts(Facts):
    title = "STAND"
    writers = ("stand",)
    stochastic: bool | None = fact("children were drawn by Gumbel-top-k (sampling) rather than taken best first")
    lookups_by_n: list[int] | None = fact("lookups answered by the 1- to 4-gram tables")
    lookups_missed: int | None = fact("lookups no table answered")
    noise_refills: int | None = fact("times the bulk Gumbel noise was drawn again so far (sampling)")
    table_entries: int | None = fact("entries in the n-gram tables")


@dataclass(frozen=True)
class AssistedFacts(Facts):
    title = "transformers' assisted generation (`hf_*`, `specviz.record`)"
    writers = ("hf_assisted", "hf_universal", "hf_prompt_lookup")
    generator: str | None = fact("transformers' candidate generator class")
    candidate_length: int | None = fact("tokens the generator drafted")
    n_matches: int | None = fact("what `update_candidate_strategy` was told: accepted tokens")
    draft_stop: str | None = fact("why the chain stopped, as a code")
    draft_stop_text: str | None = fact("why the chain stopped, in words")
    schedule: str | None = fact("`num_assistant_tokens_schedule`")
    draft_cap: int | None = fact("the assistant's token limit this cycle")
    draft_probs: list[float] | None = fact("the assistant's probability of each drafted token")
    num_assistant_tokens: int | None = fact("the generator's draft length before the cycle")
    assistant_confidence_threshold: float | None = fact("the confidence stop before the cycle")
    num_assistant_tokens_next: int | None = fact("the draft length after the cycle's update")
    assistant_confidence_threshold_next: float | None = fact("the confidence stop after the cycle's update")
    alignment: dict[str, Any] | None = fact("universal decoding: how the assistant's tokens were re-encoded")


#: Every group, in the record format table's order.
GROUPS: tuple[type[Facts], ...] = (EngineFacts, ContextMatchFacts, GooseFacts, TalonFacts, DraftModelFacts,
                                   StandFacts, AssistedFacts)


@dataclass(frozen=True)
class CycleState:
    """A cycle's ``state`` read into its groups; a group the cycle's method does not write is None."""

    groups: dict[type[Facts], Facts]
    extra: dict[str, Any]
    """Keys no group declares (a recording from another version)."""

    def __getitem__(self, group: type[Facts]) -> Any:
        return self.groups.get(group)


def typed_state(method: str, state: dict[str, Any]) -> CycleState:
    """``state`` as :class:`CycleState` for a cycle of ``method``."""
    groups = {g: g.read(state) for g in GROUPS if g.writes_for(method)}
    known = {k for g in groups for k in g.keys()}
    return CycleState(groups, {k: v for k, v in state.items() if k not in known})


def declared_keys(method: str) -> set[str]:
    """Every key a cycle of ``method`` may hold."""
    return {k for g in GROUPS if g.writes_for(method) for k in g.keys()}


def host_keys() -> set[str]:
    """The keys that depend on the host, not on the model's numbers (a golden comparison drops them)."""
    return {f.name for g in GROUPS for f in fields(g) if f.metadata["host"]}


def state_table() -> str:
    """The record format's table of ``state``, one row per fact (docs/record-format.md)."""
    rows = ["| key | written by | meaning |", "| --- | --- | --- |"]
    for g in GROUPS:
        for f in fields(g):
            host = " *Host-dependent.*" if f.metadata["host"] else ""
            rows.append(f"| `{f.name}` | {g.title} | {f.metadata['doc']}{host} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(state_table())
