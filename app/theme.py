"""Colours and fonts shared by every panel, for light and dark palettes.

The palette (Fusion, dark when asked) is set here; what a palette cannot say lives in the style sheets
``specviz_resources/themes/light.qss`` and ``dark.qss``, whose rules a widget takes by its role
(:func:`set_role`). They are not set on the whole application: an application style sheet puts every
widget under Qt's style-sheet style, whose spin-box and form-layout metrics differ from Fusion's (the Run
panel's settings grew wider than their panel).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QWidget

import specviz_resources
from specviz_core.viewer.colors import (  # noqa: F401 - the window's names for them
    ACCEPTED,
    FALLBACK,
    GATED,
    REJECTED,
    SOURCE_COLORS,
    SOURCE_LABELS,
)

THEMES = ("light", "dark")


def source_color(source: str) -> QColor:
    return QColor(SOURCE_COLORS.get(source, FALLBACK))


def is_dark(palette: QPalette | None = None) -> bool:
    if palette is None:
        app = QGuiApplication.instance()
        if app is None:
            return False
        palette = app.palette()
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def style_sheet(theme: str) -> str:
    """The Qt style sheet of ``theme`` (``light`` or ``dark``)."""
    if theme not in THEMES:
        raise ValueError(f"no theme {theme!r}: pick one of {', '.join(THEMES)}")
    return specviz_resources.read_text("themes", f"{theme}.qss")


def set_role(widget: QWidget, role: str | None) -> None:
    """Style ``widget`` by the theme's rules for ``role`` (``hint``, ``message``, ``error``); None: no rules."""
    widget.setProperty("role", role)
    widget.setStyleSheet(style_sheet("dark" if is_dark(widget.palette()) else "light") if role else "")
    # Qt matches property selectors when a widget is polished: re-polish so a changed role shows at once.
    widget.style().unpolish(widget)
    widget.style().polish(widget)


def apply_system_theme(app, theme: str = "system") -> None:
    """Fusion style, with a dark palette when the system asks for dark (or ``theme`` is ``dark``)."""
    app.setStyle("Fusion")
    scheme = app.styleHints().colorScheme()
    if theme == "dark" or (theme == "system" and scheme == Qt.ColorScheme.Dark):
        app.setPalette(dark_palette())


def dark_palette() -> QPalette:
    """The dark theme's palette (Fusion draws with it)."""
    p = QPalette()
    for role, color in (
        (QPalette.ColorRole.Window, "#202124"), (QPalette.ColorRole.WindowText, "#e8eaed"),
        (QPalette.ColorRole.Base, "#17181a"), (QPalette.ColorRole.AlternateBase, "#26272a"),
        (QPalette.ColorRole.Text, "#e8eaed"), (QPalette.ColorRole.Button, "#2d2e31"),
        (QPalette.ColorRole.ButtonText, "#e8eaed"), (QPalette.ColorRole.Highlight, "#3b78d8"),
        (QPalette.ColorRole.HighlightedText, "#ffffff"), (QPalette.ColorRole.ToolTipBase, "#2d2e31"),
        (QPalette.ColorRole.ToolTipText, "#e8eaed"), (QPalette.ColorRole.PlaceholderText, "#9aa0a6"),
    ):
        p.setColor(role, QColor(color))
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6b6f75"))  # disabled controls must look disabled
    return p


def readable_when_locked(widget: QWidget) -> None:
    """Locked settings (a live session's, or a replayed one's) stay readable: disabled text is drawn nearly as
    strong as enabled text, not in the theme's faint grey."""
    pal = widget.palette()
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
        c = QColor(pal.color(QPalette.ColorGroup.Active, role))
        c.setAlphaF(0.8)
        pal.setColor(QPalette.ColorGroup.Disabled, role, c)
    widget.setPalette(pal)
