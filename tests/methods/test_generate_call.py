"""A pasted generate call (JSON, Python keywords, the whole call) read without running anything."""

from __future__ import annotations

import pytest

from specviz_core.errors import SpecVizError
from specviz_core.session.generate_call import parse_call, resolve_call
from specviz_core.session.generate_kwargs import from_generate_kwargs

SAME = {"prompt_lookup_num_tokens": 4, "max_matching_ngram_size": 3, "max_new_tokens": 64, "do_sample": False}


@pytest.mark.parametrize("text", [
    '{"prompt_lookup_num_tokens": 4, "max_matching_ngram_size": 3, "max_new_tokens": 64, "do_sample": false}',
    "prompt_lookup_num_tokens=4, max_matching_ngram_size=3, max_new_tokens=64, do_sample=False",
    "prompt_lookup_num_tokens=4,\n    max_matching_ngram_size=3,\n    max_new_tokens=64,\n    do_sample=False,\n",
    "out = model.generate(**inputs, prompt_lookup_num_tokens=4, max_matching_ngram_size=3, max_new_tokens=64, "
    "do_sample=False)",
    "model.generate(input_ids, prompt_lookup_num_tokens=4, max_matching_ngram_size=3, max_new_tokens=64, "
    "do_sample=False);",
])
def test_every_form_reads_the_same_arguments(text):
    pasted = parse_call(text)
    assert pasted.kwargs == SAME and not pasted.names
    assert resolve_call(pasted) == from_generate_kwargs(SAME)


def test_variables_are_kept_by_name_and_resolved():
    pasted = parse_call("model.generate(**inputs, tokenizer=tok, assistant_model=small, assistant_tokenizer=small_tok,"
                        " max_new_tokens=32)")
    assert pasted.names == {"tokenizer": "tok", "assistant_model": "small", "assistant_tokenizer": "small_tok"}
    assert pasted.passed_on == ("**inputs",)
    call = resolve_call(pasted, draft_model="/models/small")
    assert (call.method, call.draft_model, call.max_new_tokens) == ("hf_universal", "/models/small", 32)
    assert any("assistant_model=small" in n for n in call.notes)


@pytest.mark.parametrize("text,draft,needle", [
    ("assistant_model=small", None, "choose the draft model"),
    ("max_new_tokens=n", None, "max_new_tokens=n is a Python expression"),
    ("generation_config=GenerationConfig(num_beams=2)", None, "generation_config cannot be reproduced"),
    ("num_beams=2", None, "beam search"),
    ("max_new_tokens=5, max_new_tokens=6", None, "given twice"),
    ("max_new_tokens=(", None, "neither JSON nor Python"),
    ("", None, "paste the keyword arguments"),
    ("{", None, "not JSON"),
])
def test_refusals_are_one_line(text, draft, needle):
    with pytest.raises(SpecVizError) as e:
        resolve_call(parse_call(text), draft)
    assert needle in str(e.value) and "\n" not in str(e.value)
