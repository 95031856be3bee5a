"""``import specviz``: a session on model objects the user already has, checked against transformers' own generate,
recorded in the format the window opens, with the command line's checks and errors (issue 31)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import specviz
from specviz_core.methods import CARDS
from specviz_core.recording.store import Recording
from specviz_core.viewer.sources import RecordingSource

PROMPT = "Rename x to total:\ndef f(x):\n    x = x + 1\n    return x\nThen explain the change."


@pytest.fixture(scope="module")
def user_model(tiny_dir):
    """A model and tokenizer loaded the way a user loads them (not through SpecViz)."""
    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(str(tiny_dir))


def generate_greedy(model, tok, n: int) -> tuple[list[int], list[int]]:
    """transformers' own greedy generate on the prompt as the chat template encodes it: (prompt ids, new ids)."""
    ids = tok.apply_chat_template([{"role": "user", "content": PROMPT}], add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    x = torch.tensor([ids])
    out = model.generate(x, attention_mask=torch.ones_like(x), do_sample=False, num_beams=1, max_new_tokens=n,
                         pad_token_id=tok.eos_token_id)
    return ids, out[0, len(ids):].tolist()


@pytest.mark.parametrize("method", ["ar", "goose", "pld", "tr", "stand", "talon", "hf_prompt_lookup"])
def test_a_session_on_the_users_model_equals_generate(user_model, method, one_thread):
    model, tok = user_model
    prompt_ids, ref = generate_greedy(model, tok, 24)
    s = specviz.Session(model, tok, method=method, prompt=PROMPT, max_new_tokens=24)
    first = s.step()
    assert first.index == 0 and s.cycles == [first] and not s.done
    s.run()
    assert s.done and s.prompt_ids == prompt_ids
    assert s.output_ids == ref, f"{method}: {s.output_ids} != generate's {ref}"
    assert s.text == tok.decode(ref)
    summary = s.summary()
    assert summary["tokens"] == len(ref) and summary["cycles"] == len(s.cycles)
    # One verify forward a cycle, but none for a first token that the prefill's last row gave.
    assert summary["target_forwards"] == len(s.cycles) - sum(bool(c.state.get("from_prefill")) for c in s.cycles)
    assert summary["tokens_per_forward_prefill_counted"] == len(ref) / (summary["target_forwards"] + 1)
    assert sum(len(c.committed_ids) for c in s.cycles) == len(ref)


@pytest.mark.parametrize("layout", ["eagle", "eagle3"])
def test_draft_head_gives_the_tree_methods_an_eagle_head(user_model, tmp_path, layout, one_thread):
    """``draft_head=``: an EAGLE head folder (written here with random weights, in the published layout) drafts
    eagle and TALON; the output stays generate's, and the session records the head and its layout."""
    from test_eagle_layouts import write_checkpoint

    model, tok = user_model
    write_checkpoint(tmp_path / "head", layout, model.config, draft_vocab=300 if layout == "eagle3" else None)
    _, ref = generate_greedy(model, tok, 16)
    for method in ("eagle", "talon"):
        s = specviz.Session(model, tok, method=method, prompt=PROMPT, max_new_tokens=16, draft_head=tmp_path / "head")
        s.run()
        assert s.output_ids == ref
        assert s.cycles[0].state["drafter"] == "head"
        assert s.session.stats()["head_layout"] == layout
        assert s.info.params["head"] == str((tmp_path / "head").resolve())
    with pytest.raises(specviz.SpecVizError, match="method goose drafts with no head"):
        specviz.Session(model, tok, method="goose", prompt=PROMPT, draft_head=tmp_path / "head")


def test_run_in_parts_and_token_id_prompts(user_model, one_thread):
    model, tok = user_model
    prompt_ids, ref = generate_greedy(model, tok, 20)
    s = specviz.Session(model, tok, method="goose", prompt=prompt_ids, max_new_tokens=20)
    part = s.run(max_new_tokens=5)
    assert part and 5 <= len(s.output_ids) < 20 and not s.done
    s.run()
    assert s.output_ids == ref
    with pytest.raises(specviz.SpecVizError, match="has ended"):
        s.step()


def test_a_recorded_session_opens_as_the_window_opens_it(user_model, tmp_path, one_thread):
    model, tok = user_model
    db = tmp_path / "api.db"
    with specviz.Session(model, tok, method="pld", prompt=PROMPT, db=db, max_new_tokens=16, num_pred_tokens=4) as s:
        s.run()
    with Recording(db, read_only=True) as rec:
        (info,) = rec.sessions()
        source = RecordingSource(rec, info.id)
        replayed = [t for i in range(len(source)) for t in source.cycle(i).committed_ids]
    assert info.id == s.info.id and info.method == "pld" and info.status == "complete"
    assert info.params["num_pred_tokens"] == 4
    assert replayed == s.output_ids


def test_a_session_the_caller_stops_between_cycles_is_recorded_complete(user_model, tmp_path, one_thread):
    """``run(max_new_tokens=...)`` then ``close()`` (or the Session going away) ends the recorded session as
    complete, ended by the caller; its repr says it is paused, not running; one cut inside a cycle is interrupted."""
    import gc

    model, tok = user_model
    db = tmp_path / "api.db"
    s = specviz.Session(model, tok, method="goose", prompt=PROMPT, db=db, max_new_tokens=32)
    s.run(max_new_tokens=6)
    assert not s.done and "paused" in repr(s) and "running" not in repr(s)
    n = len(s.output_ids)
    s.close()
    g = specviz.Session(model, tok, method="tr", prompt=PROMPT, db=db, max_new_tokens=32)
    g.step()
    del g
    gc.collect()
    c = specviz.Session(model, tok, method="pld", prompt=PROMPT, db=db, max_new_tokens=32)
    real_step = c.session.engine.step

    def interrupted_step():
        real_step()
        raise KeyboardInterrupt

    c.session.engine.step = interrupted_step
    with pytest.raises(KeyboardInterrupt):
        c.step()
    c.close()
    with Recording(db, read_only=True) as rec:
        infos = {i.method: i for i in rec.sessions()}
    assert infos["goose"].status == "complete" and infos["goose"].stop_reason == f"ended by the caller after {n} tokens"
    assert infos["tr"].status == "complete"
    assert infos["pld"].status == "interrupted"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"method": "nope"}, "unknown method 'nope' (known: " + ", ".join(CARDS) + ")"),
    ({"method": "goose", "budget": 0}, "budget for goose must be auto, paper or a whole number from 2 to 1,024, got 0"),
    ({"method": "goose", "budget": 1}, "budget for goose must be auto, paper or a whole number from 2 to 1,024, got 1"),
    ({"method": "tr", "budget": 2.5}, "budget for tr must be auto, paper or a whole number from 1 to 1,024, got 2.5"),
    ({"method": "tr", "budget": True}, "budget for tr must be auto, paper or a whole number from 1 to 1,024, got True"),
    ({"method": "goose", "max_chain": 2.5}, "parameter max_chain must be a whole number, got 2.5"),
    ({"method": "goose", "wat": 1}, "unknown parameter 'wat' for method goose"),
    ({"method": "goose", "min_score": 2.0}, "parameter min_score must be at most 0.999"),
    ({"method": "draft_tree"}, "needs a draft model (--draft-model; draft_model= in Python)"),
    ({"method": "goose", "temperature": -1.0}, "temperature must be a number from 0 to 100, got -1.0"),
    ({"method": "goose", "prompt": []}, "the prompt is empty"),
    # Issue 51's wrong inputs: each gets its line before anything decodes.
    ({"method": "goose", "prompt": None}, "the prompt must be a text or a list of token ids, got None"),
    ({"method": "goose", "prompt": 123}, "the prompt must be a text or a list of token ids, got 123"),
    ({"method": "goose", "prompt": [1, "a"]}, "a prompt of token ids must be a flat list of whole numbers"),
    ({"method": "goose", "prompt": [50000, 1]}, "the prompt's token ids must be from 0 to 49,151 (this model's "
                                                "vocabulary), got 50,000"),
    ({"method": "goose", "prompt": [99999999]}, "got 99,999,999"),
    ({"method": "goose", "max_new_tokens": "5"}, "max_new_tokens must be a whole number from 1 to 1,000,000, got '5'"),
    ({"method": "goose", "max_new_tokens": 2.5}, "max_new_tokens must be a whole number from 1 to 1,000,000, got 2.5"),
    ({"method": "goose", "temperature": "hot"}, "temperature must be a number from 0 to 100, got 'hot'"),
    ({"method": "goose", "seed": -1}, "seed must be a whole number from 0 to 9,223,372,036,854,775,807, got -1"),
    ({"method": None}, "method must be a method's name"),
])
def test_the_command_lines_checks_and_errors(user_model, kwargs, message):
    model, tok = user_model
    kwargs = {"prompt": PROMPT, **kwargs}
    with pytest.raises(specviz.SpecVizError) as e:
        specviz.Session(model, tok, **kwargs)
    assert message in str(e.value)


