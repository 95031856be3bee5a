"""Why speculation is (or is not) faster than plain decoding here: the time arithmetic of a cycle and a session.

Every cycle's wall time splits into three parts (its ``timings_ms``):

- **draft**: the drafter building the tree (``draft``);
- **verify**: the target's forward over the verify block (``forward``);
- **bookkeeping**: everything else (``walk``, ``trim``, ``harvest``, ``build``, ``record``, any other stage).

The unit is ``t_ar``, the time plain decoding spends per token: one plain 1-token forward (the cost curve's
1-row point), or the measured AR baseline's ms per token when there is one. The paper-style arithmetic is then

    speed-up = tau * t_ar / t_cycle

with tau the tokens a cycle commits (accepted + bonus). For a session, the sums over its cycles. The measured
verify-cost curve of the device (:mod:`specviz_core.engine.cost_curve`) predicts what each cycle would have
cost with its tree cut to its first ``b`` verified nodes in verify order (every node comes after its parent,
so that is a tree), keeping the accepted path's nodes within it and the draft and bookkeeping times as measured,
against the curve's own 1-token forward (both timed alike, whatever the machine's load when the session ran), a
cycle's over its own cache where the curve measured what a longer one adds: the budget with the best predicted
speed-up is the one reported (a session's sums, from summaries, which do not carry the cache, are at the
curve's). No torch here: the curve is any callable from verify-block rows to forward ms (a :class:`CostCurve`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.cycle_state import EngineFacts
from specviz_core.records import CycleRecord

Curve = Callable[[float], float]
"""Forward ms of a verify block of ``rows`` rows (root included)."""
DRAFT, FORWARD = "draft", "forward"
PARTS = ("draft", "verify", "bookkeeping")


@dataclass(frozen=True)
class CostCurve:
    """Forward time (ms) against verify-block rows, linearly interpolated between measured points."""

    n: tuple[int, ...]
    """Verify-block rows measured, ascending (root included)."""
    ms: tuple[float, ...]
    """Median forward time at each size, ms."""
    host_ms: tuple[float, ...] | None = None
    """Median ms the host then takes to reduce the block's rows (:func:`~specviz_core.target_rows.target_rows`: the
    top-k, the softmax, the copy), at each size; None in curves measured before it was."""
    cache_len: int = 256
    """The cached tokens ``ms`` was measured on top of."""
    context_n: tuple[int, ...] | None = None
    """Verify-block rows at which the cost of a longer cache was measured (ascending); None: not measured."""
    context_ms: tuple[float, ...] | None = None
    """At each of :attr:`context_n`, the forward's extra ms per cached token beyond :attr:`cache_len` (attention
    reads every cached token: on a CPU a 16-row block over 2,048 tokens cost 2.6x a 1-row forward, over 256 1.8x)."""

    def __call__(self, rows: float) -> float:
        """Predicted forward ms for ``rows`` rows on the measured cache; beyond the last point the last slope
        continues."""
        return _interpolate(self.n, self.ms, rows)

    def at(self, rows: float, context: int | None) -> float:
        """Predicted forward ms for ``rows`` rows on a cache of ``context`` tokens: the measured curve plus the
        longer cache's cost, linear in its tokens (None, or not measured: the curve as it is). Never below half the
        measured cost (a cache far shorter than the measured one saves only attention)."""
        own = self(rows)
        if context is None or not self.context_n or not self.context_ms:
            return own
        return max(0.5 * own, own + (context - self.cache_len) * _interpolate(self.context_n, self.context_ms, rows))

    def host(self, rows: float) -> float:
        """Predicted ms of the host's reduction of ``rows`` rows (0 where the curve did not measure it)."""
        return _interpolate(self.n, self.host_ms, rows) if self.host_ms else 0.0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CostCurve:
        """The curve as measured, bumps and all: on a CPU a block of 4 rows can cost less than one of 3 (the
        matrix kernels' shapes), and a chooser that smoothed that away would choose the dearer block. Each size's
        time is the median of its rounds, timed round-robin with the others, so a busy moment is not one size's."""
        host = d.get("host_ms")
        if not isinstance(host, list) or len(host) != len(d["n"]):
            host = None
        triples = sorted(zip(d["n"], d["ms"], host if host is not None else [0.0] * len(d["n"])))
        ctx = d.get("context")
        pairs = None
        if isinstance(ctx, dict) and isinstance(ctx.get("n"), list) and isinstance(ctx.get("ms_per_token"), list) \
                and len(ctx["n"]) == len(ctx["ms_per_token"]) and ctx["n"]:
            pairs = sorted((int(n), max(0.0, float(m))) for n, m in zip(ctx["n"], ctx["ms_per_token"]))
        return cls(tuple(int(n) for n, _, _ in triples), tuple(float(m) for _, m, _ in triples),
                   tuple(float(h) for _, _, h in triples) if host is not None else None,
                   cache_len=int(d.get("cache_len", 256)),
                   context_n=tuple(n for n, _ in pairs) if pairs else None,
                   context_ms=tuple(m for _, m in pairs) if pairs else None)


