"""``specviz.Session``: one speculative decoding session on model objects you already have.

The session runs the same engine, checks and recording as ``specviz record`` and the window: only the models
are yours (any device, dtype or ``device_map``; nothing is loaded again).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specviz.cycle import Cycle
from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.analysis.metrics import session_metrics, tokens_per_forward, tokens_per_s
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.records import SessionInfo
from specviz_core.runtime import threads as cpu_threads
from specviz_core.runtime.models import (
    LoadedModel,
    check_same_tokenizer,
    check_tokenizer_fits,
    load_model,
)
from specviz_core.session.factory import check_once
from specviz_core.session.spec import MAX_NEW_TOKENS, SEED, TEMPERATURE, SessionRequest
from specviz_core.session.session import Session as CoreSession


def wrap_model(model: Any, tokenizer: Any, role: str = "model") -> LoadedModel:
    """A transformers causal LM and its tokenizer as the engine takes them, without copying or moving it."""
    if model is None or not hasattr(model, "config") or not callable(model):
        raise SpecVizError(f"{role} must be a transformers causal LM (a model with a config), got {type(model).__name__}")
    if tokenizer is None or not callable(tokenizer):
        raise SpecVizError(f"the {role}'s tokenizer must be a transformers tokenizer, got {type(tokenizer).__name__}")
    if getattr(model, "training", False):
        raise SpecVizError(f"the {role} is in training mode (dropout on): call {role}.eval() first")
    check_tokenizer_fits(model, tokenizer, role)
    name = str(getattr(model.config, "_name_or_path", "") or "")
    path = name if name and Path(name).expanduser().is_dir() else ""
    try:
        param = next(model.parameters())
    except (StopIteration, AttributeError, TypeError):
        raise SpecVizError(f"the {role} has no parameters: is it a torch model?") from None
    device = getattr(model, "device", None) or param.device
    return LoadedModel(model=model, tokenizer=tokenizer, name=name or type(model).__name__, path=path,
                       device=device, dtype=param.dtype)


def _say_once(stage: str, fraction: float | None) -> None:
    """The one-off measurement of this device's verify cost, told on standard error as it starts and ends."""
    import sys

    if fraction in (0.0, 1.0):
        print(f"specviz: {stage}{': done' if fraction == 1.0 else ''}", file=sys.stderr, flush=True)


def load(name: str | None = None, device: str | None = None, dtype: str | None = None,
         threads: int | None = None) -> tuple[Any, Any]:
    """A model and its tokenizer as transformers objects: the embedded default model (SmolLM2-135M-Instruct,
    converted once into your cache), a model folder or a cached hub id, on ``device`` (default: the GPU when there
    is one) in ``dtype``; on the CPU with ``threads`` threads (default: the cores other processes leave free). For
    trying SpecViz; a model you loaded yourself works the same."""
    if threads is not None:
        cpu_threads.request(threads)
    m = load_model(name, device=device, dtype=dtype)
    return m.model, m.tokenizer


