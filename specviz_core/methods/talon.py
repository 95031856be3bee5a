"""TALON (seed 001): its card and parameters."""

from __future__ import annotations

from dataclasses import dataclass

from specviz_core.methods.card import MethodCard
from specviz_core.methods.params import param

DRAFTER_HELP = ("Where next-token distributions come from: head (a draft head: the one given as head=, else the one "
                "trained for the target with specviz train-head, as the paper drafts), table (logit n-gram tables of the target's own outputs; "
                "no training), model (a draft model, given with --draft-model), or auto (head when one is given "
                "or the model has one, else table).")
HEAD_HELP = ("A draft head folder (or cached hub id) in EAGLE's published layout, EAGLE-1/2 or EAGLE-3 (config.json "
             "with pytorch_model.bin or model.safetensors), as --draft-head gives it; empty: the head trained for the "
             "model with specviz train-head.")


@dataclass(frozen=True)
class TalonParams:
    budget: int = param(60, "Token budget N: draft nodes verified per cycle, at most (root excluded).", minimum=1, maximum=1024)
    top_k: int = param(10, "K: children of the root (robust top-K initialization).", minimum=1, maximum=64)
    mu: float = param(0.03, "Confidence gate: a deeper candidate stays if its path probability is >= mu x the layer's best.", minimum=0.0, maximum=1.0)
    drafter: str = param("auto", DRAFTER_HELP, choices=("auto", "head", "table", "model"))
    head: str = param("", HEAD_HELP)
    gated_shown: int = param(10, "Cut candidates recorded per layer as gated nodes (the best by path score).", minimum=0, maximum=1000)


CARD = MethodCard(
    method_id="talon",
    display_name="TALON",
    description="TALON: a budget-driven adaptive tree (top-K at the root, then confidence gating on path "
                "probability) from a draft model or the logit n-gram tables.",
    drafter="specviz_core.drafters.talon.drafter:TalonDrafter",
    params_cls=TalonParams,
)