def _interpolate(n: Sequence[int], ms: Sequence[float], rows: float) -> float:
    """``ms`` at ``rows``, linearly between the measured sizes ``n``; beyond the last the last slope continues."""
    if len(n) == 1:
        return ms[0]
    if rows <= n[0]:
        return ms[0]
    i = bisect_left(n, rows)
    if i >= len(n):
        i = len(n) - 1
    x0, x1, y0, y1 = n[i - 1], n[i], ms[i - 1], ms[i]
    if rows == x1:  # a measured size reads as measured (y0 + (y1 - y0) is not always y1 in floating point)
        return y1
    return y0 + (y1 - y0) * (rows - x0) / (x1 - x0)


#: Padding a block to a bigger size must save at least this share of its forward: less is the curve's noise.
PAD_GAIN = 0.05


def padded_rows(curve: CostCurve, rows: int) -> int:
    """The rows to run a verify block of ``rows`` as: the measured size at or above it whose forward costs least on
    this device, when that saves at least :data:`PAD_GAIN` of ``rows``' own cost; else ``rows``. On a CPU the matrix
    kernels run 2 or 3 rows slower than 4 and 8 (SmolLM2's LM head: 24 and 37 ms against 18 and 17, 2 threads)."""
    own = curve(rows)
    best, best_ms = rows, own
    for n, ms in zip(curve.n, curve.ms):
        if n > rows and ms < best_ms:
            best, best_ms = n, ms
    return best if best_ms <= (1.0 - PAD_GAIN) * own else rows


def curve_at(curve: Curve, rows: int, context: int | None) -> float:
    """The curve's forward ms for ``rows`` rows as run (no padding), over a cache of ``context`` tokens where a
    measured curve knows what a longer cache adds; any other curve (a callable) as it is."""
    return float(curve.at(rows, context)) if isinstance(curve, CostCurve) else float(curve(rows))


def run_ms(curve: Curve, rows: int, context: int | None = None) -> float:
    """A block of ``rows``' forward ms as the engine runs it: padded where a measured curve says a bigger block costs
    less (:func:`padded_rows`), over a cache of ``context`` tokens where the curve measured what a longer cache adds
    (:meth:`CostCurve.at`; None: the curve's own cache); any other curve (a callable) as it is."""
    return curve_at(curve, padded_rows(curve, rows) if isinstance(curve, CostCurve) else rows, context)


def split_timings(timings_ms: dict[str, float]) -> tuple[float, float, float]:
    """(draft, verify forward, bookkeeping) ms of one cycle: bookkeeping is every stage but those two."""
    draft = float(timings_ms.get(DRAFT, 0.0))
    forward = float(timings_ms.get(FORWARD, 0.0))
    return draft, forward, float(sum(timings_ms.values())) - draft - forward


def kept_tokens(accepted_rows: Sequence[int], rows: int) -> int:
    """Tokens a cycle commits when only verify rows ``< rows`` are verified: the accepted nodes up to the first
    one cut, plus the bonus."""
    n = 0
    for r in accepted_rows:
        if r >= rows:
            break
        n += 1
    return n + 1


