"""``specviz screenshot`` and ``specviz gui``: headless rendering of a recorded cycle, clear errors."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QImage

from specviz_app.cli import main
from specviz_core.recording.store import Recording


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, tiny_dir):
    db = tmp_path_factory.mktemp("shot") / "runs.db"
    assert main(["record", "--method", "tr", "--model", str(tiny_dir), "--prompt", "one two three one two",
                 "--max-new-tokens", "12", "--db", str(db), "--quiet"]) == 0
    with Recording(db) as rec:
        info = rec.sessions()[-1]
        n = rec.n_cycles(info.id)
        last = rec.cycle(info.id, n - 1)
    return db, info.id, n, last


@pytest.mark.parametrize("panel", ["tree", "mask", "kv", "window"])
def test_screenshot_renders_the_recorded_cycle(monkeypatch, tmp_path, recorded, panel, capsys):
    monkeypatch.setenv("SPECVIZ_CONFIG", str(tmp_path / "gui.ini"))
    db, sid, n, last = recorded
    out = tmp_path / f"{panel}.png"
    assert main(["screenshot", "--db", str(db), "--session", sid, "--cycle", "-1", "--panel", panel,
                 "--size", "1200x800", "--out", str(out)]) == 0
    img = QImage(str(out))
    assert not img.isNull() and img.width() > 100 and img.height() > 100
    # Not a blank image: a drawing has many colours.
    colours = {img.pixel(x, y) for x in range(0, img.width(), 7) for y in range(0, img.height(), 7)}
    assert len(colours) > 8
    assert not (tmp_path / "gui.ini").exists(), "a screenshot must not overwrite the user's window layout"


@pytest.mark.parametrize("panel", ["tree", "mask", "kv", "charts", "output", "spine", "window"])
def test_screenshot_svg(monkeypatch, tmp_path, recorded, panel):
    """Issue 15.2: every panel exports as SVG (plain widgets raised a TypeError in render() and then segfaulted)."""
    monkeypatch.setenv("SPECVIZ_CONFIG", str(tmp_path / "gui.ini"))
    db, sid, n, last = recorded
    out = tmp_path / f"{panel}.svg"
    assert main(["screenshot", "--db", str(db), "--cycle", "0", "--panel", panel, "--out", str(out)]) == 0
    svg = out.read_text(encoding="utf-8")
    assert "<svg" in svg and "</svg>" in svg and svg.count("<path") + svg.count("<text") + svg.count("<image") > 3


@pytest.mark.parametrize("argv, needle", [
    (["--cycle", "999"], "out of range"),
    (["--session", "nope"], "no session 'nope'"),
    (["--out", "x.jpg"], ".png or .svg"),
    (["--size", "big"], "WIDTHxHEIGHT"),
    (["--size", "10x10"], "--size must be from 900x600"),
    (["--out", "/nonexistent/x.png"], "folder /nonexistent does not exist"),
])
def test_screenshot_errors_are_one_line(monkeypatch, tmp_path, recorded, capsys, argv, needle):
    monkeypatch.setenv("SPECVIZ_CONFIG", str(tmp_path / "gui.ini"))
    db, sid, n, last = recorded
    args = {"--db": str(db), "--out": str(tmp_path / "o.png")}
    for k, v in zip(argv[::2], argv[1::2]):
        args[k] = v
    code = main(["screenshot", *[x for kv in args.items() for x in kv]])
    err = capsys.readouterr().err
    assert code == 2
    lines = [x for x in err.splitlines() if x.startswith("specviz: error")]
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


def test_gui_on_a_missing_recording_is_an_error(capsys, tmp_path):
    assert main(["gui", "--db", str(tmp_path / "missing.db")]) == 2
    assert "no recording at" in capsys.readouterr().err


def test_image_outputs_never_overwrite_the_recording_and_are_written_atomically(monkeypatch, tmp_path, recorded,
                                                                                 capsys):
    """Issue 15: no command writes onto a recording it reads, and a failed write leaves the old file whole."""
    import shutil

    from specviz_app.panels import base

    monkeypatch.setenv("SPECVIZ_CONFIG", str(tmp_path / "gui.ini"))
    db, sid, n, last = recorded
    named_png = tmp_path / "runs.png"  # a recording whose name ends in .png passes the suffix checks
    shutil.copy(db, named_png)
    before = named_png.read_bytes()
    for argv in (["screenshot", "--db", str(named_png), "--out", str(named_png)],
                 ["compare", "--db", str(named_png), sid, sid, "--out", str(named_png)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "is the recording being read" in err and "Traceback" not in err
        assert named_png.read_bytes() == before
    out = tmp_path / "shot.png"
    out.write_bytes(b"an earlier screenshot")

    def failing(*args):
        raise OSError("disk full")

    monkeypatch.setattr(base, "_export", failing)
    assert main(["screenshot", "--db", str(db), "--out", str(out)]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert out.read_bytes() == b"an earlier screenshot", "a failed write spoiled the file already there"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".shot.png")] == [], "a temporary file was left"


def _specviz(args: list[str], tmp_path) -> "subprocess.CompletedProcess":
    """The installed ``specviz`` command, as a user runs it: its own process, its own exit."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    exe = shutil.which("specviz") or str(Path(sys.executable).with_name("specviz"))
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", SPECVIZ_CONFIG=str(tmp_path / "gui.ini"))
    return subprocess.run([exe, *args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)


def test_gui_on_a_file_that_is_no_recording_exits_with_one_line_not_a_crash(tmp_path):
    """Issue 30, item 1: a PNG renamed .db, or a folder, printed the right line and then segfaulted (exit 139)."""
    fake = tmp_path / "fake.db"
    fake.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    folder = tmp_path / "folder.db"
    folder.mkdir()
    for db, says in ((fake, "is not a SpecViz recording"), (folder, "is a folder")):
        p = _specviz(["gui", "--db", str(db)], tmp_path)
        assert p.returncode == 2, (p.returncode, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], p.stderr


def test_headless_renders_print_nothing_but_what_they_mean_to(tmp_path, recorded):
    """Issue 30, item 8: every headless render printed Qt's "propagateSizeHints" complaint on stderr."""
    db, sid, n, last = recorded
    p = _specviz(["screenshot", "--demo", "--out", "demo.png"], tmp_path)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    p = _specviz(["screenshot", "--db", str(db), "--panel", "window", "--out", "w.png"], tmp_path)
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_no_display_or_missing_qt_libraries_is_one_line_saying_what_to_do():
    """Where Qt would abort with its own message (exit 134), the window's start says what to install or set."""
    import pytest

    from specviz_app.gui import check_platform, debian_package
    from specviz_core.errors import SpecVizError

    with pytest.raises(SpecVizError, match=r"^no display to open the window on \(DISPLAY and WAYLAND_DISPLAY are not "
                                           r"set\).*QT_QPA_PLATFORM=offscreen"):
        check_platform({}, missing_libraries=lambda: [])
    with pytest.raises(SpecVizError) as e:
        check_platform({"DISPLAY": ":0"}, missing_libraries=lambda: ["libxcb-cursor.so.0", "libxkbcommon-x11.so.0"])
    assert "(libxcb-cursor.so.0, libxkbcommon-x11.so.0): install them (Debian or Ubuntu: sudo apt install " \
           "libxcb-cursor0 libxkbcommon-x11-0)" in str(e.value) and "QT_QPA_PLATFORM=offscreen" in str(e.value)
    check_platform({"DISPLAY": ":0"}, missing_libraries=lambda: [])  # all there: Qt starts
    check_platform({"QT_QPA_PLATFORM": "offscreen"}, missing_libraries=lambda: ["libx.so.1"])  # needs no display
    assert debian_package("libxcb-icccm.so.4") == "libxcb-icccm4" and debian_package("libGL.so.1") == "libGL1"


@pytest.mark.default_model
def test_a_live_talon_session_renders_in_presentation_mode_and_returns(tmp_path):
    """Last stop's hang: after a live TALON session, presentation mode looped forever between showing and hiding a
    chart's side-axis label (the label narrowed the view, the title rewrapped, the label no longer fitted). The
    command that hung must return, with its picture, within the subprocess's time limit."""
    import subprocess

    try:
        done = _specviz(["screenshot", "--db", str(tmp_path / "t.db"), "--live", "3", "--method", "talon", "--prompt",
                         "Count: 1 2 3 4 5 6 7 8 9 10 11 12", "--presentation", "--out", str(tmp_path / "t.png")],
                        tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("specviz screenshot --presentation after a live TALON session did not return in 300 s")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "t.png").stat().st_size > 10_000
