"""On a GPU: every method decodes what transformers' own greedy ``generate`` decodes, and where each cycle's time goes.

A 2-layer random Llama with the default model's 49,152-token vocabulary (a real vocabulary, so the host's work that
grows with it shows as it would for a 7B model, whose forward a GPU runs in a few milliseconds), in fp32 on the
device given. For every method: tokens identical to ``generate(do_sample=False)`` (a divergence where the target's
top-2 logits are within 1e-3 is a tie, reported as such), tokens per forward, and the median cycle's forward against
the rest of its recorded stages (the host's share). Then plain AR through SpecViz against a dozen-line greedy loop
over the same model (tokens/s, medians of 3). Not collected by pytest (no GPU in CI); run by hand:

    python tests/gpu_check.py --device cuda --out gpu.json
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import time

import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

from specviz_core.runtime.models import LoadedModel
from specviz_core.session.session import Session
from specviz_core.session.spec import check_method, spec_for

METHODS = ["ar", "pld", "tr", "goose", "isotropic", "talon", "eagle_static", "eagle", "stand", "draft_tree"]
TABLE = {"talon", "eagle_static", "eagle"}  # drafted from the n-gram tables: a random model has no trained head


def tiny(device: str, vocab: int = 49152) -> LoadedModel:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      initializer_range=0.3, eos_token_id=None, bos_token_id=None, pad_token_id=None,
                      attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).to(device).eval()
    return LoadedModel(model=model, tokenizer=None, name="gpu-check-tiny", path="", device=torch.device(device),
                       dtype=torch.float32)


def hf_greedy(m: LoadedModel, prompt: list[int], n: int) -> list[int]:
    ids = torch.tensor([prompt], device=m.device)
    out = m.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                           do_sample=False)
    return out[0, len(prompt):].tolist()


def top2_gap(m: LoadedModel, ids: list[int]) -> float:
    with torch.no_grad():
        logits = m.model(torch.tensor([ids], device=m.device)).logits[0, -1].float()
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1])


def plain_loop(m: LoadedModel, prompt: list[int], n: int) -> float:
    """tokens/s of the plainest greedy loop: one forward a token over a DynamicCache."""
    ids = torch.tensor([prompt], device=m.device)
    # transformers 5.24 renamed the forward's past_key_values to cache
    key = "cache" if "cache" in inspect.signature(m.model.forward).parameters else "past_key_values"
    with torch.no_grad():
        cache = DynamicCache()
        out = m.model(ids, use_cache=True, **{key: cache})
        tok = out.logits[:, -1:].argmax(-1)
        sync(m)
        t0 = time.perf_counter()
        for _ in range(n):
            out = m.model(tok, use_cache=True, **{key: cache})
            tok = out.logits[:, -1:].argmax(-1)
        tok.item()
        return n / (time.perf_counter() - t0)


def sync(m: LoadedModel) -> None:
    if m.device.type == "cuda":
        torch.cuda.synchronize(m.device)


def run_method(m: LoadedModel, method: str, prompt: list[int], n: int) -> dict:
    params = {"budget": "paper"} if "budget" in check_method(method).card.params_cls.__dataclass_fields__ else {}
    if method in TABLE:
        params["drafter"] = "table"
    choice = check_method(method, params)
    spec = spec_for(choice, prompt, max_new_tokens=n, draft_model="target" if choice.wants_draft_model else None)
    s = Session(spec, m, m if choice.wants_draft_model else None)
    s.prefill()
    sync(m)
    t0 = time.perf_counter()
    records = list(s.records())
    sync(m)
    wall = time.perf_counter() - t0
    want = hf_greedy(m, prompt, n)
    got = s.output_ids
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    verdict = "identical" if got == want else "tie" if first is not None and top2_gap(
        m, prompt + want[:first]) < 1e-3 else "DIVERGED"
    fwd = [r.timings_ms.get("forward", 0.0) for r in records if not r.state.get("from_prefill")]
    host = [sum(r.timings_ms.values()) - r.timings_ms.get("forward", 0.0) for r in records
            if not r.state.get("from_prefill")]
    return {"method": method, "verdict": verdict, "first_difference": first, "tokens": len(got),
            "tau": len(got) / s.n_forward if s.n_forward else 0.0, "tokens_per_s": len(got) / wall,
            "forward_ms_median": statistics.median(fwd) if fwd else None,
            "host_ms_median": statistics.median(host) if host else None,
            "rows_median": statistics.median(r.n_verified for r in records)}


def pass_over(m: LoadedModel, tokens: int, label: str) -> list[dict]:
    g = torch.Generator().manual_seed(1)
    pat = torch.randint(0, m.vocab_size, (12,), generator=g).tolist()
    prompt = pat * 4 + torch.randint(0, m.vocab_size, (8,), generator=g).tolist() + pat[:4]
    rows = []
    print(f"-- {label}", flush=True)
    for method in METHODS:
        run_method(m, method, prompt, 8)  # warm-up: the kernels' first launches
        r = run_method(m, method, prompt, tokens)
        rows.append(r)
        print(f"{r['method']:<13} {r['verdict']:<10} tau {r['tau']:5.2f}  {r['tokens_per_s']:7.1f} tok/s  "
              f"forward {r['forward_ms_median'] or 0:6.2f} ms  host {r['host_ms_median'] or 0:6.2f} ms  "
              f"rows {r['rows_median']}", flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    # A 96-token vocabulary makes the random model repeat itself, so every method drafts real trees (the tests' tiny
    # models); the real vocabulary shows the host's share of a cycle.
    small = pass_over(tiny(args.device, vocab=96), args.tokens, "96-token vocabulary: trees, losslessness")
    m = tiny(args.device)
    real = pass_over(m, args.tokens, "49,152-token vocabulary: the host's share of a cycle")
    g = torch.Generator().manual_seed(2)
    prompt = torch.randint(0, m.vocab_size, (40,), generator=g).tolist()
    ar = [run_method(m, "ar", prompt, args.tokens)["tokens_per_s"] for _ in range(3)]
    loop = [plain_loop(m, prompt, args.tokens) for _ in range(3)]
    summary = {"device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else args.device,
               "torch": torch.__version__, "small_vocab": small, "real_vocab": real,
               "ar_tokens_per_s": statistics.median(ar), "plain_loop_tokens_per_s": statistics.median(loop)}
    print(f"AR through SpecViz {summary['ar_tokens_per_s']:.1f} tok/s, a plain greedy loop "
          f"{summary['plain_loop_tokens_per_s']:.1f} tok/s: "
          f"{summary['ar_tokens_per_s'] / summary['plain_loop_tokens_per_s']:.2f}x", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=1)
    return 0 if all(r["verdict"] != "DIVERGED" for r in small + real) else 1


if __name__ == "__main__":
    sys.exit(main())
