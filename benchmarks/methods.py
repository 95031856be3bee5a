"""Tokens/s and mean accepted tokens per forward for every method on one prompt, side by side.

Runs every method in one process on one model instance, interleaved (A B C A B C ...)
after a warm-up, and prints medians. Usage:

    python benchmarks/methods.py [--prompt-file F] [--max-new-tokens 128] [--repeats 3]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from specviz_core.drafters import METHODS, parse_params
from specviz_core.engine import DecodeConfig, Engine
from specviz_core.models import encode_prompt, load_model

REPETITIVE = (
    "Here is a config file:\n\nserver.host = 10.0.0.1\nserver.port = 8080\nserver.timeout = 30\n"
    "server.retries = 3\nserver.log = /var/log/server.log\n\n"
    "Rewrite it with every `server.` prefix replaced by `backend.`, keeping everything else the same."
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompt-file")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--methods", default=",".join(METHODS))
    args = ap.parse_args()
    text = open(args.prompt_file).read() if args.prompt_file else REPETITIVE
    m = load_model()
    ids, _ = encode_prompt(m, text)
    methods = args.methods.split(",")

    def once(method: str) -> tuple[float, float, list[int]]:
        cls = METHODS[method]
        drafter = cls(parse_params(method, cls.params_cls, {}), m, m if cls.needs_draft_model else None)
        e = Engine(m, drafter, ids, DecodeConfig(max_new_tokens=args.max_new_tokens))
        e.prefill()
        t0 = time.perf_counter()
        for _ in e.cycles():
            pass
        dt = time.perf_counter() - t0
        return len(e.output_ids) / dt, len(e.output_ids) / e.n_forward, e.output_ids

    for method in methods:  # warm-up
        once(method)
    tps: dict[str, list[float]] = {k: [] for k in methods}
    tau: dict[str, float] = {}
    outs: dict[str, list[int]] = {}
    for _ in range(args.repeats):
        for method in methods:
            t, a, o = once(method)
            tps[method].append(t)
            tau[method], outs[method] = a, o
    ar = statistics.median(tps["ar"]) if "ar" in tps else None
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}, {m.device}, {m.dtype}; prompt {len(ids)} tokens, "
          f"{args.max_new_tokens} new tokens, median of {args.repeats}")
    print(f"| method | tau (tokens/forward) | tokens/s | speed-up vs AR | identical to AR |")
    print(f"| --- | --- | --- | --- | --- |")
    for method in methods:
        med = statistics.median(tps[method])
        sp = f"{med / ar:.2f}x" if ar else "-"
        same = outs[method] == outs.get("ar", outs[method])
        print(f"| {method} | {tau[method]:.2f} | {med:.1f} | {sp} | {same} |")


if __name__ == "__main__":
    main()
