"""Two or more recorded sessions side by side: the numbers, the outputs aligned, time to token.

Everything comes from the sessions' headers (tokens, forwards, tokens/s: the numbers ``specviz sessions`` shows)
and cycle summaries (how each token was committed, when, by which cycle; no trees), so the Compare view,
``specviz compare`` and the race read the same thing. Ratios are against the first session (put the baseline,
usually ``ar``, first).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.analysis.metrics import SessionMetrics, session_metrics, speedup
from specviz_core.errors import SpecVizError
from specviz_core.records import SessionInfo


@dataclass(frozen=True)
class Compared:
    """One session of a comparison."""

    info: SessionInfo
    summaries: tuple[CycleSummary, ...]
    metrics: SessionMetrics = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics", session_metrics(self.summaries))

    @property
    def label(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in sorted(self.info.params.items()) if k == "budget")
        return f"{self.info.method}{f' ({params})' if params else ''} {self.info.id[:6]}"

    @property
    def output(self) -> tuple[int, ...]:
        return self.info.output_ids

    @property
    def tokens_per_s(self) -> float:
        return self.info.tokens_per_s

    @property
    def tau(self) -> float:
        return self.info.tokens_per_forward

    def by_source(self) -> dict[str, tuple[int, int]]:
        """Per node source over the session: (verified, accepted)."""
        total: dict[str, list[int]] = {}
        for s in self.summaries:
            for src, (v, a) in s.by_source.items():
                t = total.setdefault(src, [0, 0])
                t[0] += v
                t[1] += a
        return {k: (v[0], v[1]) for k, v in sorted(total.items())}

    def time_to_token(self) -> list[tuple[float, int]]:
        """(ms since the first cycle began, tokens committed by then), one point per cycle end, from (0, 0)."""
        out, t, n = [(0.0, 0)], 0.0, 0
        for s in self.summaries:
            t += s.cycle_ms
            n += s.n_committed
            out.append((t, n))
        return out

    def accepted_per_cycle(self) -> Counter[int]:
        """How many cycles accepted 0, 1, 2, ... draft tokens."""
        return Counter(s.n_accepted for s in self.summaries)

    def cycle_starts(self) -> list[int]:
        """The output position where each cycle's first token landed (a cycle boundary), in cycle order."""
        out, n = [], 0
        for s in self.summaries:
            out.append(n)
            n += s.n_committed
        return out

    @property
    def fork_position(self) -> int | None:
        """For a fork: the output position its own settings start at (the tokens before came from the parent's
        settings, re-run), so parent and fork align there; None for a session that is not a fork."""
        c = self.info.fork_cycle
        if self.info.parent_session is None or c is None:
            return None
        starts = self.cycle_starts()
        return starts[c] if c < len(starts) else len(self.output)

    def token_cycles(self) -> list[tuple[int, str, int, bool]]:
        """Per output position: (token, how it was committed, cycle index, first token of its cycle)."""
        out = []
        for s in self.summaries:
            for k, (tok, kind) in enumerate(zip(s.committed_ids, s.committed_kinds)):
                out.append((tok, kind, s.index, k == 0))
        return out