class Session:
    """A speculative decoding session: ``step()`` decodes one cycle, ``run()`` to the end.

    ``model`` and ``tokenizer`` are a transformers causal LM (in eval mode) and its tokenizer; ``method`` one
    of :data:`specviz.METHODS` with its parameters as keyword arguments (``budget=40``, ``mu=0.05``; the same
    names, bounds and errors as ``specviz record --param``; a tree method's ``budget`` is ``"auto"`` by default,
    chosen for this device, ``"paper"`` for the method's own, or a number); ``draft_head`` a folder (or cached hub
    id) holding an EAGLE head in its published layout, EAGLE-1/2 or EAGLE-3, for talon, eagle_static and eagle
    (default: the head ``specviz train-head`` made for the model, if any); ``prompt`` a text (the model's chat template is used
    when it has one, unless ``chat_template=False``) or token ids. With ``db`` every cycle is recorded to that
    SQLite file as it is decoded, in the format the window opens (``specviz gui --db``). A model on the CPU runs
    on ``threads`` CPU threads (default: the cores other processes leave free when the first session starts).

    ``session`` is the core's session that ``specviz record`` and the window run too; this class adds what Python
    needs: models you already have, cycles as :class:`specviz.Cycle`, a summary, a notebook picture.
    """

    def __init__(self, model: Any, tokenizer: Any, method: str = "goose", prompt: str | Sequence[int] = "",
                 db: str | Path | None = None, *, draft_model: Any = None, draft_tokenizer: Any = None,
                 draft_head: str | Path | None = None, max_new_tokens: int = MAX_NEW_TOKENS.default,
                 temperature: float = TEMPERATURE.default, seed: int = SEED.default,
                 chat_template: bool | None = None, budget: int | str | None = None, threads: int | None = None,
                 **params: Any) -> None:
        self.target = wrap_model(model, tokenizer)
        spec = SessionRequest(method=method, prompt=prompt, draft_model="given" if draft_model is not None else None,
                              draft_head=str(draft_head) if draft_head is not None else None, params=dict(params),
                              budget=budget, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
                              chat_template=chat_template, threads=threads).check()
        self.choice = spec.choice
        self.draft = None
        if spec.choice.wants_draft_model:
            self.draft = self.target if draft_model is model else wrap_model(
                draft_model, draft_tokenizer or tokenizer, "draft_model")
            if self.draft is not self.target and self.choice.card.draft_shares_tokenizer:
                check_same_tokenizer(self.target, self.draft)
        for m in {id(self.target): self.target, id(self.draft): self.draft}.values():
            if m is not None:
                check_once(m)
        self.db = Path(db) if db is not None else None
        recording = Recording(self.db, create=True) if self.db is not None else None
        try:
            self.session = CoreSession(spec, self.target, self.draft, recording=recording, progress=_say_once)
        except BaseException:
            if recording is not None:
                recording.close()
            raise
        self.info: SessionInfo = self.session.info
        self.cycles: list[Cycle] = []
        """Every cycle decoded so far, in order (cycle 0 first)."""
        self._summaries: list[CycleSummary] = []
        # Ended at garbage collection or exit too, so a notebook's session is not left "running" in the file.
        self._finalizer = weakref.finalize(self, _end, self.session)

    # -- decoding -------------------------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """Whether the session has ended (its ``stop_reason`` says why)."""
        return self.session.done

    @property
    def stop_reason(self) -> str:
        return self.session.stop_reason

    def step(self) -> Cycle:
        """Decode one cycle (the first includes the prompt's prefill) and return it (its record, with why it
        stopped)."""
        record, summary = self.session.step()
        cycle = Cycle.of(record, self.target.tokenizer)
        self.cycles.append(cycle)
        self._summaries.append(summary)
        return cycle

    def run(self, max_new_tokens: int | None = None) -> list[Cycle]:
        """Decode until the session ends, or until this call has committed ``max_new_tokens`` more tokens (the
        session's own limit still holds); the cycles decoded by this call."""
        if max_new_tokens is not None and max_new_tokens < 1:
            raise SpecVizError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        start, out = len(self.output_ids), []
        while not self.done and (max_new_tokens is None or len(self.output_ids) - start < max_new_tokens):
            out.append(self.step())
        return out

    # -- what it produced -----------------------------------------------------------------------------------------
    @property
    def prompt_ids(self) -> list[int]:
        return self.session.prompt_ids

    @property
    def output_ids(self) -> list[int]:
        """The tokens committed after the prompt (what ``generate`` returns after the prompt)."""
        return self.session.output_ids

    @property
    def text(self) -> str:
        """The output decoded to text (special tokens included, as ``generate``'s output decodes)."""
        return str(self.target.tokenizer.decode(self.output_ids))

    def summary(self) -> dict[str, Any]:
        """The session so far in numbers: tokens, target forwards, tokens per forward, draft acceptance, tokens/s,
        and the acceptance metrics (per position, stop causes, headroom) that ``specviz sessions --metrics`` prints."""
        n = len(self.output_ids)
        forwards = self.session.n_forward
        metrics = session_metrics(self._summaries).to_json()
        metrics["decode_cycles"] = metrics.pop("cycles")  # the prefill's token is a cycle, not a decode step
        return {
            **metrics,
            "method": self.choice.method, "done": self.done, "stop_reason": self.stop_reason,
            "tokens": n, "cycles": len(self.cycles), "target_forwards": forwards,
            "tokens_per_forward": tokens_per_forward(self._summaries),
            "tokens_per_forward_prefill_counted": n / (forwards + 1) if n else 0.0,
            "tokens_per_s": tokens_per_s(self._summaries),
            "recording": str(self.db) if self.db is not None else None, "session_id": self.info.id,
            "budget": self.session.stats().get("budget"),
        }

    def _repr_html_(self) -> str:
        from html import escape

        from specviz_core.viewer.svg import acceptance_svg

        s = self.summary()
        rate = s["draft_acceptance_rate"]
        rows = [("method", s["method"]), ("model", self.target.name), ("tokens", s["tokens"]), ("cycles", s["cycles"]),
                ("tokens per target forward", f"{s['tokens_per_forward']:.2f}"),
                ("draft acceptance", "—" if rate is None else f"{rate:.1%}"),
                ("tokens/s", f"{s['tokens_per_s']:.1f}"),
                ("state", f"ended: {s['stop_reason']}" if s["done"] else ("paused" if self.cycles else "ready")),
                ("recording", s["recording"] or "none")]
        table = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{escape(str(v))}</td></tr>" for k, v in rows)
        chart = acceptance_svg([len(c.committed_ids) for c in self.cycles])
        return f"<div style='display:flex;gap:16px'><table>{table}</table>{chart}</div>"

    # -- the recording --------------------------------------------------------------------------------------------
    def close(self) -> None:
        """End the session and close its recording. One you stopped between cycles (``run(max_new_tokens=...)``,
        ``step()``) is recorded as complete, ended by you; one cut inside a cycle (an error, Ctrl-C) stays
        interrupted or failed. Also done when the Session is garbage-collected or Python exits."""
        self._finalizer()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"done: {self.stop_reason}" if self.done else (
            "paused: step() or run() goes on, close() ends it" if self.cycles else "ready: step() or run()")
        return (f"<specviz.Session {self.choice.method} on {self.target.name}: {len(self.cycles)} cycles, "
                f"{len(self.output_ids)} tokens, {state}>")


def _end(session: CoreSession) -> None:
    """A session's recording ended and closed (see :meth:`Session.close`)."""
    session.end()
    if session.recording is not None:
        session.recording.close()


__all__ = ["Session", "load", "wrap_model"]
