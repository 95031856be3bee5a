"""The feature tap: what a draft head reads of the target's forward, kept beside its logits.

A draft head (EAGLE's) drafts from the target's hidden features at the committed positions: the LM head's input
(EAGLE-1/2) or the inputs of three decoder layers, concatenated (EAGLE-3). Installed once on the target by the
head's drafter, the tap keeps them after every forward (references, and one concatenation for layers) while the
drafter that installed it lives (its owner; a weak reference); the engine reads them with :func:`kept_features` into
the rows it hands the drafter, so it knows no drafter's tap. Once no owner lives, a forward keeps nothing: a plain
session after a head session does not pay for the concatenation, nor carry features no one reads.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import nn

from specviz_core.errors import SpecVizError


def lm_head_of(model: Any) -> nn.Module:
    head = model.get_output_embeddings()
    if head is None:
        raise SpecVizError("this model has no output embedding (LM head) for a draft head to reuse")
    return head


def decoder_layers(model: Any) -> nn.ModuleList:
    """The target's decoder layers, in order (``model.model.layers`` on most architectures)."""
    n = int(model.config.num_hidden_layers)
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if isinstance(layers, nn.ModuleList) and len(layers) == n:
        return layers
    for m in model.modules():
        if isinstance(m, nn.ModuleList) and len(m) == n:
            return m
    raise SpecVizError("this model's decoder layers cannot be found: an eagle3 head cannot read their features")


class TapOwner:
    """Holds a feature tap open while it lives (what a drafter is to its tap, for code that reads features without
    one)."""


def install_feature_tap(model: Any, layers: tuple[int, ...] | None, owner: object) -> None:
    """Keep the features a draft head reads after every forward, for the rows the LM head ran: the LM head's
    input, or (``layers``, an eagle3 head) the inputs of those decoder layers, concatenated. Costs references,
    and for ``layers`` one concatenation a forward; :func:`tapped_features` reads it. Installing again switches
    what is kept. ``owner``: what the features are kept for (held weakly); while none of the owners lives, the tap
    keeps nothing."""
    lm = lm_head_of(model)
    lm.__dict__.setdefault("_specviz_owners", weakref.WeakSet()).add(owner)
    lm._specviz_layers = tuple(layers) if layers else None
    if layers:
        store = lm.__dict__.setdefault("_specviz_layer_inputs", {})
        stack = decoder_layers(model)
        for i in set(layers) - set(getattr(lm, "_specviz_layer_taps", ())):
            def keep_input(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], i: int = i) -> None:
                store[i] = (args[0] if args else kwargs["hidden_states"]) if lm._specviz_owners else None

            stack[i].register_forward_pre_hook(keep_input, with_kwargs=True)
            lm._specviz_layer_taps = (*getattr(lm, "_specviz_layer_taps", ()), i)
    if getattr(lm, "_specviz_tap", False):
        return

    def keep(module: nn.Module, args: tuple[Any, ...]) -> None:
        if not module._specviz_owners:  # no drafter reads them any more
            module._specviz_features = None
            return
        x = args[0]
        if module._specviz_layers:  # the rows the LM head runs are the last ones of the layers' (logits_to_keep)
            got = module._specviz_layer_inputs
            x = torch.cat([got[i][..., -x.shape[-2]:, :].to(x.dtype) for i in module._specviz_layers], dim=-1)
        module._specviz_features = x

    lm.register_forward_pre_hook(keep)
    lm._specviz_tap = True


def kept_features(model: Any, rows: int) -> torch.Tensor | None:
    """The features the last forward kept for its first ``rows`` rows [rows, F] (a padded block's real ones), or
    None where no tap is installed."""
    lm = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    f = getattr(lm, "_specviz_features", None) if lm is not None else None
    return None if f is None else f[0, :rows].detach()


def tapped_features(model: Any, rows: int) -> torch.Tensor:
    """The last forward's features [rows, H] (the forward must have kept the LM head's input for every row)."""
    f = getattr(lm_head_of(model), "_specviz_features", None)
    if f is None or f.shape[-2] != rows:
        raise SpecVizError("the target's last forward did not give a feature per row: the draft head cannot follow it")
    return f[0].detach()
