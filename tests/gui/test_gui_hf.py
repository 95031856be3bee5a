"""The GUI side of transformers' assisted generation: the model picker over a temporary Hugging Face cache, the
"paste your generate call" dialog against the documented mapping, and the schedule chart and one-branch tree of a
real hf_assisted session."""

from __future__ import annotations

import gc
import re
import shutil
from pathlib import Path

import pytest
from test_catalog import OTHER_WORDS, WORDS, put_in_hub_cache, save_tiny

from specviz_app.cli import main
from specviz_app.panels.charts.panel import ChartsPanel
from specviz_app.panels.run import model_picker
from specviz_app.panels.run.generate_dialog import GenerateCallDialog
from specviz_app.panels.run.model_picker import DETAILS_ROLE, NAME_ROLE
from specviz_app.panels.run.panel import RunPanel
from specviz_app.panels.tree.view import TreeView
from specviz_core.recording.store import Recording
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import RecordingSource

DOCS = Path(__file__).resolve().parents[2] / "docs" / "hf-assisted.md"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A temporary HF cache: two tiny causal LMs sharing a tokenizer and one with another tokenizer."""
    cache = tmp_path / "hub"
    params = {}
    for repo, words, seed in (("org/tiny-a", WORDS, 0), ("org/tiny-a2", WORDS, 1), ("org/tiny-b", OTHER_WORDS, 2)):
        src = tmp_path / "src" / repo
        params[repo] = save_tiny(src, words, seed)
        put_in_hub_cache(cache, repo, src)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path / "data"))
    monkeypatch.setattr(model_picker, "_cache", None)  # no scan kept from another test
    return params


@pytest.fixture
def panel(qtbot, tmp_path, hub):
    p = RunPanel(tmp_path / "r.db")
    qtbot.addWidget(p)
    gc.collect()  # earlier tests' Qt objects are finalized here, not in the wait below beside the scan's thread
    with qtbot.waitSignal(p.picker.scanned, timeout=60000):  # the scan runs on its own thread
        p.model.opening.emit()  # the list about to open for the first time starts it
    return p


def items(combo) -> dict[str, int]:
    return {combo.itemData(i, NAME_ROLE): i for i in range(combo.count()) if combo.itemData(i, NAME_ROLE)}


def test_picker_lists_the_cache_and_selecting_sets_the_model(panel, hub):
    found = items(panel.model)
    assert {"default", "org/tiny-a", "org/tiny-a2", "org/tiny-b"} <= set(found)
    i = found["org/tiny-a"]
    n = hub["org/tiny-a"]  # counted from the model's own parameters
    expected = f"{n / 1e6:.0f}M" if n >= 1e6 else f"{n / 1e3:.0f}K"
    text = panel.model.itemData(i, DETAILS_ROLE)
    assert text.startswith(expected + " · ") and "HF cache" in text
    panel.model.setCurrentIndex(i)
    assert panel.model.currentText() == "org/tiny-a"
    assert panel.request().model == "org/tiny-a"
    panel.model.setCurrentIndex(0)
    assert panel.request().model is None  # the embedded default


def test_draft_list_marks_shared_and_universal_tokenizers(panel):
    panel.model.setCurrentIndex(items(panel.model)["org/tiny-a"])
    panel.picker.mark_drafts()  # (the panel does it 250 ms after the target changes)
    found = items(panel.draft_model)
    details = {name: panel.draft_model.itemData(i, DETAILS_ROLE) for name, i in found.items()}
    assert "same tokenizer" in details["org/tiny-a2"]
    assert "hf_universal" in details["org/tiny-b"]
    assert "the target itself" in details["org/tiny-a"]
    panel.method.setCurrentIndex(panel.method.findData("hf_assisted"))
    panel.draft_model.setCurrentIndex(found["org/tiny-b"])
    assert "hf_universal" in panel.draft_hint.text() and "refuse" in panel.draft_hint.text()
    panel.draft_model.setCurrentIndex(found["org/tiny-a2"])
    assert "shares the target's tokenizer" in panel.draft_hint.text()
    assert panel.request().draft_model == "org/tiny-a2"


def documented_method(argument: str) -> str:
    """The method docs/hf-assisted.md's mapping table gives for ``argument``."""
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and f"`{argument}`" in cells[0]:
            m = re.search(r"`(hf_\w+|ar)`", cells[1])
            if m:
                return m.group(1)
    raise AssertionError(f"{argument} not in the table")


