"""Forks (what-if): a new session that continues a recorded one from any cycle with other settings.

A fork of session P at cycle C re-runs P's own settings for cycles 0..C-1 on one engine, checking that every
regenerated cycle equals the recorded one (its committed tokens, its draft tree, its accepted path and bonus),
then switches that same engine to the fork's settings for cycles C on. Keeping the one engine keeps the KV cache,
the drafter's learned state and the random stream exactly where the parent had them:

- the same method with the same parameters keeps the parent's drafter; any other method or parameter starts a new
  drafter as if the committed tokens were its prompt (``start`` then a harvest of a plain forward over them);
- the same seed keeps the parent's ``torch.Generator`` mid-stream; another seed starts a new one at cycle C;
- temperature and max new tokens simply apply from cycle C on.

So a fork with unchanged settings reproduces the parent's remaining cycles exactly, greedy or seeded sampling.
The fork records every cycle, the re-run ones included, and ``parent_session`` / ``fork_cycle``. See docs/fork.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from transformers import DynamicCache

from specviz_core.engine.budget import make_controller
from specviz_core.engine.cycle import DecodeConfig, prefill_into
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.records import CycleRecord, SessionInfo
from specviz_core.runtime.models import LoadedModel
from specviz_core.session.factory import Prepared, build_engine, session_info
from specviz_core.session.request import CheckedRequest, MethodChoice, SessionRequest, check_method
from specviz_core.session.run import RecordedCycle, RecordedRun


def parse_fork_point(text: str) -> tuple[str, int]:
    """``SESSION:CYCLE`` as (session id, cycle)."""
    sid, sep, cycle = text.rpartition(":")
    if not sep or not sid or not cycle.strip().isdigit():
        raise SpecVizError(f"--fork takes SESSION:CYCLE, e.g. 1dc3fb952bda:14, got {text!r}")
    return sid.strip(), int(cycle)


def fork_request(parent: SessionInfo, method: str | None = None, params: dict[str, Any] | None = None,
                 budget: int | None = None, temperature: float | None = None, seed: int | None = None,
                 max_new_tokens: int | None = None, draft_model: str | None = None,
                 device: str | None = None, dtype: str | None = None) -> CheckedRequest:
    """The fork's settings: the parent's, with what the user changed on top (another method starts from its own
    defaults), checked."""
    method = method or parent.method
    raw = dict(parent.params) if method == parent.method else {}
    raw.update(params or {})
    if budget is not None:
        raw.pop("budget", None)
    req = SessionRequest(
        method=method, prompt=parent.prompt_text or "(the parent's prompt)", model=parent.model,
        draft_model=draft_model or parent.draft_model, params=raw, budget=budget,
        max_new_tokens=max_new_tokens if max_new_tokens is not None else parent.max_new_tokens or 128,
        temperature=parent.temperature if temperature is None else temperature,
        seed=parent.seed if seed is None else seed, chat_template=parent.chat_template, device=device, dtype=dtype)
    return req.check()


def parent_choice(parent: SessionInfo) -> MethodChoice:
    """The parent's method and parameters as recorded, checked again (a parameter this version lacks is refused)."""
    try:
        return check_method(parent.method, parent.params)
    except SpecVizError as e:
        raise SpecVizError(f"cannot re-run session {parent.id}: {e}") from None


def load_prefix(rec: Recording, parent: SessionInfo, cycle: int) -> list[CycleRecord]:
    """The parent's cycles 0..cycle-1, which the fork re-runs and checks (a damaged one is refused)."""
    if parent.status == "running":
        raise SpecVizError(f"session {parent.id} is still being recorded: fork it when it has ended")
    if not 0 <= cycle <= parent.n_cycles:
        raise SpecVizError(f"session {parent.id} has cycles 0 to {parent.n_cycles - 1}: cannot fork at cycle {cycle}")
    return list(rec.cycles(parent.id, 0, cycle))


@dataclass(frozen=True)
class Mismatch:
    """The first re-run cycle that differs from the recording."""

    cycle: int
    what: str
    recorded: str
    regenerated: str

    def message(self) -> str:
        return (f"cycle {self.cycle} did not reproduce: its {self.what} differ (recorded {self.recorded}, re-run "
                f"{self.regenerated}); the model computed something else: another device, dtype, model file or "
                "SpecViz version can change the numbers")


