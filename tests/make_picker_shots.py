"""The model picker's screenshots in docs/screenshots (maintainers; not a test): ``python tests/make_picker_shots.py``.

Builds a small Hugging Face cache in a temporary folder, as a user's would look: the default model (its converted
folder) as ``HuggingFaceTB/SmolLM2-135M-Instruct``, and a tiny random model with a tokenizer of its own as
``specviz-test/tiny-other-tokenizer``; plus a folder used before (a tiny model with the default's tokenizer).
Then opens the window at 1100x700 and 1500x940 with the draft list open over the Run panel, and saves each.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def build(tmp: Path) -> Path:
    """The cache, the history and a folder used before; returns the folder."""
    from test_catalog import OTHER_WORDS, put_in_hub_cache, save_tiny
    from transformers import LlamaConfig, LlamaForCausalLM

    from specviz_core.runtime.catalog import remember_model
    from specviz_core.runtime.models import default_model_dir

    cache = tmp / "hub"
    put_in_hub_cache(cache, "HuggingFaceTB/SmolLM2-135M-Instruct", default_model_dir())
    other = tmp / "src" / "other"
    save_tiny(other, OTHER_WORDS)
    put_in_hub_cache(cache, "specviz-test/tiny-other-tokenizer", other, revision="1" * 40)
    mine = tmp / "models" / "tiny-llama"
    cfg = LlamaConfig(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    LlamaForCausalLM(cfg).save_pretrained(mine)
    for f in default_model_dir().iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            shutil.copy(f, mine / f.name)
    os.environ["HF_HUB_CACHE"] = str(cache)
    os.environ["SPECVIZ_DATA"] = str(tmp / "data")
    remember_model(str(mine))
    return mine


def shoot(size: tuple[int, int], out: Path) -> None:
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QPainter
    from PySide6.QtTest import QSignalSpy
    from PySide6.QtWidgets import QScrollArea

    from specviz_app.gui import make_app
    from specviz_app.shell.window import MainWindow

    app = make_app(theme="light")
    w = MainWindow(Path(tempfile.mkdtemp()) / "sessions.db", restore_layout=False)
    w.resize(*size)
    w.show()
    app.processEvents()
    w.dock_layout.proportion_docks()
    w.docks["run"].show()
    w.docks["run"].raise_()
    rp = w.run_panel
    if not rp.picker.entries:
        spy = QSignalSpy(rp.picker.scanned)
        rp.picker.refresh()  # as opening the list does
        spy.wait(60000)
    rp.method.setCurrentIndex(rp.method.findData("hf_assisted"))
    rp.draft_model.setCurrentIndex(rp.draft_model.findText("specviz-test/tiny-other-tokenizer"))
    rp.picker.mark_drafts()
    for _ in range(5):
        app.processEvents()
    scroll = rp.findChild(QScrollArea)
    scroll.ensureWidgetVisible(rp.draft_hint, 0, 8)  # the draft list and what it says about the choice
    for _ in range(3):
        app.processEvents()
    rp.draft_model.showPopup()
    for _ in range(5):
        app.processEvents()
    img = w.grab().toImage()
    popup = rp.draft_model.view().window()
    at = w.mapFromGlobal(popup.mapToGlobal(QPoint(0, 0)))
    p = QPainter(img)
    p.drawImage(at, popup.grab().toImage())
    p.end()
    rp.draft_model.hidePopup()
    img.save(str(out))
    w.close()
    print(out)


def main() -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    tmp = Path(tempfile.gettempdir()) / "specviz-shots"  # a short path: the folder used before shows it
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        build(tmp)
        for size in ((1100, 700), (1500, 940)):
            shoot(size, OUT / f"picker-{size[0]}.png")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
