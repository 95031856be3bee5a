"""``specviz.record``: your own ``model.generate(...)`` calls, recorded cycle by cycle where they run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specviz_core.session.capture import GenerateCapture


def record(db: str | Path, tokenizer: Any = None) -> GenerateCapture:
    """Record transformers' speculative ``generate`` calls made inside the ``with`` block, unchanged::

        with specviz.record("runs.db") as rec:
            out = model.generate(**inputs, assistant_model=assistant, max_new_tokens=64)
        specviz.open("runs.db")

    Each call that drafts (``assistant_model=``, ``prompt_lookup_num_tokens=``, universal assisted decoding with
    ``tokenizer=`` and ``assistant_tokenizer=``), greedy or sampled, becomes one session of the SQLite file ``db``
    (created if missing; sessions are added to an existing one), in the format the window opens: each cycle's
    drafted chain, the target's top-5 at every verified position, the accepted tokens, the bonus token, the KV
    crop, and the settings as ``generate`` resolved them. ``rec.sessions`` lists the ids recorded. A call that
    would not draft (plain greedy search or sampling, beam search) raises :class:`specviz.SpecVizError` before it
    decodes anything. Only calls made in the thread that entered the block are recorded. ``tokenizer``: the
    target's, to store each prompt's text (the token ids are stored anyway).
    """
    return GenerateCapture(db, tokenizer)


__all__ = ["GenerateCapture", "record"]
