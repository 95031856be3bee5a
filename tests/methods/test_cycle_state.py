"""A cycle's ``state`` against its types (specviz_core/cycle_state.py): every fact each method writes, live, is a
declared field of a group that method writes; the types read a state back into those groups; the host-dependent facts
are the ones whose values the machine decides."""

from __future__ import annotations

import pytest

from helpers import make_session
from specviz_core.cycle_state import (
    GROUPS,
    AssistedFacts,
    EngineFacts,
    GooseFacts,
    TalonFacts,
    declared_keys,
    host_keys,
    typed_state,
)
from specviz_core.drafters import METHODS

PROMPT = [5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 5, 6, 7] * 2
#: Every method, and the variants that write other facts (a drafter, the sampling path, a budget chosen per device).
CASES = [(m, {}, 0.0) for m in METHODS if m != "hf_universal"] + [
    ("talon", {"drafter": "model"}, 0.0), ("eagle_static", {"drafter": "model", "rerank": "all"}, 0.0),
    ("stand", {}, 1.0), ("goose", {"budget": "auto"}, 0.0), ("tr", {"budget": "auto"}, 0.0)]


@pytest.mark.parametrize(("method", "params", "temperature"), CASES,
                         ids=[f"{m}{'-' + '-'.join(f'{k}={v}' for k, v in p.items()) if p else ''}-T{t}"
                              for m, p, t in CASES])
def test_every_fact_a_method_writes_is_declared(tiny, one_thread, method, params, temperature):
    session = make_session(tiny, method, PROMPT, 24, draft=tiny, temperature=temperature, seed=3, **params)
    written: set[str] = set()
    for record in session.records():
        written |= set(record.state)
        typed = typed_state(method, record.state)
        assert typed.extra == {}
        for group, facts in typed.groups.items():  # every value landed in its field
            assert {k: getattr(facts, k) for k in group.keys() if k in record.state} == \
                {k: record.state[k] for k in group.keys() if k in record.state}
    assert written, "the method wrote no state: nothing was checked"
    assert written <= declared_keys(method), written - declared_keys(method)


def test_each_fact_is_declared_once_and_documented():
    seen: dict[str, str] = {}
    for group in GROUPS:
        for key in group.keys():
            assert key not in seen, f"{key} is in {seen.get(key)} and {group.__name__}"
            seen[key] = group.__name__
    from dataclasses import fields

    assert all(len(f.metadata["doc"]) > 10 for g in GROUPS for f in fields(g))


def test_the_host_dependent_facts_are_the_machines_choices():
    """The padded block follows the stored cost curve, a draft step's ms and a long catch-up's the clock: all
    marked; the budget choice is made from the curve alone (the same on any machine with that curve), so it is not."""
    assert host_keys() == {"padded_to", "draft_step_ms", "catch_up_ms"}
    assert "budget" in EngineFacts.keys() and "budget" not in host_keys()


def test_an_old_recordings_unknown_facts_are_kept_aside():
    state = {"spine_ratio": 0.5, "route": "spine_tree", "a_fact_of_another_version": 1}
    typed = typed_state("goose", state)
    assert typed[GooseFacts].spine_ratio == 0.5 and typed[GooseFacts].route == "spine_tree"
    assert typed[GooseFacts].confidence is None and typed[TalonFacts] is None and typed[AssistedFacts] is None
    assert typed.extra == {"a_fact_of_another_version": 1}
