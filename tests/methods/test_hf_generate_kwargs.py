"""Paste your generate call: generate's keyword arguments as a SpecViz method with parameters, and the refusals."""

from __future__ import annotations

import json

import pytest
import torch

from helpers import tiny_llama
from hf_reference import GENERATORS, hf_reference
from specviz_core.cli.commands import build_parser, main, record_request
from specviz_core.drafters import METHODS
from specviz_core.errors import SpecVizError
from specviz_core.session.generate_kwargs import (
    GENERATE_IGNORES_ASSISTANT_SETTINGS,
    from_generate_kwargs,
    parse_generate_kwargs,
    to_generate_kwargs,
)


@pytest.mark.parametrize("kwargs,method,params", [
    ({"prompt_lookup_num_tokens": 10}, "hf_prompt_lookup", {"prompt_lookup_num_tokens": 10}),
    ({"prompt_lookup_num_tokens": 4, "max_matching_ngram_size": 3, "max_new_tokens": 64},
     "hf_prompt_lookup", {"prompt_lookup_num_tokens": 4, "max_matching_ngram_size": 3}),
    ({"assistant_model": "org/small"}, "hf_assisted", {}),
    ({"assistant_model": "/m/small", "assistant_tokenizer": "/m/small", "tokenizer": "/m/big"}, "hf_universal", {}),
    ({"max_new_tokens": 20, "do_sample": False}, "ar", {}),
])
def test_generate_kwargs_pick_the_method(kwargs, method, params):
    call = from_generate_kwargs(kwargs)
    assert (call.method, call.params) == (method, params)
    assert call.temperature == 0.0
    assert call.draft_model == kwargs.get("assistant_model")
    assert call.max_new_tokens == kwargs.get("max_new_tokens")


def test_assistant_settings_given_to_generate_are_what_generate_does():
    """transformers 5.x ignores num_assistant_tokens & co. passed to generate: the mapping says so and keeps the
    assistant's defaults, which is what the user's call runs."""
    call = from_generate_kwargs({"assistant_model": "a", "num_assistant_tokens": 5,
                                 "num_assistant_tokens_schedule": "heuristic", "assistant_confidence_threshold": 0.1})
    assert call.params == {}
    assert len(call.notes) == 4  # three settings, and no max_new_tokens
    assert any("num_assistant_tokens=5 is ignored" in n and "#40739" in n and "drafts with 20" in n
               for n in call.notes)


@torch.no_grad()
def test_generate_really_ignores_assistant_settings_in_its_arguments():
    """The premise of GENERATE_IGNORES_ASSISTANT_SETTINGS, against the installed transformers: given to generate,
    num_assistant_tokens=3 changes nothing; set on the assistant's generation_config it caps the draft at 3."""
    m = tiny_llama()
    drafted = []
    cls = GENERATORS["hf_assisted"]
    original = cls.get_candidates

    def spy(self, input_ids, **kw):
        drafted.append(int(self.num_assistant_tokens))
        return original(self, input_ids, **kw)

    x = torch.tensor([[5, 6, 7, 8]])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cls, "get_candidates", spy)
        m.model.generate(x, attention_mask=torch.ones_like(x), assistant_model=m.model, do_sample=False,
                         max_new_tokens=8, pad_token_id=0, num_assistant_tokens=3)
    assert set(drafted) == {20} if GENERATE_IGNORES_ASSISTANT_SETTINGS else {3}
    ref = hf_reference(m, [5, 6, 7, 8], 8, "hf_assisted", m, num_assistant_tokens=3)
    assert set(ref.num_assistant_tokens) == {3}


def test_sampling_maps_to_a_temperature():
    call = from_generate_kwargs({"prompt_lookup_num_tokens": 10, "do_sample": True, "temperature": 0.7, "top_k": 0})
    assert (call.method, call.temperature) == ("hf_prompt_lookup", 0.7)
    greedy = from_generate_kwargs({"prompt_lookup_num_tokens": 10, "temperature": 0.7, "top_p": 0.9,
                                   "max_new_tokens": 8})
    assert greedy.temperature == 0.0 and greedy.notes == ("top_p, temperature are ignored without do_sample=True: "
                                                          "generate decodes greedily",)


