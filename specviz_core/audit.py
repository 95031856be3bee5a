"""The lossless audit: is a recorded greedy session's output what plain greedy decoding gives?

The same prompt ids are decoded by transformers' own ``generate(do_sample=False)`` on the same model, device and
dtype (the CPU when the recorded device is not here), with a fresh generation config so that no sampling, penalty
or length rule of the model's own config takes part. At the first token where the two differ, one plain forward
(no cache) over the prompt and the agreed tokens gives the target's logits there, and the verdict:

- ``identical``: the outputs are the same, token for token;
- ``tie``: they differ where the target's top-2 logits are within :func:`tie_epsilon` of each other and the
  session's token is one of the two (float rounding in a different batch shape can pick either);
- ``divergence``: anything else: a bug in the method or the engine;
- ``not applicable``: a sampled session (its output follows a distribution, not a single sequence).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specviz_core.records import SessionInfo

if TYPE_CHECKING:
    from specviz_core.runtime.models import LoadedModel

#: Top-2 logit gaps below these, per dtype, are numerical ties.
TIE_EPSILON = {"float32": 1e-3, "float16": 5e-2, "bfloat16": 1e-1}


def tie_epsilon(dtype: str) -> float:
    return TIE_EPSILON.get(dtype.removeprefix("torch."), 1e-1)


@dataclass(frozen=True, slots=True)
class AuditResult:
    verdict: str
    """``identical``, ``tie``, ``divergence`` or ``not applicable``."""
    message: str
    """The verdict in one or two plain sentences."""
    compared: int = 0
    """Output tokens compared."""
    position: int | None = None
    """Index in the output of the first differing token."""
    cycle: int | None = None
    """The cycle that committed it."""
    session_token: int | None = None
    plain_token: int | None = None
    top2: tuple[tuple[int, float], ...] = ()
    """The target's top-2 (token, logit) at that position, from a plain forward."""
    gap: float | None = None
    """Top-1 minus top-2 logit there."""
    epsilon: float = 0.0
    device: str = ""
    """Where the plain decode ran."""

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "message": self.message, "compared": self.compared,
                "position": self.position, "cycle": self.cycle, "session_token": self.session_token,
                "plain_token": self.plain_token, "top2": [list(t) for t in self.top2], "gap": self.gap,
                "epsilon": self.epsilon, "device": self.device}


def audit_device(recorded: str) -> str:
    """The recorded device when this machine has it, else the CPU."""
    from specviz_core.runtime.devices import available_devices

    return recorded if recorded in available_devices() else "cpu"


def plain_greedy(model: LoadedModel, prompt_ids: Sequence[int], n: int) -> list[int]:
    """``n`` tokens of transformers' own greedy decoding (fewer if it ends at EOS)."""
    import torch
    from transformers import GenerationConfig

    x = torch.tensor([list(prompt_ids)], device=model.device)
    eos = sorted(model.eos_token_ids)
    cfg = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=n, eos_token_id=eos or None,
                           pad_token_id=eos[0] if eos else 0)
    with torch.no_grad():
        out = model.model.generate(x, attention_mask=torch.ones_like(x), generation_config=cfg)
    return out[0, len(prompt_ids):].tolist()


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first differing token (or of the end of the shorter), None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def classify(logits: Any, session_token: int, plain_token: int, dtype: str) -> tuple[str, tuple, float, float]:
    """(verdict, top-2, gap, epsilon) at a differing position, from the target's logits there."""
    top = logits.float().topk(2)
    top2 = tuple((int(t), float(v)) for t, v in zip(top.indices.tolist(), top.values.tolist()))
    gap = top2[0][1] - top2[1][1]
    eps = tie_epsilon(dtype)
    pair = {top2[0][0], top2[1][0]}
    verdict = "tie" if gap < eps and session_token in pair and plain_token in pair else "divergence"
    return verdict, top2, gap, eps


def audit(info: SessionInfo, cycle_lengths: Sequence[int], model: LoadedModel | None,
          progress: Callable[[str], None] | None = None) -> AuditResult:
    """Compare ``info.output_ids`` (committed by cycles of ``cycle_lengths`` tokens) with plain greedy decoding."""
    import torch

    say = progress or (lambda s: None)
    if info.temperature > 0:
        return AuditResult("not applicable", f"Session {info.id} was sampled (temperature {info.temperature:g}): its "
                           "output follows the model's distribution, not one sequence, so there is nothing to "
                           "compare token for token.")
    ours = list(info.output_ids)
    if not ours:
        return AuditResult("not applicable", f"Session {info.id} has no output yet.")
    if model is None:
        raise ValueError("a greedy session's audit needs the model")
    device = str(model.device)
    say(f"decoding {len(ours)} tokens plainly on {device}")
    ref = plain_greedy(model, info.prompt_ids, len(ours))
    i = first_difference(ours, ref[: len(ours)] if len(ref) > len(ours) else ref)
    if i is None:
        return AuditResult("identical", f"Identical: all {len(ours)} tokens equal plain greedy decoding "
                           f"(transformers' generate on {device}, {info.dtype}).", compared=len(ours), device=device)
    cycle, end = 0, 0
    for cycle, n in enumerate(cycle_lengths):
        end += n
        if i < end:
            break
    if i >= len(ref) or i >= len(ours):
        return AuditResult("divergence", f"Divergence at output token {i} (cycle {cycle}): the session "
                           f"{'ended' if i >= len(ours) else 'went on'} where plain decoding "
                           f"{'went on' if i < len(ref) else 'ended'}.", compared=i, position=i, cycle=cycle,
                           device=device)
    say("checking the target's logits at the first difference")
    with torch.no_grad():
        ids = torch.tensor([list(info.prompt_ids) + ours[:i]], device=model.device)
        logits = model.model(input_ids=ids).logits[0, -1]
    verdict, top2, gap, eps = classify(logits, ours[i], ref[i], info.dtype)
    where = f"output token {i} (cycle {cycle})"
    if verdict == "tie":
        msg = (f"A numerical tie at {where}: the session chose {ours[i]}, plain decoding {ref[i]}, and the target's "
               f"top-2 logits there differ by {gap:.2g} (below {eps:g} for {info.dtype}). Not a bug; the outputs "
               "part ways from there.")
    else:
        msg = (f"A real divergence at {where}: the session chose {ours[i]}, plain decoding {ref[i]}; the target's "
               f"top-2 there are {top2[0][0]} and {top2[1][0]} with a logit gap of {gap:.3g} (a tie would be below "
               f"{eps:g}). This is a bug in the method or the engine.")
    return AuditResult(verdict, msg, compared=i, position=i, cycle=cycle, session_token=ours[i],
                       plain_token=ref[i], top2=top2, gap=gap, epsilon=eps, device=device)

