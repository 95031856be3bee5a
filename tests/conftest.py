"""Shared fixtures: a tiny random Llama for most tests, the real default model where only it shows the behaviour.

The tests sit in one folder per feature (engine, methods, recording, analysis, api, cli, gui, project); the helper
modules beside this file (helpers, gui_records, ...) are shared by all of them. A test module may import what another
one defines (a fixture, a table), by its unique name, from any folder: every feature folder is on the path."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import torch

_HERE = Path(__file__).resolve().parent
for _folder in sorted(p for p in _HERE.iterdir() if p.is_dir() and any(p.glob("test_*.py"))):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Recordings and the model history of commands run by tests go to a temporary folder, not the user's.
if "SPECVIZ_DATA" not in os.environ:
    os.environ["SPECVIZ_DATA"] = tempfile.mkdtemp(prefix="specviz-tests-")
    atexit.register(shutil.rmtree, os.environ["SPECVIZ_DATA"], ignore_errors=True)
# Draft heads trained on this machine are not the tests' business: drafter=auto finds none unless a test makes one.
if "SPECVIZ_HEADS" not in os.environ:
    os.environ["SPECVIZ_HEADS"] = tempfile.mkdtemp(prefix="specviz-heads-")
    atexit.register(shutil.rmtree, os.environ["SPECVIZ_HEADS"], ignore_errors=True)
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture(scope="session")
def tiny():
    from helpers import tiny_llama

    return tiny_llama()


@pytest.fixture
def one_thread(request, monkeypatch):
    """Tiny models gain nothing from intra-op threads, and on a shared CPU the thread pool's spinning
    makes them many times slower; the default model keeps the session's setting. A session started meanwhile keeps
    the one thread too (as on a busy machine), so its curve is the one the test stored whatever the load is now."""
    if "smol" in request.fixturenames:
        yield
        return
    from specviz_core.runtime import threads as cpu_threads

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setattr(cpu_threads, "_chosen", cpu_threads.ThreadChoice(1, cpu_threads.cores(), None, False))
    yield
    torch.set_num_threads(n)


@pytest.fixture(autouse=True)
def _threads_for_the_machine_now(request, monkeypatch):
    """Each test runs on the threads a session started now takes: the cores other processes leave free
    (:mod:`specviz_core.runtime.threads`), two on a quiet 2-core machine, one while another job runs. Chosen once for
    the run (when the default model loaded, or by the last command a test ran), two threads stayed on while another
    job took a core, and each forward's threads waited on each other: 40 tokens of the default model took 52-85 s
    against 7.5-8.7 s on one thread, and test_lossless.py's default-model cases 75-330 s each instead of 15-30 s.
    The default model's tests choose as a session does (the test's own sessions report that choice); the others
    read the load once (a tiny model's test is over in milliseconds to seconds). A test that sets its threads (the
    ``one_thread`` fixture, ``--threads``) still has them."""
    from specviz_core.runtime import threads as cpu_threads

    n = torch.get_num_threads()
    if "smol" in request.fixturenames:
        monkeypatch.setattr(cpu_threads, "_requested", None)
        monkeypatch.setattr(cpu_threads, "_chosen", None)
        cpu_threads.apply("cpu")
    else:
        torch.set_num_threads(cpu_threads.choose(None, load=cpu_threads.machine_load(samples=1)).threads)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def smol():
    from specviz_core.runtime.models import load_model

    return load_model(device="cpu")


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """A tiny random Llama saved as a model folder with the default model's tokenizer (and chat template),
    so the window can load it by path and show real token text, in milliseconds per cycle."""
    import shutil

    from transformers import LlamaConfig, LlamaForCausalLM

    from specviz_core.runtime.models import default_model_dir

    src = default_model_dir()
    out = tmp_path_factory.mktemp("tiny-model")
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=49152, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=4096, initializer_range=0.3, eos_token_id=2,
        bos_token_id=1, pad_token_id=None, tie_word_embeddings=True,
    )
    LlamaForCausalLM(cfg).save_pretrained(out)
    for f in src.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template", "vocab", "merges")):
            shutil.copy(f, out / f.name)
    return out


#: Objects the collector tracks in its oldest generation, past which a window's fixture freezes them.
FREEZE_ABOVE = 50_000


def freeze_what_is_loaded() -> None:
    """Collect, then move every object alive now out of the collector's sight (``gc.freeze``) where the oldest
    generation has grown past :data:`FREEZE_ABOVE`: the modules, the models, the session's fixtures, which live to
    the end of the run. A full collection scans every tracked object: with torch, transformers, Qt and the default
    model loaded, 470,000 of them, 0.45 s; a closed window collects twice (its guard, then the fixture), in each of
    ~160 GUI tests (tests/gui/test_gui_window.py's teardowns: 19.9 s -> 2.4 s). Garbage made later is collected as
    before; an object alive now that later becomes cyclic garbage is never collected (it lives to the end of the run,
    as a module-scoped fixture's objects nearly do)."""
    import gc

    if len(gc.get_objects(generation=2)) > FREEZE_ABOVE:
        gc.collect()
        gc.freeze()


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch, tiny_dir):
    """The main window, shown offscreen, set to decode the tiny model into a fresh recording."""
    import gc

    monkeypatch.setenv("SPECVIZ_CONFIG", str(tmp_path / "gui.ini"))
    from specviz_app.shell.window import MainWindow

    freeze_what_is_loaded()  # the window's modules are loaded: out of its collections' scans
    w = MainWindow(tmp_path / "sessions.db")
    qtbot.addWidget(w)
    w.run_panel.model.setEditText(str(tiny_dir))
    w.run_panel.max_new_tokens.setValue(400)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.close()
    gc.collect()  # here, on the UI thread, not in some later test's engine thread


@pytest.fixture(autouse=True)
def _curves_are_not_measured_again_for_the_load(monkeypatch):
    """A curve measured while another process ran is measured again by a session that finds the machine quiet
    (``cost_curve.BUSY``): on a busy machine (a second test run, a build) a test's own curve would be, or not, by
    chance. Only the test of that rule turns it on."""
    from specviz_core.engine import cost_curve

    monkeypatch.setattr(cost_curve, "BUSY", float("inf"))


@pytest.fixture(autouse=True)
def _curves_stay_with_their_test():
    """A verify-cost curve a test measures for a tiny model stays with that test: stored in the suite's data folder,
    it would pad and price the next test's sessions by it (which tests ran first would decide what a later one
    sees). The default model's curve is kept: measuring it costs seconds, and it is the same model everywhere. What a
    drafter's steps cost and whether its drafts paid are not: a session starts from the last one's."""
    from pathlib import Path

    folder = Path(os.environ["SPECVIZ_DATA"]) / "cost_curves"
    before = set(folder.glob("*.json")) if folder.is_dir() else set()
    yield
    if folder.is_dir():
        for f in set(folder.glob("*.json")) - before:
            if not f.name.startswith("SmolLM2-135M-Instruct__") or "__draft-" in f.name:
                f.unlink(missing_ok=True)


#: Tests measured slow (tests/slow.txt, written by tests/slow_tests.py from a whole run's timings): with the default
#: model's, left out of the quick tier.
SLOW = frozenset(line.strip() for line in (_HERE / "slow.txt").read_text(encoding="utf-8").splitlines()
                 if line.strip() and not line.startswith("#")) if (_HERE / "slow.txt").is_file() else frozenset()


def pytest_collection_modifyitems(config, items) -> None:
    """``quick``: every test but the default model's and the slow ones, for the edit-test loop (under 3 minutes on
    a 2-core machine: ``python -m pytest -m quick``). A test is listed by its id without parameters, so every case of
    a slow parametrized test goes with it."""
    for item in items:
        if item.get_closest_marker("default_model") is None and item.nodeid.split("[")[0] not in SLOW:
            item.add_marker(pytest.mark.quick)


def pytest_terminal_summary(terminalreporter) -> None:
    """The sampling tests' chi-square statistics, as a table after the run (each test asserts its own p-value)."""
    results = getattr(sys.modules.get("test_sampling_lossless"), "CHI2_RESULTS", None)
    if not results:
        return
    m = sys.modules["test_sampling_lossless"]
    terminalreporter.write_sep("-", f"chi-square against plain sampling, T={m.TEMPERATURE}, {m.N_SEEDS} seeds, "
                                    f"first {m.N_TOKENS} tokens, alpha={m.ALPHA}")
    for name, (stat, p, k) in results.items():
        terminalreporter.write_line(f"  {name:<36} chi2={stat:8.2f}  df={k:3d}  p={p:.3g}")
