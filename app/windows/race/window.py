"""The race window: a :class:`~specviz_app.windows.race.view.RaceView` played at the recorded pace, with its controls.

The bar: Play/Pause (Space), Restart (R), a slow-motion factor (+ / - too), Full screen (F11: presentation fonts,
large enough for the back of a room), Export GIF (Ctrl+E: rendered on a background thread with a progress bar, by
:func:`~specviz_app.windows.race.view.write_gif`, the function ``specviz race --out`` uses). Esc leaves full screen, or closes.

Playback reads a clock (injected: tests pass a fake one) rather than counting timer ticks, so a busy machine drops
frames but never slows the race: at any moment the view shows race time ``(now - start) / slowdown``.
"""

from __future__ import annotations

import atexit
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QFont, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QFileDialog,
    QLabel,
    QProgressBar,
    QSizePolicy,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from specviz_app.theme import set_role
from specviz_app.windows.race.view import RacePainter, RaceView, write_gif
from specviz_core.analysis.race import Race
from specviz_core.runtime.vocab import TokenText

#: Slow-motion factors offered (1: the recorded pace).
SLOWDOWNS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
#: The exported GIF: the size, frame rate and 2 s hold of ``specviz race --out``'s defaults.
GIF_SIZE = (960, 540)
GIF_FPS = 10


class GifExport(QObject):
    """Renders a race to a GIF on the UI thread, a frame at a time with the window's events handled between frames
    (the window keeps playing); ``cancel()`` stops it at the next frame (nothing is written).

    Not a thread: laying out the lanes' text (a QTextDocument) off the UI thread while the window painted could
    deadlock the two (Qt's text layout held the interpreter's lock while it waited for the UI thread, seen in a test
    run). An export is nobody's child: it outlives a window destroyed under it (its painter holds no widget)."""

    running: set[GifExport] = set()

    progress = Signal(int, int)
    """(frames rendered, frames in all)."""
    done = Signal(str, int)
    """(path written, number of frames)."""
    failed = Signal(str)
    """A message for the user ('' when cancelled)."""
    finished = Signal()

    class Stopped(Exception):
        pass

    def __init__(self, painter: RacePainter, out: Path, slowdown: float) -> None:
        super().__init__()
        self.painter, self.out, self.slowdown = painter, Path(out), slowdown
        self._cancel = False
        GifExport.running.add(self)
        self.finished.connect(lambda: GifExport.running.discard(self))

    @classmethod
    def stop_all(cls) -> None:
        for job in list(cls.running):
            job.cancel()

    def start(self) -> None:
        """Begin once the event loop runs again (the caller's slot returns first)."""
        QTimer.singleShot(0, self.run)

    def wait(self) -> bool:
        """Nothing to wait for: a cancelled export stops at its next frame, on this thread."""
        return True

    def cancel(self) -> None:
        self._cancel = True

    def _progress(self, i: int, n: int) -> None:
        QCoreApplication.processEvents()  # the window plays on, and Cancel can be pressed
        if self._cancel:
            raise GifExport.Stopped
        self.progress.emit(i, n)

    def run(self) -> None:
        try:
            if self._cancel:
                raise GifExport.Stopped
            n = write_gif(self.painter, self.out, GIF_SIZE, fps=GIF_FPS, slowdown=self.slowdown,
                          progress=self._progress)
        except GifExport.Stopped:
            self.failed.emit("")
        except OSError as e:
            self.failed.emit(f"cannot write {self.out}: {e.strerror or e}")
        except Exception as e:  # a message in the window, never a traceback
            self.failed.emit(f"the GIF export failed: {type(e).__name__}: {e}")
        else:
            self.done.emit(str(self.out), n)
        finally:
            self.finished.emit()


atexit.register(GifExport.stop_all)


