"""The panels registry is the one list of panels: every panel class of app/panels is in it, the window builds and
docks exactly its entries, presentation mode keeps exactly the ones it marks, and ``screenshot --panel`` takes its
keys (an earlier name too)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import specviz_app.panels
from specviz_app.panels.base import PanelMixin
from specviz_app.panels.registry import ALIASES, EXPORTED, PANELS, docked


def panel_classes() -> set[str]:
    """Every class in app/panels that mixes in PanelMixin and is a widget (what the window could show)."""
    from PySide6.QtWidgets import QWidget

    found = set()
    for mod in pkgutil.walk_packages(specviz_app.panels.__path__, "specviz_app.panels."):
        module = importlib.import_module(mod.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, PanelMixin) and issubclass(cls, QWidget):
                found.add(f"{module.__name__}:{name}")
    return found


def test_every_panel_class_is_registered_once():
    assert sorted(e.cls for e in PANELS) == sorted(panel_classes())
    assert len({e.key for e in PANELS}) == len(PANELS)
    assert not set(ALIASES) & {e.key for e in PANELS}


def test_the_window_builds_docks_and_presents_what_the_registry_says(window, qtbot):
    w = window
    assert list(w.panels) == [e.key for e in PANELS]
    assert all(type(w.panels[e.key]) is e.load() for e in PANELS)
    assert list(w.docks) == [e.key for e in docked()]
    assert all(w.docks[k].objectName() == f"dock_{k}" and w.docks[k].widget() is w.panels[k] for k in w.docks)
    w.presentation_action.trigger()
    qtbot.wait(50)
    kept = {k for k, d in w.docks.items() if d.isVisible()}
    assert kept == {e.key for e in docked() if e.presenting}
    w.presentation_action.trigger()


def test_screenshot_takes_the_registry_keys_and_the_old_name(capsys):
    from specviz_app.cli import PANELS as SHOTS
    from specviz_app.cli import add_commands
    from specviz_core.cli.commands import build_parser

    parser = build_parser(add_commands)
    assert SHOTS == (*EXPORTED, "window")
    args = parser.parse_args(["screenshot", "--demo", "--out", "x.png", "--panel", "spine"])
    assert args.panel == "stop_cause"
