"""The Run panel's draft-head line: it offers to train a head where TALON or EAGLE would draft from tables, trains
one in a window of its own (progress, Stop) and then says the head is used."""

from __future__ import annotations

import pytest

from specviz_app.windows.train_head import TrainHeadDialog
from specviz_core.runtime.head_files import head_info, head_info_for, head_paths
from specviz_core.runtime.models import load_model


@pytest.fixture(autouse=True)
def heads(tmp_path, monkeypatch):
    """Each test starts with no head for any model."""
    monkeypatch.setenv("SPECVIZ_HEADS", str(tmp_path / "heads"))


def _set(panel, method: str, drafter: str | None = None) -> None:
    panel.method.setCurrentIndex(panel.method.findData(method))
    if drafter is not None:
        panel.param_widgets["drafter"].setCurrentText(drafter)


def test_the_offer_shows_for_talon_without_a_head_only(window, tiny_dir):
    panel = window.run_panel
    _set(panel, "talon")
    panel._refresh_head_offer()
    offer = panel.head_offer
    assert offer.isVisible() and offer.button.isVisible()
    assert "n-gram tables" in offer.text.text()
    _set(panel, "eagle_static")
    assert offer.isVisible() and offer.button.isVisible()
    _set(panel, "eagle_static", "table")  # the user chose tables: nothing to offer
    assert not offer.isVisible()
    _set(panel, "talon", "head")
    assert offer.isVisible() and "no draft head" in offer.text.text()
    _set(panel, "goose")
    assert not offer.isVisible()


def test_training_from_the_dialog_saves_the_head_the_session_will_load(window, tiny_dir, qtbot):
    panel = window.run_panel
    _set(panel, "talon")
    panel._refresh_head_offer()
    assert head_info_for(str(tiny_dir)) is None
    panel.head_offer.button.click()
    dialog = panel.train_dialog
    assert isinstance(dialog, TrainHeadDialog) and dialog.isVisible()
    stages: list[str] = []
    assert dialog.features.currentData() == "last"  # the default, as the command line's
    dialog.features.setCurrentIndex(dialog.features.findData("eagle3"))  # the user picks EAGLE-3's head
    with qtbot.waitSignal(dialog.trained, timeout=120_000) as got:
        dialog.start(steps=4, text_tokens=200)
        assert not dialog.features.isEnabled()
        dialog.trainer.progress.connect(lambda s, f: stages.append(s))
    info = got.args[0]
    qtbot.waitUntil(lambda: not dialog.running, timeout=10_000)
    # Independently of the panel's lookup: the head saved under the loaded model's own key.
    target = load_model(str(tiny_dir), device="cpu")
    assert head_paths(target)[0].exists()
    assert head_info(target) == head_info_for(str(tiny_dir)) and head_info(target)["steps"] == info["steps"] == 4
    assert head_info(target)["features"] == "eagle3" and len(head_info(target)["feature_layers"]) == 3
    assert "Saved" in dialog.stage.text() and dialog.bar.value() == dialog.bar.maximum()
    assert any(s.startswith("Training the head") for s in stages)
    assert panel.head_offer.isVisible() and not panel.head_offer.button.isVisible()
    assert "draft head" in panel.head_offer.text.text()
    dialog.close()


def test_stop_saves_nothing(window, tiny_dir, qtbot):
    panel = window.run_panel
    _set(panel, "talon")
    panel.open_train_head_dialog()
    dialog = panel.train_dialog
    dialog.start(steps=10_000, text_tokens=10**7)  # far longer than the test waits
    qtbot.waitUntil(lambda: dialog.stage.text().startswith(("Reading", "Writing", "Loading", "Checking")), timeout=60_000)
    dialog.stop_button.click()
    qtbot.waitUntil(lambda: not dialog.running, timeout=60_000)
    assert "stopped" in dialog.stage.text() and "no head was saved" in dialog.stage.text()
    assert head_info_for(str(tiny_dir)) is None
    assert dialog.train_button.isEnabled()


@pytest.mark.parametrize("name", ["/no/such/model", "no-such-org/no-such-model"])
def test_a_model_that_is_not_here_has_no_head_and_raises_nothing(name):
    assert head_info_for(name) is None


@pytest.mark.parametrize("arch", ["llama", "gpt2", "qwen2"])
def test_a_heads_key_read_from_config_json_is_transformers_own(tmp_path, arch):
    """The Run panel finds a head without loading torch: its key's facts come from ``config.json`` where it names
    them (llama, qwen2) and from transformers' reading where it does not (gpt2's ``n_embd``, ``n_layer``); either
    way the same facts transformers' loaded config gives (what ``head_key`` hashes when the head is saved)."""
    from transformers import AutoConfig, GPT2Config, LlamaConfig, Qwen2Config

    from specviz_core.runtime.head_files import KEY_FACTS, config_facts

    cls = {"llama": LlamaConfig, "gpt2": GPT2Config, "qwen2": Qwen2Config}[arch]
    cls(vocab_size=321, hidden_size=64, num_hidden_layers=3, num_attention_heads=4).save_pretrained(tmp_path)
    loaded = AutoConfig.from_pretrained(str(tmp_path))
    assert config_facts(tmp_path) == tuple(getattr(loaded, k) for k in KEY_FACTS) == (arch, 64, 321, 3)


def test_a_head_folder_given_as_head_is_named_and_drafts_the_session(window, tiny_dir, tmp_path, qtbot):
    """A journey: choose eagle, type an EAGLE-3 head folder into head (the Run panel's field; --draft-head on the
    command line), read what the line says of it, decode a cycle, and see the head and its tree in the window."""
    from test_eagle_layouts import write_checkpoint
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(tiny_dir)
    write_checkpoint(tmp_path / "my-eagle3", "eagle3", cfg, draft_vocab=500)
    panel = window.run_panel
    _set(panel, "eagle")
    panel.param_widgets["head"].setText(str(tmp_path / "nowhere"))
    assert "is not an EAGLE head folder" in panel.head_offer.text.text()
    panel.param_widgets["head"].setText(str(tmp_path / "my-eagle3"))
    said = panel.head_offer.text.text()
    assert "EAGLE-3 head in my-eagle3" in said and "draft vocabulary of 500" in said
    assert not panel.head_offer.button.isVisible()
    window.controller.step()
    qtbot.waitUntil(lambda: window.model.n_cycles == 1, timeout=60000)
    qtbot.waitUntil(lambda: window.controller.idle, timeout=60000)
    info = window.model.source.info
    assert info.method == "eagle" and info.params["head"] == str((tmp_path / "my-eagle3").resolve())
    rec = window.model.record
    assert rec.state["drafter"] == "head" and rec.state["candidates"] > 0


def test_a_head_for_another_model_is_refused_in_the_panel_in_one_line(window, tiny_dir, tmp_path, qtbot):
    from test_eagle_layouts import write_checkpoint
    from transformers import LlamaConfig

    write_checkpoint(tmp_path / "wide", "eagle", LlamaConfig(vocab_size=49152, hidden_size=64, intermediate_size=128,
                                                             num_attention_heads=4, num_key_value_heads=2))
    panel = window.run_panel
    _set(panel, "talon")
    panel.param_widgets["head"].setText(str(tmp_path / "wide"))
    window.controller.step()
    qtbot.waitUntil(lambda: panel.message.isVisible(), timeout=60000)
    text = panel.message.text()
    assert "reads features 64 wide (hidden_size), the target's are 32" in text and "\n" not in text.strip()
