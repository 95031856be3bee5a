"""transformers' assisted generation, cycle by cycle: ``generate(assistant_model=...)``.

``hf_assisted`` is transformers' ``AssistedCandidateGenerator`` (an assistant sharing the target's tokenizer);
``hf_universal`` is ``AssistedCandidateGeneratorDifferentTokenizers`` (universal assisted decoding: an assistant
with a tokenizer of its own; the context is re-encoded into the assistant's tokens and every draft back into the
target's). Both are built and called as ``generate`` builds and calls them (see ``hf_generate``); each cycle
records the chain, why the assistant stopped drafting, the ``num_assistant_tokens`` and threshold it drafted under
and their values after ``update_candidate_strategy``, and for universal decoding the two tokenizations of the draft.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from specviz_core.drafters.hf.generate import (
    AssistantSpy,
    CandidateDrafter,
    assistant_settings,
    assistant_stop,
    check_no_processors,
    generation_config_for,
    model_kwargs_for,
)
from specviz_core.errors import SpecVizError
from specviz_core.methods.card import DRAFT_MODEL
from specviz_core.methods.hf import ASSISTED, UNIVERSAL


class HFAssistedDrafter(CandidateDrafter):
    card = ASSISTED
    generator_class: ClassVar[str] = "AssistedCandidateGenerator"

    def __init__(self, params: Any, target: Any, draft_model: Any = None) -> None:
        super().__init__(params, target, draft_model)
        if draft_model is None:
            raise SpecVizError(f"{self.method_id} needs {DRAFT_MODEL} (the assistant)")
        self.spy: AssistantSpy | None = None
        self._calls = 0
        self.cycle_call: Any = None

    def assistant_config(self) -> dict[str, Any]:
        """What the parameters set on the assistant's ``generation_config`` (where ``generate`` reads them)."""
        p = self.params
        return {"num_assistant_tokens": p.num_assistant_tokens,
                "num_assistant_tokens_schedule": p.num_assistant_tokens_schedule,
                "assistant_confidence_threshold": p.assistant_confidence_threshold}

    def generate_kwargs(self) -> dict[str, Any]:
        """The arguments of the ``generate`` call this session reproduces (besides the assistant)."""
        eos = list(self.target.eos_token_ids) or None
        return {"do_sample": False, "num_beams": 1, "eos_token_id": eos, "pad_token_id": eos[0] if eos else 0}

    def build(self, input_ids: torch.Tensor, cfg: Any, model_kwargs: dict[str, Any], procs: Any) -> Any:
        from transformers.generation.candidate_generator import AssistedCandidateGenerator

        return AssistedCandidateGenerator(input_ids=input_ids, assistant_model=self.draft_model.model,
                                          generation_config=cfg, model_kwargs=model_kwargs, inputs_tensor=input_ids,
                                          logits_processor=procs)

    def make_generator(self, input_ids: torch.Tensor, max_new_tokens: int) -> Any:
        model = self.target.model
        cfg = generation_config_for(model, input_ids.shape[1], max_new_tokens, **self.generate_kwargs())
        procs = check_no_processors(model, cfg, input_ids)
        with assistant_settings(self.draft_model.model, **self.assistant_config()):
            gen = self.build(input_ids, cfg, model_kwargs_for(model, input_ids), procs)
        self.spy = AssistantSpy(self.draft_model.model)
        self._calls = 0
        gen.assistant_model = self.spy  # observes the assistant's generate calls, changes nothing
        return gen

    def settings(self) -> dict[str, Any]:
        g = self.generator
        if g is None:
            return {}
        return {"num_assistant_tokens": int(g.num_assistant_tokens),
                "assistant_confidence_threshold": float(g.generation_config.assistant_confidence_threshold or 0.0)}

    def _call(self) -> Any:
        """The assistant's generate call of this cycle (None if the generator drafted without one)."""
        assert self.spy is not None
        call = self.spy.last if self.spy.count > self._calls else None
        self._calls = self.spy.count
        self.cycle_call = call
        return call

    def describe(self, ids: list[int], drafted: list[int]) -> tuple[list[float] | None, dict[str, Any]]:
        call = self._call()
        s = self.settings()
        code, text = assistant_stop(call, self.target.eos_token_ids, s["assistant_confidence_threshold"],
                                    s["num_assistant_tokens"])
        state: dict[str, Any] = {"generator": self.generator_class, "draft_stop": code, "draft_stop_text": text,
                                 "schedule": self.params.num_assistant_tokens_schedule}
        state.update(draft_cap=call.max_new_tokens if call is not None else 0,
                     draft_probs=list(call.probs) if call is not None else [])
        known = call is not None and len(call.probs) >= len(drafted)
        return (list(call.probs[: len(drafted)]) if known else None), state