@pytest.mark.parametrize("text", [
    "prompt_lookup_num_tokens=4, max_matching_ngram_size=3, max_new_tokens=64",
    "out = model.generate(**inputs, prompt_lookup_num_tokens=4, max_matching_ngram_size=3, max_new_tokens=64)",
    '{"prompt_lookup_num_tokens": 4, "max_matching_ngram_size": 3, "max_new_tokens": 64}',
])
def test_pasted_call_fills_the_run_panel(qtbot, tmp_path, text):
    p = RunPanel(tmp_path / "r.db")
    qtbot.addWidget(p)
    d = GenerateCallDialog(None, p)
    d.set_text(text)
    assert d.apply.isEnabled(), d.result.text()
    assert d.call.method == documented_method("prompt_lookup_num_tokens") == "hf_prompt_lookup"
    p.apply_generate_call(d.call)
    assert p.method.currentData() == "hf_prompt_lookup"
    values = p.param_values()
    assert (values["prompt_lookup_num_tokens"], values["max_matching_ngram_size"]) == (4, 3)
    assert p.max_new_tokens.value() == 64 and p.temperature.value() == 0.0


def test_pasted_assistant_variable_is_the_chosen_draft(qtbot, tmp_path):
    p = RunPanel(tmp_path / "r.db")
    qtbot.addWidget(p)
    d = GenerateCallDialog("default", p)
    d.set_text("model.generate(**inputs, assistant_model=assistant_model, num_assistant_tokens=5,\n"
               "               do_sample=False, max_new_tokens=48)")
    assert d.call.method == documented_method("assistant_model") == "hf_assisted"
    assert d.call.draft_model == "default"
    assert "assistant_model=assistant_model" in d.notes.text() and "#40739" in d.notes.text()  # notes shown
    p.apply_generate_call(d.call)
    assert p.method.currentData() == "hf_assisted" and p.request().draft_model == "default"
    assert p.param_values()["num_assistant_tokens"] == 20  # what generate really drafts with (the note says why)
    without = GenerateCallDialog(None, p)
    without.set_text("assistant_model=assistant_model")
    assert not without.apply.isEnabled() and "choose the draft model" in without.result.text()


@pytest.mark.parametrize("text", ["num_beams=2", '{"num_beams": 2, "max_new_tokens": 9}'])
def test_pasted_beam_search_is_refused_in_one_line(qtbot, text):
    d = GenerateCallDialog(None)
    qtbot.addWidget(d)
    d.set_text(text)
    assert d.call is None and not d.apply.isEnabled()
    shown = d.result.text()
    assert "\n" not in shown and "num_beams=2" in shown and "beam search" in shown
    assert d.result.property("role") == "error"


@pytest.fixture(scope="module")
def heuristic_session(tmp_path_factory, tiny_dir):
    """A real hf_assisted session with the heuristic schedule: a tiny model assisted by a tiny model of the same
    tokenizer (another seed), so chains are accepted in part and the schedule moves both ways."""
    import torch
    from transformers import LlamaForCausalLM

    root = tmp_path_factory.mktemp("hf")
    helper = root / "assistant"
    m = LlamaForCausalLM.from_pretrained(tiny_dir)
    with torch.no_grad():
        for prm in m.parameters():
            prm.add_(0.02 * torch.randn_like(prm))  # close to the target: it agrees often, not always
    m.save_pretrained(helper)
    for f in tiny_dir.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            shutil.copy(f, helper / f.name)
    db = root / "hf.db"
    assert main(["record", "--method", "hf_assisted", "--model", str(tiny_dir), "--draft-model", str(helper),
                 "--param", "num_assistant_tokens_schedule=heuristic", "--param", "num_assistant_tokens=3",
                 "--param", "assistant_confidence_threshold=0", "--prompt", "one two three one two three",
                 "--max-new-tokens", "40", "--db", str(db), "--quiet"]) == 0
    return db