@pytest.mark.parametrize("kwargs,needle", [
    ({"num_beams": 4}, "num_beams=4 cannot be reproduced: SpecViz has no beam search"),
    ({"repetition_penalty": 1.2}, "repetition_penalty=1.2 cannot be reproduced"),
    ({"min_new_tokens": 5}, "min_new_tokens=5 cannot be reproduced"),
    ({"assistant_model": "a", "do_sample": True, "top_k": 0}, "do_sample=True cannot be reproduced"),
    ({"prompt_lookup_num_tokens": 10, "do_sample": True}, "default top_k=50"),
    ({"prompt_lookup_num_tokens": 10, "do_sample": True, "top_k": 0, "top_p": 0.9}, "top_p=0.9 cannot be reproduced"),
    ({"prompt_lookup_num_tokens": 10, "do_sample": "yes"}, "do_sample must be true or false"),
    ({"prompt_lookup_num_tokens": 0}, "parameter prompt_lookup_num_tokens must be at least 1"),
    ({"prompt_lookup_num_tokens": "ten"}, "prompt_lookup_num_tokens must be a whole number"),
    ({"prompt_lookup_num_tokens": 2.5}, "prompt_lookup_num_tokens must be a whole number"),
    ({"assistant_model": "a", "num_assistant_tokens_schedule": "fast"}, "must be one of constant, heuristic"),
    ({"assistant_model": "a", "prompt_lookup_num_tokens": 3}, "assistant_model and prompt_lookup_num_tokens"),
    ({"assistant_model": 7}, "assistant_model must be a model folder or hub id"),
    ({"assistant_tokenizer": "t"}, "assistant_tokenizer needs assistant_model"),
    ({"num_assistant_tokens": 5}, "num_assistant_tokens does nothing without assistant_model"),
    ({"assistant_model": "a", "max_matching_ngram_size": 2}, "does nothing without prompt_lookup_num_tokens"),
    ({"assistant_model": "a", "target_lookbehind": 4}, "target_lookbehind does nothing without"),
    ({"max_length": 50}, "max_length counts the prompt: give max_new_tokens"),
    ({"max_new_tokens": 0}, "max_new_tokens must be at least 1"),
    ({"generation_config": {"a": 1}}, "generation_config cannot be reproduced"),
    ({"warp_speed": 9}, "unknown generate argument 'warp_speed'"),
])
def test_what_cannot_be_reproduced_is_refused_in_one_line(kwargs, needle):
    with pytest.raises(SpecVizError) as e:
        from_generate_kwargs(kwargs)
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("text,needle", [("{", "not JSON"), ("[1]", "must be a JSON object")])
def test_bad_json_is_refused(text, needle):
    with pytest.raises(SpecVizError, match=needle):
        parse_generate_kwargs(text)


@pytest.mark.parametrize("method", ["hf_prompt_lookup", "hf_assisted", "hf_universal"])
def test_round_trip(method):
    """to_generate_kwargs then from_generate_kwargs gives the method and parameters back (the assistant settings
    travel on the assistant's generation_config, where generate reads them)."""
    params = METHODS[method].params_cls()
    kwargs, settings = to_generate_kwargs(method, params)
    if method != "hf_prompt_lookup":
        kwargs["assistant_model"] = "a"
        assert set(settings) >= {"num_assistant_tokens", "num_assistant_tokens_schedule",
                                 "assistant_confidence_threshold"}
    if method == "hf_universal":
        kwargs["assistant_tokenizer"] = "a"
    call = from_generate_kwargs(kwargs)
    assert call.method == method
    assert all(getattr(params, k) == v for k, v in call.params.items())


def test_record_command_takes_generate_kwargs(capsys):
    ns = build_parser().parse_args(["record", "--generate-kwargs", json.dumps(
        {"assistant_model": "org/small", "max_new_tokens": 16, "num_assistant_tokens": 5}),
        "--param", "num_assistant_tokens=5", "--prompt", "hi", "--db", "x.db"])
    req = record_request(ns)
    assert (req.method, req.draft_model, req.max_new_tokens, req.params) == (
        "hf_assisted", "org/small", 16, {"num_assistant_tokens": "5"})
    err = capsys.readouterr().err
    assert "specviz: note: num_assistant_tokens=5 is ignored" in err and "make hf_assisted" in err


@pytest.mark.parametrize("argv,needle", [
    (["--generate-kwargs", '{"num_beams": 2}'], "num_beams=2 cannot be reproduced"),
    (["--generate-kwargs", '{"prompt_lookup_num_tokens": 3}', "--method", "pld"], "--method pld disagrees"),
    ([], "give --method, or your generate call's arguments with --generate-kwargs"),
])
def test_record_refuses_bad_generate_kwargs_in_one_line(capsys, tmp_path, argv, needle):
    code = main(["record", *argv, "--prompt", "hi", "--db", str(tmp_path / "x.db"), "--quiet"])
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("specviz: error")]
    assert code == 2 and len(lines) == 1 and needle in lines[0], err
    assert not (tmp_path / "x.db").exists()
