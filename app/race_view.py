"""The race, drawn: two to four lanes writing the same answer at their recorded pace, for a room to watch.

:class:`RaceView` paints one moment of a :class:`~specviz_core.race.Race` (what each lane has written, the tokens
that landed last, accepted draft tokens tinted by their source, tokens/s and speed-up, a finish line);
:class:`RaceWindow` plays it (Space pauses, R restarts, F11 full screen, +/- slow motion); :func:`write_gif`
renders the frames to an animated GIF with Pillow.
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QImage, QKeySequence, QPainter, QPen, QShortcut, QTextDocument
from PySide6.QtWidgets import QWidget

from specviz_core.cli.options import new_file_mode
from specviz_core.race import Race, frame_times, is_draft
from specviz_core.vocab import TokenText

from .theme import ACCEPTED, SOURCE_COLORS, is_dark

#: Lane colours of the progress bars (the first lane is the baseline).
LANE_COLORS = ("#6c7a89", "#1f77d0", "#e07b00", "#8e44ad")
ORDINALS = {1: "1st", 2: "2nd", 3: "3rd"}
LEGEND = "tinted: accepted draft tokens (colour = their source)   ·   underlined: the latest cycle's tokens"


class RaceView(QWidget):
    """One moment of a race; ``set_time(ms)`` moves it."""

    def __init__(self, race: Race, vocab: TokenText, parent: QWidget | None = None, base_pt: float = 13.0) -> None:
        super().__init__(parent)
        self.race = race
        self.vocab = vocab
        self.ms = 0.0
        self.base_pt = base_pt
        self.setMinimumSize(640, 360)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)

    def set_time(self, ms: float) -> None:
        self.ms = ms
        self.update()

    def set_base_pt(self, pt: float) -> None:
        self.base_pt = pt
        self.update()

    # -- drawing --------------------------------------------------------------------------------------------------
    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt's name)
        p = QPainter(self)
        try:
            self.paint(p, QRectF(self.rect()))
        finally:
            p.end()

    def paint(self, p: QPainter, area: QRectF) -> None:
        dark = is_dark(self.palette())
        bg, fg = (QColor("#1e2227"), QColor("#e8eaed")) if dark else (QColor("#ffffff"), QColor("#1d2125"))
        p.fillRect(area, bg)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        states = self.race.at(self.ms)
        speedups = self.race.speedups(self.ms)
        finals = self.race.final_speedups()
        n = len(states)
        pad = max(8.0, area.height() * 0.015)
        head_pt = self.base_pt * 1.25
        title = QFont(self.font())
        title.setPointSizeF(head_pt)
        title.setBold(True)
        clock = QFont(self.font())
        clock.setPointSizeF(self.base_pt)
        p.setFont(clock)
        p.setPen(fg)
        top = area.top() + pad
        p.drawText(QRectF(area.left() + pad, top, area.width() - 2 * pad, head_pt * 2),
                   Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, f"t = {self.ms / 1000:.2f} s")
        small = QFont(self.font())
        small.setPointSizeF(max(7.0, self.base_pt * 0.75))
        p.setFont(small)
        legend_h = small.pointSizeF() * 2.2
        p.setPen(QColor("#8a8f98"))
        p.drawText(QRectF(area.left() + pad, area.bottom() - legend_h, area.width() - 2 * pad, legend_h),
                   Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, LEGEND)
        lane_h = (area.height() - 2 * pad - legend_h) / n
        total = max(len(lane.tokens) for lane in self.race.lanes) or 1
        for i, (lane, st) in enumerate(zip(self.race.lanes, states)):
            r = QRectF(area.left() + pad, area.top() + pad + i * lane_h, area.width() - 2 * pad, lane_h - pad)
            color = QColor(LANE_COLORS[i % len(LANE_COLORS)])
            # Header: name, tokens/s, speed-up (the final one once the lane has finished).
            p.setFont(title)
            p.setPen(color)
            head = QRectF(r.left(), r.top(), r.width(), head_pt * 2)
            p.drawText(head, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, lane.label)
            p.setFont(clock)
            p.setPen(fg)
            base = self.race.lanes[0].label.split()[0]
            if st.finished:
                place = sorted(lane.finish_ms for lane in self.race.lanes).index(st.finish_ms) + 1
                speed = (f"{ORDINALS.get(place, f'{place}th')} · finished in {st.finish_ms / 1000:.2f} s"
                         + (f"  ·  {finals[i]:.2f}× vs {base}" if i else ""))
            else:
                s = speedups[i]
                speed = f"{st.tokens_per_s:.1f} tok/s" + (f"  ·  {s:.2f}× vs {base}" if i and s is not None else "")
            p.drawText(QRectF(r.left(), r.top(), r.width() * 0.82, head_pt * 2),
                       Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, speed)
            # Progress toward the finish line: tokens written of the longest answer.
            bar = QRectF(r.left(), head.bottom() + 2, r.width(), max(6.0, self.base_pt * 0.5))
            p.fillRect(bar, QColor(color.red(), color.green(), color.blue(), 40))
            p.fillRect(QRectF(bar.left(), bar.top(), bar.width() * len(st.tokens) / total, bar.height()), color)
            if st.finished:
                p.setPen(QPen(QColor(ACCEPTED), 3))
                p.drawLine(bar.topRight(), bar.bottomRight())
            # The text so far; the tail is kept in view when it outgrows the lane.
            text_r = QRectF(r.left(), bar.bottom() + pad / 2, r.width(), r.bottom() - bar.bottom() - pad / 2)
            self._paint_text(p, text_r, st, fg, dark)

    def _paint_text(self, p: QPainter, r: QRectF, st, fg: QColor, dark: bool) -> None:
        doc = QTextDocument()
        font = QFont(self.font())
        font.setPointSizeF(self.base_pt)
        doc.setDefaultFont(font)
        doc.setTextWidth(r.width())
        doc.setHtml(self._html(st, fg, dark))
        p.save()
        p.setClipRect(r)
        over = doc.size().height() - r.height()
        p.translate(r.left(), r.top() - max(0.0, over))
        doc.drawContents(p)
        p.restore()

    def _html(self, st, fg: QColor, dark: bool) -> str:
        """Tokens as text: accepted draft tokens tinted by their source, the latest cycle's tokens underlined."""
        parts = []
        n = len(st.tokens)
        pieces = self.vocab.pieces(st.tokens)
        for k, (piece, kind) in enumerate(zip(pieces, st.kinds)):
            text = html.escape(piece).replace("\n", "<br>")
            style = []
            if is_draft(kind):
                c = QColor(SOURCE_COLORS.get(kind, ACCEPTED))
                c.setAlpha(90 if dark else 60)
                style.append(f"background-color: rgba({c.red()},{c.green()},{c.blue()},{c.alphaF():.2f})")
            if k >= n - st.last_cycle:
                style.append("text-decoration: underline; font-weight: 600")
            parts.append(f'<span style="{"; ".join(style)}">{text}</span>' if style else text)
        body = "".join(parts) or "&nbsp;"
        return f'<div style="color: {fg.name()}; white-space: pre-wrap">{body}</div>'


