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

from specviz_core.engine.budget import make_controller
from specviz_core.engine.cycle import DecodeConfig
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.records import CycleRecord, SessionInfo
from specviz_core.runtime.models import LoadedModel
from specviz_core.session.factory import load_draft, session_info
from specviz_core.session.spec import MethodChoice, SessionRequest, SessionSpec, check_method, choice_fields
from specviz_core.session.session import Progress, RecordedCycle, Session


def parse_fork_point(text: str) -> tuple[str, int]:
    """``SESSION:CYCLE`` as (session id, cycle)."""
    sid, sep, cycle = text.rpartition(":")
    if not sep or not sid or not cycle.strip().isdigit():
        raise SpecVizError(f"--fork takes SESSION:CYCLE, e.g. 1dc3fb952bda:14, got {text!r}")
    return sid.strip(), int(cycle)


def fork_request(parent: SessionInfo, method: str | None = None, params: dict[str, Any] | None = None,
                 budget: int | None = None, temperature: float | None = None, seed: int | None = None,
                 max_new_tokens: int | None = None, draft_model: str | None = None,
                 device: str | None = None, dtype: str | None = None) -> SessionSpec:
    """The fork's spec: the parent's settings, with what the user changed on top (another method starts from its own
    defaults), checked as any session's are."""
    method = method or parent.method
    raw = dict(parent.params) if method == parent.method else {}
    if method != parent.method and parent.params.get("head") and "head" not in (params or {}):
        if "head" in choice_fields(method):  # the parent's EAGLE head drafts the new method too, as its draft model
            raw["head"] = parent.params["head"]
    raw.update(params or {})
    if budget is not None:
        raw.pop("budget", None)
    if draft_model is None and check_method(method, raw, budget).wants_draft_model:
        draft_model = parent.draft_model  # the parent's draft model drafts on, unless another is given
    return _spec_of(parent, method, raw, budget, draft_model=draft_model, device=device, dtype=dtype,
                    max_new_tokens=max_new_tokens if max_new_tokens is not None else parent.max_new_tokens or None,
                    temperature=parent.temperature if temperature is None else temperature,
                    seed=parent.seed if seed is None else seed)


def _spec_of(parent: SessionInfo, method: str, params: dict[str, Any], budget: Any = None, **settings: Any
             ) -> SessionSpec:
    """A session on ``parent``'s prompt ids and models with these settings, checked."""
    settings = {k: v for k, v in settings.items() if v is not None}
    spec = SessionRequest(method=method, prompt=list(parent.prompt_ids), model=parent.model, params=params,
                          budget=budget, chat_template=parent.chat_template, **settings).check()
    return spec.with_prompt_ids(parent.prompt_ids, parent.prompt_text)


def parent_spec(parent: SessionInfo, device: str | None = None, dtype: str | None = None) -> SessionSpec:
    """The parent's own settings, as recorded, checked again (a parameter this version lacks is refused)."""
    try:
        return _spec_of(parent, parent.method, dict(parent.params), draft_model=parent.draft_model,
                        temperature=parent.temperature, seed=parent.seed, max_new_tokens=parent.max_new_tokens or None,
                        device=device, dtype=dtype)
    except SpecVizError as e:
        raise SpecVizError(f"cannot re-run session {parent.id}: {e}") from None


def check_fork_point(parent: SessionInfo, cycle: int) -> MethodChoice:
    """Refuse a fork of ``parent`` at ``cycle`` that cannot be made (before any model is loaded); the parent's
    method as it re-runs."""
    if parent.status == "running":
        raise SpecVizError(f"session {parent.id} is still being recorded: fork it when it has ended")
    if not 0 <= cycle <= parent.n_cycles:
        raise SpecVizError(f"session {parent.id} has cycles 0 to {parent.n_cycles - 1}: cannot fork at cycle {cycle}")
    return parent_spec(parent).choice


def load_prefix(rec: Recording, parent: SessionInfo, cycle: int) -> list[CycleRecord]:
    """The parent's cycles 0..cycle-1, which the fork re-runs and checks (a damaged one is refused)."""
    check_fork_point(parent, cycle)
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


