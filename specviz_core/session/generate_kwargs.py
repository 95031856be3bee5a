"""Paste your ``generate`` call: its keyword arguments as a SpecViz method with parameters, and back.

:func:`from_generate_kwargs` reads the arguments a user passes to ``model.generate(...)`` (as JSON: the
assistant model as a folder or hub id) and returns the method that steps the same decoding
(``hf_assisted``, ``hf_universal``, ``hf_prompt_lookup``, or ``ar`` for plain decoding) with its parameters, or
refuses, in one line naming the argument, what SpecViz cannot reproduce. :func:`to_generate_kwargs` goes the
other way, for the bench's reference rows and the tests: the ``generate`` arguments, and the assistant
``generation_config`` settings, that run a method's parameters through transformers' own loop.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from specviz_core.errors import SpecVizError
from specviz_core.methods import card, parse_params
from specviz_core.methods.hf import ASSISTANT_SETTINGS

#: transformers 5.x reads the assistant settings from ``assistant_model.generation_config`` only; given to
#: ``generate`` itself they are ignored (huggingface/transformers#40739). ``tests/methods/test_hf_generate_kwargs.py``
#: checks this against the installed transformers.
GENERATE_IGNORES_ASSISTANT_SETTINGS = True

#: Arguments that do not change which tokens greedy decoding produces.
IGNORED = frozenset({"attention_mask", "streamer", "return_dict_in_generate", "output_scores", "output_logits",
                     "output_attentions", "output_hidden_states", "pad_token_id", "tokenizer", "synced_gpus",
                     "input_ids", "inputs"})
#: Arguments accepted at their neutral value only (anything else changes the logits or the search).
NEUTRAL: dict[str, tuple[Any, ...]] = {
    "num_beams": (1, None), "num_return_sequences": (1, None), "repetition_penalty": (1.0, None), "encoder_repetition_penalty": (1.0, None), "no_repeat_ngram_size": (0, None),
    "length_penalty": (1.0, None), "min_new_tokens": (0, None), "min_length": (0, None), "bad_words_ids": (None,),
    "suppress_tokens": (None,), "begin_suppress_tokens": (None,), "sequence_bias": (None,),
    "forced_bos_token_id": (None,), "forced_eos_token_id": (None,), "stop_strings": (None,), "max_time": (None,),
    "guidance_scale": (None, 1.0), "watermarking_config": (None,), "use_cache": (True, None),
    "assistant_early_exit": (None,), "assistant_ensemble_weight": (None,), "use_mtp": (None, False),
    "speculation_type": (None,), "cache_implementation": (None, "dynamic"), "token_healing": (None, False),
    "low_memory": (None, False), "diversity_penalty": (0.0, None), "num_beam_groups": (1, None),
}
WHY_NOT: dict[str, str] = {
    "num_beams": "beam search", "num_return_sequences": "several sequences per prompt",
    "min_new_tokens": "a minimum length (it suppresses EOS)", "min_length": "a minimum length (it suppresses EOS)",
    "assistant_early_exit": "early-exit self-speculation", "use_mtp": "multi-token prediction heads",
    "speculation_type": "that speculation type", "use_cache": "decoding without a cache",
}
#: Sampling filters: ignored by greedy decoding; with ``do_sample=True`` only their neutral value can be reproduced
#: (``top_k`` must be given as 0: ``generate``'s default is 50).
SAMPLING_ONLY: dict[str, tuple[Any, ...]] = {
    "top_k": (0, None), "top_p": (1.0, None), "min_p": (0.0, None), "typical_p": (1.0, None),
    "epsilon_cutoff": (0.0, None), "eta_cutoff": (0.0, None)}
PROMPT_LOOKUP = ("prompt_lookup_num_tokens", "max_matching_ngram_size")
UNIVERSAL = ("target_lookbehind", "assistant_lookbehind")


@dataclass(frozen=True)
class GenerateCall:
    """A ``generate`` call as SpecViz runs it."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)
    """The method's parameters that differ from its defaults (checked)."""
    draft_model: str | None = None
    """``assistant_model``: a model folder or a hub id in the local cache."""
    max_new_tokens: int | None = None
    """None: not given (``generate`` would stop at its default ``max_length=20``, prompt included)."""
    temperature: float = 0.0
    """0 for greedy (``do_sample=False``)."""
    notes: tuple[str, ...] = ()
    """What the call does that a user may not expect, or what SpecViz does differently, one sentence each."""