class RaceWindow(QWidget):
    """Plays a race in real time (or slower): Space pause, R restart, F11 full screen, +/- slow motion."""

    FPS = 30

    def __init__(self, race: Race, vocab: TokenText, slowdown: float = 1.0, base_pt: float = 16.0) -> None:
        super().__init__()
        from PySide6.QtWidgets import QVBoxLayout

        self.setWindowTitle("SpecViz race — Space: pause · R: restart · +/-: slower/faster · F11: full screen")
        self.view = RaceView(race, vocab, self, base_pt=base_pt)
        self._base_pt = base_pt
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self.slowdown = slowdown
        self.ms = 0.0
        self.timer = QTimer(self)
        self.timer.setInterval(int(1000 / self.FPS))
        self.timer.timeout.connect(self._tick)
        for key, fn in (("Space", self.toggle), ("R", self.restart), ("F11", self.toggle_full_screen),
                        ("+", lambda: self.set_slowdown(self.slowdown * 2)), ("=", lambda: self.set_slowdown(self.slowdown * 2)),
                        ("-", lambda: self.set_slowdown(self.slowdown / 2)), ("Escape", self.close)):
            QShortcut(QKeySequence(key), self, activated=fn)
        self.resize(1280, 720)

    def start(self) -> None:
        self.timer.start()

    def toggle(self) -> None:
        self.timer.stop() if self.timer.isActive() else self.timer.start()

    def restart(self) -> None:
        self.ms = 0.0
        self.view.set_time(0.0)
        self.timer.start()

    def set_slowdown(self, factor: float) -> None:
        self.slowdown = min(64.0, max(1 / 16, factor))

    def toggle_full_screen(self) -> None:
        self.showNormal() if self.isFullScreen() else self.showFullScreen()

    def resizeEvent(self, e) -> None:  # noqa: N802
        """Full screen on a projector: the text grows with the window (as the GIF's does with its size)."""
        self.view.set_base_pt(max(self._base_pt, self.height() / 45))
        super().resizeEvent(e)

    def _tick(self) -> None:
        self.ms += 1000 / self.FPS / self.slowdown
        if self.ms >= self.view.race.duration_ms:
            self.ms = self.view.race.duration_ms
            self.timer.stop()
        self.view.set_time(self.ms)


def render_frame(view: RaceView, ms: float, size: tuple[int, int]) -> QImage:
    img = QImage(size[0], size[1], QImage.Format.Format_RGB32)
    view.resize(*size)
    view.ms = ms
    p = QPainter(img)
    try:
        view.paint(p, QRectF(0, 0, size[0], size[1]))
    finally:
        p.end()
    return img


def write_gif(view: RaceView, out: Path, size: tuple[int, int], fps: float = 10.0, slowdown: float = 1.0,
              hold_ms: float = 2000.0, progress=None) -> int:
    """Render the race to an animated GIF (written atomically); returns the number of frames."""
    import os
    import tempfile

    from PIL import Image

    times = frame_times(view.race, fps=fps, slowdown=slowdown, hold_ms=hold_ms)
    frames = []
    for i, ms in enumerate(times):
        img = render_frame(view, ms, size).convertToFormat(QImage.Format.Format_RGB888)
        data = bytes(img.constBits())[: img.bytesPerLine() * img.height()]
        frame = Image.frombuffer("RGB", size, data, "raw", "RGB", img.bytesPerLine(), 1)
        frames.append(frame.convert("P", palette=Image.Palette.ADAPTIVE, colors=128))
        if progress is not None:
            progress(i + 1, len(times))
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent if str(out.parent) else ".")
    os.close(fd)
    try:
        frames[0].save(tmp, format="GIF", save_all=True, append_images=frames[1:], duration=int(round(1000 / fps)),
                       loop=0, optimize=False, disposal=1)
        os.chmod(tmp, new_file_mode())
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(frames)
