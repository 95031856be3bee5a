"""Training a draft head (:mod:`specviz_core.drafters.talon.head`) for the target, on this machine, in minutes.

The text is the target's own: it answers the seed prompts shipped in ``resources/prompts/head-seeds.txt``
(none of them a bench prompt), sampled at T=0.8. Self-distillation needs no download and no licence, and
it is the distribution the head meets when it drafts: what this model says, in its own chat format.
Then one teacher-forced forward per sequence gives the target's features (the input of its LM head) and
its top-k next-token distribution at every position.

The loss is EAGLE's: regress the next feature (smooth L1) plus 0.1 x cross-entropy against the target's
distribution, over a softmax restricted to the batch's candidate tokens (every position's top-k; the full
vocabulary costs 10x more on a CPU and ranks the same tokens). Each batch is run twice: once on the target's
features, once on the head's own predictions of them (shifted by one), which is what a draft step past the
root reads (EAGLE-3's training-time test, one step of it).

Everything is seeded: the same seed, model and step count give the same head.
"""

from __future__ import annotations

import math
import random
import time
from importlib import resources
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import DynamicCache

from specviz_core.drafters.talon.eagle.heads import Eagle3Head, published_head_for
from specviz_core.drafters.talon.head import DraftHead, feature_layers_of
from specviz_core.errors import SpecVizError
from specviz_core.runtime import kv
from specviz_core.runtime.attention import attention_pattern, tree_masks
from specviz_core.runtime.head_files import DEFAULT_FEATURES, EAGLE_LAYOUTS
from specviz_core.runtime.models import LoadedModel, Progress, encode_prompt
from specviz_core.training.reading import (  # noqa: F401 - Corpus, Stop and TrainingStopped are the training's too
    Corpus,
    Stop,
    TrainingStopped,
    _check,
    read_rate,
    teacher_force,
)
from specviz_core.training.text import shipped_text

TEXT_SHARE = 0.6
"""Of the minutes, the share spent writing text (``text=own``; training is the cheap part: ~0.1 s a step on a
2-core CPU)."""
READ_SHARE = 0.5
"""Of the minutes, the share spent reading the shipped text's features (``text=shipped``; on a 2-core CPU
about 1,500 tokens a second with bfloat16 units, 900 in float32 without them)."""
HELD_SHARE = 0.1
"""Of the minutes, the most spent reading the held-out answers (after the training text: they only measure)."""
MIN_TRAIN_TOKENS = 10_000
"""The least training text a head is worth training on; ``minutes`` that cannot read (or write) this much on this
machine are refused before any work."""
WRITE_COST = 4.0
"""Writing a token (``text=own``) costs about this many times reading one."""
TEXTS = ("shipped", "own")
"""Where the training text comes from: the shipped answers, or the target's own, written now."""
DRAFT_VOCAB = 16384
"""Most tokens a head drafts (EAGLE-3 drafts from 32k of Llama-3's 128k)."""
CE_WEIGHT = 0.1
"""Weight of the token loss against the feature loss (EAGLE's)."""
HEAD_FORMATS = ("specviz", *EAGLE_LAYOUTS)
"""What a trained head is: SpecViz's own layout (kept per model, drafter=auto finds it) or EAGLE's published ones
(EAGLE-1/2, EAGLE-3: a folder the serving engines load, drafted with ``--draft-head``)."""
TTT_STEPS = 3
"""Unrolled draft steps an eagle3 head trains on (EAGLE-3's training-time test runs 7 on a GPU; on a CPU each costs
another forward and backward of the batch, so three, within the same minutes)."""


