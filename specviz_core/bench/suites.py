"""Prompt suites for the benchmark: the built-in ones shipped in ``resources/suites/``, or a user's own.

A suite is a JSON file::

    {"name": "code_editing", "title": "Code editing", "description": "...",
     "prompts": [{"id": "type_hints", "text": "..."},
                 {"id": "packing_list", "messages": [{"role": "user", "content": "..."}, ...]}]}

A prompt is either one user message (``text``) or a whole conversation (``messages``, ending
with a user turn), sent through the model's chat template when it has one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import specviz_resources
from specviz_core.errors import SpecVizError
from specviz_core.runtime.models import LoadedModel, encode_prompt

#: The suites ``--suite all`` runs, in this order (the published benchmark).
ALL = ("code_editing", "summarising", "qa", "chat", "multi_turn")
#: The prefix of a built-in suite's held-out calibration prompts (``calibration/chat``), shipped beside it.
CALIBRATION = "calibration/"
#: The workloads speculative decoding is benchmarked on beyond ``all`` (``--suite workloads``): translation, math
#: reasoning, answers over a retrieved passage of 1,000+ tokens and summarising a long news article; prompts written
#: for the project, none from a benchmark's files.
WORKLOADS = ("translation", "math", "rag", "news")
#: Every built-in suite: ``all``, ``workloads`` and ``quick`` (one short prompt of each kind, for a first look).
BUILTIN = ALL + WORKLOADS + ("quick",)
#: Names that stand for several suites.
GROUPS = {"all": ALL, "workloads": WORKLOADS}


@dataclass(frozen=True)
class Prompt:
    suite: str
    id: str
    text: str | None = None
    """A single user message."""
    messages: tuple[dict[str, str], ...] = ()
    """A conversation (role/content dicts) ending with a user turn."""

    def encode(self, model: LoadedModel, chat_template: bool | None = None) -> list[int]:
        if self.text is not None:
            return encode_prompt(model, self.text, chat_template)[0]
        tok = model.tokenizer
        if chat_template is False or not model.has_chat_template:
            text = "\n\n".join(f"{m['role']}: {m['content']}" for m in self.messages) + "\n\nassistant:"
            return encode_prompt(model, text, False)[0]
        ids = tok.apply_chat_template(list(self.messages), add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    @property
    def label(self) -> str:
        return f"{self.suite}/{self.id}"


@dataclass(frozen=True)
class Suite:
    name: str
    title: str
    description: str
    prompts: tuple[Prompt, ...]


def _suite_dir() -> Any:
    return specviz_resources.files("suites")


def parse_suite(data: Any, origin: str) -> Suite:
    if not isinstance(data, dict) or not isinstance(data.get("prompts"), list) or not data["prompts"]:
        raise SpecVizError(f"{origin} is not a prompt suite (a JSON object with a non-empty 'prompts' list)")
    name = str(data.get("name") or Path(origin).stem)
    prompts = []
    for k, p in enumerate(data["prompts"]):
        pid = str(p.get("id") or k) if isinstance(p, dict) else str(k)
        if isinstance(p, str):
            prompts.append(Prompt(name, pid, text=p))
        elif isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"].strip():
            prompts.append(Prompt(name, pid, text=p["text"]))
        elif isinstance(p, dict) and isinstance(p.get("messages"), list) and p["messages"]:
            msgs = p["messages"]
            if not all(isinstance(m, dict) and m.get("role") in ("system", "user", "assistant")
                       and isinstance(m.get("content"), str) for m in msgs) or msgs[-1]["role"] != "user":
                raise SpecVizError(f"{origin}: prompt {pid}: messages need role and content and must end with a user turn")
            prompts.append(Prompt(name, pid, messages=tuple({"role": m["role"], "content": m["content"]} for m in msgs)))
        else:
            raise SpecVizError(f"{origin}: prompt {pid} has neither 'text' nor 'messages'")
    return Suite(name, str(data.get("title") or name), str(data.get("description") or ""), tuple(prompts))


def load_suite(name_or_path: str) -> Suite:
    """A built-in suite by name, ``calibration/NAME`` (the held-out prompts of built-in suite NAME, which the bench
    does not run: what a STAND tree is calibrated on), or a suite JSON file by path."""
    if name_or_path in BUILTIN:
        text = (_suite_dir() / f"{name_or_path}.json").read_text(encoding="utf-8")
        return parse_suite(json.loads(text), name_or_path)
    if name_or_path.startswith(CALIBRATION) and name_or_path[len(CALIBRATION):] in ALL:
        text = (_suite_dir() / f"{name_or_path}.json").read_text(encoding="utf-8")
        return parse_suite(json.loads(text), name_or_path)
    path = Path(name_or_path)
    if path.suffix == ".json" and path.is_file():
        try:
            return parse_suite(json.loads(path.read_text(encoding="utf-8")), str(path))
        except (OSError, ValueError) as e:
            raise SpecVizError(f"cannot read the suite {path}: {e}") from None
    raise SpecVizError(f"unknown suite {name_or_path!r} (built in: {', '.join(BUILTIN)}, all, workloads; "
                       "calibration/NAME for NAME's held-out prompts; or a .json file)")


def load_suites(spec: str) -> list[Suite]:
    """``all``, ``workloads``, one name or path, or several separated by commas (groups among them)."""
    names = [n for part in spec.split(",") if part.strip() for n in GROUPS.get(part.strip(), (part.strip(),))]
    if not names:
        raise SpecVizError("no suite given")
    return [load_suite(n) for n in names]


def prompt_file_suite(path: Path) -> Suite:
    """``--prompt-file``: a text file is one prompt; a ``.json`` file is a suite."""
    if path.suffix == ".json":
        return load_suite(str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecVizError(f"cannot read the prompt file: {e.strerror}: {path}") from None
    if not text.strip():
        raise SpecVizError(f"the prompt file {path} is empty")
    return Suite("file", path.name, "", (Prompt("file", path.stem, text=text),))