@dataclass(frozen=True)
class CycleCost:
    """One cycle's time against plain decoding. Times in ms, ratios in units of ``ar_forward_ms``."""

    index: int
    rows: int
    """Verify-block rows (root included)."""
    tokens: int
    """Tokens the cycle committed (accepted + bonus): tau of this cycle."""
    draft_ms: float
    forward_ms: float
    bookkeeping_ms: float
    ar_forward_ms: float
    """t_ar: one plain 1-token forward (or plain decoding's ms per token, when a baseline was measured)."""
    curve_ms: float | None
    """The cost curve's forward ms at ``rows`` (None without a curve)."""
    best_budget: int | None = None
    """In hindsight: the verify budget (draft nodes) at which the curve predicts this tree would have done best."""
    best_speedup: float | None = None
    sentence: str = ""
    rows_run: int | None = None
    """The rows the forward ran, when padded beyond ``rows`` (the record's ``state.padded_to``)."""
    from_prefill: bool = False
    """The cycle ran no forward of its own (its token came from the prefill's last row): it claims no speed-up."""

    @property
    def total_ms(self) -> float:
        return self.draft_ms + self.forward_ms + self.bookkeeping_ms

    @property
    def verify_x(self) -> float:
        """The verify forward in 1-token forwards."""
        return self.forward_ms / self.ar_forward_ms

    @property
    def overhead_x(self) -> float:
        """Draft and bookkeeping in 1-token forwards."""
        return (self.draft_ms + self.bookkeeping_ms) / self.ar_forward_ms

    @property
    def speedup(self) -> float | None:
        """tau * t_ar / t_cycle; None for a cycle that ran no forward of its own (a token from the prefill)."""
        if self.from_prefill:
            return None
        return self.tokens * self.ar_forward_ms / self.total_ms if self.total_ms > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "total_ms": self.total_ms, "speedup": self.speedup}


def _unit(curve: Curve | None, ar_forward_ms: float | None) -> float:
    if ar_forward_ms is not None and ar_forward_ms > 0:
        return float(ar_forward_ms)
    if curve is not None and curve(1) > 0:
        return float(curve(1))
    raise ValueError("no unit: give ar_forward_ms or a cost curve")


def cycle_cost(record: CycleRecord | CycleSummary, curve: Curve | None, ar_forward_ms: float | None = None
               ) -> CycleCost:
    """The arithmetic of one cycle (a record, or a summary that carries timings) and the sentence saying it.

    ``ar_forward_ms`` defaults to the curve's 1-row forward; one of the two is needed (ValueError otherwise)."""
    t_ar = _unit(curve, ar_forward_ms)
    context = record.cache_len  # the cycle's cache (None: a summary that does not know it, read at the curve's own)
    if isinstance(record, CycleRecord):
        order = {nid: i for i, nid in enumerate(record.verify_order)}
        acc_rows: Sequence[int] | None = [order[a] for a in record.accepted_path if a in order]
    else:
        acc_rows = record.accepted_rows
    draft, forward, book = split_timings(record.timings_ms)
    rows, tokens = record.n_verified, len(record.committed_ids)
    best_b = best_x = None
    if curve is not None and acc_rows is not None and rows > 1:
        # the curve against its own 1-token forward, both over this cycle's cache (a long one makes every row dearer)
        u = run_ms(curve, 1, context)
        preds = [(kept_tokens(acc_rows, b + 1) * u / (draft + run_ms(curve, b + 1, context) + book), b)
                 for b in range(1, rows)]
        best_x, best_b = max(preds, key=lambda p: (p[0], -p[1]))
    facts = EngineFacts.read(record.state) if isinstance(record.state, dict) else EngineFacts.read({})
    run = int(facts.padded_to or 0)
    # The curve at what the forward ran, over this cycle's cache: as recorded, else as the engine would pad it today.
    if curve is None:
        curve_ms = None
    elif run:
        curve_ms = curve_at(curve, run, context)
    else:
        curve_ms = run_ms(curve, rows, context)
    cost = CycleCost(record.index, rows, tokens, draft, forward, book, t_ar, curve_ms, best_b, best_x,
                     rows_run=run or None, from_prefill=bool(facts.from_prefill))
    return _with_sentence(cost)


