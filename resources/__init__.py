"""SpecViz's shipped files, imported as ``specviz_resources`` (the folder is ``resources/``).

The import name carries the product's prefix so it cannot clash with another installed package
called ``resources``. Everything here is read through :mod:`importlib.resources`, never through a
path relative to the working directory, so it works from a checkout, an editable install and a
built wheel alike.

- ``suites/``: benchmark prompt suites (JSON), ``specviz bench --suite NAME``;
- ``prompts/``: the demo prompt the window and ``specviz`` open with (``demo.txt``), and the demo
  recording's prompt (``goose-demo.txt``);
- ``icons/``: the application icon and the toolbar's action icons (SVG), loaded by ``app/icons.py``;
- ``themes/``: the window's light and dark Qt style sheets, applied by ``app/theme.py``;
- ``trees/``: static draft trees as rank paths (the ``specviz optimize-tree`` format): Token Recycling's published
  template (``token-recycling-2.2.2.json``), the default of ``tr``;
- ``demo/``: a small real Goose session on the default model (after an AR session on the same prompt,
  its speed baseline), replayed by ``specviz gui --demo``, with the slice of the default tokenizer its
  tokens need; ``tests/make_demo.py`` rebuilds both.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable


def files(*parts: str) -> Traversable:
    """The shipped file or folder at ``parts`` (e.g. ``files("suites", "qa.json")``)."""
    node = resources.files(__name__)
    for p in parts:
        node = node / p
    return node


def read_text(*parts: str) -> str:
    """A shipped text file, decoded as UTF-8."""
    return files(*parts).read_text(encoding="utf-8")


def demo_prompt() -> str:
    """The prompt the window opens with and ``specviz`` records by default."""
    return read_text("prompts", "demo.txt")
