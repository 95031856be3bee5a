"""Token ids as text a person can read, whitespace made visible."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from specviz_core.errors import SpecVizError
from specviz_core.runtime.locations import locate_model

_VISIBLE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"})


class TokenText:
    """Decodes single tokens (cached). Without a tokenizer, tokens show as ``#id``."""

    def __init__(self, tokenizer: Any | None) -> None:
        self.tokenizer = tokenizer
        self.piece = lru_cache(maxsize=65536)(self._piece)

    def _piece(self, token: int) -> str:
        if self.tokenizer is None or token < 0:
            return f"#{token}"
        try:
            return self.tokenizer.decode([token], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        except Exception:  # a tokenizer that cannot decode one id alone still shows something
            return f"#{token}"

    def label(self, token: int, limit: int = 12) -> str:
        """Short and single-line: spaces as ␣, newlines as ↵."""
        text = self.piece(token).translate(_VISIBLE) or "∅"
        return text if len(text) <= limit else text[: limit - 1] + "…"

    def pieces(self, tokens: list[int] | tuple[int, ...]) -> list[str]:
        """Per token, the text it adds: a character split over several tokens (UTF-8 bytes of an emoji, say)
        is given whole to the token that completes it, the others get ''."""
        out: list[str] = []
        start = 0
        for k in range(len(tokens)):
            text = self.piece(tokens[k]) if start == k else self.text(tokens[start: k + 1])
            if text.endswith("\ufffd") and k + 1 < len(tokens) and k - start < 4:
                out.append("")  # an incomplete character: wait for the bytes that complete it
                continue
            out.append(text)
            start = k + 1
        return out

    def text(self, tokens: list[int] | tuple[int, ...]) -> str:
        if self.tokenizer is None:
            return " ".join(f"#{t}" for t in tokens)
        return self.tokenizer.decode(list(tokens), skip_special_tokens=False, clean_up_tokenization_spaces=False)


class TextStream:
    """Token texts in order, as a reader sees them: a character whose bytes are split across tokens (a multi-byte
    UTF-8 character in a byte-level vocabulary) is given whole to the token that completes it, the earlier ones
    getting ''. Decoding each token alone would show a replacement character for each part."""

    MAX_PARTS = 4
    """A UTF-8 character has at most four bytes: after that many tokens, what was decoded is shown as it is."""

    def __init__(self, vocab: TokenText) -> None:
        self.vocab = vocab
        self._pending: list[int] = []

    def push(self, token: int) -> str:
        """The text ``token`` adds after the tokens pushed before it."""
        piece = self.vocab.piece(token)
        if not self._pending and "\ufffd" not in piece:
            return piece
        self._pending.append(token)
        text = self.vocab.text(self._pending)
        if text.endswith("\ufffd") and len(self._pending) < self.MAX_PARTS:
            return ""
        self._pending = []
        return text


class _FastTokenizer:
    """``tokenizers.Tokenizer`` behind the one method TokenText uses (no transformers import: opens fast)."""

    def __init__(self, tok) -> None:
        self.tok = tok

    def decode(self, ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces: bool = False) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=skip_special_tokens)


@lru_cache(maxsize=8)
def load_token_text(tokenizer: str | None) -> TokenText:
    """The tokenizer of a recorded session, found on this machine by the name the recording gives it (``default``,
    a hub id, a folder; see :mod:`specviz_core.runtime.locations`); ids only if it cannot be found."""
    folder = locate_model(tokenizer)
    if folder is None:
        return TokenText(None)
    fast = folder / "tokenizer.json"
    try:
        if fast.is_file():
            from tokenizers import Tokenizer

            return TokenText(_FastTokenizer(Tokenizer.from_file(str(fast))))
        from transformers import AutoTokenizer

        return TokenText(AutoTokenizer.from_pretrained(str(folder), local_files_only=True))
    except Exception:
        return TokenText(None)


def check_text(text: str, what: str = "the prompt") -> None:
    """Refuse text that is not text: bytes that were not UTF-8, smuggled in as lone surrogates (a shell's
    ``$'\\xff'``, a file read with ``surrogateescape``), which a tokenizer cannot encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        bad = text[e.start:e.end].encode("utf-8", "surrogateescape").hex(" ")
        raise SpecVizError(f"{what} is not valid UTF-8 text (bytes {bad} at character {e.start}): give it as "
                           "text, or in a UTF-8 file with --prompt-file") from None