def _with_sentence(c: CycleCost) -> CycleCost:
    if c.from_prefill:
        return CycleCost(**{**asdict(c), "sentence": (
            f"{c.total_ms:.1f} ms of bookkeeping and no speed-up claimed: the prefill's forward gave this token.")})
    if c.total_ms <= 0:
        return CycleCost(**{**asdict(c), "sentence": "This cycle recorded no timings."})
    unit = f"a 1-token forward ({c.ar_forward_ms:.1f} ms)"
    if c.rows <= 1:
        head = f"An AR cycle: one 1-row forward of {c.forward_ms:.1f} ms = {c.verify_x:.2f}x {unit}"
    else:
        run = f" (run as {c.rows_run}, padded)" if c.rows_run and c.rows_run > c.rows else ""
        head = f"{c.rows}-row verify{run} took {c.forward_ms:.1f} ms = {c.verify_x:.1f}x {unit}"
        if c.curve_ms is not None:
            head += f"; the cost curve says {c.curve_ms / c.ar_forward_ms:.1f}x"
    tail = (f"draft {c.draft_ms:.1f} ms and bookkeeping {c.bookkeeping_ms:.1f} ms add {c.overhead_x:.1f}x; "
            f"{c.tokens} token{'s' if c.tokens != 1 else ''} committed: {c.tokens} / "
            f"{c.verify_x + c.overhead_x:.2f} = {c.speedup:.2f}x plain decoding.")
    text = f"{head}. {tail[0].upper()}{tail[1:]}"
    if c.best_budget is not None and c.best_speedup is not None:
        text += (f" In hindsight, cut to its first {c.best_budget} node{'s' if c.best_budget != 1 else ''} the "
                 f"cost curve predicts {c.best_speedup:.2f}x.")
    return CycleCost(**{**asdict(c), "sentence": text})


@dataclass(frozen=True)
class BudgetPoint:
    """The curve's prediction for a session had every tree been cut to ``budget`` draft nodes."""

    budget: int
    tau: float
    """Predicted tokens per cycle."""
    cycle_ms: float
    """Predicted mean cycle ms."""
    speedup: float


@dataclass(frozen=True)
class SessionCost:
    """A session's time against plain decoding: means per cycle (ms), and the sums' speed-ups."""

    cycles: int
    """Cycles counted (damaged cycles and cycles without timings are left out)."""
    tokens: int
    mean_rows: float
    draft_ms: float
    forward_ms: float
    bookkeeping_ms: float
    ar_forward_ms: float
    ar_source: str
    """Where t_ar comes from (the cost curve, or an AR session)."""
    measured_speedup: float
    """tau * t_ar / mean t_cycle, from the measured timings."""
    curve_speedup: float | None
    """The same with each forward replaced by the curve's, in units of the curve's own 1-token forward (how fast
    these trees are under the conditions the curve was measured in)."""
    budgets: list[BudgetPoint] = field(default_factory=list)
    best: BudgetPoint | None = None
    sentence: str = ""

    forwards: int = 0
    """Of the cycles counted, those that ran a target forward of their own."""

    @property
    def tau(self) -> float:
        """Tokens per target forward: the session's own number (``SessionInfo.tokens_per_forward``)."""
        return self.tokens / self.forwards if self.forwards else 0.0

    @property
    def cycle_ms(self) -> float:
        return self.draft_ms + self.forward_ms + self.bookkeeping_ms

    @property
    def headline(self) -> str:
        """The sentence in one short line (for a narrow panel; the sentence says the rest)."""
        if not self.cycles:
            return self.sentence
        text = (f"{self.measured_speedup:.2f}× plain decoding: {round(self.mean_rows)}-row verify "
                f"{self.forward_ms / self.ar_forward_ms:.1f}× t_ar, {self.tau:.2f} tokens/forward")
        if self.best is not None:
            text += f"; best budget {self.best.budget}: {self.best.speedup:.2f}× (cost curve)"
        return text

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["tau"], d["cycle_ms"] = self.tau, self.cycle_ms
        return d