class ForkMismatch(SpecVizError):
    """A re-run cycle differs from the recording; the fork waits: ``continue_anyway()`` or ``stop()``."""

    def __init__(self, mismatch: Mismatch) -> None:
        super().__init__(mismatch.message())
        self.mismatch = mismatch


def _short(values: Any, limit: int = 8) -> str:
    values = list(values)
    return str(values[:limit])[:-1] + ", ...]" if len(values) > limit else str(values)


def cycle_difference(recorded: CycleRecord, rerun: CycleRecord) -> Mismatch | None:
    """What differs between a recorded cycle and its re-run: committed tokens, the draft tree (tokens, parents,
    sources, verified or gated), the accepted path and bonus. Scores and timings may differ in the last bits."""
    def tree(c: CycleRecord) -> list[tuple]:
        return [(n.token, n.parent, n.source, n.verified, n.gated) for n in c.nodes]

    checks = [
        ("committed tokens", recorded.committed_ids, rerun.committed_ids),
        ("draft trees", tree(recorded), tree(rerun)),
        ("accepted paths", (recorded.accepted_path, recorded.bonus_token), (rerun.accepted_path, rerun.bonus_token)),
        ("modes", recorded.mode, rerun.mode),
    ]
    for what, a, b in checks:
        if a != b:
            if what == "draft trees":
                i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                a, b = (f"{len(a)} nodes, node {i} = {a[i] if i < len(a) else 'none'}",
                        f"{len(b)} nodes, node {i} = {b[i] if i < len(b) else 'none'}")
            else:
                a, b = (_short(a), _short(b)) if isinstance(a, tuple) and what == "committed tokens" else (a, b)
            return Mismatch(recorded.index, what, str(a), str(b))
    return None


def prepare_fork(parent: SessionInfo, checked: CheckedRequest, fork_cycle: int, target: LoadedModel,
                 parent_draft: LoadedModel | None = None, draft: LoadedModel | None = None) -> Prepared:
    """An engine with the parent's settings (it re-runs the prefix), and the fork's session row."""
    engine = build_engine(target, parent_choice(parent), parent.prompt_ids, draft=parent_draft,
                          max_new_tokens=parent.max_new_tokens or checked.request.max_new_tokens,
                          temperature=parent.temperature, seed=parent.seed)
    req = checked.request
    info = session_info(target, checked.choice, parent.prompt_ids, prompt_text=parent.prompt_text,
                        temperature=req.temperature, seed=req.seed, max_new_tokens=req.max_new_tokens, draft=draft,
                        chat_template=parent.chat_template)
    return Prepared(engine, replace(info, parent_session=parent.id, fork_cycle=fork_cycle))


