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


class Recorder(QPainter):
    """A QPainter that also keeps every text the race's painter asked it to draw, with the rectangle and flags."""

    def __init__(self, device) -> None:
        super().__init__(device)
        self.texts = []

    def drawText(self, *args):  # noqa: N802 - QPainter's name
        if len(args) == 3 and isinstance(args[0], QRectF):
            self.texts.append((QRectF(args[0]), args[1], args[2]))
        return super().drawText(*args)


@pytest.mark.parametrize("width,height", [(960, 540), (1280, 720)])
def test_a_lanes_note_at_the_finish_is_whole_never_cut_mid_word(qtbot, demo_race, width, height):
    """The note under a lane that came in behind ("... the cost curve gives budget 10 2.31x") wraps at words and is
    drawn whole in a rectangle tall enough for it: the GIF's footer was cut ("... gives budget 10 2....")."""
    import dataclasses

    from specviz_app.windows.race.view import RacePainter

    race, vocab = demo_race
    note = ("goose came in behind: 30-row verify blocks cost 2.7x a 1-row forward here, and the cost curve gives "
            "budget 10 2.31x over plain decoding with the acceptance this session had")
    race = dataclasses.replace(race, notes=tuple(note for _ in race.lanes))
    painter = RacePainter(race, vocab, QFont(), base_pt=13.0)
    img = QImage(width, height, QImage.Format.Format_RGB32)
    rec = Recorder(img)
    painter.paint(rec, QRectF(0, 0, width, height), max(lane.finish_ms for lane in race.lanes) + 1.0)
    drawn = [(r, f) for r, f, t in rec.texts if t == note]
    rec.end()
    assert drawn, "the note was not drawn whole (elided?)"
    small = QFont()
    small.setPointSizeF(max(7.0, 13.0 * 0.75))
    for rect, flags in drawn:
        need = QFontMetricsF(small).boundingRect(QRectF(0, 0, rect.width(), 1e6), int(flags), note).height()
        assert rect.height() >= need - 0.5, f"the note needs {need:.0f} px, its rectangle is {rect.height():.0f}"
