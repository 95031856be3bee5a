"""SpecViz core: the headless decode engine, drafters, verification and recording.

Nothing here imports Qt: everything the GUI shows can be produced, recorded and
tested without it.
"""

__version__ = "0.1.0"