def test_a_tokenizer_of_another_vocabulary_is_refused(user_model):
    """A tokenizer that cannot be the model's (here a word-level one of 40 tokens, for a 49,152-token model) is
    refused in one line before anything decodes or is recorded."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    model, _ = user_model
    words = {w: i for i, w in enumerate(["<unk>", "</s>"] + [f"w{i}" for i in range(38)])}
    raw = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    other = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="<unk>", eos_token="</s>")
    rows = model.get_output_embeddings().weight.shape[0]
    with pytest.raises(specviz.SpecVizError) as e:
        specviz.Session(model, other, method="pld", prompt="w1 w2 w3")
    assert str(e.value) == (f"the model's tokenizer has {len(other):,} tokens but the model has a vocabulary of "
                            f"{rows:,}: give the tokenizer that came with the model")


def test_a_model_in_training_mode_is_refused(user_model):
    model, tok = user_model
    model.train()
    try:
        with pytest.raises(specviz.SpecVizError, match=r"training mode .* call model.eval\(\) first"):
            specviz.Session(model, tok, prompt=PROMPT)
    finally:
        model.eval()


def test_the_package_is_typed_versioned_and_loads_no_qt():
    assert specviz.__version__ == version("specviz")
    assert (specviz.__file__ and __import__("pathlib").Path(specviz.__file__).with_name("py.typed").is_file())
    assert set(specviz.METHODS) == set(CARDS)
    # ... nor does drawing cycles for a notebook (test_cycles_and_sessions_draw_themselves_for_notebooks_without_qt):
    # its module checked in the same fresh interpreter, after the package alone.
    qt = "assert not any(m.startswith(('PySide6', 'pyqtgraph', 'specviz_app')) for m in sys.modules), 'Qt'"
    code = f"import sys, specviz; {qt}; import specviz_core.viewer.svg; {qt}"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_docs_examples_run(tmp_path):
    """docs/python.md's two examples (a session; a generate call recorded) and the README's (the window left out),
    as a user pastes them into scripts one after the other, on the default model, all into one runs.db."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    blocks = [b.split("```", 1)[0] for b in (root / "docs" / "python.md").read_text().split("```python\n")[1:3]]
    readme = (root / "README.md").read_text().split("## From Python", 1)[1].split("```python\n", 1)[1]
    blocks.append(readme.split("```", 1)[0].replace("specviz.open(", "print(").replace(
        'db="runs.db")', 'db="runs.db", max_new_tokens=16)'))
    said = ["tokens per target forward", "draft tokens accepted per cycle", "runs.db"]
    for code, words in zip(blocks, said):
        code = code.replace("max_new_tokens=48", "max_new_tokens=12")
        p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr[-2000:]
        assert words in p.stdout
    with Recording(tmp_path / "runs.db", read_only=True) as rec:
        methods = sorted(s.method for s in rec.sessions())
    assert methods == ["goose", "goose", "hf_assisted", "hf_prompt_lookup"]


