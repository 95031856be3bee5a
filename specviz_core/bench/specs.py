"""What ``specviz bench`` runs: method specs such as ``goose:budget=auto`` or ``isotropic:branching_factor=5``, checked
before any model is loaded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specviz_core.bench import hf as bench_hf
from specviz_core.errors import SpecVizError
from specviz_core.methods import CARDS, card
from specviz_core.session.spec import check_method

#: Methods run when ``--methods`` is not given (``hf_assisted`` and ``draft_tree`` join when there is a draft model):
#: a tree method by its name runs its default, ``budget=auto``; ``:budget=paper`` the paper's fixed budget.
DEFAULT_METHODS = ("ar", "pld", "hf_prompt_lookup", "tr", "tr:budget=paper", "goose", "goose:budget=paper")
#: Methods also run with recording on, for the recording overhead.
DEFAULT_RECORDED = ("goose",)


@dataclass(frozen=True)
class MethodSpec:
    """One benchmarked configuration: a method with parameters, e.g. ``goose:budget=auto:adjacency_top_k=8``."""

    label: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)
    sweep: bool = False
    """Added by ``--fixed-budgets`` (not asked for by name): in the tables, left out of the chart."""

    @property
    def is_hf(self) -> bool:
        return self.method in bench_hf.HF_METHODS

    @property
    def has_budget(self) -> bool:
        return not self.is_hf and self.method in CARDS and "budget" in card(self.method).params_cls.__dataclass_fields__

    @property
    def is_auto(self) -> bool:
        """A tree method choosing its budget for the device: its default, or ``budget=auto`` said."""
        return self.has_budget and str(self.params.get("budget", "auto")).strip().lower() == "auto"

    @property
    def base(self) -> str:
        """The label without its budget: what a fixed-budget variant of this configuration adds its budget to."""
        return self.method + "".join(_shown(k, v) for k, v in self.params.items() if k != "budget")

    def with_budget(self, budget: str) -> MethodSpec:
        params = {**{k: v for k, v in self.params.items() if k != "budget"}, "budget": budget}
        return MethodSpec(f"{self.base}:budget={budget}", self.method, params, sweep=True)


def _shown(key: str, value: Any) -> str:
    """A parameter as a label shows it: a head folder by its name (the results keep the whole path)."""
    if key == "head" and value:
        from pathlib import Path

        return f":head={Path(str(value)).name or value}"
    return f":{key}={value}"


def add_fixed_budgets(specs: list[MethodSpec], budgets: list[str]) -> list[MethodSpec]:
    """``specs`` and, after each tree method choosing its budget (``auto``), the same configuration at each of
    ``budgets`` (numbers, or ``paper``), unless already there: measured in the same rounds, for auto against the
    best fixed budget."""
    out, labels = [], {s.label for s in specs}
    for spec in specs:
        out.append(spec)
        if not spec.is_auto:
            continue
        for b in budgets:
            variant = spec.with_budget(b)
            if variant.label not in labels:
                labels.add(variant.label)
                out.append(variant)
    return out


def parse_budgets(text: str) -> list[str]:
    """``4,8,16,32,paper``: fixed budgets, checked."""
    out = []
    for piece in (p.strip().lower() for p in text.split(",") if p.strip()):
        if piece != "paper" and not (piece.isdigit() and 1 <= int(piece) <= 1024):
            raise SpecVizError(f"--fixed-budgets takes numbers from 1 to 1024 and 'paper', got {piece!r}")
        out.append(piece)
    if not out:
        raise SpecVizError("--fixed-budgets is empty: e.g. 4,8,16,32,paper")
    return list(dict.fromkeys(out))


def _items(text: str) -> list[str]:
    """``text`` split at its commas, except those inside a value (``goose:ngram_lengths=5,4,3,tr``: a piece that is
    neither a method nor a ``key=value`` continues the value before it)."""
    known = set(CARDS) | {"hf_greedy", "hf_universal"}
    items: list[str] = []
    for piece in (s.strip() for s in text.split(",")):
        head = piece.split(":", 1)[0]
        if items and "=" in items[-1] and piece and "=" not in head and head not in known:
            items[-1] += "," + piece
        elif piece:
            items.append(piece)
    return items


def parse_method_specs(text: str, extra_params: dict[str, str] | None = None) -> list[MethodSpec]:
    """``ar,pld,goose:budget=auto,isotropic:branching_factor=5:budget=auto``; a value may hold commas
    (``goose:spine_ratio_tiers=0,0.3,0.5``); ``extra_params`` (``--param``) go to every method that has them."""
    specs, seen = [], set()
    for item in _items(text):
        method, *kvs = item.split(":")
        params: dict[str, Any] = {}
        for kv in kvs:
            key, sep, value = kv.partition("=")
            if not sep or not key:
                raise SpecVizError(f"method parameters take key=value, got {kv!r} in {item!r}")
            params[key.strip()] = value.strip()
        if method == "hf_greedy":
            if params:
                raise SpecVizError(f"{method} takes no parameters")
        elif method == "hf_universal":
            raise SpecVizError("hf_universal is not benchmarked: its assistant has a tokenizer of its own, which the "
                               "draft-model methods of a bench cannot share (record it with specviz record)")
        else:
            fields = card(method).params_cls.__dataclass_fields__
            for key, value in (extra_params or {}).items():
                if key in fields and key not in params:
                    params[key] = value
            check_method(method, params)  # the one check every session's method passes, before the slow part
        label = method + "".join(_shown(k, v) for k, v in params.items())
        if label in seen:
            continue
        seen.add(label)
        specs.append(MethodSpec(label, method, params))
    if not specs:
        raise SpecVizError("no methods given")
    return specs
