"""transformers' own assisted generation as the reference for hf_assisted, hf_universal and hf_prompt_lookup.

``hf_reference`` calls ``model.generate`` with the arguments a user would pass and watches its candidate generator
(which tokens ``get_candidates`` drafted, what ``update_candidate_strategy`` was told), written out here without
SpecViz's code, so the tests compare SpecViz's records with what transformers itself did. ``universal_pair`` builds
two tiny models with different tokenizers over overlapping vocabularies.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from unittest import mock

import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from transformers import PreTrainedTokenizerFast
from transformers.generation import candidate_generator as cg

from helpers import tiny_llama
from specviz_core.runtime.models import LoadedModel

GENERATORS = {"hf_assisted": cg.AssistedCandidateGenerator,
              "hf_universal": cg.AssistedCandidateGeneratorDifferentTokenizers,
              "hf_prompt_lookup": cg.PromptLookupCandidateGenerator}


@dataclass
class Reference:
    tokens: list[int]
    told: list[int] = field(default_factory=list)
    """``num_matches`` given to ``update_candidate_strategy``, per iteration."""
    drafted: list[int] = field(default_factory=list)
    """Candidate tokens ``get_candidates`` returned, per iteration."""
    num_assistant_tokens: list[int] = field(default_factory=list)
    """The generator's ``num_assistant_tokens`` when it drafted, per iteration (assistant generators)."""
    thresholds: list[float] = field(default_factory=list)


@torch.no_grad()
def hf_reference(target: LoadedModel, prompt: list[int], n: int, method: str, draft: LoadedModel | None = None,
                 **params) -> Reference:
    """``target.model.generate(prompt, ...)`` as a user calls it for ``method`` with ``params``."""
    cls = GENERATORS[method]
    x = torch.tensor([prompt])
    eos = list(target.eos_token_ids) or None
    kwargs = dict(attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n, eos_token_id=eos,
                  pad_token_id=eos[0] if eos else 0, num_beams=1)
    if method == "hf_prompt_lookup":
        kwargs.update(prompt_lookup_num_tokens=params.get("prompt_lookup_num_tokens", 10),
                      max_matching_ngram_size=params.get("max_matching_ngram_size", 2))
    else:
        kwargs["assistant_model"] = draft.model
        if method == "hf_universal":
            kwargs.update(tokenizer=target.tokenizer, assistant_tokenizer=draft.tokenizer)
    ref = Reference([])
    get, update = cls.get_candidates, cls.update_candidate_strategy

    def spy_get(self, input_ids, **kw):
        if hasattr(self, "num_assistant_tokens"):
            ref.num_assistant_tokens.append(int(self.num_assistant_tokens))
            ref.thresholds.append(float(self.generation_config.assistant_confidence_threshold or 0.0))
        out, logits = get(self, input_ids, **kw)
        ref.drafted.append(out.shape[1] - input_ids.shape[1])
        return out, logits

    def spy_update(self, input_ids, scores, num_matches):
        ref.told.append(int(num_matches))
        return update(self, input_ids, scores, num_matches)

    # transformers 5.x reads the assistant's settings from its generation_config (generate's own arguments for them
    # are ignored), so that is where a user sets them.
    saved = draft.model.generation_config if draft is not None else None
    if draft is not None:
        draft.model.generation_config = copy.deepcopy(saved)
        for key in ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold",
                    "target_lookbehind", "assistant_lookbehind"):
            if key in params:
                setattr(draft.model.generation_config, key, params[key])
    try:
        with mock.patch.object(cls, "get_candidates", spy_get), \
                mock.patch.object(cls, "update_candidate_strategy", spy_update):
            out = target.model.generate(x, **kwargs)
    finally:
        if draft is not None:
            draft.model.generation_config = saved
    ref.tokens = out[0, len(prompt):].tolist()
    return ref


def near_copy(m: LoadedModel, noise: float, seed: int = 0) -> LoadedModel:
    """An assistant that mostly agrees with ``m``: its weights plus Gaussian noise."""
    g = torch.Generator().manual_seed(seed)
    model = copy.deepcopy(m.model)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(noise * torch.randn(p.shape, generator=g))
    return LoadedModel(model=model, tokenizer=m.tokenizer, name=f"{m.name}+noise", path=m.path, device=m.device,
                       dtype=m.dtype)


def word_tokenizer(words: list[str]) -> PreTrainedTokenizerFast:
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>")


def universal_pair(noise: float = 0.02) -> tuple[LoadedModel, LoadedModel]:
    """A target (96 words ``w0..w93``) and an assistant with another tokenizer: words ``w0..w79`` at shuffled ids
    plus 30 words of its own (``x0..``), 112 tokens. The assistant carries the target's weights (its embedding
    and head rows moved to its own ids, its own words nearly never predicted, a little noise), so it drafts what
    the target would say, in its own tokens, until the target says a word it lacks."""
    target_words = ["<unk>", "<eos>"] + [f"w{i}" for i in range(94)]
    shared = [f"w{i}" for i in range(80)]
    assistant_words = ["<unk>", "<eos>"] + random.Random(1).sample(shared, len(shared)) + [f"x{i}" for i in range(30)]
    t = tiny_llama(len(target_words), seed=0)
    target = LoadedModel(t.model, word_tokenizer(target_words), "target", "target", t.device, t.dtype)
    a = tiny_llama(len(assistant_words), seed=5).model
    index = {w: i for i, w in enumerate(target_words)}
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for j, w in enumerate(assistant_words):
            if w in index:
                a.model.embed_tokens.weight[j] = t.model.model.embed_tokens.weight[index[w]]
                a.lm_head.weight[j] = t.model.lm_head.weight[index[w]]
            else:
                a.lm_head.weight[j] *= 0.05
        for (name, p_t), (_, p_a) in zip(t.model.named_parameters(), a.named_parameters()):
            if "embed" not in name and "lm_head" not in name:
                p_a.copy_(p_t + noise * torch.randn(p_t.shape, generator=g))
    assistant = LoadedModel(a, word_tokenizer(assistant_words), "assistant", "assistant", t.device, t.dtype)
    return target, assistant
