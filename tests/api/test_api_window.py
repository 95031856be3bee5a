"""``specviz.open``: the window on sessions decoded from Python, blocking in a script, returning at once in IPython
(on its Qt event loop), with one-line refusals (issue 31)."""

from __future__ import annotations

import sys
import types

import pytest
import torch
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from transformers import AutoModelForCausalLM, AutoTokenizer

import specviz
from specviz_core.recording.store import Recording

PROMPT = "Rename x to total:\ndef f(x):\n    return x + 1"


@pytest.fixture(scope="module")
def sessions(tiny_dir):
    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    torch.set_num_threads(1)
    a = specviz.Session(model, tok, method="goose", prompt=PROMPT, max_new_tokens=12)
    a.run()
    b = specviz.Session(model, tok, method="pld", prompt=PROMPT, max_new_tokens=12)
    b.run()
    return a, b


@pytest.fixture
def shell(monkeypatch):
    """A stand-in for IPython with Qt's event loop on (what ``%gui qt`` does)."""
    fake = types.SimpleNamespace(active_eventloop="qt", enable_gui=lambda name: None)
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: fake))
    return fake


def shown(window) -> tuple[str, int, str]:
    model = window.controller.model
    return model.source.info.id, model.n_cycles, model.source.info.method


def test_in_ipython_open_returns_the_window_at_once(sessions, shell, qtbot):
    a, b = sessions
    window = specviz.open([a, b])
    qtbot.addWidget(window)
    assert window.isVisible() and shown(window) == (a.info.id, len(a.cycles), "goose")
    with Recording(window.controller.model.recording_path, read_only=True) as rec:
        listed = {s.id: (s.method, s.n_tokens, s.status) for s in rec.sessions()}
    assert listed == {a.info.id: ("goose", len(a.output_ids), "complete"),
                      b.info.id: ("pld", len(b.output_ids), "complete")}
    window.controller.model.set_cycle(len(a.cycles) - 1)
    assert window.controller.model.record.committed_ids == a.cycles[-1].committed_ids


def test_a_shell_without_qt_is_switched_to_it_or_told_how(sessions, shell):
    turned_on = []
    shell.active_eventloop = None
    shell.enable_gui = turned_on.append
    window = specviz.open(sessions[0])
    assert turned_on == ["qt"]
    window.close()

    def refuse(name):
        raise RuntimeError("no Qt binding for this kernel")

    shell.enable_gui = refuse
    with pytest.raises(specviz.SpecVizError, match=r"run %gui qt first"):
        specviz.open(sessions[0])


def test_in_a_script_open_blocks_until_the_window_is_closed(sessions, tmp_path, qapp):
    a, _ = sessions
    seen = []

    def look() -> None:
        (window,) = [w for w in QApplication.topLevelWidgets() if w.isVisible() and hasattr(w, "controller")]
        seen.append(shown(window))
        window.close()
        qapp.quit()

    QTimer.singleShot(0, look)
    assert specviz.open(a, block=True) is None
    assert seen == [(a.info.id, len(a.cycles), "goose")]


def test_a_recorded_session_opens_from_its_own_file(sessions, tmp_path, shell, qtbot, tiny_dir):
    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    s = specviz.Session(model, tok, method="tr", prompt=PROMPT, db=tmp_path / "mine.db", max_new_tokens=8)
    s.step()  # unfinished: it opens with what it has
    window = specviz.open(s)
    qtbot.addWidget(window)
    assert window.controller.model.recording_path == tmp_path / "mine.db"
    assert shown(window) == (s.info.id, 1, "tr")
    s.close()


@pytest.mark.parametrize(("what", "message"), [
    (123, "open takes a recording's path, a specviz.Session, a list of sessions or a specviz.record, got int"),
    ("no-such.db", "no recording at no-such.db"),
    ([], "open takes a recording's path"),
])
def test_what_open_cannot_show_is_refused_in_one_line(what, message):
    with pytest.raises(specviz.SpecVizError) as e:
        specviz.open(what)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_recorded_generate_call_opens_beside_a_session(tiny_dir, shell, tmp_path, qtbot):
    """The issue's three lines: Goose stepped on the user's model, their own generate(assistant_model=...) recorded
    into the same file, and the window on it: it shows the generate call, every cycle as recorded, the schedule
    chart and why each chain stopped; the Sessions panel lists both, for Compare and Race."""
    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    assistant = AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32).eval()
    with torch.no_grad():
        for p in assistant.parameters():
            p.add_(0.02 * torch.randn_like(p))  # agrees with the target often, not always
    db = tmp_path / "runs.db"
    with specviz.Session(model, tok, "goose", prompt=PROMPT, db=db, max_new_tokens=16) as s:
        s.run()
    inputs = tok(PROMPT, return_tensors="pt")
    with specviz.record(db, tokenizer=tok) as rec:
        out = model.generate(**inputs, assistant_model=assistant, max_new_tokens=24, do_sample=False,
                             pad_token_id=tok.eos_token_id)
    window = specviz.open(rec)
    qtbot.addWidget(window)
    assert shown(window) == (rec.sessions[0], shown(window)[1], "hf_assisted")
    m = window.controller.model
    assert m.source.info.prompt_text == tok.decode(inputs["input_ids"][0])
    committed = []
    for i in range(m.n_cycles):
        m.set_cycle(i)
        committed += m.record.committed_ids
        explained = window.stop_cause.explanation()
        assert m.record.state["draft_stop_text"].split(":")[0] in explained or "assistant" in explained
    assert committed == out[0, inputs["input_ids"].shape[1]:].tolist()
    window.charts.flush()
    assert "schedule" in window.charts.shown
    table = window.sessions.table
    methods = {table.item(r, c).text() for r in range(table.rowCount()) for c in range(table.columnCount())
               if table.item(r, c) is not None}
    assert {"goose", "hf_assisted"} <= methods
    window.close()
