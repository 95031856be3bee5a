"""The race, drawn: two to four lanes writing the same answer at their recorded pace, for a room to watch.

:class:`RacePainter` paints one moment of a :class:`~specviz_core.analysis.race.Race` on any painter (what each lane has
written, the tokens that landed last, accepted draft tokens tinted by their source, tokens/s and speed-up counters,
a finish line with the finishing order); it holds no widget, so a GIF can be rendered off the UI thread.
:class:`RaceView` shows it in a widget (played by :class:`specviz_app.windows.race.window.RaceWindow`); :func:`write_gif` renders
the frames to an animated GIF with Pillow.
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPen, QTextDocument
from PySide6.QtWidgets import QWidget

from specviz_app.theme import ACCEPTED, SOURCE_COLORS, is_dark
from specviz_core.analysis.race import LaneState, Race, frame_times, is_draft
from specviz_core.files import new_file_mode
from specviz_core.runtime.vocab import TokenText

#: Lane colours of the headers and progress bars (the first lane is the baseline).
LANE_COLORS = ("#6c7a89", "#1f77d0", "#e07b00", "#8e44ad")
ORDINALS = {1: "1st", 2: "2nd", 3: "3rd"}
LEGEND = ("tinted: accepted draft tokens (colour = their source; strong as they land)   ·   underlined: the latest "
          "cycle's tokens   ·   ▦ the finish line")


class RacePainter:
    """Paints one moment of ``race`` into a rectangle; ``font`` and ``dark`` are the look to paint with."""

    def __init__(self, race: Race, vocab: TokenText, font: QFont, dark: bool = False, base_pt: float = 13.0,
                 slowdown: float = 1.0) -> None:
        self.race = race
        self.vocab = vocab
        self.font = QFont(font)
        self.dark = dark
        self.base_pt = base_pt
        """Point size of the lanes' text; headers and counters scale from it."""
        self.slowdown = slowdown
        """Shown beside the clock when not 1 (the race itself is timed by the caller)."""

    def _font(self, scale: float, bold: bool = False) -> QFont:
        f = QFont(self.font)
        f.setPointSizeF(max(7.0, self.base_pt * scale))
        f.setBold(bold)
        return f

    def paint(self, p: QPainter, area: QRectF, ms: float) -> None:
        bg, fg = (QColor("#1e2227"), QColor("#e8eaed")) if self.dark else (QColor("#ffffff"), QColor("#1d2125"))
        muted = QColor("#9aa0a6") if self.dark else QColor("#6b7280")
        p.fillRect(area, bg)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        states = self.race.at(ms)
        speedups = self.race.speedups(ms)
        finals = self.race.final_speedups()
        pad = max(8.0, area.height() * 0.015)
        left, width = area.left() + pad, area.width() - 2 * pad
        # Top: the race clock (and the slow-motion factor); bottom: the legend.
        clock = self._font(1.0)
        head_h = self.base_pt * 2.0
        p.setFont(clock)
        p.setPen(fg)
        slow = f"   ({self.slowdown:g}× slow motion)" if self.slowdown != 1 else ""
        p.drawText(QRectF(left, area.top() + pad / 2, width, head_h),
                   Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, f"t = {ms / 1000:.2f} s{slow}")
        small = self._font(0.75)
        legend_h = small.pointSizeF() * 2.2
        p.setFont(small)
        p.setPen(muted)
        p.drawText(QRectF(left, area.bottom() - legend_h, width, legend_h),
                   Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, LEGEND)
        base = self.race.lanes[0].label.split()[0]
        order = sorted(lane.finish_ms for lane in self.race.lanes)
        for i, ((lane, st), (head, bar, text_r)) in enumerate(zip(zip(self.race.lanes, states), self.lane_rects(area))):
            color = QColor(LANE_COLORS[i % len(LANE_COLORS)])
            p.setFont(self._font(1.3, bold=True))
            p.setPen(color)
            p.drawText(head, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, lane.label)
            self._counters(p, head, i, st, speedups[i], finals[i], order.index(st.finish_ms) + 1, base, fg, color)
            self._bar(p, bar, lane.tokens, st, color)
            note = self.race.notes[i] if i < len(self.race.notes) else ""
            if note and all(s.finished for s in states):  # the race is over: why this lane came in behind
                p.setFont(self._font(0.75))
                fm = p.fontMetrics()
                # Wrapped at words, up to three lines (the lane's text gives them room), never cut mid-word.
                wrap = Qt.TextFlag.TextWordWrap | Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
                need = fm.boundingRect(0, 0, max(1, int(text_r.width())), 10**6, wrap, note).height()
                note_h = min(float(need), fm.lineSpacing() * 3.0, text_r.height() * 0.6) + fm.lineSpacing() * 0.4
                text_r = QRectF(text_r.left(), text_r.top(), text_r.width(), max(0.0, text_r.height() - note_h))
                p.setPen(muted)
                p.drawText(QRectF(text_r.left(), text_r.bottom(), text_r.width(), note_h), wrap, note)
            self._paint_text(p, text_r, st, fg)

    def lane_rects(self, area: QRectF) -> list[tuple[QRectF, QRectF, QRectF]]:
        """Per lane, top to bottom: its header row (label and counters), its progress bar and its text."""
        pad = max(8.0, area.height() * 0.015)
        left, width = area.left() + pad, area.width() - 2 * pad
        top = area.top() + pad / 2 + self.base_pt * 2.0  # under the clock
        legend_h = self._font(0.75).pointSizeF() * 2.2
        n = len(self.race.lanes)
        lane_h = (area.bottom() - legend_h - top) / n
        row_h = self._font(1.3, bold=True).pointSizeF() * 2.0
        out = []
        for i in range(n):
            r = QRectF(left, top + i * lane_h, width, lane_h - pad)
            head = QRectF(r.left(), r.top(), r.width(), row_h)
            bar = QRectF(r.left(), head.bottom() + self.base_pt * 0.4, r.width(), max(10.0, self.base_pt * 0.8))
            below = bar.bottom() + bar.height() * 0.7 + pad / 2  # under the finish flag
            out.append((head, bar, QRectF(r.left(), below, r.width(), r.bottom() - below)))
        return out

    def _counters(self, p: QPainter, head: QRectF, i: int, st: LaneState, speedup: float | None, final: float | None,
                  place: int, base: str, fg: QColor, color: QColor) -> None:
        """tokens/s so far and the speed-up against the first lane, large; once finished, the place and time."""
        big = self._font(1.3, bold=True)
        mid = self._font(1.0)
        if st.finished:
            left_txt = (f"{ORDINALS.get(place, f'{place}th')} · {st.finish_ms / 1000:.2f} s · "
                        f"{st.tokens_per_s:.1f} tok/s")
            right_txt = ("baseline" if not i else f"{final:.2f}× vs {base}" if final is not None
                         else f"–× vs {base}")
        else:
            left_txt = f"{st.tokens_per_s:.1f} tok/s"
            right_txt = ("baseline" if not i else f"{speedup:.2f}× vs {base}" if speedup is not None
                         else f"–× vs {base}")
        p.setFont(big)
        p.setPen(color if i else fg)
        fm = p.fontMetrics()
        speed_w = max(fm.horizontalAdvance(f"00.00× vs {base}"), fm.horizontalAdvance(right_txt))
        p.drawText(QRectF(head.right() - speed_w, head.top(), speed_w, head.height()),
                   Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, right_txt)
        p.setFont(mid)
        p.setPen(fg)
        p.drawText(QRectF(head.left(), head.top(), head.width() - speed_w - self.base_pt * 1.5, head.height()),
                   Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, left_txt)

    def _bar(self, p: QPainter, bar: QRectF, tokens: tuple[int, ...], st: LaneState, color: QColor) -> None:
        """The lane's share of its own answer written, up to a chequered finish line it reaches as it finishes."""
        sq = bar.height() * 0.6
        track = QRectF(bar.left(), bar.top(), bar.width() - 2 * sq - 2, bar.height())
        p.fillRect(track, QColor(color.red(), color.green(), color.blue(), 40))
        share = len(st.tokens) / len(tokens) if tokens else 1.0
        p.fillRect(QRectF(track.left(), track.top(), track.width() * (1.0 if st.finished else share), track.height()),
                   color)
        light, dark = ((QColor("#e8eaed"), QColor("#000000")) if self.dark
                       else (QColor("#ffffff"), QColor("#1d2125")))
        flag_top = bar.center().y() - 2 * sq
        p.setPen(QPen(dark, 1))
        p.drawRect(QRectF(track.right() + 2, flag_top, 2 * sq, 4 * sq))
        for row in range(4):
            for col in range(2):
                c = dark if (row + col) % 2 == 0 else light
                p.fillRect(QRectF(track.right() + 2 + col * sq, flag_top + row * sq, sq, sq), c)
        if st.finished:
            p.setPen(QPen(QColor(ACCEPTED), max(2.0, bar.height() * 0.3)))
            p.drawLine(QPointF(track.right(), flag_top), QPointF(track.right(), flag_top + 4 * sq))

    def _paint_text(self, p: QPainter, r: QRectF, st: LaneState, fg: QColor) -> None:
        doc = self.text_document(st, r.width(), fg)
        p.save()
        p.setClipRect(r)
        p.translate(r.left(), r.top() - text_scroll(doc, r.height()))
        doc.drawContents(p)
        p.restore()

    def text_document(self, st: LaneState, width: float, fg: QColor) -> QTextDocument:
        """A lane's text laid out ``width`` wide, in the lanes' font."""
        doc = QTextDocument()
        font = QFont(self.font)
        font.setPointSizeF(self.base_pt)
        doc.setDefaultFont(font)
        doc.setTextWidth(width)
        doc.setHtml(self.html(st, fg))
        return doc

    def html(self, st: LaneState, fg: QColor) -> str:
        """Tokens as text: accepted draft tokens tinted by their source (strongly in the cycle that just landed),
        the latest cycle's tokens underlined."""
        parts = []
        n = len(st.tokens)
        pieces = self.vocab.pieces(st.tokens)
        for k, (piece, kind) in enumerate(zip(pieces, st.kinds)):
            text = html.escape(piece).replace("\n", "<br>")
            style = []
            latest = k >= n - st.last_cycle
            if is_draft(kind):
                c = QColor(SOURCE_COLORS.get(kind, ACCEPTED))
                alpha = (0.65 if latest else 0.35) if self.dark else (0.45 if latest else 0.24)
                style.append(f"background-color: rgba({c.red()},{c.green()},{c.blue()},{alpha:.2f})")
            if latest:
                style.append("text-decoration: underline; font-weight: 600")
            parts.append(f'<span style="{"; ".join(style)}">{text}</span>' if style else text)
        body = "".join(parts) or "&nbsp;"
        return f'<div style="color: {fg.name()}; white-space: pre-wrap">{body}</div>'


