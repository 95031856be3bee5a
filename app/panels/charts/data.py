"""The numbers behind the charts panel: per-cycle series kept in numpy arrays that grow in place.

No Qt here. :class:`ChartData` takes :class:`~specviz_core.analysis.cycle_summary.CycleSummary` lists in chunks (a whole
recording at once, or one live cycle at a time) and keeps, per cycle: tau (tokens per target forward),
rolling means, throughput, cumulative acceptance per node source, Goose's spine ratio and EMA, TALON's
delta, and the acceptance counts by (depth, sibling rank). Appending a chunk costs time proportional to
the chunk, not to the session (rolling means come from running sums).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import chain, repeat

import numpy as np

from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.analysis.metrics import MetricsCounter, SessionMetrics

#: Cycles in the rolling means.
WINDOW = 16

#: Per-cycle state keys the charts read.
SPINE_RATIO, EMA_P_S, DELTA = ("spine_ratio",), ("ema_p_s",), ("delta",)
STEP_KEYS = ("draft_forwards", "draft_steps")
#: transformers' assistant schedule (hf_assisted, hf_universal): the series name is the state key.
SCHEDULE = ("num_assistant_tokens", "assistant_confidence_threshold", "num_assistant_tokens_next",
            "candidate_length", "n_matches")


def _state_floats(states: list[dict], keys: tuple[str, ...]) -> np.ndarray:
    """One state value per cycle as float (the first of ``keys`` present); NaN where a cycle has none."""
    vals = list(map(dict.get, states, repeat(keys[0])))
    for key in keys[1:]:
        if any(v is None for v in vals):
            vals = [st.get(key) if v is None else v for v, st in zip(vals, states)]
    try:
        return np.array(vals, dtype=float)  # None becomes NaN
    except (TypeError, ValueError):
        return np.array([v if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan for v in vals],
                        dtype=float)


class ChartData:
    """Per-cycle series of one session, for cycles ``0 .. n-1``. Arrays are views: copy before keeping."""

    def __init__(self, window: int = WINDOW) -> None:
        self.window = window
        self.reset()

    def reset(self) -> None:
        self.n = 0
        self._cap = 0
        self._f: dict[str, np.ndarray] = {}       # float series, capacity long
        self._bypass = np.zeros(0, dtype=bool)
        self._sums: dict[str, np.ndarray] = {}    # running sums with a leading 0: length capacity + 1
        self._src: dict[str, np.ndarray] = {}     # source -> [capacity, 2] cumulative (verified, accepted)
        self.heat_verified = np.zeros((0, 0))     # [depth, rank] summed over cycles
        self.heat_accepted = np.zeros((0, 0))
        self.has_spine = self.has_delta = self.has_timings = self.has_schedule = False
        self.metrics = MetricsCounter()  # the serving-dashboard metrics, stop causes and headroom so far
        self._metrics_result: SessionMetrics | None = None

    # -- growth ------------------------------------------------------------------
    _SERIES = ("tau", "committed", "ms", "n_verified", "tau_rolling", "tps", "tps_rolling", "tau_cum",
               "spine_ratio", "ema_p_s", "delta", "steps", "draft_ms", "forward_ms", "book_ms", "forwards", *SCHEDULE)
    _SUMMED = ("tau", "committed", "ms", "steps", "forwards")

    def _reserve(self, n: int) -> None:
        if n <= self._cap:
            return
        cap = max(n, 2 * self._cap, 256)
        for name in self._SERIES:
            a = np.full(cap, np.nan)
            if name in self._f:
                a[: self.n] = self._f[name][: self.n]
            self._f[name] = a
        for name in self._SUMMED:
            a = np.zeros(cap + 1)
            if name in self._sums:
                a[: self.n + 1] = self._sums[name][: self.n + 1]
            self._sums[name] = a
        b = np.zeros(cap, dtype=bool)
        b[: self.n] = self._bypass[: self.n]
        self._bypass = b
        for name, c in self._src.items():
            self._src[name] = self._grow_src(c, cap)
        self._cap = cap

    def _grow_src(self, c: np.ndarray | None, cap: int) -> np.ndarray:
        a = np.zeros((cap, 2))
        if c is not None:
            a[: self.n] = c[: self.n]
        return a

    # -- appending -----------------------------------------------------------------
    def extend(self, summaries: Sequence[CycleSummary]) -> None:
        """Append cycles ``n .. n+len-1`` (the summaries of the next cycles, in order)."""
        m = len(summaries)
        if not m:
            return
        self.metrics.add(summaries)
        self._metrics_result = None
        n0, n1 = self.n, self.n + m
        self._reserve(n1)
        f, sl = self._f, slice(n0, n1)
        f["tau"][sl] = np.fromiter((s.n_accepted for s in summaries), float, m) + 1.0
        f["committed"][sl] = np.fromiter((len(s.committed_ids) for s in summaries), float, m)
        f["ms"][sl] = np.fromiter((s.cycle_ms for s in summaries), float, m)
        f["n_verified"][sl] = np.fromiter((s.n_verified for s in summaries), float, m)
        f["forwards"][sl] = np.fromiter((s.ran_forward for s in summaries), float, m)
        damaged = np.fromiter((bool(s.damaged) for s in summaries), bool, m)
        # The time breakdown (:func:`specviz_core.analysis.timing.split_timings`): bookkeeping is all but draft and forward.
        f["draft_ms"][sl] = np.fromiter((s.timings_ms.get("draft", 0.0) for s in summaries), float, m)
        f["forward_ms"][sl] = np.fromiter((s.timings_ms.get("forward", 0.0) for s in summaries), float, m)
        f["book_ms"][sl] = f["ms"][sl] - f["draft_ms"][sl] - f["forward_ms"][sl]
        self.has_timings = self.has_timings or any(s.timings_ms for s in summaries)
        for name in ("tau", "committed", "ms", "n_verified", "draft_ms", "forward_ms", "book_ms"):  # a damaged cycle has no numbers: a gap, not a zero
            f[name][sl][damaged] = np.nan
        self._bypass[sl] = np.fromiter((s.mode == "bypass" for s in summaries), bool, m)
        states = [s.state for s in summaries]
        f["spine_ratio"][sl] = _state_floats(states, SPINE_RATIO)
        f["ema_p_s"][sl] = _state_floats(states, EMA_P_S)
        f["delta"][sl] = _state_floats(states, DELTA)
        f["steps"][sl] = _state_floats(states, STEP_KEYS)
        for key in SCHEDULE:
            f[key][sl] = _state_floats(states, (key,))
        self.has_spine = self.has_spine or bool(np.isfinite(f["spine_ratio"][sl]).any())
        self.has_schedule = self.has_schedule or bool(np.isfinite(f["num_assistant_tokens"][sl]).any())
        self.has_delta = self.has_delta or bool(np.isfinite(f["delta"][sl]).any() or np.isfinite(f["steps"][sl]).any())

        for name in self._SUMMED:
            vals = np.nan_to_num(f[name][sl])
            self._sums[name][n0 + 1: n1 + 1] = self._sums[name][n0] + np.cumsum(vals)
        i = np.arange(n0, n1)
        lo = np.maximum(0, i + 1 - self.window)
        s_tau, s_com, s_ms, s_steps, s_fwd = (self._sums[k] for k in self._SUMMED)
        f["tau_rolling"][sl] = (s_tau[i + 1] - s_tau[lo]) / (i + 1 - lo)
        with np.errstate(divide="ignore", invalid="ignore"):  # tokens per forward so far: the session's own number
            f["tau_cum"][sl] = np.where(s_fwd[i + 1] > 0, s_com[i + 1] / s_fwd[i + 1], np.nan)
        ms = f["ms"][sl]
        with np.errstate(divide="ignore", invalid="ignore"):
            # a cycle's own rate (:func:`specviz_core.analysis.metrics.cycle_rate`): none where it ran no forward
            f["tps"][sl] = np.where((ms > 0) & (f["forwards"][sl] > 0), f["committed"][sl] / ms * 1000.0, np.nan)
            win_ms = s_ms[i + 1] - s_ms[lo]
            f["tps_rolling"][sl] = np.where((win_ms > 0) & (s_fwd[i + 1] > s_fwd[lo]),
                                            (s_com[i + 1] - s_com[lo]) / win_ms * 1000.0, np.nan)
        # TALON records its running delta; otherwise it is the running mean of draft steps per cycle.
        d = f["delta"][sl]
        f["delta"][sl] = np.where(np.isfinite(d), d, np.where(np.isfinite(f["steps"][sl]), s_steps[i + 1] / (i + 1),
                                                               np.nan))
        self._extend_sources(summaries, n0, n1)
        self._extend_heat(summaries)
        self.n = n1

    def _extend_sources(self, summaries: Sequence[CycleSummary], n0: int, n1: int) -> None:
        m = n1 - n0
        dicts = [s.by_source for s in summaries]
        for name in set(chain.from_iterable(dicts)) - self._src.keys():
            self._src[name] = self._grow_src(None, self._cap)
        for name, c in self._src.items():
            counts = np.fromiter(chain.from_iterable(map(dict.get, dicts, repeat(name), repeat((0, 0)))), float,
                                 2 * m).reshape(m, 2)
            c[n0:n1] = (c[n0 - 1] if n0 else 0.0) + np.cumsum(counts, axis=0)

    def _extend_heat(self, summaries: Sequence[CycleSummary]) -> None:
        # A 10,000-cycle tree session has ~200,000 (depth, rank) entries but only a few hundred distinct
        # ((depth, rank), (verified, accepted)) pairs: count those in C, then weight them.
        quads = Counter(map(tuple, chain.from_iterable(s.depth_rank for s in summaries)))
        pairs = Counter({((d, r), (v, a)): c for (d, r, v, a), c in quads.items()})
        if not pairs:
            return
        k = np.array([key for key, _ in pairs], dtype=np.int64).reshape(-1, 2)
        v = np.array([val for _, val in pairs], dtype=float).reshape(-1, 2)
        v *= np.fromiter(pairs.values(), float, len(pairs))[:, None]
        depth_n = max(int(k[:, 0].max()) + 1, self.heat_verified.shape[0])
        rank_n = max(int(k[:, 1].max()) + 1, self.heat_verified.shape[1])
        if (depth_n, rank_n) != self.heat_verified.shape:
            for name in ("heat_verified", "heat_accepted"):
                old, new = getattr(self, name), np.zeros((depth_n, rank_n))
                new[: old.shape[0], : old.shape[1]] = old
                setattr(self, name, new)
        np.add.at(self.heat_verified, (k[:, 0], k[:, 1]), v[:, 0])
        np.add.at(self.heat_accepted, (k[:, 0], k[:, 1]), v[:, 1])

    # -- reading -------------------------------------------------------------------
    def series(self, name: str) -> np.ndarray:
        """A per-cycle float series (see ``_SERIES``), length n."""
        return self._f[name][: self.n] if self.n else np.zeros(0)

    @property
    def bypass_indices(self) -> np.ndarray:
        return np.flatnonzero(self._bypass[: self.n])

    @property
    def sources(self) -> list[str]:
        return sorted(self._src)

    def session_metrics(self) -> SessionMetrics:
        """The metrics of the cycles so far (worked out once per append, however many charts read them)."""
        if self._metrics_result is None:
            self._metrics_result = self.metrics.result()
        return self._metrics_result

    def source_counts(self, name: str) -> np.ndarray:
        """[n, 2] cumulative (verified, accepted) of one node source."""
        return self._src[name][: self.n]

    def accepted_by_source(self) -> dict[str, int]:
        """Accepted draft tokens of each node source, over the session so far."""
        return {name: int(c[self.n - 1, 1]) for name, c in self._src.items()} if self.n else {}

    def source_rate(self, name: str) -> np.ndarray:
        """Cumulative accepted / verified of one node source per cycle (NaN until it is first verified)."""
        c = self.source_counts(name)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(c[:, 0] > 0, c[:, 1] / c[:, 0], np.nan)

    @property
    def total_tokens_per_s(self) -> float:
        ms = self._sums["ms"][self.n] if self.n else 0.0
        return float(self._sums["committed"][self.n] / ms * 1000.0) if ms > 0 else 0.0

    @property
    def mean_tau(self) -> float:
        """Tokens committed per target forward: the session's one number (``SessionInfo.tokens_per_forward``), the one
        the Run panel, ``sessions`` and ``compare`` show (a cycle 0 that took its token from the prefill ran no
        forward of its own)."""
        forwards = self._sums["forwards"][self.n] if self.n else 0.0
        return float(self._sums["committed"][self.n] / forwards) if forwards > 0 else 0.0


def cost_points(curve: object) -> list[tuple[int, float]] | None:
    """(block size N, forward ms) pairs, sorted by N, from a dict or pairs; None if absent or unreadable."""
    try:
        if curve is None:
            return None
        if isinstance(curve, dict):
            for key in ("points", "curve"):
                if key in curve:
                    return cost_points(curve[key])
            if "n" in curve and "ms" in curve:
                return cost_points(list(zip(curve["n"], curve["ms"])))
            return cost_points(list(curve.items()))
        pts = sorted((int(n), float(ms)) for n, ms in curve)
        return pts or None
    except (TypeError, ValueError):
        return None
