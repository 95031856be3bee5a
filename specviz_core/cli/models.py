"""`specviz models`: the models a session can use on this machine, found without loading or downloading any."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any


def add_parser(sub: Any) -> None:
    mo = sub.add_parser("models", help="list the models on this machine (default, used before, Hugging Face cache)",
                        description="List the models a session can use, without loading or downloading anything: the "
                        "embedded default, folders used before, and causal LMs in the local Hugging Face cache "
                        "(HF_HUB_CACHE), with parameter count and size on disk; then the draft heads found (EAGLE "
                        "heads in the cache and in SpecViz's heads folder, for --draft-head; the heads train-head "
                        "kept) and which of the models each fits.")
    mo.add_argument("--draft-for", default=None, metavar="MODEL",
                    help="mark each model as a draft for this target: same tokenizer (hf_assisted, draft_tree, ...) "
                         "or another one (hf_universal)")
    mo.add_argument("--json", action="store_true", help="one JSON object per model")


DRAFT_LABELS = {"target": "(the target)", "same": "same tokenizer", "universal": "other tokenizer: hf_universal",
                "unknown": "?"}


def _count(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}K"


def _bytes(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"


HEAD_LAYOUTS = {"eagle": "EAGLE-1/2", "eagle3": "EAGLE-3", "specviz": "train-head"}


def cmd_models(args: argparse.Namespace) -> int:
    from specviz_core.runtime.catalog import list_heads, list_models

    entries = list_models(draft_for=args.draft_for)
    heads = list_heads(entries)
    if args.json:
        for e in entries:
            print(json.dumps(dataclasses.asdict(e)))
        for h in heads:
            print(json.dumps({"head": True, **dataclasses.asdict(h)}))
        return 0
    width = max(len(e.name) for e in entries)
    head = f"{'model':<{width}}  {'source':<8}  {'architecture':<24}  {'params':>7}  {'on disk':>8}  {'vocab':>7}"
    print(head + ("  as a draft" if args.draft_for else ""))
    for e in entries:
        line = (f"{e.name:<{width}}  {e.source:<8}  {e.architecture[:24]:<24}  {_count(e.n_params):>7}  "
                f"{_bytes(e.size_bytes):>8}  {e.vocab_size if e.vocab_size is not None else '?':>7}")
        print(line + (f"  {DRAFT_LABELS[e.draft]}" if args.draft_for else ""))
    print()
    if not heads:
        print("draft heads: none found (EAGLE heads in the hub cache or the heads folder; specviz train-head makes "
              "one)")
        return 0
    width = max(len(h.name) for h in heads)
    print(f"{'draft head':<{width}}  {'source':<8}  {'layout':<9}  {'reads':>5}  {'vocab':>7}  {'drafts':>7}  fits")
    for h in heads:
        fits = ", ".join(h.fits) if h.fits else "none of these models"
        print(f"{h.name:<{width}}  {h.source:<8}  {HEAD_LAYOUTS.get(h.layout, h.layout):<9}  "
              f"{h.reads_width if h.reads_width else '':>5}  {h.vocab_size if h.vocab_size else '':>7}  "
              f"{h.draft_vocab_size if h.draft_vocab_size else '':>7}  {fits}")
    return 0
