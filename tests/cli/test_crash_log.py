"""An unexpected error is one line and a log file, in the command line, on the engine thread and in the window."""

from __future__ import annotations

import pytest

from specviz_app.gui import window_excepthook
from specviz_core.crash import one_line


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as e:
        return e


def test_one_line_logs_the_whole_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))
    e = _raised(KeyError("no such thing\nsecond line"))
    line = one_line(e)
    assert "\n" not in line and line.startswith("unexpected KeyError: 'no such thing")
    log = tmp_path / "logs" / line.split("(details in ")[1].rstrip(")").rsplit("/", 1)[1]
    text = log.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text and "_raised" in text and "KeyError" in text


def test_the_log_takes_any_text_even_undecodable_arguments(tmp_path, monkeypatch):
    """An argument of bytes that were not UTF-8 (lone surrogates in sys.argv) is written escaped: the logger never
    raises in turn."""
    import sys

    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["specviz", "record", "--prompt", "\udcff\udcfe bad"])
    line = one_line(_raised(TypeError("text input must be of type str \udcff")))
    log = tmp_path / "logs" / line.split("(details in ")[1].rstrip(")").rsplit("/", 1)[1]
    text = log.read_text(encoding="utf-8")
    assert "--prompt \\udcff\\udcfe bad" in text and "TypeError" in text


def test_an_exception_escaping_a_slot_is_one_line_and_shown_in_the_window(window, qtbot, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))
    hook = window_excepthook(window)
    e = _raised(ZeroDivisionError("division by zero"))
    hook(type(e), e, e.__traceback__)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("specviz: error: unexpected ZeroDivisionError: division by zero")
    assert "Traceback" not in err
    assert "ZeroDivisionError" in window.statusBar().currentMessage()
    logs = list((tmp_path / "logs").glob("*.log"))
    assert len(logs) == 1 and "Traceback (most recent call last)" in logs[0].read_text(encoding="utf-8")


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt()])
def test_a_keyboard_interrupt_is_quiet(window, capsys, interrupt, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))
    window_excepthook(window)(type(interrupt), interrupt, None)
    assert capsys.readouterr().err == ""
    assert not (tmp_path / "logs").exists()


def test_an_unexpected_error_on_the_engine_thread_is_one_line_in_the_window(window, qtbot, tmp_path, monkeypatch,
                                                                            capfd):
    from PySide6.QtCore import Qt

    import specviz_core.session.session

    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the engine")

    monkeypatch.setattr(specviz_core.session.session.Session, "__init__", broken)
    qtbot.keyClick(window, Qt.Key.Key_F10)
    qtbot.waitUntil(lambda: "a bug in the engine" in window.run_panel.message.text(), timeout=60000)
    text = window.run_panel.message.text()
    assert text.startswith("could not start the session: unexpected RuntimeError: a bug in the engine (details in ")
    assert "Traceback" not in capfd.readouterr().err
    logs = list((tmp_path / "logs").glob("*.log"))
    assert len(logs) == 1 and "broken" in logs[0].read_text(encoding="utf-8")