def text_scroll(doc: QTextDocument, height: float) -> float:
    """How far to scroll ``doc`` up so that its tail shows in ``height`` and the top line shown is whole: the top
    of the first line at or below the overflow (0 when it fits)."""
    over = doc.size().height() - height
    if over <= 0:
        return 0.0
    block = doc.begin()
    while block.isValid():
        layout = block.layout()
        y = layout.position().y()
        for i in range(layout.lineCount()):
            top = y + layout.lineAt(i).y()
            if top >= over:
                return top
        block = block.next()
    return over  # one line taller than the lane: its tail shows


class RaceView(QWidget):
    """One moment of a race in a widget; ``set_time(ms)`` moves it."""

    def __init__(self, race: Race, vocab: TokenText, parent: QWidget | None = None, base_pt: float = 13.0) -> None:
        super().__init__(parent)
        self.painter = RacePainter(race, vocab, self.font(), base_pt=base_pt)
        self.ms = 0.0
        self.setMinimumSize(640, 360)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)

    @property
    def race(self) -> Race:
        return self.painter.race

    @property
    def base_pt(self) -> float:
        return self.painter.base_pt

    def set_time(self, ms: float) -> None:
        self.ms = ms
        self.update()

    def set_base_pt(self, pt: float) -> None:
        self.painter.base_pt = pt
        self.update()

    def set_slowdown(self, factor: float) -> None:
        self.painter.slowdown = factor
        self.update()

    def states(self) -> list[LaneState]:
        """What every lane shows now."""
        return self.race.at(self.ms)

    def offscreen_painter(self) -> RacePainter:
        """A painter with this view's look, its own (to paint from another thread)."""
        p = self.painter
        return RacePainter(p.race, p.vocab, self.font(), is_dark(self.palette()), p.base_pt, p.slowdown)

    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt's name)
        self.painter.font = QFont(self.font())
        self.painter.dark = is_dark(self.palette())
        p = QPainter(self)
        try:
            self.painter.paint(p, QRectF(self.rect()), self.ms)
        finally:
            p.end()


