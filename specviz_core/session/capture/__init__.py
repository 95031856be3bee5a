"""transformers' own ``generate()`` recorded where it runs, cycle by cycle: what ``specviz.record`` does.

While a :class:`GenerateCapture` is active, in the thread that started it, every ``model.generate(...)`` call that
decodes speculatively (``assistant_model=``, ``prompt_lookup_num_tokens=``, universal assisted decoding) is
recorded as one session of the recording, the same rows the window opens. Nothing of the call is changed: the
capture hooks three places of transformers' own loop (``_assisted_decoding``), each only to watch.

- ``GenerationMixin.generate``: where a call begins and ends (its output is checked against what was recorded).
- ``GenerationConfig.get_generation_mode``: a call that would not decode speculatively (greedy search, sampling,
  beam search...) is refused in one line before it decodes anything, never half-recorded.
- ``GenerationMixin._get_candidate_generator``: the candidate generator ``generate`` built, with the settings as
  ``generate`` resolved them. Its ``get_candidates`` (the drafted chain) and ``update_candidate_strategy`` (the
  tokens committed, the verify rows' logits, the matches) are watched on that one object.

Each cycle is one iteration of ``_assisted_decoding``: a chain drafted below the last committed token, verified by
one target forward (the first one runs the prompt too, as ``generate`` does), its leading matches kept with one
token of the target's own, the cache cropped to them. A failure of the recording itself never reaches the call:
the session is marked failed with the reason, and a warning says so.
"""

from __future__ import annotations

import functools
import inspect
import threading
import warnings
from pathlib import Path
from typing import Any, Self

import torch

from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.session.capture.call import CallRecorder

_local = threading.local()
_lock = threading.Lock()
_active: GenerateCapture | None = None


def _depth() -> int:
    return int(getattr(_local, "depth", 0))


class GenerateCapture:
    """Records every speculative ``generate`` call made in this thread while active (a ``with`` block), each as one
    session of the recording at ``db``. ``tokenizer``: the target's, for the prompt's text (optional)."""

    def __init__(self, db: str | Path, tokenizer: Any = None) -> None:
        self.path = Path(db)
        self.tokenizer = tokenizer
        self.sessions: list[str] = []
        """The ids of the sessions recorded, in order."""
        self.recording: Recording | None = None
        self._thread = 0
        self._call: CallRecorder | None = None
        self._saved: list[tuple[type, str, Any]] = []

    # -- the with block --------------------------------------------------------------------------------------
    def __enter__(self) -> Self:
        global _active
        with _lock:
            if _active is not None:
                raise SpecVizError(f"specviz.record is already recording to {_active.path}: one at a time")
            self.recording = Recording(self.path, create=True)
            _active = self
        self._thread = threading.get_ident()
        self._install()
        return self

    def __exit__(self, *exc: object) -> None:
        global _active
        self._uninstall()
        if self._call is not None:  # a generate call left by an exception we did not see
            self._call.end(error=KeyboardInterrupt())
            self._call = None
        if self.recording is not None:
            self.recording.close()
        with _lock:
            _active = None

    # -- the hooks -------------------------------------------------------------------------------------------
    def _mine(self) -> bool:
        return threading.get_ident() == self._thread

    def _install(self) -> None:
        from transformers.generation.configuration_utils import GenerationConfig, GenerationMode
        from transformers.generation.utils import GenerationMixin

        generate = GenerationMixin.__dict__["generate"]
        mode_of = GenerationConfig.__dict__["get_generation_mode"]
        make_gen = GenerationMixin.__dict__["_get_candidate_generator"]
        signature = inspect.signature(make_gen)

        @functools.wraps(generate)
        def watched_generate(model: Any, *args: Any, **kwargs: Any) -> Any:
            depth = _depth()
            if depth or not self._mine():  # the assistant's own generate inside a cycle, or another thread
                _local.depth = depth + 1
                try:
                    return generate(model, *args, **kwargs)
                finally:
                    _local.depth = depth
            for key, why in (("custom_generate", "a custom decoding loop"),):
                if kwargs.get(key) is not None:
                    raise SpecVizError(f"specviz.record cannot watch {why} ({key}=...): call it outside the block")
            if kwargs.get("cache_implementation") == "paged":
                raise SpecVizError("specviz.record cannot watch continuous batching (cache_implementation='paged')")
            _local.depth = 1
            try:
                out = generate(model, *args, **kwargs)
            except BaseException as e:
                self._end(error=e)
                raise
            finally:
                _local.depth = 0
            self._end(output=out)
            return out

        @functools.wraps(mode_of)
        def watched_mode(config: Any, *args: Any, **kwargs: Any) -> Any:
            mode = mode_of(config, *args, **kwargs)
            if _depth() == 1 and self._mine() and mode != GenerationMode.ASSISTED_GENERATION:
                raise SpecVizError(
                    f"specviz.record records speculative generate calls (assistant_model=..., "
                    f"prompt_lookup_num_tokens=...); this one decodes by {str(mode.value).replace('_', ' ')}: call "
                    "it outside the with block (for a plain decoding baseline: specviz.Session(..., method='ar'))")
            return mode

        @functools.wraps(make_gen)
        def watched_make_gen(model: Any, *args: Any, **kwargs: Any) -> Any:
            gen = make_gen(model, *args, **kwargs)
            if _depth() == 1 and self._mine():
                a = signature.bind(model, *args, **kwargs).arguments
                self._begin(model, gen, a["generation_config"], a["input_ids"], a.get("assistant_model"),
                           a.get("target_tokenizer"))
            return gen

        for cls, name, fn in ((GenerationMixin, "generate", watched_generate),
                              (GenerationConfig, "get_generation_mode", watched_mode),
                              (GenerationMixin, "_get_candidate_generator", watched_make_gen)):
            self._saved.append((cls, name, cls.__dict__[name]))
            setattr(cls, name, fn)

    def _uninstall(self) -> None:
        while self._saved:
            cls, name, fn = self._saved.pop()
            setattr(cls, name, fn)

    # -- one call --------------------------------------------------------------------------------------------
    def _begin(self, model: Any, gen: Any, cfg: Any, input_ids: torch.Tensor, assistant: Any, tokenizer: Any) -> None:
        assert self.recording is not None
        call = CallRecorder(self.recording, model, gen, cfg, input_ids, assistant, tokenizer or self.tokenizer)
        call.watch()
        self._call = call
        self.sessions.append(call.writer.id)

    def _end(self, output: Any = None, error: BaseException | None = None) -> None:
        call, self._call = self._call, None
        if call is not None:
            try:
                call.end(output, error)
            except SpecVizError as e:  # the file could not be written: the call's output stands, the user is told
                warnings.warn(f"specviz.record: {e}", RuntimeWarning, stacklevel=3)


__all__ = ["CallRecorder", "GenerateCapture"]
