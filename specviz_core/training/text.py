"""The draft head's shipped training text: the default model's own answers to the seed prompts.

On a 2-core CPU the model writes about 250 answer tokens a second, so a 15-minute ``train-head`` that
writes its own text trains on about 100k tokens, 1/50 of what EAGLE heads see, and the head learns
little. Reading text is about 4x cheaper than writing it (one teacher-forced forward per answer: 900
tokens a second in float32 on that CPU), so the text is written once, ahead of time, and shipped:
``resources/head-text/answers.jsonl.gz``, the embedded model's answers (sampled at T=0.8, in its chat
format) to ``resources/prompts/head-seeds.txt``, none of them a bench prompt. It is self-distillation,
so it needs no download and no licence beyond the model's own (Apache-2.0), and it is the text the head
meets when it drafts.

Any model can read it (the prompts go through that model's chat template, the answers through its
tokenizer); for another model it is plain text rather than its own, as EAGLE-1 trained on ShareGPT.

``shipped_text`` reads it in a model's format and splits it: whole prompts held out for the agreement
figure, the rest shuffled for training. ``write_answers`` (``specviz train-head --write-text FILE``) makes
the file, appending a line per answer, so an interrupted run loses nothing and resumes where it
stopped. It writes in rounds (every prompt gets its first answers before any gets more), so a shorter run
still covers every prompt.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from transformers import DynamicCache

from specviz_core.errors import SpecVizError
from specviz_core.runtime import kv
from specviz_core.runtime.models import LoadedModel, Progress, encode_prompt

SHIPPED = "head-text/answers.jsonl.gz"
"""The shipped answers, inside ``specviz_resources``."""


@dataclass(frozen=True)
class Answer:
    prompt: str
    answer: str
    ended: bool
    """The model stopped by itself (an end-of-turn token follows the answer)."""


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        for line in f:
            line = line.strip()
            if line:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:  # a line cut short by an interrupted write
                    continue


def read_answers(path: Path | None = None) -> tuple[dict[str, Any], list[Answer]]:
    """(the header: who wrote the text and how, the answers) of ``path`` (default: the shipped file)."""
    if path is None:
        path = Path(str(resources.files("specviz_resources").joinpath(SHIPPED)))
    if not path.exists():
        raise SpecVizError(f"no head training text at {path}")
    header: dict[str, Any] = {}
    out: list[Answer] = []
    for row in _lines(path):
        if "header" in row:
            header = row["header"]
        elif "answer" in row:
            out.append(Answer(row["prompt"], row["answer"], bool(row.get("ended"))))
    return header, out


def encode_answer(target: LoadedModel, a: Answer) -> tuple[int, list[int]]:
    """(answer start, prompt + answer ids) in ``target``'s chat format and tokenizer."""
    prompt, _ = encode_prompt(target, a.prompt, None)
    ids = list(target.tokenizer(a.answer, add_special_tokens=False)["input_ids"])
    if a.ended and target.eos_token_ids:
        ids.append(_end_of_turn(target))
    return len(prompt), prompt + [int(i) for i in ids]


def _end_of_turn(target: LoadedModel) -> int:
    tok_eos = getattr(target.tokenizer, "eos_token_id", None)
    return int(tok_eos) if tok_eos is not None else target.eos_token_ids[0]


@torch.no_grad()
def sample_answers(target: LoadedModel, prompts: list[list[int]], samples: int, *, seed: int,
                   max_new_tokens: int = 256, temperature: float = 0.8) -> list[list[list[int]]]:
    """``samples`` answers to each prompt, all in one batch: prompts left-padded, masked out and positioned
    from their first real token, so each row sees exactly what it would alone. Per prompt, its answers
    (each ending with an end-of-turn token when the model stopped by itself)."""
    rows = [ids for ids in prompts for _ in range(samples)]
    width = max(len(r) for r in rows)
    dev = target.device
    ids = torch.tensor([[0] * (width - len(r)) + r for r in rows], device=dev)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=dev)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    eos = set(target.eos_token_ids)
    cache = DynamicCache()
    answers: list[list[int]] = [[] for _ in rows]
    alive = [True] * len(rows)
    step_in = ids
    for _ in range(max_new_tokens):
        pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, -step_in.shape[1]:]
        res = target.model(input_ids=step_in, attention_mask=mask, position_ids=pos,
                           **kv.cache_arg(target.model, cache), use_cache=True)
        cache = kv.returned_cache(res)
        probs = torch.softmax(res.logits[:, -1].float().cpu() / temperature, dim=-1)
        nxt = torch.multinomial(probs, 1, generator=gen)[:, 0]
        for r, t in enumerate(nxt.tolist()):
            if alive[r]:
                answers[r].append(t)
                alive[r] = t not in eos
        if not any(alive):
            break
        step_in = nxt[:, None].to(dev)
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
    return [answers[i * samples:(i + 1) * samples] for i in range(len(prompts))]


