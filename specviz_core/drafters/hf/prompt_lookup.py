"""transformers' prompt lookup, cycle by cycle: ``generate(prompt_lookup_num_tokens=...)``.

The chain is transformers' ``PromptLookupCandidateGenerator``'s, built and called as ``generate`` builds and
calls it (see ``hf_generate``). It copies from the first earlier occurrence of the longest matching suffix n-gram,
as SpecViz's own ``pld`` does by default, and differs from it in its n-grams, of at most ``max_matching_ngram_size``
(2 by default, ``pld`` 3), and a copy cut before the first EOS. Each cycle records the chain, why it stopped (no
n-gram match, ``prompt_lookup_num_tokens`` copied, the context ran out, an EOS, no room before ``max_length``) and
where it was copied from (the match span, for the spine panel).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from specviz_core.drafters.hf.generate import CandidateDrafter, check_no_processors, generation_config_for
from specviz_core.drafters.pld import find_match
from specviz_core.methods.hf import PROMPT_LOOKUP, HFPromptLookupParams


class HFPromptLookupDrafter(CandidateDrafter):
    card = PROMPT_LOOKUP
    node_source = "ngram"

    def generate_kwargs(self) -> dict[str, Any]:
        """The arguments of the ``generate`` call this session reproduces."""
        eos = list(self.target.eos_token_ids) or None
        p: HFPromptLookupParams = self.params
        return {"do_sample": False, "num_beams": 1, "eos_token_id": eos, "pad_token_id": eos[0] if eos else 0,
                "prompt_lookup_num_tokens": p.prompt_lookup_num_tokens,
                "max_matching_ngram_size": p.max_matching_ngram_size}

    def make_generator(self, input_ids: torch.Tensor, max_new_tokens: int) -> Any:
        from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

        model = self.target.model
        cfg = generation_config_for(model, input_ids.shape[1], max_new_tokens, **self.generate_kwargs())
        procs = check_no_processors(model, cfg, input_ids)
        # As GenerationMixin._get_candidate_generator builds it.
        return PromptLookupCandidateGenerator(
            eos_token_id=cfg._eos_token_tensor, num_output_tokens=cfg.prompt_lookup_num_tokens,
            max_matching_ngram_size=cfg.max_matching_ngram_size or 2, max_length=cfg.max_length,
            logits_processor=procs, vocab_size=model.config.get_text_config().vocab_size)

    def describe(self, ids: list[int], drafted: list[int]) -> tuple[list[float] | None, dict[str, Any]]:
        p: HFPromptLookupParams = self.params
        return None, lookup_state(ids, drafted, self.generator.max_length, p.prompt_lookup_num_tokens,
                                  p.max_matching_ngram_size)


def lookup_state(ids: list[int], drafted: list[int], max_length: int, k: int, ngram: int) -> dict[str, Any]:
    """A prompt lookup cycle's state: why the chain stopped (``draft_stop``, ``draft_stop_text``) and where it was
    copied from (``match``). ``ids``: the context the generator was given; ``drafted``: what it returned."""
    # The generator keeps no record of where it copied from: find the same occurrence it finds (the first,
    # for the longest n-gram that has a following token), and check it gives the same tokens.
    m = find_match(np.asarray(ids, dtype=np.int64), ngram, 1, k, last=False)
    match = None
    if m is not None and ids[m.copy_start:m.copy_start + len(drafted)] == drafted:
        match = {"ngram": m.ngram, "match_span": [m.match_start, m.match_end],
                 "copy_span": [m.copy_start, m.copy_start + len(drafted)]}
    if max_length == len(ids) + 1:
        code, text = "max_length", "no room: one token is left before max_length, and the target makes it"
    elif m is None:
        code, text = "no_match", "no n-gram match: the context's last n-gram occurs nowhere earlier"
    elif len(drafted) >= k:
        code, text = "num_tokens", f"the length cap: prompt_lookup_num_tokens={k} copied"
    elif m.copy_end - m.copy_start > len(drafted):
        code, text = "eos", "the copy stops before an EOS token"
    else:
        code, text = "context_end", f"the context ran out: only {len(drafted)} tokens followed the match"
    return {"generator": "PromptLookupCandidateGenerator", "draft_stop": code, "draft_stop_text": text,
            "match": match}