class HFUniversalDrafter(HFAssistedDrafter):
    card = UNIVERSAL
    generator_class = "AssistedCandidateGeneratorDifferentTokenizers"

    def __init__(self, params: Any, target: Any, draft_model: Any = None) -> None:
        super().__init__(params, target, draft_model)
        tv = target.model.config.get_text_config().vocab_size
        if tv == draft_model.model.config.get_text_config().vocab_size:
            raise SpecVizError(
                f"the assistant's vocabulary has the target's size ({tv}): generate() then refuses "
                "assistant_tokenizer and treats the tokenizers as one; use hf_assisted")
        if target.tokenizer is None or draft_model.tokenizer is None:
            raise SpecVizError("hf_universal re-encodes text: both models need a tokenizer")

    def assistant_config(self) -> dict[str, Any]:
        return dict(super().assistant_config(), target_lookbehind=self.params.target_lookbehind,
                    assistant_lookbehind=self.params.assistant_lookbehind)

    def build(self, input_ids: torch.Tensor, cfg: Any, model_kwargs: dict[str, Any], procs: Any) -> Any:
        from transformers.generation.candidate_generator import AssistedCandidateGeneratorDifferentTokenizers

        return AssistedCandidateGeneratorDifferentTokenizers(
            input_ids=input_ids, assistant_model=self.draft_model.model, target_tokenizer=self.target.tokenizer,
            assistant_tokenizer=self.draft_model.tokenizer, generation_config=cfg, model_kwargs=model_kwargs,
            inputs_tensor=input_ids, logits_processor=procs)

    def describe(self, ids: list[int], drafted: list[int]) -> tuple[list[float] | None, dict[str, Any]]:
        probs, state = super().describe(ids, drafted)
        call = self.cycle_call
        if call is not None and call.drafted and not drafted:
            state.update(draft_stop="reencoding", draft_stop_text=(
                f"{state['draft_stop_text']}; re-encoded into the target's tokens, the draft added none"))
        if call is not None:
            state["alignment"] = align(self.draft_model.tokenizer, call.drafted, self.target.tokenizer, drafted)
        return None, state


def char_spans(tokenizer: Any, ids: list[int]) -> tuple[str, list[tuple[int, int]]]:
    """The text of ``ids`` as the re-encoding decodes it, and each token's character span in it (end exclusive)."""
    def text(k: int) -> str:
        return tokenizer.decode(ids[:k], skip_special_tokens=True, clean_up_tokenization_spaces=True)

    spans, prev = [], 0
    for k in range(1, len(ids) + 1):
        end = len(text(k))
        spans.append((min(prev, end), end))
        prev = max(prev, end)
    return text(len(ids)), spans


def align(assistant_tok: Any, assistant_ids: list[int], target_tok: Any, target_ids: list[int]) -> dict[str, Any]:
    """The draft in both tokenizations and which assistant tokens cover each target token (by character overlap of
    the two decoded texts; ``text_agrees`` says whether the texts are the same, else the pairing is approximate)."""
    a_text, a_spans = char_spans(assistant_tok, assistant_ids)
    t_text, t_spans = char_spans(target_tok, target_ids)
    pairs = [[i for i, (a0, a1) in enumerate(a_spans) if a0 < t1 and t0 < a1] for t0, t1 in t_spans]
    return {
        "assistant_tokens": list(assistant_ids),
        "assistant_pieces": [a_text[a0:a1] for a0, a1 in a_spans],
        "target_tokens": list(target_ids),
        "target_pieces": [t_text[t0:t1] for t0, t1 in t_spans],
        "target_to_assistant": pairs,
        "text_agrees": a_text == t_text,
    }
