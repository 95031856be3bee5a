"""What a session is made of: its models (loaded and checked once), its engine (built for
:class:`~specviz_core.session.session.Session` alone, so a method runs the same wherever it is
started) and the session row it is recorded under."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from specviz_core.drafters import Drafter
from specviz_core.engine.budget import make_controller, stored_curve
from specviz_core.engine.cycle import DecodeConfig, Engine
from specviz_core.engine.selfcheck import SelfCheck, check_tree_support
from specviz_core.recording.store import new_session_id
from specviz_core.records import SessionInfo
from specviz_core.runtime.models import (
    DEFAULT_MODEL,
    LoadedModel,
    check_same_tokenizer,
    load_model,
    model_reference,
)
from specviz_core.session.spec import MAX_NEW_TOKENS, MethodChoice, SessionSpec


def build_engine(target: LoadedModel, choice: MethodChoice, prompt_ids: Sequence[int], *,
                 draft: LoadedModel | None = None, max_new_tokens: int = 128, temperature: float = 0.0,
                 seed: int = 0, drafter: Drafter | None = None,
                 progress: Callable[[str, float | None], None] | None = None) -> Engine:
    """An engine for ``choice`` on ``prompt_ids``. ``drafter``: reuse one (its tables persist across
    the samples of a group), else a new one; with ``budget=auto`` a budget controller is attached, priced by this
    device's verify-cost curve, measured first (once per device, in seconds, told to ``progress``) when none is
    stored, so no session pays for it in its own time."""
    if drafter is None:
        drafter = choice.drafter_class(choice.params, target, draft)
    if choice.auto:
        ensure_curve(target, progress, long=len(prompt_ids) + max_new_tokens >= LONG_SESSION)
    budget = make_controller(target, choice.max_budget, getattr(choice.params, "budget", None),
                             drafter.draft_cost_key()) if choice.auto else None
    cfg = DecodeConfig(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
    # With no controller, a block is still padded where this device's stored curve says a bigger one costs less.
    return Engine(target, drafter, list(prompt_ids), cfg, budget=budget,
                  pad_curve=stored_curve(target) if budget is None else None)


#: What the one-off measurement of a device's verify cost is called where it shows.
MEASURING_CURVE = "Measuring this device's verify cost, once (seconds; budget=auto prices trees with it)"
#: ... and where the stored one was measured while the machine was busy, and it is quiet now.
MEASURING_AGAIN = "Measuring this device's verify cost again: it was measured while the machine was busy (seconds)"


#: A session that may reach this many cached tokens (prompt and new tokens) needs the curve's cost of a longer cache.
LONG_SESSION = 512


def ensure_curve(target: LoadedModel, progress: Callable[[str, float | None], None] | None = None,
                 long: bool = False) -> None:
    """``target``'s verify-cost curve on its device stored, measuring it now if there is none (each round kept);
    ``long``: with what a longer cache adds (seconds more, measured once, by the first session that needs it)."""
    from specviz_core.engine.cost_curve import ensure_device_curve, is_dense, load_device_curve, to_measure

    stored = load_device_curve(target)
    what = to_measure(stored, long)
    if not what:
        return
    stage = MEASURING_AGAIN if stored is not None and is_dense(stored) and what == "all" else MEASURING_CURVE
    say = progress or (lambda s, f: None)
    say(stage, 0.0)
    ensure_device_curve(target, lambda done, total: say(stage, done / total), context=long)


def load_checked_model(name: str | None, device: str | None = None, dtype: str | None = None,
                       progress: Callable[[str, float | None], None] | None = None) -> LoadedModel:
    """Load a model and check, once per process, that it honours tree masks and positions (else refuse)."""
    progress = progress or (lambda s, f: None)
    model = load_model(name, device=device, dtype=dtype, progress=progress)
    check_once(model, progress)
    return model


def check_once(model: LoadedModel, progress: Callable[[str, float | None], None] | None = None) -> SelfCheck:
    """Check, once per process and model, that ``model`` honours tree masks and positions (else refuse)."""
    key = (model.path or str(id(model.model)), str(model.device), str(model.dtype), model.attn_implementation)
    if key not in _CHECKED:
        (progress or (lambda s, f: None))("Checking tree attention on this model", None)
        _CHECKED[key] = check_tree_support(model)
    return _CHECKED[key]


#: Models that passed the load-time self-check in this process: (path, device, dtype, attention) -> result.
_CHECKED: dict[tuple[str, str, str, str], SelfCheck] = {}


def load_models(spec: SessionSpec, progress: Callable[[str, float | None], None] | None = None
                ) -> tuple[LoadedModel, LoadedModel | None]:
    """The target and, when the method drafts with a model, the draft model (the target itself if named twice)."""
    target = load_checked_model(spec.model, spec.device, spec.dtype, progress)
    same = spec.choice.card.draft_shares_tokenizer
    draft = load_draft(target, spec.draft_model, spec.device, spec.dtype, progress, same_tokenizer=same) \
        if spec.choice.wants_draft_model else None
    return target, draft


def load_draft(target: LoadedModel, name: str | None, device: str | None = None, dtype: str | None = None,
               progress: Callable[[str, float | None], None] | None = None, same_tokenizer: bool = True
               ) -> LoadedModel:
    """A draft model: the target itself when it names the same model, else loaded, checked and compared
    (``same_tokenizer=False``: a method that re-encodes between two tokenizers, no comparison)."""
    if (name or DEFAULT_MODEL) == target.name:
        return target
    draft = load_checked_model(name, device, dtype, progress)
    if same_tokenizer:
        check_same_tokenizer(target, draft)
    return draft


def session_info(target: LoadedModel, choice: MethodChoice, prompt_ids: Sequence[int], *, prompt_text: str = "",
                 temperature: float = 0.0, seed: int = 0, max_new_tokens: int = MAX_NEW_TOKENS.default,
                 draft: LoadedModel | None = None,
                 chat_template: bool = False, group_id: str | None = None) -> SessionInfo:
    """The session row a recording starts with."""
    return SessionInfo(
        # The model by a name that any machine resolves (never this machine's cache folder): a recording made here
        # replays elsewhere with the same model.
        id=new_session_id(), model=model_reference(target.name), tokenizer=model_reference(target.name), method=choice.method,
        params=choice.on(target).recorded_params, prompt_ids=tuple(prompt_ids), prompt_text=prompt_text,
        temperature=temperature, seed=seed, device=str(target.device),
        dtype=str(target.dtype).removeprefix("torch."),
        attention=f"{target.attn_implementation}; {target.attention.describe()}", draft_model=model_reference(draft.name) if draft is not None else None,
        chat_template=chat_template, max_new_tokens=max_new_tokens, group_id=group_id,
    )