def test_schedule_chart_shows_the_recorded_schedule(qtbot, heuristic_session):
    with Recording(heuristic_session) as rec:
        sid = rec.sessions()[-1].id
        states = [rec.cycle(sid, i).state for i in range(rec.n_cycles(sid))]
        model = SessionModel()
        model.open(RecordingSource(rec, sid))
        charts = ChartsPanel(model)
        qtbot.addWidget(charts)
        charts.flush()
        assert "schedule" in charts.shown
        _, cap = charts.chart("schedule").c_cap.getData()
        _, thr = charts.chart("schedule").c_thr.getData()
        _, drafted = charts.chart("schedule").c_drafted.getData()
        assert list(cap) == [s["num_assistant_tokens"] for s in states]
        assert list(thr) == pytest.approx([s["assistant_confidence_threshold"] for s in states])
        assert list(drafted) == [s["candidate_length"] for s in states]
        assert len(set(cap)) > 1  # the heuristic schedule moved
        caps = [s["num_assistant_tokens"] for s in states]
        for a, b, s in zip(caps, caps[1:], states):  # transformers' rule, recomputed here
            assert b == (a + 2 if s["n_matches"] == s["candidate_length"] else max(1, a - 1))


def test_hf_chain_is_a_one_branch_tree(qtbot, heuristic_session):
    with Recording(heuristic_session) as rec:
        sid = rec.sessions()[-1].id
        model = SessionModel()
        model.open(RecordingSource(rec, sid))
        view = TreeView(model)
        qtbot.addWidget(view)
        view.resize(900, 500)
        longest = max(range(rec.n_cycles(sid)), key=lambda i: rec.cycle(sid, i).n_verified)
        model.set_cycle(longest)
        record = model.record
        assert record.n_verified >= 3
        children = {}
        for n in record.nodes:
            children.setdefault(n.parent, []).append(n.id)
        assert all(len(c) == 1 for c in children.values())  # the root, then one child each: a chain
        boxes = {nid: item.sceneBoundingRect() for nid, item in view.node_items().items()
                 if nid in record.node_by_id}
        chain = sorted(record.nodes, key=lambda n: n.depth)
        xs = [boxes[n.id].center().x() for n in chain]
        assert xs == sorted(xs) and len(set(xs)) == len(xs)  # one column per depth, root to last draft token
        rejected = [n for n in chain if n.parent >= 0 and not n.accepted]
        assert len({round(boxes[n.id].center().y()) for n in rejected}) <= 1  # the rejected rest: one straight row


def test_universal_node_tooltip_shows_the_alignment(qtbot, one_thread):
    """hf_universal: hovering a draft node names the assistant tokens it was re-encoded from (a real session of a
    tiny pair whose tokenizers share words at other ids)."""
    from dataclasses import replace

    from gui_records import session_info
    from helpers import run
    from hf_reference import universal_pair
    from specviz_core.runtime.vocab import TokenText
    from specviz_core.viewer.sources import LiveSource

    target, assistant = universal_pair()
    prompt = target.tokenizer("w1 w2 w3 w4 w5 w6 w7 w8 w9 w10")["input_ids"]
    _, records = run(target, "hf_universal", prompt, 6, draft=assistant, num_assistant_tokens=4,
                     assistant_confidence_threshold=0.0)
    source = LiveSource(replace(session_info("hf_universal", prompt), model="tiny"))
    source.append(records[0])
    model = SessionModel()
    model.open(source, TokenText(target.tokenizer))
    model.set_cycle(0)
    view = TreeView(model)
    qtbot.addWidget(view)
    al = records[0].state["alignment"]
    a_tok = assistant.tokenizer
    for node in records[0].nodes[1:]:
        k = node.depth - 1
        tip = view.tooltip_for(node.id)
        words = [a_tok.decode([al["assistant_tokens"][i]]).strip() for i in al["target_to_assistant"][k]]
        assert words and all(repr(w) in tip or repr(" " + w) in tip for w in words), tip
        assert f"({al['assistant_tokens'][al['target_to_assistant'][k][0]]})" in tip  # the assistant's own id
    assert "re-encoded" not in view.tooltip_for(0)  # the root was not drafted
