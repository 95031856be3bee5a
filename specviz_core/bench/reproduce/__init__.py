"""``specviz reproduce``: each seed paper's central, hardware-independent claims, run on the current model.

Every claim is measured in tokens per target forward (tau) or acceptance counts, never in seconds, so
it means the same on any machine. Each :class:`Claim` holds the paper's figure, ours, whether the claim
holds here (None where it cannot be measured, with the reason) and the per-prompt numbers behind it.

- Goose (seed 000): non-degradation against its own PLD and TR sources at equal budget on every prompt
  (Prop. 4); spine acceptance over branch acceptance; the spine tree against Iso(3) and Iso(5) at equal
  budget (Table 2, +12-33%); the Prop. 1 bound below the measured yield; Table 2's ablations.
- TALON (seed 001), on the model's draft head: tau, delta and R against the EAGLE-style static tree at
  equal budget per suite (Eq. 7); the tree deep and narrow where the head is sure, shallow and wide where
  it is not (Sec. 5.2); the head against the n-gram tables as TALON's drafter.
- STAND (seed 002), at T=0.7: samples of one prompt sharing one drafter's tables against the same seeds each with
  fresh tables (1, 2, 4, 8 samples);
  stochastic against deterministic drafting (Table 3); the optimised tree against the heuristic one (Table 4).
"""

from __future__ import annotations

from typing import Any

from specviz_core.bench.reproduce.claims import Say, Work, prompts_of
from specviz_core.bench.reproduce.goose import reproduce_goose
from specviz_core.bench.reproduce.stand import reproduce_stand
from specviz_core.bench.reproduce.talon import reproduce_talon
from specviz_core.bench.suites import load_suites
from specviz_core.errors import SpecVizError
from specviz_core.runtime.models import LoadedModel

PAPERS = ("goose", "talon", "stand")


def reproduce(target: LoadedModel, paper: str, *, quick: bool = False, say: Say | None = None,
              prompts: list[tuple[str, str, list[int]]] | None = None, max_new_tokens: int | None = None,
              samples: int | None = None, work: Work | None = None, head: str = "") -> dict[str, Any]:
    """Run one paper's claims: every built-in suite (``quick``: the quick suite, shorter sessions and fewer STAND
    samples). ``head``: TALON's claims on this EAGLE head folder instead of the model's trained head. ``prompts``
    (suite, id, token ids), ``max_new_tokens`` and ``samples`` replace the defaults. ``work``
    bounds the time and tells progress: when it stops, the claims are over the prompts finished and ``stopped``
    says why."""
    if paper not in PAPERS:
        raise SpecVizError(f"unknown paper {paper!r} (known: {', '.join(PAPERS)})")
    say = say or (lambda s: None)
    suite_names = sorted({s for s, _, _ in prompts}) if prompts is not None else None
    if prompts is None:
        suites = load_suites("quick" if quick else "all")
        prompts, suite_names = prompts_of(target, suites), [s.name for s in suites]
    n = max_new_tokens or (48 if quick else (64 if paper == "stand" else 96))
    work = work or Work()
    if paper == "goose":
        claims = reproduce_goose(target, prompts, n, say, work)
    elif paper == "talon":
        claims = reproduce_talon(target, prompts, n, say, work, head)
    else:
        claims = reproduce_stand(target, prompts, n, say, work, samples or (4 if quick else 8))
    out = {"paper": paper, "model": target.name, "quick": quick, "max_new_tokens": n, "suites": suite_names,
           "claims": [c.to_json() for c in claims], "prompts_planned": len(prompts), "prompts_finished": work.done}
    if work.stopped is not None:
        out["stopped"] = work.stopped
    return out