def render_frame(painter: RacePainter, ms: float, size: tuple[int, int]) -> QImage:
    img = QImage(size[0], size[1], QImage.Format.Format_RGB32)
    p = QPainter(img)
    try:
        painter.paint(p, QRectF(0, 0, size[0], size[1]), ms)
    finally:
        p.end()
    return img


def write_gif(view: RaceView | RacePainter, out: Path, size: tuple[int, int], fps: float = 10.0,
              slowdown: float = 1.0, hold_ms: float = 2000.0, progress=None) -> int:
    """Render the race to an animated GIF (written atomically); returns the number of frames the file holds (an
    unchanged picture is one frame shown longer). ``progress(i, n)``
    is called after each frame (it may raise to stop: nothing is written then). A :class:`RacePainter` may be
    rendered from any thread; a :class:`RaceView` only from the UI thread."""
    import os
    import tempfile

    from PIL import Image

    if isinstance(view, RaceView):
        painter = view.offscreen_painter()
        painter.slowdown = slowdown
    else:
        painter = view
    times = frame_times(painter.race, fps=fps, slowdown=slowdown, hold_ms=hold_ms)
    frames: list = []
    durations: list[int] = []
    step_ms = int(round(1000 / fps))
    last = None
    for i, ms in enumerate(times):
        img = render_frame(painter, ms, size).convertToFormat(QImage.Format.Format_RGB888)
        data = bytes(img.constBits())[: img.bytesPerLine() * img.height()]
        if data == last:  # an unchanged picture (the final hold, a pause between tokens) is one longer frame
            durations[-1] += step_ms
        else:
            frame = Image.frombuffer("RGB", size, data, "raw", "RGB", img.bytesPerLine(), 1)
            frames.append(frame.convert("P", palette=Image.Palette.ADAPTIVE, colors=128))
            durations.append(step_ms)
            last = data
        if progress is not None:
            progress(i + 1, len(times))
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent if str(out.parent) else ".")
    os.close(fd)
    try:
        frames[0].save(tmp, format="GIF", save_all=True, append_images=frames[1:], duration=durations,
                       loop=0, optimize=False, disposal=1)
        os.chmod(tmp, new_file_mode())
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(frames)
