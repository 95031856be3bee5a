"""transformers' own candidate generators, stepped cycle by cycle: their cards and parameters."""

from __future__ import annotations

from dataclasses import dataclass

from specviz_core.methods.card import MethodCard
from specviz_core.methods.params import param

SCHEDULES = ("constant", "heuristic", "heuristic_transient")
"""transformers' num_assistant_tokens_schedule values."""
#: The assistant settings ``generate`` reads from ``assistant_model.generation_config`` (transformers 5.x reads
#: them there only: passed to ``generate`` itself they are ignored, huggingface/transformers#40739).
ASSISTANT_SETTINGS = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")


@dataclass(frozen=True)
class HFPromptLookupParams:
    prompt_lookup_num_tokens: int = param(
        10, "Tokens copied after the match (transformers has no default; 10 is its documentation's example and the "
        "bench row's).", minimum=1, maximum=256)
    max_matching_ngram_size: int = param(
        2, "Longest suffix n-gram looked up (transformers' default 2); shorter ones are tried after it.", minimum=1,
        maximum=16)


PROMPT_LOOKUP = MethodCard(
    method_id="hf_prompt_lookup",
    display_name="HF prompt lookup",
    description="transformers' prompt lookup, generate(prompt_lookup_num_tokens=...), stepped cycle by cycle: its "
                "own candidate generator copies what followed the first earlier occurrence of the last n-gram.",
    drafter="specviz_core.drafters.hf.prompt_lookup:HFPromptLookupDrafter",
    params_cls=HFPromptLookupParams,
    no_draft_reason="transformers' prompt lookup found no earlier occurrence of the last n-gram (or no room)",
    no_match_note="transformers' prompt lookup found no earlier occurrence of the context's last n-gram",
)


@dataclass(frozen=True)
class HFAssistedParams:
    num_assistant_tokens: int = param(
        20, "Tokens the assistant drafts per cycle at most (transformers' default); the heuristic schedules move it.",
        minimum=1, maximum=256)
    num_assistant_tokens_schedule: str = param(
        "constant", "constant keeps num_assistant_tokens; heuristic and heuristic_transient add 2 after a cycle "
        "whose whole draft was accepted and take 1 off otherwise (they differ only across generate calls).",
        choices=SCHEDULES)
    assistant_confidence_threshold: float = param(
        0.4, "Stop drafting after a token the assistant gives less than this probability (0: never). With "
        "scikit-learn installed transformers moves it every cycle (an ROC cut on the drafts so far).",
        minimum=0.0, maximum=1.0)


@dataclass(frozen=True)
class HFUniversalParams(HFAssistedParams):
    target_lookbehind: int = param(
        10, "Target tokens re-encoded each cycle to find where the assistant's tokens pick up.", minimum=1,
        maximum=1024)
    assistant_lookbehind: int = param(
        10, "Assistant tokens decoded back with each draft to find where the target's tokens pick up.", minimum=1,
        maximum=1024)


ASSISTED = MethodCard(
    method_id="hf_assisted",
    display_name="HF assisted",
    description="transformers' assisted generation, generate(assistant_model=...), stepped cycle by cycle: its own "
                "candidate generator drafts a chain with the --draft-model (same tokenizer).",
    drafter="specviz_core.drafters.hf.assisted:HFAssistedDrafter",
    params_cls=HFAssistedParams,
    no_draft_reason="the assistant had no room to draft before max_length",
    needs_draft_model=True,
    greedy_only="SpecViz steps transformers' assisted generation greedily (do_sample=False); its sampling "
                "variant is not reproduced",
)


UNIVERSAL = MethodCard(
    method_id="hf_universal",
    display_name="HF universal",
    description="transformers' universal assisted decoding, generate(assistant_model=..., tokenizer=..., "
                "assistant_tokenizer=...): an assistant with its own tokenizer; each draft is re-encoded into "
                "the target's tokens.",
    drafter="specviz_core.drafters.hf.assisted:HFUniversalDrafter",
    params_cls=HFUniversalParams,
    no_draft_reason="the assistant's draft, re-encoded, added no target token",
    needs_draft_model=True,
    draft_shares_tokenizer=False,
    greedy_only="SpecViz steps universal assisted decoding greedily; with do_sample=True transformers switches "
                "to another generator (UniversalSpeculativeDecodingGenerator), not reproduced",
)