def parse_generate_kwargs(text: str) -> dict[str, Any]:
    """The JSON object of a ``--generate-kwargs`` argument or the window's text box."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecVizError(f"the generate arguments are not JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(value, dict):
        raise SpecVizError("the generate arguments must be a JSON object, e.g. {\"prompt_lookup_num_tokens\": 10}")
    return value


def _number(key: str, value: Any, kind: type) -> Any:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind is int:
        ok = ok and float(value).is_integer()
    if not ok:
        raise SpecVizError(f"generate argument {key} must be {'a whole number' if kind is int else 'a number'}, "
                           f"got {value!r}")
    return kind(value)


def from_generate_kwargs(kwargs: dict[str, Any]) -> GenerateCall:
    """The method and parameters that step the decoding ``model.generate(**kwargs)`` does; refuses in one line."""
    kw = dict(kwargs)
    notes: list[str] = []
    for key in ("generation_config", "logits_processor", "stopping_criteria", "prefix_allowed_tokens_fn",
                "custom_generate", "negative_prompt_ids"):
        if kw.get(key) is not None:
            raise SpecVizError(f"generate argument {key} cannot be reproduced (give plain arguments instead)")
    for key, neutral in NEUTRAL.items():
        if key in kw and kw[key] not in neutral:
            what = WHY_NOT.get(key, "a change to the target's logits")
            raise SpecVizError(f"generate argument {key}={kw[key]!r} cannot be reproduced: SpecViz has no {what}")
    if not isinstance(kw.get("do_sample", False), bool):
        raise SpecVizError(f"generate argument do_sample must be true or false, got {kw['do_sample']!r}")
    sampling = bool(kw.get("do_sample"))
    for key, neutral in SAMPLING_ONLY.items():
        if sampling and key in kw and kw[key] not in neutral:
            raise SpecVizError(f"generate argument {key}={kw[key]!r} cannot be reproduced: SpecViz samples from the "
                               "target's whole (tempered) distribution")
    known = IGNORED | set(NEUTRAL) | set(SAMPLING_ONLY) | set(PROMPT_LOOKUP) | set(UNIVERSAL) | set(
        ASSISTANT_SETTINGS) | {"assistant_model", "assistant_tokenizer", "do_sample", "temperature", "max_new_tokens",
                               "max_length", "eos_token_id"}
    unknown = sorted(set(kw) - known)
    if unknown:
        raise SpecVizError(f"unknown generate argument {unknown[0]!r}")

    assistant = kw.get("assistant_model")
    if assistant is not None and (not isinstance(assistant, str) or not assistant.strip()):
        raise SpecVizError("generate argument assistant_model must be a model folder or hub id (a string)")
    lookup = kw.get("prompt_lookup_num_tokens")
    if assistant is not None and lookup is not None:
        raise SpecVizError("generate arguments assistant_model and prompt_lookup_num_tokens together: generate uses "
                           "prompt lookup and ignores the assistant; give one")
    universal = kw.get("assistant_tokenizer") not in (None, False)
    if universal and assistant is None:
        raise SpecVizError("generate argument assistant_tokenizer needs assistant_model")
    method = "hf_prompt_lookup" if lookup is not None else (
        "hf_universal" if universal else "hf_assisted" if assistant is not None else "ar")
    stray = [k for k in (*ASSISTANT_SETTINGS, *UNIVERSAL) if k in kw and assistant is None] + [
        k for k in UNIVERSAL if k in kw and method != "hf_universal"] + [
        k for k in PROMPT_LOOKUP if k in kw and method != "hf_prompt_lookup"]
    if stray:
        raise SpecVizError(f"generate argument {stray[0]} does nothing without "
                           f"{'prompt_lookup_num_tokens' if stray[0] in PROMPT_LOOKUP else 'assistant_model'}")

    params: dict[str, Any] = {}
    if method == "hf_prompt_lookup":
        params["prompt_lookup_num_tokens"] = _number("prompt_lookup_num_tokens", lookup, int)
        if "max_matching_ngram_size" in kw and kw["max_matching_ngram_size"] is not None:
            params["max_matching_ngram_size"] = _number("max_matching_ngram_size", kw["max_matching_ngram_size"], int)
    if method in ("hf_assisted", "hf_universal"):
        for key in (*ASSISTANT_SETTINGS, *(UNIVERSAL if method == "hf_universal" else ())):
            if key not in kw:
                continue
            value = kw[key] if key == "num_assistant_tokens_schedule" else _number(
                key, kw[key], float if key == "assistant_confidence_threshold" else int)
            parse_params(method, card(method).params_cls, {key: value})  # a valid value, even if ignored
            if GENERATE_IGNORES_ASSISTANT_SETTINGS:
                default = getattr(card(method).params_cls(), key)
                notes.append(f"{key}={value!r} is ignored by transformers' generate(), which reads it from "
                             f"assistant_model.generation_config (huggingface/transformers#40739): your call drafts "
                             f"with {default!r}; set assistant_model.generation_config.{key} = {value!r} for {value!r} "
                             f"(here: --param {key}={value})")
            else:
                params[key] = value
        if universal and kw["assistant_tokenizer"] is not True and kw["assistant_tokenizer"] != assistant:
            notes.append("SpecViz re-encodes with the tokenizer saved with assistant_model")

    temperature = 0.0
    if sampling:
        if card(method).greedy_only:
            raise SpecVizError(f"generate argument do_sample=True cannot be reproduced: {card(method).greedy_only}")
        if "top_k" not in kw:
            raise SpecVizError("generate argument do_sample=True samples from the top 50 tokens (generate's default "
                               "top_k=50): SpecViz samples from the whole distribution; add \"top_k\": 0 to compare")
        temperature = _number("temperature", kw.get("temperature", 1.0), float)
        if temperature <= 0:
            raise SpecVizError("generate argument temperature must be above 0 with do_sample=True")
    else:
        ignored = [k for k in (*SAMPLING_ONLY, "temperature") if kw.get(k) is not None]
        if ignored:
            notes.append(f"{', '.join(ignored)} {'is' if len(ignored) == 1 else 'are'} ignored without "
                         "do_sample=True: generate decodes greedily")

    max_new = kw.get("max_new_tokens")
    if max_new is not None:
        max_new = _number("max_new_tokens", max_new, int)
        if max_new < 1:
            raise SpecVizError(f"generate argument max_new_tokens must be at least 1, got {max_new}")
    elif kw.get("max_length") is not None:
        raise SpecVizError("generate argument max_length counts the prompt: give max_new_tokens instead")
    else:
        notes.append("no max_new_tokens: generate would stop at max_length=20 tokens, prompt included")
    if kw.get("eos_token_id") is not None:
        notes.append("eos_token_id is not reproduced: SpecViz stops at the target's own EOS tokens")
    parse_params(method, card(method).params_cls, params)  # bounds and choices, in one line
    return GenerateCall(method, params, assistant, max_new, temperature, tuple(notes))


def to_generate_kwargs(method: str, params: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``generate`` arguments (besides the assistant, tokenizers, the token limit and the special tokens) and
    the assistant ``generation_config`` settings that make transformers decode as ``method`` with ``params``."""
    if method == "hf_prompt_lookup":
        return {"prompt_lookup_num_tokens": params.prompt_lookup_num_tokens,
                "max_matching_ngram_size": params.max_matching_ngram_size}, {}
    if method in ("hf_assisted", "hf_universal"):
        keys = ASSISTANT_SETTINGS + (UNIVERSAL if method == "hf_universal" else ())
        return {}, {k: getattr(params, k) for k in keys}
    if method == "ar":
        return {}, {}
    raise SpecVizError(f"method {method} is not one of transformers' generate modes")
