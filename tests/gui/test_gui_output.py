"""The output panel's text: a character whose bytes are split across tokens shows whole, not as replacement
characters, and the token that completes it carries it (hover and click still find their tokens)."""

from __future__ import annotations

from typing import Any

from gui_records import ar_cycle, keep_none_alive, session_info
from specviz_app.panels.output import OutputView
from specviz_core.runtime.vocab import TextStream, TokenText
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import LiveSource

keep_none_alive()

# A byte-level vocabulary: ids 0-255 are single bytes, 256+ a few words. "é" is two bytes, "日" three.
WORDS = {256: b" caf", 257: b" na", 258: b"ve", 259: b" done"}


class ByteTokenizer:
    def decode(self, ids: list[int], **_: Any) -> str:
        return b"".join(WORDS.get(i, bytes([i % 256])) for i in ids).decode("utf-8", errors="replace")


def ids_of(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def test_text_stream_gives_a_split_character_to_the_token_that_completes_it() -> None:
    vocab = TokenText(ByteTokenizer())
    ids = [256] + ids_of("é") + [257] + ids_of("ï") + [258] + ids_of(" 日本")
    assert vocab.piece(ids[1]) == "\ufffd"  # alone, each part is a replacement character
    stream = TextStream(vocab)
    parts = [stream.push(i) for i in ids]
    assert "".join(parts) == " café naïve 日本"
    assert parts[:3] == [" caf", "", "é"]
    assert "\ufffd" not in "".join(parts)


def test_output_panel_shows_a_split_multibyte_character_as_the_character(qtbot) -> None:
    prompt = [256] + ids_of("é")  # " café"
    source = LiveSource(session_info("ar", prompt))
    out = ids_of("日") + [259]
    ids = list(prompt)
    for k, tok in enumerate(out):  # one AR cycle per token: the character spans three cycles
        source.append(ar_cycle(k, len(ids) - 1, ids[-1], tok))
        ids.append(tok)
    model = SessionModel()
    panel = OutputView(model)
    qtbot.addWidget(panel)
    model.open(source, TokenText(ByteTokenizer()))
    text = panel.text.toPlainText()
    assert text == " café日 done"
    assert "\ufffd" not in text
    # The character belongs to the token that completed it: hovering it names that token's cycle.
    pos = text.index("日")
    assert panel.tooltip_at(pos).startswith("cycle 2 ")
    assert panel.shown_tokens()[-1] == (259, 3, "ar")