@pytest.mark.parametrize("method", ["goose", "talon"])
def test_each_cycle_says_why_it_stopped_and_the_export_carries_it(user_model, tmp_path, method, one_thread, capsys):
    """The API's cycles carry the window's analysis (the stop cause, the headroom), and ``specviz export`` writes
    the same for every cycle of the recording."""
    import json

    from specviz_core.cli.commands import main

    model, tok = user_model
    db = tmp_path / "api.db"
    with specviz.Session(model, tok, method=method, prompt=PROMPT, db=db, max_new_tokens=24) as s:
        s.run()
    for c in s.cycles:
        cause = c.stop_cause
        stop = c.accepted_path[-1] if c.accepted_path else 0
        assert c.cause in specviz.CAUSES and cause.wanted == c.bonus_token and cause.node == stop
        assert c.headroom["*"] >= len(c.accepted_path)  # never below what the cycle accepted
    capsys.readouterr()
    assert main(["export", "--db", str(db)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()][1:]
    assert [x["stop_cause"] for x in lines] == [json.loads(json.dumps(c.stop_cause.to_json())) for c in s.cycles]
    assert {x["stop_cause"]["kind"] for x in lines} <= set(specviz.CAUSES)


def test_cycles_and_sessions_draw_themselves_for_notebooks_without_qt(user_model, one_thread):
    """A cycle's inline picture is its tree (a box per drawn node, the accepted path's in green, the bonus token)
    and its mask (a filled cell per attended pair, green on accepted rows); a session's is its numbers and a bar per
    cycle. Counted against the record itself; well-formed SVG; no Qt."""
    import xml.etree.ElementTree as ET

    from specviz_core.viewer.colors import ACCEPTED

    model, tok = user_model
    s = specviz.Session(model, tok, method="talon", prompt=PROMPT, max_new_tokens=24)
    s.run()
    c = max(s.cycles, key=lambda c: (len(c.accepted_path), len(c.nodes)))
    ns = "{http://www.w3.org/2000/svg}"
    tree = ET.fromstring(c.tree_svg())
    boxes = [g for g in tree.iter(f"{ns}g")]
    shown = [n for n in c.nodes if not n.gated]
    markers = {p for p in {n.parent for n in c.nodes if n.gated}}  # at most one "+N gated" box per parent
    assert len(shown) + 1 <= len(boxes) <= len(shown) + 1 + len(markers)  # + the bonus token
    texts = [t.text for t in tree.iter(f"{ns}text")]
    assert any(t.startswith("★") for t in texts)
    green = [g for g in boxes if g.find(f"{ns}rect").get("stroke") == ACCEPTED]
    assert len(green) == len(c.accepted_path) + 2  # the root, the accepted nodes, the bonus token
    mask = ET.fromstring(c.mask_svg())
    cells = [r for r in mask.iter(f"{ns}rect") if r.get("fill") not in ("none",)]
    accepted_rows = [r for r, i in enumerate(c.verify_order) if i == 0 or i in c.accepted_path]
    assert len(cells) == int(c.mask.sum())
    assert sum(r.get("fill") == ACCEPTED for r in cells) == int(c.mask[accepted_rows].sum())
    html = c._repr_html_()
    assert c.stop_cause.label.split()[0] in html or "wanted" in html
    page = s._repr_html_()
    assert "tokens per target forward" in page and page.count("<rect") == len(s.cycles)
    # No Qt: test_the_package_is_typed_versioned_and_loads_no_qt imports specviz_core.viewer.svg in its fresh
    # interpreter (one interpreter's start for both).


@pytest.mark.default_model
def test_the_example_notebook_runs_in_a_real_kernel(tmp_path):
    """docs/python-example.ipynb, executed headless by a real IPython kernel (nbclient) on the default model: every
    cell runs, the cycle and the session show themselves inline as pictures."""
    from pathlib import Path

    import nbclient
    import nbformat

    nb = nbformat.read(Path(__file__).resolve().parents[2] / "docs" / "python-example.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                            ).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o["data"]["text/html"] for o in outputs if o.output_type == "execute_result" and "text/html" in o["data"]]
    # The first cycle, the session, the best cycle, the recorded generate call's longest chain.
    assert len(html) == 4 and all("<svg" in h for h in html)
    assert "tokens per target forward" in html[1]
    with Recording(tmp_path / "runs.db", read_only=True) as rec:
        assert sorted(s.method for s in rec.sessions()) == ["goose", "hf_assisted"]


def test_import_in_a_jupyter_kernel_without_ipywidgets_is_quiet():
    """In a notebook kernel (ipykernel's shell loaded) with no ipywidgets, ``import specviz`` warns nothing (tqdm.auto,
    imported by transformers' hub client, warned that it falls back to text bars)."""
    code = (
        "import sys, types, warnings\n"
        "sys.modules['ipykernel.zmqshell'] = types.ModuleType('ipykernel.zmqshell')\n"
        "import IPython\n"
        "class ZMQInteractiveShell: pass\n"
        "IPython.get_ipython = lambda: ZMQInteractiveShell()\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    import specviz\n"
        "print([f'{type(x.message).__name__}: {x.message}' for x in w])\n"
    )
    pytest.importorskip("IPython")
    if __import__("importlib").util.find_spec("ipywidgets") is not None:
        pytest.skip("ipywidgets is installed: tqdm has its bar and nothing to warn about")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == "[]", out.stdout

