"""SpecViz core: the headless decode engine, drafters, verification and recording.

Layers, top to bottom (an import-linter contract in pyproject.toml enforces them):
``cli`` > ``bench`` | ``viewer`` > ``session`` > ``engine`` | ``recording`` > ``drafters`` > the shared
modules (``records``, ``tree``, ``kv``, ``summary``, ``models``, ``vocab``, ``errors``).

Nothing here imports Qt: everything the GUI shows can be produced, recorded and
tested without it.
"""

__version__ = "0.1.0"