def plain_unit(summaries: Iterable[CycleSummary], curve: Curve | None, ar_ms_per_token: float | None = None,
               ar_source: str = "", ar_forward_ms: float | None = None) -> tuple[float | None, str]:
    """t_ar, the time plain decoding takes a token here, in ms, and what it is: the one unit of every speed-up the
    window, ``explain`` and the race show for a session (None: neither a baseline nor a curve).

    An AR session's ms per token (``ar_ms_per_token``, its tokens/s inverted; ``ar_source`` names it) is the unit when
    it ran under this session's load: its median 1-row forward (``ar_forward_ms``) within :data:`LOAD_RATIO` of this
    session's own, forward against forward. This session's own 1-row forward is the median of its plain cycles'
    (:func:`own_plain_forward`) where it ran a few, else the curve's 1-row forward at its pace (:func:`session_pace`),
    an estimate; either is the unit where the baseline ran under another load or there is none. Figures timed under
    different loads are never put in one sentence."""
    cyc = [s for s in summaries if not s.damaged and s.timings_ms and sum(s.timings_ms.values()) > 0]
    plain = own_plain_forward(cyc)
    pace = session_pace(cyc, curve) if curve is not None else None
    given = ar_ms_per_token is not None and ar_ms_per_token > 0
    # the session's own plain 1-token forwards where it ran a few; else the curve's, scaled to the session's pace
    one = curve_at(curve, 1, _median_cache(cyc)) if curve is not None else 0.0  # at the session's cache
    own, what = (plain, "a 1-token forward of this session's own plain cycles") if plain is not None else (
        (one * pace, "a 1-token forward at this session's pace") if pace is not None else (None, ""))
    if given and own is not None:
        theirs = ar_forward_ms if ar_forward_ms else ar_ms_per_token  # an older baseline: its whole step
        if not same_load(float(theirs), own):
            return own, f"{what}; {ar_source} ran {theirs:.1f} ms a forward under another load, so it is not the unit"
    if given:
        return float(ar_ms_per_token), ar_source
    if plain is not None:
        return plain, f"{what} (the median of {len(_plain_forwards(cyc))})"
    if curve is not None and one > 0:
        return one * (pace or 1.0), "the cost curve's 1-token forward" + (
            " at this session's pace" if pace is not None else "")
    return None, ""