@dataclass(frozen=True)
class Comparison:
    sessions: tuple[Compared, ...]

    @property
    def base(self) -> Compared:
        return self.sessions[0]

    def same_prompt(self) -> bool:
        return len({s.info.prompt_ids for s in self.sessions}) == 1

    def first_difference(self) -> int | None:
        """The first output position where any session differs from the first (a shorter output ends there);
        None when every output is the same."""
        outs = [s.output for s in self.sessions]
        n = min(len(o) for o in outs)
        for i in range(n):
            if len({o[i] for o in outs}) > 1:
                return i
        return None if len({len(o) for o in outs}) == 1 else n

    def rows(self) -> list[dict[str, Any]]:
        """The summary table: one row per session, ratios against the first."""
        b = self.base
        rows = []
        for s in self.sessions:
            m = s.metrics
            rows.append({
                "session": s.info.id, "method": s.info.method, "params": dict(s.info.params),
                "tokens": s.info.n_tokens, "forwards": s.info.n_forward, "tau": s.tau,
                "tokens_per_s": s.tokens_per_s,
                "speedup": speedup(s.tokens_per_s, b.tokens_per_s),
                "tau_ratio": s.tau / b.tau if b.tau > 0 else None,
                "forwards_ratio": s.info.n_forward / b.info.n_forward if b.info.n_forward else None,
                "draft_acceptance_rate": m.draft_acceptance_rate,
                "by_source": {k: {"verified": v, "accepted": a, "rate": a / v if v else 0.0}
                              for k, (v, a) in s.by_source().items()},
            })
        return rows

    def text(self, decode: Any = None) -> list[str]:
        """The comparison as lines of text (``specviz compare``); ``decode(ids) -> str`` shows tokens."""
        rows = self.rows()
        # A method's budget beside it when it is not the default (auto): goose and goose at the paper's 60 differ.
        names = [r["method"] + (f" budget={r['params']['budget']}" if str(r["params"].get("budget", "auto")) != "auto"
                                else "") for r in rows]
        w = max(12, max(len(n) for n in names) + 2)
        lines = [f"{'session':<14}{'method':<{w}}{'tokens':>7}{'fwd':>6}{'tau':>7}{'tok/s':>8}{'speed-up':>10}"
                 f"{'tau x':>7}  acceptance by source"]
        for r, name in zip(rows, names):
            src = ", ".join(f"{k} {v['accepted']}/{v['verified']}" for k, v in r["by_source"].items()) or "-"
            speed = "-" if r["speedup"] is None else f"{r['speedup']:.2f}x"
            tau_x = "-" if r["tau_ratio"] is None else f"{r['tau_ratio']:.2f}"
            lines.append(f"{r['session'][:12]:<14}{name:<{w}}{r['tokens']:>7}{r['forwards']:>6}"
                         f"{r['tau']:>7.2f}{r['tokens_per_s']:>8.1f}{speed:>10}{tau_x:>7}  {src}")
        if not self.same_prompt():
            lines.append("prompts differ: the outputs are not comparable token by token")
            return lines
        i = self.first_difference()
        if i is None:
            lines.append(f"outputs: identical ({len(self.base.output)} tokens)")
        else:
            show = []
            for s in self.sessions:
                out = s.output
                tok = "(end)" if i >= len(out) else (repr(decode([out[i]])) if decode else str(out[i]))
                show.append(f"{s.info.id[:12]} {tok}")
            sampled = any(s.info.temperature > 0 for s in self.sessions)
            lines.append(f"outputs: first differ at position {i}{' (sampled sessions)' if sampled else ''}: "
                         + "; ".join(show))
        for s in self.sessions:
            hist = s.accepted_per_cycle()
            lines.append(f"accepted per cycle, {s.info.id[:12]}: "
                         + " ".join(f"{k}:{hist[k]}" for k in sorted(hist)))
        return lines


def compare(sessions: Sequence[tuple[SessionInfo, Sequence[CycleSummary]]]) -> Comparison:
    """Sessions side by side: of one model and tokenizer (else their speed-ups would compare the models, not the
    methods, and their tokens would not be the same text), else one clear error."""
    if len(sessions) < 2:
        raise ValueError("a comparison needs two sessions or more")
    base = sessions[0][0]
    for info, _ in sessions[1:]:
        for what, a, b in (("model", base.model, info.model), ("tokenizer", base.tokenizer, info.tokenizer)):
            if a != b:
                raise SpecVizError(f"sessions {base.id} and {info.id} decode with different {what}s ({a} and {b}): "
                                   f"compare and race sessions of one model, so that the ratios compare methods")
    return Comparison(tuple(Compared(info, tuple(s)) for info, s in sessions))


def fork_tree(sessions: Sequence[SessionInfo]) -> list[tuple[SessionInfo, int]]:
    """The sessions in their order, each fork right after its parent: (session, how many forks deep). A fork whose
    parent is not among them stays in its place at depth 0."""
    ids = {s.id for s in sessions}
    children: dict[str, list[SessionInfo]] = {}
    for s in sessions:
        if s.parent_session in ids and s.parent_session != s.id:
            children.setdefault(s.parent_session, []).append(s)
    out: list[tuple[SessionInfo, int]] = []
    seen: set[str] = set()

    def visit(s: SessionInfo, depth: int) -> None:
        if s.id in seen:
            return
        seen.add(s.id)
        out.append((s, depth))
        for c in children.get(s.id, ()):
            visit(c, depth + 1)

    for s in sessions:
        if s.parent_session not in ids or s.parent_session == s.id:
            visit(s, 0)
    for s in sessions:  # a cycle of parents (a damaged file): still listed
        visit(s, 0)
    return out


def fork_label(info: SessionInfo) -> str:
    """``fork of S@C`` for a fork, else ''."""
    return f"fork of {info.parent_session}@{info.fork_cycle}" if info.parent_session else ""
