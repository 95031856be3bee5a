"""A ``generate`` call as people paste it: JSON, Python keyword arguments, or the whole ``model.generate(...)``.

:func:`parse_call` reads the text without evaluating anything: literal values are kept, anything else (a variable
such as ``assistant_model=assistant``, ``**inputs``) is kept by name. :func:`resolve_call` turns the names into
what SpecViz can use (the assistant variable becomes the draft model the user chose; the prompt's tensors and the
tokenizers are not needed) and maps the whole through
:func:`~specviz_core.session.generate_kwargs.from_generate_kwargs`, refusing in one line what it cannot read.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass
from typing import Any

from specviz_core.errors import SpecVizError
from specviz_core.session.generate_kwargs import IGNORED, GenerateCall, from_generate_kwargs, parse_generate_kwargs

#: Arguments ``from_generate_kwargs`` refuses whatever their value: a variable there is refused with its reason.
REFUSED_WHATEVER = ("generation_config", "logits_processor", "stopping_criteria", "prefix_allowed_tokens_fn",
                    "custom_generate", "negative_prompt_ids")


@dataclass(frozen=True)
class PastedCall:
    """The arguments of a pasted call."""

    kwargs: dict[str, Any]
    """Arguments given as literal values (numbers, strings, True/False/None, lists, dicts)."""
    names: dict[str, str]
    """Arguments given as Python expressions SpecViz cannot evaluate (a variable), by their source text."""
    passed_on: tuple[str, ...] = ()
    """Positional arguments and ``**`` unpackings (the prompt's tensors), by their source text."""


def parse_call(text: str) -> PastedCall:
    """The keyword arguments of a pasted ``generate`` call; raises SpecVizError in one line."""
    s = text.strip()
    if s.endswith(";"):
        s = s[:-1].rstrip()
    if not s:
        raise SpecVizError("paste the keyword arguments of your generate call, e.g. prompt_lookup_num_tokens=10")
    if s.startswith("{"):
        return PastedCall(parse_generate_kwargs(s), {})
    call = None
    try:  # the whole call, perhaps assigned: out = model.generate(**inputs, max_new_tokens=20)
        body = ast.parse(s).body
        value = getattr(body[0], "value", None) if len(body) == 1 else None
        if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] == "generate":
            call = value
    except SyntaxError:
        pass
    if call is None:
        try:
            call = ast.parse(f"f(\n{s}\n)", mode="eval").body
        except SyntaxError as e:
            raise SpecVizError(f"the generate arguments are neither JSON nor Python keyword arguments: {e.msg} "
                               f"(line {max(1, (e.lineno or 2) - 1)})") from None
    assert isinstance(call, ast.Call)
    kwargs: dict[str, Any] = {}
    names: dict[str, str] = {}
    passed = [ast.unparse(a) for a in call.args]
    for kw in call.keywords:
        if kw.arg is None:
            passed.append("**" + ast.unparse(kw.value))
            continue
        if kw.arg in kwargs or kw.arg in names:
            raise SpecVizError(f"generate argument {kw.arg} given twice")
        try:
            kwargs[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            names[kw.arg] = ast.unparse(kw.value)
    return PastedCall(kwargs, names, tuple(passed))


def resolve_call(pasted: PastedCall, draft_model: str | None = None) -> GenerateCall:
    """The method and parameters of a pasted call. ``draft_model``: the draft the user chose, which an
    ``assistant_model`` given as a variable stands for (None: none chosen, so such a call is refused)."""
    kwargs = dict(pasted.kwargs)
    notes: list[str] = []
    for key, expr in pasted.names.items():
        if key in IGNORED:
            continue
        if key == "assistant_model":
            if not draft_model:
                raise SpecVizError(f"assistant_model={expr} is a Python variable: choose the draft model in the Run "
                                   "panel first, or paste its folder or hub id as a string")
            kwargs[key] = draft_model
            notes.append(f"assistant_model={expr}: the draft model chosen in the Run panel ({draft_model})")
        elif key == "assistant_tokenizer":
            kwargs[key] = True  # the assistant's own tokenizer: the one saved with it
        elif key in REFUSED_WHATEVER:
            kwargs[key] = expr  # refused by from_generate_kwargs, with its reason
        else:
            raise SpecVizError(f"generate argument {key}={expr} is a Python expression: give its value")
    call = from_generate_kwargs(kwargs)
    return dataclasses.replace(call, notes=tuple(notes) + call.notes)