class RaceWindow(QWidget):
    """Plays a race in real time or slower; see the module docstring for the controls."""

    FPS = 30

    def __init__(self, race: Race, vocab: TokenText, slowdown: float = 1.0, parent: QWidget | None = None,
                 clock: Callable[[], float] = time.monotonic, export_dir: Path | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("SpecViz race — " + " vs ".join(lane.label.split()[0] for lane in race.lanes))
        self.clock = clock
        self.export_dir = export_dir or Path.home()
        self.view = RaceView(race, vocab, self)
        self.slowdown = 1.0
        self.presentation = False
        self._origin_ms = 0.0
        """Race time at ``_t0`` (where the last play, resume or change of pace started)."""
        self._t0 = 0.0
        self.export: GifExport | None = None
        self.timer = QTimer(self)
        self.timer.setInterval(int(1000 / self.FPS))
        self.timer.timeout.connect(self.tick)
        self.bar = self._build_bar()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.bar)
        lay.addWidget(self.view, 1)
        for key, fn in (("+", self.slower), ("=", self.slower), ("-", self.faster), ("Esc", self.escape)):
            QShortcut(QKeySequence(key), self, activated=fn)
        self.set_slowdown(slowdown)
        self._base_font = QFont(self.font())
        self.resize(1100, 700)

    def _build_bar(self) -> QToolBar:
        tb = QToolBar("Race")

        def action(text: str, key: str, slot, tip: str) -> QAction:
            a = QAction(text, self)
            a.setShortcut(QKeySequence(key))
            a.setToolTip(f"{tip} ({key})")
            a.triggered.connect(slot)
            tb.addAction(a)
            self.addAction(a)
            return a

        self.play_action = action("Play", "Space", self.toggle, "Play or pause the race")
        self.restart_action = action("Restart", "R", self.restart, "Back to the start, and play")
        tb.addSeparator()
        tb.addWidget(QLabel(" Slow motion "))
        self.slow = QComboBox()
        for f in SLOWDOWNS:
            self.slow.addItem("real time" if f == 1 else f"{f:g}× slower" if f > 1 else f"{1 / f:g}× faster", f)
        self.slow.setToolTip("Play the recorded pace this many times slower (+ / -)")
        self.slow.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # Space and R stay the race's keys
        self.slow.currentIndexChanged.connect(lambda i: self.set_slowdown(self.slow.itemData(i)))
        tb.addWidget(self.slow)
        tb.addSeparator()
        self.full_action = action("Full screen", "F11", self.toggle_presentation,
                                  "Full screen with presentation fonts; Esc leaves")
        self.full_action.setCheckable(True)
        self.export_action = action("Export GIF…", "Ctrl+E", self.export_dialog,
                                    f"Save the race as an animated GIF ({GIF_SIZE[0]}x{GIF_SIZE[1]}, {GIF_FPS} fps, "
                                    "at the slow-motion factor chosen)")
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(200)
        self.progress.setVisible(False)
        self.cancel_button = QToolButton()
        self.cancel_button.setText("Cancel")
        self.cancel_button.setToolTip("Stop the GIF export (nothing is written)")
        self.cancel_button.clicked.connect(self.cancel_export)
        self.message = QLabel()
        self.message.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        tb.addWidget(self.progress)
        self.cancel_widget = tb.addWidget(self.cancel_button)
        self.cancel_widget.setVisible(False)
        tb.addWidget(self.message)
        return tb

    # -- playing ----------------------------------------------------------------------------------------------------
    @property
    def playing(self) -> bool:
        return self.timer.isActive()

    @property
    def ms(self) -> float:
        """The race time shown."""
        return self.view.ms

    def _now_ms(self) -> float:
        return self._origin_ms + (self.clock() - self._t0) * 1000.0 / self.slowdown

    def _rebase(self) -> None:
        """Play on from the time shown, from now."""
        self._origin_ms = self.view.ms
        self._t0 = self.clock()

    def start(self) -> None:
        """Play (from the start once the race has finished)."""
        if self.view.ms >= self.view.race.duration_ms:
            self.view.set_time(0.0)
        self._rebase()
        self.timer.start()
        self._show_playing()

    def pause(self) -> None:
        if self.playing:
            self.tick()
        self.timer.stop()
        self._show_playing()

    def toggle(self) -> None:
        self.pause() if self.playing else self.start()

    def restart(self) -> None:
        self.view.set_time(0.0)
        self.start()

    def tick(self) -> None:
        """Show the race at the clock's now (the timer calls this; the race stops at the finish)."""
        end = self.view.race.duration_ms
        ms = min(end, self._now_ms())
        self.view.set_time(ms)
        if ms >= end:
            self.timer.stop()
            self._show_playing()

    def _show_playing(self) -> None:
        done = self.view.ms >= self.view.race.duration_ms
        self.play_action.setText("Pause" if self.playing else "Replay" if done else "Play")

    def set_slowdown(self, factor: float) -> None:
        """Play ``factor`` times slower than recorded from now on (the time shown does not jump)."""
        factor = min(SLOWDOWNS, key=lambda f: abs(f - factor)) if factor not in SLOWDOWNS else factor
        if self.playing:
            self.view.set_time(min(self.view.race.duration_ms, self._now_ms()))
            self._rebase()
        self.slowdown = factor
        self.view.set_slowdown(factor)
        self.slow.blockSignals(True)
        self.slow.setCurrentIndex(SLOWDOWNS.index(factor))
        self.slow.blockSignals(False)

    def slower(self) -> None:
        self.set_slowdown(SLOWDOWNS[min(len(SLOWDOWNS) - 1, SLOWDOWNS.index(self.slowdown) + 1)])

    def faster(self) -> None:
        self.set_slowdown(SLOWDOWNS[max(0, SLOWDOWNS.index(self.slowdown) - 1)])

    # -- presentation -----------------------------------------------------------------------------------------------
    def set_presentation(self, on: bool, full_screen: bool = True) -> None:
        """Presentation: the race's text and the bar's grow for a room; full screen unless told otherwise."""
        self.presentation = on
        self.full_action.setChecked(on)
        font = QFont(self._base_font)
        if on:
            font.setPointSizeF(self._base_font.pointSizeF() * 1.5)
        self.bar.setFont(font)
        for w in self.bar.findChildren(QWidget):
            w.setFont(font)
        if full_screen:
            self.showFullScreen() if on else self.showNormal()
        self._fit_text()

    def toggle_presentation(self) -> None:
        self.set_presentation(not self.presentation)

    def escape(self) -> None:
        """Esc: leave full screen, else close."""
        if self.presentation or self.isFullScreen():
            self.set_presentation(False)
        else:
            self.close()

    def _fit_text(self) -> None:
        h = self.view.height()
        self.view.set_base_pt(max(20.0, h / 38) if self.presentation else max(12.0, h / 48))

    def resizeEvent(self, e) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(e)
        self._fit_text()

    # -- export -----------------------------------------------------------------------------------------------------
    def export_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export the race as a GIF", str(self.export_dir / "race.gif"),
                                              "Animated GIF (*.gif)")
        if path:
            self.export_gif(Path(path) if path.lower().endswith(".gif") else Path(path + ".gif"))

    def export_gif(self, out: Path) -> GifExport | None:
        """Write the race to ``out`` in the background (the window keeps playing); progress shows in the bar."""
        if self.export is not None:
            self.show_message("A GIF export is running: wait for it or cancel it.", error=True)
            return None
        painter = self.view.offscreen_painter()
        painter.base_pt = max(9.0, GIF_SIZE[1] / 45)  # as specviz race --out draws it
        painter.slowdown = self.slowdown
        job = GifExport(painter, out, self.slowdown)
        job.progress.connect(self._export_progress)
        job.done.connect(self._export_done)
        job.failed.connect(self._export_failed)
        self.export = job
        self.export_action.setEnabled(False)
        self.progress.setRange(0, 0)
        self.progress.setVisible(True)
        self.cancel_widget.setVisible(True)
        self.show_message(f"Exporting {out.name}…")
        job.start()
        return job

    def _export_progress(self, i: int, n: int) -> None:
        self.progress.setRange(0, n)
        self.progress.setValue(i)
        self.progress.setFormat(f"frame {i}/{n}")

    def _export_done(self, path: str, n: int) -> None:
        self._export_ended(f"Saved {path} ({n} frames)", False)

    def _export_failed(self, text: str) -> None:
        self._export_ended(text or "GIF export cancelled", bool(text))

    def _export_ended(self, text: str, error: bool) -> None:
        if self.export is not None:
            self.export.wait()
        self.export = None
        self.export_action.setEnabled(True)
        self.progress.setVisible(False)
        self.cancel_widget.setVisible(False)
        self.show_message(text, error)

    def cancel_export(self) -> None:
        if self.export is not None:
            self.export.cancel()

    def show_message(self, text: str, error: bool = False) -> None:
        self.message.setText(f"  {text}")
        set_role(self.message, "error" if error else None)

    def closeEvent(self, e: QCloseEvent) -> None:  # noqa: N802 (Qt's name)
        self.timer.stop()
        if self.export is not None:
            self.export.cancel()
            self.export.wait()
        super().closeEvent(e)


def show_race(race: Race, vocab: TokenText, slowdown: float = 1.0, **kw) -> RaceWindow:
    """A race window, shown and playing."""
    w = RaceWindow(race, vocab, slowdown, **kw)
    w.show()
    QApplication.processEvents()
    w.start()
    return w