def _median_cache(cyc: Sequence[CycleSummary]) -> int | None:
    """The median cache length of the cycles that know theirs (None: none does)."""
    known = sorted(s.cache_len for s in cyc if s.cache_len is not None)
    return known[len(known) // 2] if known else None


#: A session's own plain cycles needed before their forwards are its unit (fewer: one slow forward would be it).
OWN_PLAIN = 3


def _plain_forwards(cyc: Sequence[CycleSummary]) -> list[float]:
    return [s.timings_ms["forward"] for s in cyc if s.n_verified == 1 and s.ran_forward
            and s.timings_ms.get("forward", 0.0) > 0 and not EngineFacts.read(s.state).padded_to]


def own_plain_forward(cyc: Sequence[CycleSummary]) -> float | None:
    """The median forward of a session's own plain cycles (one row, not padded), ms: plain decoding's step measured
    under the session's own load, with no curve between (a session scaled from its 60-row blocks by the curve's shape
    once claimed 3x plain decoding for an AR cycle of its own). None with fewer than :data:`OWN_PLAIN` of them."""
    ms = sorted(_plain_forwards(cyc))
    if len(ms) < OWN_PLAIN:
        return None
    return (ms[(len(ms) - 1) // 2] + ms[len(ms) // 2]) / 2


def session_cost(summaries: Iterable[CycleSummary], curve: Curve | None, ar_forward_ms: float | None = None,
                 ar_source: str = "", ar_forward_only_ms: float | None = None) -> SessionCost:
    """The arithmetic of a whole session from its cycle summaries, with the curve's best budget and the sentence.

    ``ar_forward_ms`` is an AR baseline's ms per token and ``ar_forward_only_ms`` its median forward: the unit when it
    ran under this session's load (:func:`plain_unit`), else the curve's 1-row forward at this session's pace."""
    cyc = [s for s in summaries if not s.damaged and s.timings_ms and sum(s.timings_ms.values()) > 0]
    t_ar, ar_source = plain_unit(cyc, curve, ar_forward_ms, ar_source, ar_forward_only_ms)
    if t_ar is None:
        raise ValueError("no unit: give ar_forward_ms or a cost curve")
    n = len(cyc)
    if not n:
        return SessionCost(0, 0, 0.0, 0.0, 0.0, 0.0, t_ar, ar_source, 0.0, None,
                           sentence="No cycle with timings to explain.")
    parts = [split_timings(s.timings_ms) for s in cyc]
    draft, forward, book = (sum(p[k] for p in parts) for k in range(3))
    tokens = sum(s.n_committed for s in cyc)
    measured = tokens * t_ar / (draft + forward + book)
    curve_x = budgets = best = None
    if curve is not None:  # the curve against its own 1-token forward, both at each cycle's cache: timed alike
        units = [run_ms(curve, 1, s.cache_len) for s in cyc]
        curve_x = sum(s.n_committed * u for s, u in zip(cyc, units)) / sum(
            d + run_ms(curve, s.n_verified, s.cache_len) + b for s, (d, _, b) in zip(cyc, parts))
        budgets = _budgets(cyc, parts, curve, units)
        best = max(budgets, key=lambda p: (p.speedup, -p.budget)) if budgets else None
    cost = SessionCost(n, tokens, sum(s.n_verified for s in cyc) / n, draft / n, forward / n, book / n, t_ar,
                       ar_source, measured, curve_x, budgets or [], best, forwards=sum(s.ran_forward for s in cyc))
    return SessionCost(**{**asdict(cost), "budgets": cost.budgets, "best": best, "sentence": _session_sentence(cost)})


def median_forward_ms(summaries: Iterable[CycleSummary]) -> float | None:
    """The median of a session's target forwards, ms (cycles that ran one): an AR baseline's 1-row forward, which
    :func:`plain_unit` compares with the cost curve at another session's pace."""
    ms = sorted(s.timings_ms["forward"] for s in summaries
                if not s.damaged and s.ran_forward and s.timings_ms.get("forward", 0.0) > 0)
    if not ms:
        return None
    return (ms[(len(ms) - 1) // 2] + ms[len(ms) // 2]) / 2


#: Two figures timed more than this far apart relative to the device's curve were timed under different loads.
LOAD_RATIO = 1.5


def same_load(a_ms: float, b_ms: float) -> bool:
    """Whether two timings of the same work (ms) are within :data:`LOAD_RATIO` of each other."""
    return a_ms > 0 and b_ms > 0 and max(a_ms, b_ms) / min(a_ms, b_ms) <= LOAD_RATIO


def session_pace(cyc: Sequence[CycleSummary], curve: Curve) -> float | None:
    """How fast this session's forwards ran against the device's curve: the median over its cycles of the measured
    forward ms over the curve's ms for the rows it ran (2.0: twice as slow, a busy machine). None without a timed
    forward."""
    ratios = sorted(
        s.timings_ms["forward"] / curve_at(curve, int(EngineFacts.read(s.state).padded_to or s.n_verified), s.cache_len)
        for s in cyc if s.timings_ms.get("forward", 0.0) > 0 and s.ran_forward and float(curve(1)) > 0)
    if not ratios:
        return None
    k = len(ratios)
    return (ratios[(k - 1) // 2] + ratios[k // 2]) / 2


def _budgets(cyc: list[CycleSummary], parts: list[tuple[float, float, float]], curve: Curve, units: list[float]
             ) -> list[BudgetPoint]:
    """The curve's prediction for every budget from 1 to the largest tree's (cycles recorded with accepted rows),
    each cycle's forward and its 1-token unit (``units``) read at the cycle's own cache, as :func:`cycle_cost` reads
    them.

    Rows rise along the accepted path (every node comes after its parent), so a cut at budget b keeps exactly the
    accepted nodes in rows 1..b: tokens(b) counts accepted rows up to b, each worth its cycle's unit. A budget's
    forwards are one array operation over the cycles (the curve tabulated by rows once), so a 10,000-cycle session
    is explained at once."""
    known = [(s, p, u) for s, p, u in zip(cyc, parts, units) if s.accepted_rows is not None]
    if not known:
        return []
    sizes = np.array([s.n_verified for s, _, _ in known])
    unit = np.array([u for _, _, u in known])
    worth = Counter()  # accepted row -> the units of the tokens it gives
    for s, _, u in known:
        for r in s.accepted_rows or ():
            worth[r] += u
    other = sum(d + k for _, (d, _, k), _ in known)
    m, top = len(known), int(sizes.max()) - 1
    forward = _forwards(curve, [s.cache_len for s, _, _ in known], int(sizes.max()))
    counts = Counter(r for s, _, _ in known for r in s.accepted_rows or ())
    out, tok, value = [], float(m) + counts.get(0, 0), float(unit.sum()) + worth.get(0, 0.0)  # each bonus, a unit
    for b in range(1, top + 1):
        tok += counts.get(b, 0)
        value += worth.get(b, 0.0)
        ms = other + float(forward(np.minimum(b + 1, sizes)).sum())
        out.append(BudgetPoint(b, tok / m, ms / m, value / ms if ms > 0 else 0.0))
    return out


def _forwards(curve: Curve, contexts: list[int | None], max_rows: int) -> Callable[[np.ndarray], np.ndarray]:
    """``rows`` [m] -> each cycle's forward ms for that many rows, as :func:`run_ms` gives it at the cycle's cache
    (``contexts`` [m]; None: the curve's own): the curve tabulated for 1..``max_rows`` rows once."""
    sizes = range(max_rows + 1)
    if not isinstance(curve, CostCurve):
        own = np.array([0.0, *(float(curve(r)) for r in sizes[1:])])
        return lambda rows: own[rows]
    run = [0, *(padded_rows(curve, r) for r in sizes[1:])]
    own = np.array([float(curve(r)) for r in run])
    if not curve.context_n or not curve.context_ms or all(c is None for c in contexts):
        return lambda rows: own[rows]
    per_token = np.array([_interpolate(curve.context_n, curve.context_ms, r) for r in run])
    extra = np.array([0.0 if c is None else float(c - curve.cache_len) for c in contexts])
    return lambda rows: np.maximum(0.5 * own[rows], own[rows] + extra * per_token[rows])


def _session_sentence(c: SessionCost) -> str:
    rows = round(c.mean_rows)
    verify_x, over_x = c.forward_ms / c.ar_forward_ms, (c.draft_ms + c.bookkeeping_ms) / c.ar_forward_ms
    what = "verify" if rows > 1 else "forward"
    unit = "a 1-token forward" if c.ar_source.startswith(("the cost curve", "a 1-token")) else "a plain decoding step"
    text = (f"A {rows}-row {what} costs {verify_x:.1f}x {unit} ({c.forward_ms:.1f} vs "
            f"{c.ar_forward_ms:.1f} ms: {c.ar_source}); draft and bookkeeping add {over_x:.1f}x; "
            f"{c.tau:.2f} tokens per forward: net {c.tau:.2f} / {verify_x + over_x:.2f} = {c.measured_speedup:.2f}x")
    if c.curve_speedup is not None:
        text += f" (the cost curve predicts {c.curve_speedup:.2f}x for these trees)"
    text += "."
    if c.best is not None:
        if c.best.speedup > 1.0:
            text += f" With budget {c.best.budget} the measured cost curve predicts {c.best.speedup:.2f}x."
        else:
            text += (f" No budget beats plain decoding here: the best, budget {c.best.budget}, predicts "
                     f"{c.best.speedup:.2f}x.")
    elif c.curve_speedup is None:
        text += " Measure the cost curve to see which budget would pay off."
    else:
        text += " (Recorded before the accepted rows were stored: no budget prediction.)"
    return text