def seed_prompts() -> list[str]:
    text = resources.files("specviz_resources").joinpath("prompts/head-seeds.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


@torch.no_grad()
def generate_text(target: LoadedModel, prompts: list[list[int]], n_tokens: int, seed: int, max_new_tokens: int = 192,
                  temperature: float = 0.8, batch: int = 32, deadline: float | None = None,
                  progress: Progress | None = None, stop: Stop | None = None) -> tuple[list[tuple[int, list[int]]], int]:
    """The target's answers to ``prompts`` (cycled, each sampled afresh), prompt and answer, until ``n_tokens``
    answer tokens or ``deadline`` (``time.monotonic``); returns (answer start, prompt + answer) per answer and the
    answer tokens written. One seeded generator; batches run one prompt at a time
    per row with no padding (rows of a batch share a prompt), so no model needs a pad token."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    eos = set(target.eos_token_ids)
    dev = target.device
    out: list[tuple[int, list[int]]] = []
    made, i = 0, 0
    while made < n_tokens and (deadline is None or time.monotonic() < deadline):
        ids = list(prompts[i % len(prompts)])
        i += 1
        rows = torch.tensor([ids] * batch, device=dev)  # [b, p]
        cache, alive = DynamicCache(), [True] * batch
        answers: list[list[int]] = [[] for _ in range(batch)]
        step_in, pos = rows, 0
        for _ in range(max_new_tokens):
            _check(stop)
            n = step_in.shape[1]
            res = target.model(input_ids=step_in, position_ids=torch.arange(pos, pos + n, device=dev)[None].expand(batch, n),
                               **kv.cache_arg(target.model, cache), use_cache=True)
            cache, pos = kv.returned_cache(res), pos + n
            probs = torch.softmax(res.logits[:, -1].float().cpu() / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=gen)[:, 0]  # [b]
            for r, t in enumerate(nxt.tolist()):
                if alive[r]:
                    answers[r].append(t)
                    alive[r] = t not in eos
            step_in = nxt[:, None].to(dev)
            if not any(alive):
                break
        for a in answers:
            out.append((len(ids), ids + a))
            made += len(a)
        if progress:
            if deadline is None:
                progress(f"Writing training text: {made:,} of {n_tokens:,} tokens", min(1.0, made / n_tokens))
            else:
                left = max(0.0, deadline - time.monotonic())
                progress(f"Writing training text: {made:,} tokens, {left:.0f} s left for it", None)
    return out, made


def check_minutes(target: LoadedModel, minutes: float, text: str) -> None:
    """Refuse, before any work, minutes that cannot read (or write) :data:`MIN_TRAIN_TOKENS` of text here."""
    rate = read_rate(target) / (WRITE_COST if text == "own" else 1.0)
    share = TEXT_SHARE if text == "own" else READ_SHARE
    need_min = MIN_TRAIN_TOKENS / rate / 60 / share
    if minutes < need_min:
        verb = "writing" if text == "own" else "reading"
        raise SpecVizError(f"{minutes:g} minutes cannot be enough here: {verb} the {MIN_TRAIN_TOKENS:,} tokens of "
                           f"training text a head needs takes about {need_min * share:.1f} minutes on this machine "
                           f"({rate:,.0f} tokens/s), {share:.0%} of the run: give --minutes {math.ceil(need_min)} "
                           "or more")


def _windows(c: Corpus, length: int, batch: int, rng: random.Random, first: int = 0) -> tuple[torch.Tensor, ...]:
    """A batch of windows, each as late in its answer as fits: tokens [b, L], previous features [b, L, H], features
    [b, L, H], top-k ids and probabilities [b, L, k], and which rows predict answer text [b, L]. ``first``: the first
    token a window may start at (1 for a head with no row for the text's first token: EAGLE's layouts)."""
    toks, prev, feats, ids, ps, keep = [], [], [], [], [], []
    usable = [i for i, t in enumerate(c.tokens) if len(t) >= 2 + first]
    L = min(length, min(len(c.tokens[i]) - first for i in usable))
    for _ in range(batch):
        i = rng.choice(usable)
        n = len(c.tokens[i])
        s = rng.randrange(min(max(first, c.starts[i] - 1 - L // 2), n - L), n - L + 1)
        f = c.feats[i].float()
        toks.append(c.tokens[i][s:s + L])
        prev.append(torch.cat([torch.zeros_like(f[:1]), f[:-1]])[s:s + L])
        feats.append(f[s:s + L])
        ids.append(c.top_ids[i][s:s + L])
        ps.append(c.top_p[i][s:s + L])
        keep.append(torch.arange(s, s + L) >= c.starts[i] - 1)
    return tuple(torch.stack(x) for x in (toks, prev, feats, ids, ps, keep))


def ttt_mask(length: int, step: int) -> np.ndarray:
    """Training-time test's mask for unrolled step ``step`` (2, 3, ...) over ``length`` rows: [L, step * L] over the
    rows of steps 1..step (steps before this one are in the cache). Row t of step k drafts the token at t as if
    the committed text ended at t - k + 1: it sees step 1's rows up to there (run on the target's features), the
    rows of steps 2..k-1 that drafted t - k + 2 .. t - 1 (its tree ancestors), and itself; as a draft step does."""
    t = np.arange(length)[:, None]
    c = np.arange(length)[None, :]
    blocks = [c <= t - step + 1] + [c == t - step + j for j in range(2, step + 1)]
    return np.concatenate(blocks, axis=1)


def unroll(head: DraftHead, prev: torch.Tensor, emb: torch.Tensor, steps: int) -> list[torch.Tensor]:
    """The head's predictions [b, L, H] at each of ``steps`` unrolled draft steps: step 1 reads the target's
    features (``prev``, shifted by one), step k reads step k-1's prediction at the row before, attending as
    :func:`ttt_mask` says (EAGLE-3's training-time test). Rows t < k - 1 of step k have no context to draft from;
    callers leave them out."""
    b, L = emb.shape[:2]
    dev = emb.device
    pos = torch.arange(L, device=dev)[None].expand(b, L)
    pattern = attention_pattern(head.body.config)
    cache = DynamicCache()
    pred, out = head(prev, emb, position_ids=pos, use_cache=True, **kv.cache_arg(head.body, cache))
    preds = [pred]
    for k in range(2, steps + 1):
        cache = kv.returned_cache(out)
        mask = tree_masks(pattern, ttt_mask(L, k), 0, pred.dtype, dev, np.arange(L), np.tile(np.arange(L), k))
        inputs = torch.cat([torch.zeros_like(pred[:, :1]), pred[:, :-1]], dim=1)
        pred, out = head(inputs, emb, position_ids=pos, attention_mask=mask, use_cache=True,
                         **kv.cache_arg(head.body, cache))
        preds.append(pred)
    return preds


def _soft_targets(model: Any, top_ids: torch.Tensor, top_p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch's candidate tokens (every position's top-k): their LM head rows [S, H], and the target's
    distribution over them at each position [b, L, S]."""
    vocab, inv = torch.unique(top_ids, return_inverse=True)
    w = model.get_output_embeddings().weight[vocab].float()
    target = torch.zeros(*top_ids.shape[:2], len(vocab), device=top_ids.device)
    target.scatter_add_(-1, inv, top_p / top_p.sum(-1, keepdim=True))
    return w, target


def _loss(head: DraftHead, embed: nn.Module, model: Any, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    if isinstance(head, Eagle3Head):
        return _loss_published_eagle3(head, embed, batch)
    if head.feature_layers:
        return _loss_eagle3(head, embed, model, batch)
    dev = embed.weight.device
    toks, prev, feats, top_ids, top_p, keep = (t.to(dev) for t in batch)
    emb = embed(toks).float()
    w, target = _soft_targets(model, top_ids, top_p)
    weights = keep.float() / keep.float().sum().clamp(min=1.0)  # the mean over answer rows
    total = torch.zeros((), device=dev)
    inputs = prev
    for k, weight in enumerate((1.0, 0.5)):  # on the target's features, then on the head's own
        pred, _ = head(inputs, emb, use_cache=False)
        logp = torch.log_softmax(pred @ w.T, dim=-1)
        per_row = (nn.functional.smooth_l1_loss(pred, feats, reduction="none").mean(-1)
                   - CE_WEIGHT * (target * logp).sum(-1))
        total = total + weight * (per_row * weights).sum()
        if k == 0:
            inputs = torch.cat([prev[:, :1], pred[:, :-1].detach()], dim=1)
    return total


def _loss_eagle3(head: DraftHead, embed: nn.Module, model: Any, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """EAGLE-3's loss: cross-entropy against the target's distribution at each of :data:`TTT_STEPS` unrolled steps,
    weighted 0.8^k; no feature regression (the fused features are not what the LM head reads)."""
    dev = embed.weight.device
    toks, prev, _, top_ids, top_p, keep = (t.to(dev) for t in batch)
    emb = embed(toks).float()
    w, target = _soft_targets(model, top_ids, top_p)
    total = torch.zeros((), device=dev)
    rows = torch.arange(toks.shape[1], device=dev)[None]
    for k, pred in enumerate(unroll(head, prev, emb, TTT_STEPS)):
        use = (keep & (rows >= k)).float()
        logp = torch.log_softmax(pred @ w.T, dim=-1)
        total = total + 0.8 ** k * (-(target * logp).sum(-1) * use).sum() / use.sum().clamp(min=1.0)
    return total


def _loss_published_eagle3(head: Eagle3Head, embed: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """EAGLE-3's loss in its published layout: cross-entropy of its own ``lm_head(norm(h))`` over the draft vocabulary
    against the target's distribution restricted to it (``t2d``), at each of :data:`TTT_STEPS` unrolled steps,
    weighted 0.8^k."""
    dev = embed.weight.device
    toks, prev, _, top_ids, top_p, keep = (t.to(dev) for t in batch)
    emb = embed(toks).float()
    index = head.__dict__.get("_draft_index")
    if index is None or index.device != dev:  # target token -> draft index (-1: not in the draft vocabulary)
        index = torch.full((int(embed.weight.shape[0]),), -1, dtype=torch.long, device=dev)
        index[head.vocab.to(dev)] = torch.arange(len(head.vocab), device=dev)
        head.__dict__["_draft_index"] = index
    idx = index[top_ids]
    target = torch.zeros(*top_ids.shape[:2], len(head.vocab), device=dev)
    target.scatter_add_(-1, idx.clamp(min=0), top_p.float() * (idx >= 0))
    mass = target.sum(-1, keepdim=True)
    target = target / mass.clamp(min=1e-9)
    rows = torch.arange(toks.shape[1], device=dev)[None]
    total = torch.zeros((), device=dev)
    for k, pred in enumerate(unroll(head, prev, emb, TTT_STEPS)):
        use = (keep & (rows >= k) & (mass[..., 0] > 0)).float()
        logp = torch.log_softmax(head.lm_head(head.norm(pred)), dim=-1)
        total = total + 0.8 ** k * (-(target * logp).sum(-1) * use).sum() / use.sum().clamp(min=1.0)
    return total


def draft_vocabulary(c: Corpus, vocab_size: int, most: int = DRAFT_VOCAB) -> torch.Tensor:
    """EAGLE-3's reduced draft vocabulary: the ``most`` tokens seen most often in the text and in the target's
    top-k over it, most frequent first (the whole vocabulary when it is no larger)."""
    if vocab_size <= most:
        return torch.arange(vocab_size)
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for t, ids in zip(c.tokens, c.top_ids):
        counts += torch.bincount(torch.cat([t, ids.flatten()]), minlength=vocab_size)
    seen = int((counts > 0).sum())
    return counts.argsort(descending=True, stable=True)[: min(most, seen)]


CALIBRATION_ROWS = 2048
"""Held-out rows per draft step the temperature is fitted on (their logits are kept in memory: rows x vocabulary)."""


@torch.no_grad()
def agreement(head: DraftHead, target: LoadedModel, held: Corpus,
              keep: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> dict[str, float]:
    """Held-out agreement with the target over answer rows: the target's most likely next token is the head's
    top-1 / in its top-5, reading the target's features (a root step), and reading the head's own (a step further,
    attending as a draft step does: :func:`unroll`). ``keep``: gets (logits, the target's top-1 as an index of the
    head's vocabulary) of up to :data:`CALIBRATION_ROWS` rows a step, for :func:`fit_temperature`."""
    embed = head.embedding_for(target.model)
    logits = head.logits_for(target.model)
    hits = {"top1": 0, "top5": 0, "top1_step2": 0, "top5_step2": 0}
    n = 0
    dev = target.device
    index = torch.full((int(target.model.config.vocab_size),), -1, dtype=torch.long, device=dev)
    index[logits.vocab.to(dev)] = torch.arange(len(logits.vocab), device=dev)
    kept = {"": 0, "_step2": 0}
    off = head.first_row  # EAGLE's layouts have no row for the text's first token (and no zero feature)
    for toks, f, ids, start in zip(held.tokens, held.feats, held.top_ids, held.starts):
        if len(toks) <= off + 1:
            continue
        f = f.to(dev).float()
        prev = torch.cat([torch.zeros_like(f[:1]), f[:-1]])[off:][None]  # [1, T, H]: row j reads f[j - 1]
        toks, ids, start = toks[off:], ids[off:], max(start - off, 0)
        emb = embed(toks[None].to(dev)).float()
        rows = slice(max(0, start - 1), len(toks))
        want = ids[rows, 0].to(dev)
        first, second = unroll(head, prev, emb, 2)
        for suffix, pred, skip in (("", first, 0), ("_step2", second, 1)):
            top, _ = logits.top(pred[0, rows], 5)
            ok = torch.arange(rows.start, len(toks), device=dev) >= skip  # a step further needs a row before
            hits["top1" + suffix] += int(((top[:, 0] == want) & ok).sum())
            hits["top5" + suffix] += int(((top == want[:, None]).any(-1) & ok).sum())
            if keep is not None and kept[suffix] < CALIBRATION_ROWS:
                use = ok & (index[want] >= 0)
                take = pred[0, rows][use][: CALIBRATION_ROWS - kept[suffix]]
                keep.append((logits(take), index[want[use]][: len(take)]))
                kept[suffix] += len(take)
        n += len(want)
    return {k: v / max(n, 1) for k, v in hits.items()} | {"positions": n}


def fit_temperature(kept: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """The temperature T that makes softmax(logits / T) the most likely explanation of the target's top-1 on held-out
    rows (temperature scaling, Guo et al. 2017): the negative log-likelihood is convex in 1/T, so a golden-section
    search over 1/T in [0.2, 5] finds it. 1.0 when there is nothing to fit on."""
    if not kept:
        return 1.0
    lg = torch.cat([a for a, _ in kept]).float()
    want = torch.cat([b for _, b in kept])
    if not len(want):
        return 1.0

    def nll(beta: float) -> float:
        return float(nn.functional.cross_entropy(lg * beta, want))

    lo, hi = 0.2, 5.0
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = nll(a), nll(b)
    for _ in range(40):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = nll(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = nll(b)
    return 1.0 / ((lo + hi) / 2)


def calibrate(head: Any, temperature: float) -> bool:
    """Apply the fitted temperature to ``head``'s logits: SpecViz's head keeps it beside its weights, EAGLE-3's layout
    folds it into its own LM head (so the serving engines draft with it too). EAGLE-1/2's layout reads the target's
    LM head, which a head file cannot change: it stays as trained (False)."""
    with torch.no_grad():
        if isinstance(head, Eagle3Head):
            head.lm_head.weight.div_(temperature)
            return True
        if isinstance(head, DraftHead):
            head.temperature.fill_(temperature)
            return True
    return False


def train_head(target: LoadedModel, *, minutes: float = 10.0, steps: int | None = None, seed: int = 0,
               text: str = "shipped", text_tokens: int | None = None, window: int = 256, batch: int = 4,
               lr: float = 1e-3, prompts: list[list[int]] | None = None, features: str = DEFAULT_FEATURES,
               layout: str = "specviz", progress: Progress | None = None, stop: Stop | None = None) -> tuple[DraftHead, dict[str, Any]]:
    """Read (or write) text, read its features, train a head; returns it and the facts a saved head records.

    ``text``: ``shipped`` reads the shipped answers (:mod:`specviz_core.training.text`), ``own`` has the target
    write its own answers to ``prompts`` (token ids; default: the shipped seed prompts). ``minutes`` bounds the
    whole run: a share for the text (``READ_SHARE`` or ``TEXT_SHARE``, unless ``text_tokens`` fixes its size),
    then the step count that fits the rest (unless ``steps`` fixes it: give both for a run that repeats exactly).
    ``features``: ``last`` (EAGLE-1's head on the target's last hidden state, with one unrolled step on its own
    predictions) or ``eagle3`` (three layers fused, tokens alone, :data:`TTT_STEPS` unrolled steps). ``layout``:
    SpecViz's own head, or a head in EAGLE's published layout (``eagle``: EAGLE-1/2, reading the last hidden state;
    ``eagle3``: EAGLE-3, reading three layers, with its own norm and LM head over the draft vocabulary), which
    fixes the features."""
    if layout not in HEAD_FORMATS:
        raise SpecVizError(f"layout must be one of {', '.join(HEAD_FORMATS)}, got {layout!r}")
    if layout != "specviz":
        features = "eagle3" if layout == "eagle3" else "last"
    if minutes <= 0:
        raise SpecVizError(f"minutes must be above 0, got {minutes}")
    if text not in TEXTS:
        raise SpecVizError(f"text must be one of {', '.join(TEXTS)}, got {text!r}")
    if text == "shipped" and prompts is not None:
        raise SpecVizError("prompts are what the model answers with text=own; the shipped text has its own")
    if text == "shipped" and target.tokenizer is None:
        raise SpecVizError("the model has no tokenizer to read the shipped text with: use text=own")
    layers = feature_layers_of(features, target.model.config)
    say = progress or (lambda s, f: None)
    if text_tokens is None and steps is None:  # the minutes decide how much: can they be enough here?
        check_minutes(target, minutes, text)
    t_start = time.monotonic()
    torch.manual_seed(seed)
    if text == "shipped":
        say("Reading the shipped answers", None)
        train_seqs, held_seqs = shipped_text(target, seed, text_tokens)
        # The training text first, within its share; the held-out answers only measure, in what is left of theirs.
        deadline = None if text_tokens is not None else t_start + READ_SHARE * minutes * 60
        train = teacher_force(target, train_seqs, progress=say, stop=stop, deadline=deadline, layers=layers)
        deadline = None if text_tokens is not None else t_start + (READ_SHARE + HELD_SHARE) * minutes * 60
        held = teacher_force(target, held_seqs, progress=say, stop=stop, deadline=deadline, layers=layers)
        made = sum(len(t) - s for t, s in zip(train.tokens, train.starts))
    else:
        if prompts is None:  # the shipped seed prompts, in the model's chat format when it has one
            prompts = [encode_prompt(target, line, None)[0] for line in seed_prompts()]
        prompts = list(prompts)
        random.Random(seed).shuffle(prompts)
        deadline = None if text_tokens is not None else t_start + TEXT_SHARE * minutes * 60
        seqs, made = generate_text(target, prompts, text_tokens or 10**9, seed, deadline=deadline, progress=say,
                                   stop=stop)
        train, held = teacher_force(target, seqs, progress=say, stop=stop, layers=layers).split(0.1)
    if not train.tokens:
        raise SpecVizError("too little text was read to train on: give more minutes")
    vocab = draft_vocabulary(train, int(target.model.config.vocab_size))
    head = DraftHead(target.model.config, vocab, layers) if layout == "specviz" else \
        published_head_for(target, layout, vocab)
    head = head.float().to(target.device)
    head.train()
    for p in target.model.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=0.0)
    rng = random.Random(seed)
    embed = target.model.get_input_embeddings()
    done, t_train = 0, time.monotonic()
    total = steps
    losses: list[float] = []
    while total is None or done < total:
        _check(stop)
        if total is None and done == 5:  # fit the step count to the time left, from the first steps' pace
            per = (time.monotonic() - t_train) / done
            left = minutes * 60 - (time.monotonic() - t_start) - 0.05 * minutes * 60
            total = max(done + 1, int(left / per))
        frac = done / total if total else 0.0
        for g in opt.param_groups:  # warm-up, then cosine to a tenth
            g["lr"] = lr * min(1.0, (done + 1) / 20) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        loss = _loss(head, embed, target.model, _windows(train, window, batch, rng, head.first_row))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        done += 1
        if total is not None and (done % 10 == 0 or done == total):
            say(f"Training the head: step {done} of {total}, loss {sum(losses[-10:]) / len(losses[-10:]):.3f}",
                done / total)
    head.eval()
    # A head trained on features regressed to their mean is under-confident: fit a temperature where it can be kept
    # (EAGLE-1/2's layout reads the model's own LM head: nothing to fit, nothing kept over the whole vocabulary).
    kept: list[tuple[torch.Tensor, torch.Tensor]] | None = [] if layout != "eagle" else None
    agree = agreement(head, target, held, kept)
    temperature = fit_temperature(kept or [])
    del kept
    applied = calibrate(head, temperature) if layout != "eagle" else False
    info = {"model": target.name, "path": target.path, "layout": layout, "seed": seed, "steps": done, "window": window, "batch": batch,
            "lr": lr, "text": text, "ttt_steps": TTT_STEPS if layers else 2, "text_tokens": train.n_tokens + held.n_tokens, "answer_tokens": made,
            "calibration": {"temperature": round(temperature, 4), "applied": applied},
            "draft_vocabulary": len(head.vocab), "answers": len(train.tokens) + len(held.tokens), "held_out_answers": len(held.tokens),
            "temperature": 0.8, "minutes": round((time.monotonic() - t_start) / 60, 2), "agreement": agree,
            "final_loss": sum(losses[-10:]) / max(1, len(losses[-10:])), "created": time.strftime("%Y-%m-%d %H:%M")}
    return head, info
