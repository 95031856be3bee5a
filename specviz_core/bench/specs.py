"""What ``specviz bench`` runs: method specs such as ``goose:budget=auto`` or ``isotropic:branching_factor=5``, checked
before any model is loaded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specviz_core.bench import hf as bench_hf
from specviz_core.engine.budget import split_auto
from specviz_core.errors import SpecVizError
from specviz_core.methods import CARDS, card, parse_params

#: Methods run when ``--methods`` is not given (``hf_assisted`` and ``draft_tree`` join when there is a draft model).
DEFAULT_METHODS = ("ar", "pld", "hf_prompt_lookup", "tr", "tr:budget=auto", "goose", "goose:budget=auto")
#: Methods also run with recording on, for the recording overhead.
DEFAULT_RECORDED = ("goose:budget=auto",)


@dataclass(frozen=True)
class MethodSpec:
    """One benchmarked configuration: a method with parameters, e.g. ``goose:budget=auto:adjacency_top_k=8``."""

    label: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def is_hf(self) -> bool:
        return self.method in bench_hf.HF_METHODS


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
            cls = card(method)
            fields = cls.params_cls.__dataclass_fields__
            for key, value in (extra_params or {}).items():
                if key in fields and key not in params:
                    params[key] = value
            rest, _ = split_auto(method, cls.params_cls, params)
            parse_params(method, cls.params_cls, rest)  # check now, before the slow part
        label = method + "".join(f":{k}={v}" for k, v in params.items())
        if label in seen:
            continue
        seen.add(label)
        specs.append(MethodSpec(label, method, params))
    if not specs:
        raise SpecVizError("no methods given")
    return specs