class ForkedRun(RecordedRun):
    """A recorded run that re-runs and checks the parent's cycles before ``fork_cycle``, then switches settings.

    On the first re-run cycle that differs, ``step()`` raises :class:`ForkMismatch` without storing it (the session
    stays running): ``continue_anyway()`` stores it and goes on, unchecked, from the re-run state; ``stop()`` ends
    the session as failed. ``anyway=True`` continues at once (the difference is still reported in ``mismatch``).
    """

    def __init__(self, prepared: Prepared, recording: Recording, parent: SessionInfo, recorded: list[CycleRecord],
                 checked: CheckedRequest, draft: LoadedModel | None = None, anyway: bool = False) -> None:
        super().__init__(prepared, recording)
        self.parent = parent
        self.recorded = recorded
        self.engine.reuse_decisions(recorded)  # what the parent's clock decided is applied, not decided again
        self.fork_cycle = len(recorded)
        self.checked = checked
        self.draft = draft
        self.anyway = anyway
        self.mismatch: Mismatch | None = None
        self.switched = False
        self._pending: CycleRecord | None = None
        self._warm_ms = 0.0

    @property
    def reproducing(self) -> bool:
        """Still re-running the parent's cycles."""
        return not self.switched

    @property
    def rerun_left(self) -> bool:
        """Cycles of the parent still to re-run (or a re-run one waiting on a failed check)."""
        return self._pending is not None or (self.engine.cycle_index < self.fork_cycle and not self.engine.done)

    def step(self) -> RecordedCycle:
        e = self.engine
        if self._pending is None and e.cycle_index < self.fork_cycle and not e.done:
            try:
                self._pending = self._rerun()
            except Exception as err:
                self._fail(str(err) if isinstance(err, SpecVizError) else f"{type(err).__name__}: {err}")
                raise
        waiting = self._pending is not None and self.mismatch is not None and self.mismatch.cycle == self._pending.index
        if waiting and not self.anyway:
            raise ForkMismatch(self.mismatch)
        return super().step()

    def _rerun(self) -> CycleRecord:
        e = self.engine
        if not e.prefilled:
            self.writer.set_prefill_ms(e.prefill())
        record = e.step()
        if self.mismatch is None:
            self.mismatch = cycle_difference(self.recorded[record.index], record)
        if record.index + 1 == self.fork_cycle:
            e.decided = {}  # from the fork's cycle on, its own settings decide
        return record

    def _decode(self) -> CycleRecord:
        if self._pending is not None:
            record, self._pending = self._pending, None
            return record
        if not self.engine.prefilled:
            self.writer.set_prefill_ms(self.engine.prefill())
        if not self.switched:
            self._switch()
        record = self.engine.step()
        if self._warm_ms:
            record = record.replace(timings_ms=dict(record.timings_ms, warmup=self._warm_ms))
            self._warm_ms = 0.0
        return record

    def _cycle_stored(self) -> None:
        if not self.switched and self.engine.cycle_index == self.fork_cycle:
            self._switch()

    def continue_anyway(self) -> None:
        self.anyway = True

    def stop(self) -> None:
        """End the fork after a failed check: the session is marked failed with the difference as its reason."""
        self._fail(f"not reproducible: {self.mismatch.message()}" if self.mismatch else "stopped by the user")

    def _switch(self) -> None:
        """From here on, the fork's own settings (see the module's docstring)."""
        import time

        e, parent, new = self.engine, self.parent, self.checked
        req = new.request
        self.switched = True
        if e.done:
            if e.stop_reason == "max_new_tokens" and req.max_new_tokens > len(e.output_ids):
                e.stop_reason = ""
            else:
                raise SpecVizError(f"session {parent.id} ended at cycle {self.fork_cycle - 1} ({e.stop_reason}): "
                                   "there is nothing to continue; fork at an earlier cycle")
        if len(e.output_ids) >= req.max_new_tokens:
            raise SpecVizError(f"{len(e.output_ids)} tokens are already committed at cycle {self.fork_cycle}: give "
                               f"a max new tokens above that")
        if (new.choice.method, new.choice.on(e.target).recorded_params) != (parent.method, dict(parent.params)):
            t0 = time.perf_counter()
            drafter = new.choice.cls(new.choice.params, e.target, self.draft)
            drafter.start(list(e.ids))  # the committed tokens as its prompt
            prefill_into(e.target, drafter, e.ids[:-1], DynamicCache())
            e.drafter = drafter
            e.budget = make_controller(e.target, new.choice.cls.max_budget(new.choice.params),
                                       getattr(new.choice.params, "budget", None)) if new.choice.auto \
                else None
            self._warm_ms = (time.perf_counter() - t0) * 1000.0
        if req.seed != parent.seed:
            e.generator = torch.Generator(device="cpu").manual_seed(req.seed)
        e.config = DecodeConfig(max_new_tokens=req.max_new_tokens, temperature=req.temperature, seed=req.seed,
                                stop_on_eos=e.config.stop_on_eos)

    def check_text(self) -> str:
        if self.mismatch is not None:
            return f"not reproducible: {self.mismatch.message()}"
        return f"reproduced cycles 0-{self.fork_cycle - 1}" if self.fork_cycle else "nothing to reproduce"

    def finish(self, status: str, reason: str = "") -> None:
        self.writer.finish(status, reason, {**self.engine.session_stats(), "fork_check": self.check_text()})
