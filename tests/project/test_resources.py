"""``specviz_resources``: the icons load and draw, the theme's style sheets replace the inline styles they
stand for, the bundled demo is a small real Goose session that ``gui --demo`` and ``screenshot --demo`` open."""

from __future__ import annotations

import fnmatch
import sqlite3
import tomllib
from pathlib import Path

import pytest
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QLabel

import specviz_resources
from specviz_app.cli import main
from specviz_app.demo import DEMO_DB, copy_demo, demo_recording
from specviz_app.icons import ACTION_ICONS, action_icon, app_icon, render
from specviz_app.theme import dark_palette, set_role, style_sheet
from specviz_core.recording.store import Recording

ROOT = Path(__file__).resolve().parents[2]
RESOURCES = ROOT / "resources"


def _opaque_pixels(img: QImage) -> int:
    return sum(img.pixelColor(x, y).alpha() > 0 for x in range(img.width()) for y in range(img.height()))


# -- icons ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ACTION_ICONS)
def test_action_icon_draws_at_toolbar_size(qapp, name):
    icon = action_icon(name)
    assert not icon.isNull()
    img = icon.pixmap(24, 24).toImage()
    assert (img.width(), img.height()) == (24, 24)
    # Drawn, not blank, and not a filled square: an icon covers part of its box.
    assert 24 < _opaque_pixels(img) < 24 * 24 * 0.8


def test_app_icon(qapp):
    from specviz_app.gui import make_app

    assert make_app() is qapp
    assert not qapp.windowIcon().isNull()
    for size in (16, 24, 64):
        assert _opaque_pixels(app_icon().pixmap(size, size).toImage()) > size * size // 2


def test_action_icons_take_the_palette_text_colour(qapp):
    """Outlines follow the theme (dark on light, light on dark); accents keep their colour."""
    for name in ("pause", "reset", "open", "presentation", "export", "step"):
        on_light, on_dark = render(name, 24, "#000000"), render(name, 24, "#ffffff")
        assert on_light != on_dark, name
    assert render("run", 24, "#000000") == render("run", 24, "#ffffff")


def test_unknown_icon_is_a_clear_error(qapp):
    with pytest.raises(KeyError, match="no action icon 'stop'"):
        action_icon("stop")


# -- themes -----------------------------------------------------------------------------------------------------
def _label_pixels(qtbot, text: str, style=None, role=None, palette=None) -> QImage:
    label = QLabel(text)
    qtbot.addWidget(label)
    if palette is not None:
        label.setPalette(palette)
    if style is not None:
        label.setStyleSheet(style)
    if role is not None:
        set_role(label, role)
    label.resize(320, 30)
    return label.grab().toImage()


@pytest.mark.parametrize("role, inline", [
    ("hint", "color: palette(placeholder-text);"),
    ("error", "color: #c62828; font-weight: bold;"),
    ("message", "color: palette(text); font-weight: normal;"),
])
def test_a_role_looks_like_the_inline_style_it_replaces(qtbot, role, inline):
    assert _label_pixels(qtbot, "Replaying session 1234", role=role) == _label_pixels(qtbot, "Replaying session 1234",
                                                                                         style=inline)


def test_dark_theme_errors_are_readable_on_dark(qtbot):
    img = _label_pixels(qtbot, "no recording at x.db", role="error", palette=dark_palette())
    reds = [img.pixelColor(x, y) for x in range(img.width()) for y in range(img.height())]
    brightest = max(reds, key=lambda c: c.lightness())
    assert brightest.red() > 200 and brightest.lightness() > 140


def test_style_sheets_load_and_name_the_same_roles():
    import re

    roles = {t: set(re.findall(r'\[role="(\w+)"\]', style_sheet(t))) for t in ("light", "dark")}
    assert roles["light"] == roles["dark"] == {"hint", "message", "error"}
    with pytest.raises(ValueError, match="no theme"):
        style_sheet("solarized")


def test_role_none_clears_the_rules(qtbot):
    label = QLabel("x")
    qtbot.addWidget(label)
    set_role(label, "error")
    set_role(label, None)
    assert label.styleSheet() == "" and label.property("role") is None


