"""The race's lanes show their first text line whole (issue 30, item 9): when a lane's text outgrows it, the text
scrolls by whole lines so its tail stays in view, never leaving the top line cut in half under the progress bar.

Where the painter scrolled is read back from its pixels (the rows of the lane's text matched against the same text
laid out and drawn here, whole), and the lines are the test's own layout of that text, not the painter's numbers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QImage, QPainter, QTextDocument

from specviz_app.demo import copy_demo
from specviz_app.windows.race.view import render_frame
from specviz_app.windows.race.window import RaceWindow
from specviz_core.analysis.race import make_race
from specviz_core.viewer.comparison import load_comparison

#: (width, height, presentation): the GIF's size, the window's default, a projector in presentation mode.
SIZES = ((960, 540, False), (1100, 700, False), (1920, 1080, True))
WHITE = QColor("#ffffff")
INK = QColor("#1d2125")


@pytest.fixture(scope="module")
def demo_race(tmp_path_factory):
    """The bundled demo's AR and Goose sessions of one prompt, raced (no model, no torch)."""
    db = copy_demo(tmp_path_factory.mktemp("demo"))
    from specviz_core.recording.store import Recording

    with Recording(db) as rec:
        ids = [s.id for s in rec.sessions()]
    comparison, vocab = load_comparison(Path(db), ids)
    return make_race(comparison.sessions), vocab


def gray(img: QImage) -> np.ndarray:
    img = img.convertToFormat(QImage.Format.Format_Grayscale8)
    a = np.frombuffer(bytes(img.constBits()), np.uint8).reshape(img.height(), img.bytesPerLine())
    return a[:, : img.width()].astype(float)


def lines_of(doc: QTextDocument) -> list[tuple[float, float]]:
    """(top, bottom) of every laid-out line of ``doc``, in document coordinates."""
    out = []
    block = doc.begin()
    while block.isValid():
        lay = block.layout()
        for i in range(lay.lineCount()):
            line = lay.lineAt(i)
            top = lay.position().y() + line.y()
            out.append((top, top + line.height()))
        block = block.next()
    return out


def shown_scroll(frame: np.ndarray, text_r: QRectF, doc: QTextDocument) -> int:
    """How far down ``doc`` the frame's lane shows it: the offset whose rows of ink best match the frame's (blank
    below the text: a lane may scroll past its tail's last pixel)."""
    ref = QImage(int(text_r.width()), int(np.ceil(doc.size().height() + text_r.height())),
                 QImage.Format.Format_RGB32)
    ref.fill(WHITE)
    p = QPainter(ref)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    doc.drawContents(p)
    p.end()
    ref_rows = 255 - gray(ref).mean(axis=1)
    top, h = int(np.ceil(text_r.top())), int(text_r.height()) - 2
    x0 = int(np.ceil(text_r.left()))
    shown = 255 - frame[top: top + h, x0: x0 + ref.width()].mean(axis=1)
    costs = [np.abs(ref_rows[s: s + h] - shown).sum() for s in range(0, int(doc.size().height()) + 1)]
    return int(np.argmin(costs)) - (top - int(round(text_r.top())))


@pytest.mark.parametrize("width,height,presentation", SIZES)
def test_every_lane_shows_its_first_text_line_whole(qtbot, demo_race, width, height, presentation):
    race, vocab = demo_race
    window = RaceWindow(race, vocab)
    qtbot.addWidget(window)
    window.resize(width, height)
    window.show()
    window.set_presentation(presentation, full_screen=False)
    qtbot.waitUntil(lambda: window.view.height() > 0)
    view = window.view
    painter = view.painter
    size = (view.width(), view.height())
    area = QRectF(0, 0, *size)
    title = QFont(view.font())
    title.setPointSizeF(view.base_pt * 1.3)
    title.setBold(True)
    overflowed = 0
    for t in np.linspace(0.3, 1.0, 8):
        ms = race.duration_ms * float(t)
        frame = gray(render_frame(painter, ms, size))
        for st, (head, bar, text_r) in zip(race.at(ms), painter.lane_rects(area)):
            # The text starts under the lane's header (its title's height) and under its progress bar.
            assert text_r.top() >= head.top() + QFontMetricsF(title).height()
            assert text_r.top() >= bar.bottom()
            doc = QTextDocument()
            font = QFont(view.font())
            font.setPointSizeF(view.base_pt)
            doc.setDefaultFont(font)
            doc.setTextWidth(text_r.width())
            doc.setHtml(painter.html(st, INK))
            if doc.size().height() <= text_r.height():
                continue
            overflowed += 1
            scroll = shown_scroll(frame, text_r, doc)
            assert scroll > 0, "the tail of a lane's text is in view"
            cut = [(a, b) for a, b in lines_of(doc) if a < scroll - 1.5 and b > scroll + 1.5]
            assert not cut, (f"{width}x{height} at {ms:.0f} ms: a line ({cut[0][0]:.1f}–{cut[0][1]:.1f}) is cut by "
                             f"the lane's top edge (the text scrolled {scroll} px)")
    assert overflowed >= 4  # the demo's answer outgrows its lanes: the case that clipped
