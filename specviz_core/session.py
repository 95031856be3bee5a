"""Running a whole session: check the request, load models, decode, record.

The CLI and the GUI's worker thread both go through here, so a session is
validated, recorded and closed the same way whoever starts it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .budget import make_controller, split_auto, wants_auto
from .drafters import Drafter, method_class, parse_params
from .engine import DecodeConfig, Engine
from .errors import SpecVizError
from .models import LoadedModel, check_same_tokenizer, encode_prompt, load_model
from .recording import Recording, SessionWriter, new_session_id
from .records import CycleRecord, SessionInfo


@dataclass
class SessionRequest:
    """Everything a user chooses for one session."""

    method: str
    prompt: str
    model: str | None = None
    draft_model: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    budget: int | None = None
    max_new_tokens: int = 128
    temperature: float = 0.0
    seed: int = 0
    chat_template: bool | None = None
    """None: use the model's chat template if it has one."""
    device: str | None = None
    dtype: str | None = None

    def check(self) -> tuple[type, Any]:
        """Validate everything that needs no model; returns the drafter class and its params."""
        cls = method_class(self.method)
        if not self.prompt or not self.prompt.strip():
            raise SpecVizError("the prompt is empty")
        if self.max_new_tokens < 1:
            raise SpecVizError("max new tokens must be at least 1")
        if self.temperature < 0:
            raise SpecVizError("temperature must be >= 0")
        raw, _ = split_auto(self.method, cls.params_cls, self.params)  # budget=auto: see prepare()
        if self.budget is not None:
            if self.budget < 1:
                raise SpecVizError(f"budget must be at least 1, got {self.budget}")
            if "budget" not in {f for f in cls.params_cls.__dataclass_fields__}:
                raise SpecVizError(f"method {self.method} has no budget")
            raw["budget"] = self.budget
        params = parse_params(self.method, cls.params_cls, raw)
        if cls.wants_draft_model(params) and not self.draft_model:
            why = "" if cls.needs_draft_model else " with drafter=model (drafter=table needs none)"
            raise SpecVizError(
                f"method {self.method} needs --draft-model{why} (a model sharing the target's tokenizer; "
                "the target itself works, e.g. --draft-model default)"
            )
        return cls, params


@dataclass
class Prepared:
    """A session ready to decode."""

    engine: Engine
    info: SessionInfo


def load_models(req: SessionRequest, progress: Callable[[str, float | None], None] | None = None
                ) -> tuple[LoadedModel, LoadedModel | None]:
    progress = progress or (lambda s, f: None)
    cls, params = req.check()
    target = load_model(req.model, device=req.device, dtype=req.dtype, progress=progress)
    draft = None
    if cls.wants_draft_model(params):
        if (req.draft_model or "default") == (req.model or "default"):
            draft = target
        else:
            draft = load_model(req.draft_model, device=req.device, dtype=req.dtype, progress=progress)
            check_same_tokenizer(target, draft)
    return target, draft


def prepare(req: SessionRequest, target: LoadedModel, draft: LoadedModel | None = None,
            group_id: str | None = None, drafter: Drafter | None = None) -> Prepared:
    """``drafter``: reuse one from an earlier session of the group (its tables persist), else a new one."""
    cls, params = req.check()
    prompt_ids, used_chat = encode_prompt(target, req.prompt, req.chat_template)
    drafter = drafter if drafter is not None else cls(params, target, draft)
    auto = wants_auto(req.params)
    engine = Engine(target, drafter, prompt_ids,
                    DecodeConfig(max_new_tokens=req.max_new_tokens, temperature=req.temperature, seed=req.seed),
                    budget=make_controller(target, params.budget) if auto else None)
    info = SessionInfo(
        id=new_session_id(), model=target.name, tokenizer=target.path, method=req.method,
        params=dict(vars(params), **({"budget": "auto"} if auto else {})), prompt_ids=tuple(prompt_ids), prompt_text=req.prompt,
        temperature=req.temperature, seed=req.seed, device=str(target.device), dtype=str(target.dtype).removeprefix("torch."),
        draft_model=draft.name if draft is not None else None, chat_template=used_chat,
        max_new_tokens=req.max_new_tokens, group_id=group_id,
    )
    return Prepared(engine, info)


class RecordedRun:
    """Drives an engine and records every cycle; safe to stop at any cycle boundary.

    ``run()`` yields cycle records already stored (with their ``record`` timing);
    if the loop is left early the session is marked ``interrupted``, if the
    engine raises it is marked ``failed``.
    """

    def __init__(self, prepared: Prepared, recording: Recording) -> None:
        self.engine = prepared.engine
        self.recording = recording
        self.writer: SessionWriter = recording.new_session(prepared.info)
        self.info = prepared.info

    def step(self) -> CycleRecord:
        try:
            if not self.engine._prefilled:
                self.writer.set_prefill_ms(self.engine.prefill())
            record = self.writer.append(self.engine.step())
        except SpecVizError as e:
            self.finish("failed", str(e))
            raise
        except Exception as e:
            self.finish("failed", f"{type(e).__name__}: {e}")
            raise
        if self.engine.done:
            self.finish("complete", self.engine.stop_reason)
        return record

    def run(self) -> Iterator[CycleRecord]:
        try:
            while not self.engine.done:
                yield self.step()
        finally:
            if not self.writer.finished:
                self.finish("interrupted", "stopped by the user")

    def finish(self, status: str, reason: str = "") -> None:
        self.writer.finish(status, reason, self.engine.drafter.stats())


def summary_line(info: SessionInfo) -> str:
    return (f"{info.n_tokens} tokens, {info.n_forward} target forwards, "
            f"{info.mean_accepted:.2f} tokens/forward, {info.tokens_per_s:.1f} tokens/s "
            f"({info.status}{', ' + info.stop_reason if info.stop_reason else ''})")
