"""Loading a model quiets transformers' and the hub's own chatter through their switches, never by redirecting the
process's stderr (the window loads models on its engine thread while the UI thread keeps running)."""

from __future__ import annotations

import sys
import warnings

from specviz_core.runtime import models


def test_quiet_leaves_the_process_streams_alone_and_restores_the_switches() -> None:
    from huggingface_hub.utils import are_progress_bars_disabled
    from transformers.utils import logging as hf_logging

    err, out = sys.stderr, sys.stdout
    level = hf_logging.get_verbosity()
    with models._quiet():
        assert sys.stderr is err and sys.stdout is out
        assert hf_logging.get_verbosity() == hf_logging.ERROR and are_progress_bars_disabled()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            warnings.warn("from SpecViz itself", UserWarning, stacklevel=1)
        assert [str(w.message) for w in caught] == ["from SpecViz itself"]  # other code's warnings still show
    assert hf_logging.get_verbosity() == level


def test_loading_a_model_does_not_touch_stderr(tiny_dir, monkeypatch) -> None:
    import transformers

    err = sys.stderr
    seen = []
    real = transformers.AutoModelForCausalLM.from_pretrained

    def spy(*args, **kw):
        seen.append(sys.stderr is err)
        return real(*args, **kw)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", spy)
    loaded = models.load_model(str(tiny_dir), device="cpu")
    assert loaded.tokenizer is not None
    assert seen and all(seen)