class Fork(Session):
    """A session that re-runs and checks the parent's cycles before ``fork_cycle``, then switches settings.

    Its engine starts with the parent's settings (so the re-run reproduces the parent), its recorded row has the
    fork's. On the first re-run cycle that differs, ``step()`` raises :class:`ForkMismatch` without storing it (the
    session stays running): ``continue_anyway()`` stores it and goes on, unchecked, from the re-run state; ``stop()``
    ends the session as failed. ``anyway=True`` continues at once (the difference is still reported in ``mismatch``).
    """

    def __init__(self, parent: SessionInfo, recorded: list[CycleRecord], spec: SessionSpec,
                 target: LoadedModel, recording: Recording, parent_draft: LoadedModel | None = None,
                 draft: LoadedModel | None = None, anyway: bool = False) -> None:
        fork_cycle = len(recorded)
        old = parent_spec(parent, spec.device, spec.dtype)
        if not parent.max_new_tokens:  # recorded before sessions kept their limit: the fork's holds throughout
            old = replace(old, max_new_tokens=spec.max_new_tokens)
        info = session_info(target, spec.choice, parent.prompt_ids, prompt_text=parent.prompt_text,
                            temperature=spec.temperature, seed=spec.seed, max_new_tokens=spec.max_new_tokens,
                            draft=draft, chat_template=parent.chat_template)
        super().__init__(old, target, parent_draft, recording=recording,
                         info=replace(info, parent_session=parent.id, fork_cycle=fork_cycle))
        self.parent = parent
        self.recorded = recorded
        self.engine.reuse_decisions(recorded)  # what the parent's clock decided is applied, not decided again
        self.fork_cycle = fork_cycle
        self.fork_spec = spec
        self.fork_draft = draft
        self.anyway = anyway
        self.mismatch: Mismatch | None = None
        self.switched = False
        self._pending: CycleRecord | None = None
        self._warm_ms = 0.0

    @classmethod
    def start(cls, recording: Recording, parent: SessionInfo, cycle: int, spec: SessionSpec,
              target: LoadedModel, progress: Progress | None = None, anyway: bool = False,
              draft: LoadedModel | None = None) -> Fork:
        """A fork of ``parent`` (in ``recording``, where the fork is written too) at ``cycle`` on ``target``: the
        parent's cycles before it read (a damaged one refused), the draft model either side needs loaded (``draft``:
        the fork's, already loaded)."""
        old = parent_spec(parent).choice
        recorded = load_prefix(recording, parent, cycle)
        if spec.choice.wants_draft_model and draft is None:
            draft = load_draft(target, spec.draft_model, spec.device, spec.dtype, progress,
                               spec.choice.card.draft_shares_tokenizer)
        parent_draft = None
        if old.wants_draft_model:
            parent_draft = draft if draft is not None and parent.draft_model == spec.draft_model else load_draft(
                target, parent.draft_model, spec.device, spec.dtype, progress, old.card.draft_shares_tokenizer)
        return cls(parent, recorded, spec, target, recording, parent_draft, draft, anyway)

    @property
    def done(self) -> bool:
        """Ended, with no re-run cycle waiting to be stored."""
        return self._pending is None and self.engine.done

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
        self.prefill()
        record = self.engine.step()
        if self.mismatch is None:
            self.mismatch = cycle_difference(self.recorded[record.index], record)
        if record.index + 1 == self.fork_cycle:
            self.engine.reuse_decisions([])  # from the fork's cycle on, its own settings decide
        return record

    def _decode(self) -> CycleRecord:
        if self._pending is not None:
            record, self._pending = self._pending, None
            return record
        self.prefill()
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
        e, parent, new = self.engine, self.parent, self.fork_spec
        self.switched = True
        if e.done and not (e.stop_reason == "max_new_tokens" and new.max_new_tokens > len(e.output_ids)):
            raise SpecVizError(f"session {parent.id} ended at cycle {self.fork_cycle - 1} ({e.stop_reason}): "
                                   "there is nothing to continue; fork at an earlier cycle")
        if len(e.output_ids) >= new.max_new_tokens:
            raise SpecVizError(f"{len(e.output_ids)} tokens are already committed at cycle {self.fork_cycle}: give "
                               f"a max new tokens above that")
        drafter = budget = None
        if (new.method, new.choice.on(e.target).recorded_params) != (parent.method, dict(parent.params)):
            drafter = new.choice.drafter_class(new.choice.params, e.target, self.fork_draft)
            budget = make_controller(e.target, new.choice.max_budget, getattr(new.choice.params, "budget", None),
                                     drafter.draft_cost_key()) if new.choice.auto else None
        self._warm_ms = e.switch(DecodeConfig(max_new_tokens=new.max_new_tokens, temperature=new.temperature,
                                              seed=new.seed, stop_on_eos=e.config.stop_on_eos), drafter, budget)
        self.spec = new

    def check_text(self) -> str:
        if self.mismatch is not None:
            return f"not reproducible: {self.mismatch.message()}"
        return f"reproduced cycles 0-{self.fork_cycle - 1}" if self.fork_cycle else "nothing to reproduce"

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "fork_check": self.check_text()}