# -- package data -------------------------------------------------------------------------------------------
def test_package_data_globs_cover_every_resource_file():
    """A file the globs miss is in the checkout but not in a wheel (tests/project/test_wheel.py checks a real one)."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = cfg["tool"]["setuptools"]["package-data"]["specviz_resources"]
    files = [p.relative_to(RESOURCES).as_posix() for p in RESOURCES.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".py"]
    assert files
    missed = [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)]
    assert not missed, f"add package-data globs for {missed}"


def test_resources_are_read_through_the_package():
    assert specviz_resources.files("icons", "specviz.svg").read_bytes().startswith(b"<svg")
    assert "def f(a, b):" in specviz_resources.demo_prompt()


# -- the demo recording -----------------------------------------------------------------------------------------
def test_demo_is_one_small_self_contained_file():
    shipped = RESOURCES / "demo" / DEMO_DB
    assert shipped.stat().st_size < 500_000
    assert not (RESOURCES / "demo" / f"{DEMO_DB}-wal").exists()
    conn = sqlite3.connect(f"file:{shipped}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
        # Nothing of the recording machine: no local paths, no host.
        assert conn.execute("SELECT DISTINCT tokenizer, writer_host FROM sessions").fetchall() == [("", "")]
    finally:
        conn.close()


def test_demo_copy_is_a_complete_goose_session_with_its_ar_baseline(tmp_path):
    shipped = (RESOURCES / "demo" / DEMO_DB).read_bytes()
    db = copy_demo(tmp_path / "demo")
    with Recording(db) as rec:
        goose = rec.session()  # the latest: what the window opens
        sessions = rec.sessions()
        assert goose.method == "goose" and goose.status == "complete" and goose.temperature == 0
        assert rec.n_cycles(goose.id) > 5 and len(goose.output_ids) >= 32
        assert goose.tokenizer == str(tmp_path / "demo")
        assert (tmp_path / "demo" / "tokenizer.json").is_file()
        ar = [s for s in sessions if s.method == "ar"]
        assert len(ar) == 1 and ar[0].prompt_ids == goose.prompt_ids and ar[0].status == "complete"
        assert "merge_settings" in goose.prompt_text
    assert (RESOURCES / "demo" / DEMO_DB).read_bytes() == shipped, "opening the demo must not touch the shipped file"


def test_demo_recording_removes_its_copy():
    with demo_recording() as db:
        assert db.is_file()
    assert not db.parent.exists()


def test_screenshot_demo(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECVIZ_CONFIG", str(tmp_path / "gui.ini"))
    out = tmp_path / "demo.png"
    assert main(["screenshot", "--demo", "--cycle", "2", "--out", str(out)]) == 0
    img = QImage(str(out))
    assert not img.isNull() and img.width() > 100 and img.height() > 100
    colours = {img.pixel(x, y) for x in range(0, img.width(), 7) for y in range(0, img.height(), 7)}
    assert len(colours) > 8


def test_demo_replay_shows_token_text():
    """The tokenizer slice travels with the copy: the replay shows words, not ``#id`` labels."""
    from specviz_core.runtime.vocab import load_token_text

    with demo_recording() as db, Recording(db) as rec:
        info = rec.session()
        tokens = load_token_text(info.tokenizer)
        assert tokens.tokenizer is not None
        assert "def merge_settings(defaults, overrides, allowed_keys):" in tokens.text(info.output_ids)


def test_screenshot_demo_and_live_is_an_error(capsys, tmp_path):
    assert main(["screenshot", "--demo", "--live", "3", "--out", str(tmp_path / "x.png")]) == 2
    assert "pick one" in capsys.readouterr().err


def test_gui_demo_opens_a_copy(monkeypatch):
    import specviz_app.gui

    seen = {}

    def fake_run_gui(db, session=None, replay=False):
        seen.update(db=db, exists=Path(db).is_file(), session=session, replay=replay)
        return 0

    monkeypatch.setattr(specviz_app.gui, "run_gui", fake_run_gui)
    assert main(["gui", "--demo"]) == 0
    assert seen["exists"] and seen["replay"] and seen["session"] is None
    assert Path(seen["db"]).name == DEMO_DB and Path(seen["db"]).parent != RESOURCES / "demo"
    assert not Path(seen["db"]).exists()
    with pytest.raises(SystemExit):
        main(["gui", "--demo", "--db", "x.db"])


@pytest.mark.default_model
def test_demo_output_is_the_default_models_greedy_decode(smol, tmp_path):
    """What the demo shows is what Goose claims: lossless, so its output is the target's own greedy output."""
    from helpers import hf_greedy_once

    with Recording(copy_demo(tmp_path)) as rec:
        sessions = [rec.session(s.id) for s in rec.sessions()]
    for s in sessions:  # the goose session and its AR baseline: one prompt, one generate call for both
        assert s.model == "default" and s.device == "cpu" and s.dtype == "float32"
        assert list(s.output_ids) == hf_greedy_once(smol, list(s.prompt_ids), len(s.output_ids)), s.method


@pytest.mark.default_model
def test_demo_tokenizer_slice_decodes_like_the_full_tokenizer(tmp_path):
    """Every token the replay can show reads the same as with the default model's own tokenizer."""
    from make_demo import token_ids
    from tokenizers import Tokenizer

    from specviz_core.runtime.models import default_model_dir

    full = Tokenizer.from_file(str(default_model_dir() / "tokenizer.json"))
    part = Tokenizer.from_file(str(RESOURCES / "demo" / "tokenizer.json"))
    ids = sorted(token_ids(RESOURCES / "demo" / DEMO_DB))
    assert len(ids) > 100
    assert [part.decode([i], skip_special_tokens=False) for i in ids] == \
        [full.decode([i], skip_special_tokens=False) for i in ids]
    assert part.decode(ids[:200]) == full.decode(ids[:200])
