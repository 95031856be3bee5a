"""Every panel of the window, one line each: the window builds and docks them from here, the layout reads which stay in
presentation mode, File → Export and ``specviz screenshot --panel`` list the ones that draw a cycle.

Adding a panel: its module in ``specviz_app/panels/`` (a :class:`~specviz_app.panels.base.PanelMixin` taking the
session model) and one :class:`PanelEntry` here. Torch-free and Qt-free: the command line reads it to parse
``--panel`` without starting Qt.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

#: Where a dock can go, in the order the window adds them (Qt places a dock after those already in its area).
AREAS = ("left", "right", "bottom")


@dataclass(frozen=True)
class PanelEntry:
    key: str
    """Its name: ``--panel``, the dock's object name (``dock_KEY``), the window's ``panels`` dict."""
    cls: str
    """``"module:Class"``, imported when the window is built."""
    place: str
    """``center`` (the central widget), ``toolbar`` (placed by the window's toolbars) or an area of :data:`AREAS`."""
    slot: int = 0
    """Its order in its area (a new dock goes after the others of a lower slot)."""
    tab_with: str | None = None
    """The panel whose dock this one shares as a tab."""
    raised: bool = False
    """The tab shown first in its group."""
    exported: bool = True
    """Offered by File → Export and ``specviz screenshot --panel`` (it draws the current cycle)."""
    presenting: bool = False
    """Kept in presentation mode (the other docks are hidden)."""

    def load(self) -> type:
        module, _, name = self.cls.partition(":")
        return getattr(importlib.import_module(module), name)


#: In File → Export's order.
PANELS: tuple[PanelEntry, ...] = (
    PanelEntry("tree", "specviz_app.panels.tree.view:TreeView", "center", presenting=True),
    PanelEntry("mask", "specviz_app.panels.mask.view:MaskView", "right", 0),
    PanelEntry("kv", "specviz_app.panels.kv.view:KVView", "right", 1),
    PanelEntry("charts", "specviz_app.panels.charts.panel:ChartsPanel", "bottom", 2, tab_with="stop_cause",
               presenting=True),
    PanelEntry("output", "specviz_app.panels.output:OutputView", "bottom", 0, presenting=True),
    PanelEntry("stop_cause", "specviz_app.panels.stop_cause:StopCausePanel", "bottom", 1, raised=True,
               presenting=True),
    PanelEntry("run", "specviz_app.panels.run.panel:RunPanel", "left", 0, raised=True, exported=False),
    PanelEntry("sessions", "specviz_app.panels.sessions:SessionsView", "left", 1, tab_with="run", exported=False),
    PanelEntry("timeline", "specviz_app.panels.timeline:TimelinePanel", "toolbar", exported=False, presenting=True),
)

#: Earlier names of panels, still taken by ``--panel``.
ALIASES = {"spine": "stop_cause"}

#: The panels File → Export and ``screenshot --panel`` offer, in that order.
EXPORTED = tuple(e.key for e in PANELS if e.exported)


def docked() -> list[PanelEntry]:
    """The panels in docks, in the order the window adds them."""
    return sorted((e for e in PANELS if e.place in AREAS), key=lambda e: (AREAS.index(e.place), e.slot))


def panel_key(name: str) -> str:
    """``name`` as a panel's key (an earlier name taken too)."""
    return ALIASES.get(name, name)