def write_answers(target: LoadedModel, prompts: list[str], out: Path, *, rounds: int = 2, per_round: int = 8,
                  prompts_per_batch: int = 16, max_new_tokens: int = 256, temperature: float = 0.8, seed: int = 0,
                  progress: Progress | None = None) -> int:
    """Append ``target``'s answers to ``out`` (plain JSON lines): ``rounds`` x ``per_round`` answers per prompt,
    skipping prompts whose round is there already; returns the answer tokens written by this call."""
    say = progress or (lambda s, f: None)
    header = {"model": target.name, "path": os.path.basename(str(target.path).rstrip("/")),
              "dtype": str(target.dtype).removeprefix("torch."), "temperature": temperature, "seed": seed,
              "max_new_tokens": max_new_tokens, "per_round": per_round}
    done: set[tuple[str, int]] = set()
    if out.exists():
        done = {(row["prompt"], int(row.get("round", 0))) for row in _lines(out) if "answer" in row}
    out.parent.mkdir(parents=True, exist_ok=True)
    eos = set(target.eos_token_ids)
    order = list(prompts)
    random.Random(seed).shuffle(order)
    todo = [(r, text) for r in range(rounds) for text in order if (text, r) not in done]
    written, t0 = 0, time.monotonic()
    with open(out, "a", encoding="utf-8") as f:
        if not done:
            f.write(json.dumps({"header": header}) + "\n")
        for b in range(0, len(todo), prompts_per_batch):
            part = todo[b:b + prompts_per_batch]
            ids = [encode_prompt(target, text, None)[0] for _, text in part]
            got = sample_answers(target, ids, per_round, seed=seed * 1_000_003 + b, max_new_tokens=max_new_tokens,
                                 temperature=temperature)
            for (r, text), answers in zip(part, got):
                for ans in answers:
                    ended = bool(ans) and ans[-1] in eos
                    body = ans[:-1] if ended else ans
                    f.write(json.dumps({"prompt": text, "round": r, "ended": ended,
                                        "answer": target.tokenizer.decode(body)}) + "\n")
                    written += len(ans)
            f.flush()
            rate = written / max(time.monotonic() - t0, 1e-9)
            n = min(b + prompts_per_batch, len(todo))
            say(f"Writing answers: {n} of {len(todo)} prompt rounds, {written:,} tokens, {rate:.0f} tokens/s",
                n / len(todo))
    return written


def shipped_text(target: LoadedModel, seed: int, text_tokens: int | None = None, held_out: float = 0.1,
                 most_held: int = 160) -> tuple[list[tuple[int, list[int]]], list[tuple[int, list[int]]]]:
    """(train, held-out) sequences of the shipped answers in ``target``'s format: the held-out ones answer
    prompts the training never sees (a share of the prompts, at most ``most_held`` answers), the training ones
    are shuffled and, with ``text_tokens``, cut to about that many answer tokens."""
    _, answers = read_answers()
    by_prompt: dict[str, list[Answer]] = {}
    for a in answers:
        by_prompt.setdefault(a.prompt, []).append(a)
    names = sorted(by_prompt)
    rng = random.Random(seed)
    rng.shuffle(names)
    k = max(1, round(len(names) * held_out)) if len(names) > 1 else 0
    held = [encode_answer(target, a) for name in names[:k] for a in by_prompt[name]][:most_held]
    train_answers = [a for name in names[k:] for a in by_prompt[name]]
    rng.shuffle(train_answers)
    train, count = [], 0
    for a in train_answers:
        if text_tokens is not None and count >= text_tokens:
            break
        start, seq = encode_answer(target, a)
        train.append((start, seq))
        count += len(seq) - start
    return train, held
