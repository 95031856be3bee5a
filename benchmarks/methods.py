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
from specviz_core.engine.cycle import DecodeConfig, Engine
from specviz_core.models import encode_prompt, load_model

REPETITIVE = (
    "Here is a config file:\n\nserver.host = 10.0.0.1\nserver.port = 8080\nserver.timeout = 30\n"
    "server.retries = 3\nserver.log = /var/log/server.log\n\n"
    "Rewrite it with every `server.` prefix replaced by `backend.`, keeping everything else the same."
)


SUITE = {
    "code edit": REPETITIVE,
    "repeated structure": "Write a markdown table with columns Name, Age, City for five people: Ann 31 Oslo, "
                          "Bob 42 Rome, Cid 27 Lima, Dee 35 Kyiv, Eve 29 Pune. Then write the same table again "
                          "sorted by age.",
    "free chat": "Hi! I have a free afternoon in a rainy city. What are three cosy things I could do?",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompt-file")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy; > 0: sampling, repeat i uses seed + i")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's own)")
    ap.add_argument("--methods", default=",".join(METHODS),
                    help="comma-separated method ids; parameters after a colon, e.g. isotropic:k=5 (separate methods with ';' then)")
    ap.add_argument("--suite", action="store_true", help="run the three built-in prompts (code edit, repeated structure, free chat)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    m = load_model()
    if args.suite:
        prompts = SUITE
    else:
        prompts = {"prompt": open(args.prompt_file).read() if args.prompt_file else REPETITIVE}
    for name, text in prompts.items():
        print(f"\n### {name}\n")
        bench_prompt(m, text, args)


def bench_prompt(m, text: str, args) -> None:
    ids, _ = encode_prompt(m, text)
    methods = args.methods.split(";") if ";" in args.methods else args.methods.split(",")

    def once(spec: str, seed: int = args.seed) -> tuple[float, float, list[int]]:
        # "isotropic:k=5" runs a method with parameters.
        method, _, raw = spec.partition(":")
        params = dict(kv.split("=", 1) for kv in raw.split(",") if kv)
        cls = METHODS[method]
        drafter = cls(parse_params(method, cls.params_cls, params), m, m if cls.needs_draft_model else None)
        e = Engine(m, drafter, ids, DecodeConfig(max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                                                 seed=seed))
        e.prefill()
        t0 = time.perf_counter()
        for _ in e.cycles():
            pass
        dt = time.perf_counter() - t0
        return len(e.output_ids) / dt, len(e.output_ids) / e.n_forward, e.output_ids

    for method in methods:  # warm-up
        once(method)
    tps: dict[str, list[float]] = {k: [] for k in methods}
    tau: dict[str, list[float]] = {k: [] for k in methods}
    outs: dict[str, list[int]] = {}
    for i in range(args.repeats):
        for method in methods:
            t, a, o = once(method, args.seed + i)
            tps[method].append(t)
            tau[method].append(a)
            outs[method] = o
    ar = statistics.median(tps["ar"]) if "ar" in tps else None
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}, {m.device}, {m.dtype}; prompt {len(ids)} tokens, "
          f"{args.max_new_tokens} new tokens, temperature {args.temperature:g}, median of {args.repeats} "
          f"(tau: mean)")
    print(f"| method | tau (tokens/forward) | tokens/s | speed-up vs AR | identical to AR |")
    print(f"| --- | --- | --- | --- | --- |")
    for method in methods:
        med = statistics.median(tps[method])
        sp = f"{med / ar:.2f}x" if ar else "-"
        same = outs[method] == outs.get("ar", outs[method]) if args.temperature == 0 else "- (sampled)"
        print(f"| {method} | {statistics.mean(tau[method]):.2f} | {med:.1f} | {sp} | {same} |")


if __name__ == "__main__":
    main()
