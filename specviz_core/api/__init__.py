"""SpecViz from Python: speculative decoding, cycle by cycle, on the model you already have.

::

    import specviz

    s = specviz.Session(model, tokenizer, method="goose", prompt="Rewrite: def f(a): return a+1", db="runs.db")
    s.run()                      # or s.step(), one cycle at a time
    print(s.text, s.summary())   # the output, tokens per forward, acceptance
    specviz.open(s)              # the window on it (in a notebook: returns at once, the window stays)
    specviz.share(s, "s.html")   # one HTML page that replays it in any browser

    with specviz.record("runs.db"):   # your own generate(), recorded cycle by cycle, its output unchanged
        model.generate(**inputs, assistant_model=assistant, max_new_tokens=64)

Installed as ``specviz`` (the folder is ``specviz_core/api``): a thin, stable face over the core, which the
command line and the window use as before. Importing it loads neither Qt nor, until a session starts, a model.
See ``docs/python.md``.
"""

from __future__ import annotations

import warnings
from importlib.metadata import PackageNotFoundError, version

with warnings.catch_warnings():
    # In a Jupyter kernel without ipywidgets, tqdm.auto (imported by transformers' hub client) warns at import that
    # it falls back to text bars: nothing a SpecViz user asked about, and SpecViz draws no bar in a notebook.
    warnings.filterwarnings("ignore", message="IProgress not found")
    import tqdm.auto  # noqa: F401

from specviz.capture import record
from specviz.cycle import CAUSES, Cycle
from specviz.session import Session, load
from specviz.share import share
from specviz.window import open
from specviz_core.errors import SpecVizError
from specviz_core.methods import CARDS
from specviz_core.records import CycleRecord, SessionInfo

try:
    __version__ = version("specviz")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

#: Every method a session takes, by id (``specviz.METHODS["goose"].description``, its ``params_cls``...).
METHODS = CARDS

__all__ = ["CAUSES", "METHODS", "Cycle", "CycleRecord", "Session", "SessionInfo", "SpecVizError", "__version__", "load", "open", "record", "share"]
