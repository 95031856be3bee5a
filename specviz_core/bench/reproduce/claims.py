"""What every paper's claims are made of: a :class:`Claim`, the sessions behind it (:func:`decode`, :class:`Run`),
and the :class:`Work` that bounds them in time and counts the prompts finished."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Any

from specviz_core.bench.suites import Suite
from specviz_core.runtime.models import LoadedModel
from specviz_core.runtime.time_limit import TimeLimit
from specviz_core.session.spec import check_method, spec_for
from specviz_core.session.session import Session

Say = Callable[[str], None]


@dataclass
class Claim:
    paper: str
    name: str
    paper_figure: str
    ours: str
    holds: bool | None
    """None: not measurable here (``note`` says why)."""
    note: str = ""
    paper_value: float | None = None
    ours_value: float | None = None
    """The two numbers the chart draws side by side (when the claim has one number each)."""
    data: dict[str, Any] = field(default_factory=dict)
    cause: str = ""
    """Why a claim does not hold here, as measured (printed beside it)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Run:
    tau: float
    records: list
    stats: dict[str, Any]
    output: list[int]


def decode(target: LoadedModel, method: str, params: dict[str, Any], ids: list[int], n: int, *,
           temperature: float = 0.0, seed: int = 0, drafter: Any = None) -> tuple[Run, Any]:
    """One session to the end; returns its numbers and its drafter (to share tables across samples). The papers'
    claims are about their own budgets: a method with a budget runs ``budget=paper`` unless ``params`` say."""
    from specviz_core.methods import card

    if "budget" in card(method).params_cls.__dataclass_fields__:
        params = {"budget": "paper", **params}
    choice = check_method(method, params)
    session = Session(spec_for(choice, ids, max_new_tokens=n, temperature=temperature, seed=seed), target,
                      drafter=drafter)
    records = list(session.records())
    out = session.output_ids
    tau = len(out) / session.n_forward if session.n_forward else 0.0
    return Run(tau, records, session.drafter.stats(), out), session.drafter


GOOSE_SESSIONS = 8
"""Sessions a prompt for Goose's claims: Goose, its PLD and TR sources, Iso(3), Iso(5) and three ablations."""
TALON_SESSIONS = 3
"""Sessions a prompt for TALON's claims: TALON and EAGLE's static tree on the head, TALON on the tables."""


def stand_sessions(samples: int, default_model: bool) -> int:
    """Sessions a prompt for STAND's claims: the samples shared and fresh, deterministic, and the heuristic tree
    (only on the model the shipped tree is for)."""
    return 2 * samples + min(samples, 4) * (2 if default_model else 1)


def sessions_per_prompt(paper: str, quick: bool, default_model: bool = True) -> int:
    """Sessions a prompt for one paper's claims (the default sample count), known before any model loads."""
    return {"goose": GOOSE_SESSIONS, "talon": TALON_SESSIONS}.get(paper) or \
        stand_sessions(4 if quick else 8, default_model)


class _TimeUp(Exception):
    """The time limit passed: no more sessions."""


class Work:
    """The sessions of a reproduction: the time limit checked before each, ``tick`` told after each, the prompts
    finished counted. A claim is computed over the prompts whose sessions all finished; on the limit or Ctrl-C
    (``with work:``) the work stops and ``stopped`` says why (``interrupted`` for Ctrl-C)."""

    def __init__(self, limit: TimeLimit | None = None, tick: Callable[[str], None] | None = None) -> None:
        self.limit = limit or TimeLimit(None)
        self.tick = tick or (lambda what: None)
        self.stopped: str | None = None
        self.done = 0

    def decode(self, what: str, *args: Any, **kw: Any) -> tuple[Run, Any]:
        if self.stopped is not None or self.limit.passed():
            raise _TimeUp
        out = decode(*args, **kw)
        self.tick(what)
        return out

    def each(self, prompts: list[tuple[str, str, list[int]]]) -> Iterator[tuple[str, str, list[int]]]:
        """The prompts, one at a time; one counts as done when the loop comes back for the next."""
        self.done = 0
        for p in prompts:
            yield p
            self.done += 1

    def __enter__(self) -> Work:
        return self

    def __exit__(self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> bool:
        if kind is _TimeUp:
            self.stopped = self.stopped or self.limit.reason
            return True
        if kind is KeyboardInterrupt:
            self.stopped = "interrupted"
            return True
        return False


def prompts_of(target: LoadedModel, suites: Sequence[Suite]) -> list[tuple[str, str, list[int]]]:
    """(suite, prompt id, token ids) for every prompt, in the model's chat format when it has one."""
    return [(s.name, p.id, p.encode(target)) for s in suites for p in s.prompts]


def _pct(x: float) -> str:
    """A relative change in whole percents, with as many decimals as it takes not to read as none: a claim judged on
    the sign showed "+0%" beside "does not hold" for +0.37%."""
    if x == 0 or abs(x) >= 0.01:
        return f"{x:+.0%}" if x else "0%"
    for digits in (1, 2, 3):
        text = f"{x:+.{digits}%}"
        if text.strip("+-0.%"):
            return text
    return f"{x:+.1e}"


def _gain(a: Sequence[float], b: Sequence[float]) -> float:
    """Mean relative gain of ``a`` over ``b`` across prompts."""
    return statistics.mean(x / y - 1.0 for x, y in zip(a, b) if y > 0) if a else 0.0
