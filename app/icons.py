"""The window's icons: the application icon and the toolbar's action icons, drawn from the SVGs in
``specviz_resources/icons`` (read as bytes, so they load from a checkout, an editable install or a wheel).

Action icons draw their outlines in ``currentColor``, which is replaced by the palette's button-text
colour when the icon is made: dark glyphs on a light theme, light glyphs on a dark one. Their accents
(green run, red breakpoint, blue chart) are mid-tones that read on both.
"""

from __future__ import annotations

from functools import cache

from PySide6.QtCore import QByteArray, QRectF, Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QImage, QPainter, QPalette, QPixmap
from PySide6.QtSvg import QSvgRenderer

import specviz_resources

#: Every toolbar action icon, by file name (without ``.svg``).
ACTION_ICONS = ("step", "run", "pause", "run-to-breakpoint", "reset", "open", "presentation", "export")
APP_ICON = "specviz"
# Rendered once per size, so small toolbars get crisp pixels instead of a scaled-down 64 px image;
# the larger sizes serve high-DPI screens.
_SIZES = (16, 20, 24, 32, 48, 64, 128)


@cache
def svg_bytes(name: str) -> bytes:
    """The SVG source of icon ``name``."""
    if name != APP_ICON and name not in ACTION_ICONS:
        raise KeyError(f"no icon {name!r}: pick one of {', '.join(ACTION_ICONS)}")
    return specviz_resources.files("icons", f"{name}.svg").read_bytes()


def render(name: str, size: int, color: QColor | str | None = None) -> QImage:
    """Icon ``name`` as a ``size`` x ``size`` image with a transparent background."""
    data = svg_bytes(name).replace(b"currentColor", QColor(color or _glyph_color()).name().encode())
    renderer = QSvgRenderer(QByteArray(data))
    if not renderer.isValid():
        raise ValueError(f"icon {name!r} is not a valid SVG")
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    return image


def action_icon(name: str, color: QColor | str | None = None) -> QIcon:
    """A toolbar icon (one of :data:`ACTION_ICONS`), its outlines in ``color`` (default: the palette's button text)."""
    if name not in ACTION_ICONS:
        raise KeyError(f"no action icon {name!r}: pick one of {', '.join(ACTION_ICONS)}")
    return _icon(name, color)


def app_icon() -> QIcon:
    """The application icon: a draft tree with its accepted path in green."""
    return _icon(APP_ICON, None)


def _icon(name: str, color: QColor | str | None) -> QIcon:
    icon = QIcon()
    for size in _SIZES:
        icon.addPixmap(QPixmap.fromImage(render(name, size, color)))
    return icon


def _glyph_color() -> QColor:
    app = QGuiApplication.instance()
    if app is None:
        return QColor("#202124")
    return app.palette().color(QPalette.ColorRole.ButtonText)
