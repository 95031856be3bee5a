"""Rebuild the bundled demo, ``resources/demo/`` (maintainers; not a test): ``python tests/make_demo.py``.

Records, on the default model and the CPU, an AR session (the speed baseline) and then a Goose session on
``resources/prompts/goose-demo.txt``; shrinks the file to one small self-contained SQLite file; and writes
the slice of the default tokenizer that the recording's tokens need, so the replay shows token text on a
machine where the default model was never converted. ``tests/project/test_resources.py`` checks the result.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "resources" / "demo"
PROMPT = ROOT / "resources" / "prompts" / "goose-demo.txt"
MAX_NEW_TOKENS = 128  # ~36 Goose cycles: long bypass copies, a spine break, tree and AR cycles; ~400 KB


def record(db: Path) -> None:
    from specviz_core.cli.commands import main

    for method in ("ar", "goose"):  # goose last: the window opens the latest session
        code = main(["record", "--method", method, "--prompt-file", str(PROMPT), "--device", "cpu",
                     "--max-new-tokens", str(MAX_NEW_TOKENS), "--db", str(db), "--quiet"])
        if code:
            raise SystemExit(code)


def shrink(db: Path) -> None:
    """No machine-specific paths, one file (no -wal/-shm needed to open it), no free pages."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE sessions SET tokenizer = '', writer_host = '', writer_pid = NULL")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
    conn.close()


def token_ids(db: Path) -> set[int]:
    """Every token id the replay can show: prompts, drafted nodes, the target's top-k, commits, bonus tokens."""
    conn = sqlite3.connect(db)
    ids: set[int] = set()
    for (prompt,) in conn.execute("SELECT prompt_ids FROM sessions"):
        ids.update(json.loads(prompt))
    for nodes, topk, committed, bonus in conn.execute(
            "SELECT nodes, target_topk, committed_ids, bonus_token FROM cycles"):
        ids.update(json.loads(nodes)["token"])
        ids.update(int(t) for row in json.loads(topk) or [] for t, _p in row)
        ids.update(json.loads(committed))
        if bonus is not None:
            ids.add(int(bonus))
    conn.close()
    return {i for i in ids if i >= 0}


def tokenizer_slice(full: dict, ids: set[int]) -> dict:
    """``full`` (a tokenizer.json) keeping only the vocabulary entries of ``ids`` and no merges: it decodes
    those ids exactly as the full tokenizer does (it cannot encode)."""
    out = dict(full)
    model = dict(full["model"])
    # Special tokens stay in the vocabulary too: an added token missing from it gets a new id past the
    # vocabulary's size, which would shadow a real token there.
    keep = ids | {t["id"] for t in full.get("added_tokens", [])}
    model["vocab"] = {tok: i for tok, i in full["model"]["vocab"].items() if i in keep}
    model["merges"] = []
    out["model"] = model
    return out


def main() -> int:
    import torch

    from specviz_core.runtime.models import default_model_dir

    # One thread: on a shared CPU a multi-threaded forward slows down many times over when another process
    # runs, and the demo's timings (tokens/s, the speed-up over AR) would show that instead of the method.
    torch.set_num_threads(1)
    DEMO.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "demo.db"
        record(db)
        shrink(db)
        ids = token_ids(db)
        full = json.loads((default_model_dir() / "tokenizer.json").read_text(encoding="utf-8"))
        (DEMO / "goose-demo.db").write_bytes(db.read_bytes())
    text = json.dumps(tokenizer_slice(full, ids), ensure_ascii=False, separators=(",", ":"))
    (DEMO / "tokenizer.json").write_text(text, encoding="utf-8")
    for f in sorted(DEMO.iterdir()):
        print(f"{f.relative_to(ROOT)}: {f.stat().st_size / 1024:.0f} KB")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
