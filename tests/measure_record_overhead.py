"""What ``specviz.record`` costs a ``generate`` call (maintainers; not a test): ``python tests/measure_record_overhead.py
[ROUNDS]``. transformers' own greedy ``generate`` on the default model, 128 new tokens, with prompt lookup
(``prompt_lookup_num_tokens=10``: short cycles, so the recording's share is at its largest) and with assisted
generation (the model assisting itself), each plain and inside ``specviz.record`` (a temporary file), alternating,
one thread. Prints the median wall time of each, the overhead, and checks the outputs are the same."""
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

import specviz

torch.set_num_threads(1)
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
model, tok = specviz.load(device="cpu")
TEXT = ("Rename x to total:\n\ndef f(x):\n    x = x + 1\n    x = x * 2\n    return x\n\n"
        "Then explain the change in two sentences.")
ids = tok.apply_chat_template([{"role": "user", "content": TEXT}], add_generation_prompt=True, return_dict=True,
                              return_tensors="pt")
CALLS = {"prompt lookup": {"prompt_lookup_num_tokens": 10}, "assisted": {"assistant_model": model}}
folder = Path(tempfile.mkdtemp())


def call(kwargs, recorded):
    t0 = time.perf_counter()
    if recorded:
        with specviz.record(folder / "runs.db"):
            out = model.generate(**ids, **kwargs, do_sample=False, max_new_tokens=128, pad_token_id=tok.eos_token_id)
    else:
        out = model.generate(**ids, **kwargs, do_sample=False, max_new_tokens=128, pad_token_id=tok.eos_token_id)
    return time.perf_counter() - t0, out[0].tolist()


for name, kwargs in CALLS.items():
    call(kwargs, False)  # warm-up
    times = {False: [], True: []}
    outs = set()
    for _ in range(ROUNDS):
        for recorded in (False, True):
            s, out = call(kwargs, recorded)
            times[recorded].append(s)
            outs.add(tuple(out))
    plain, rec = statistics.median(times[False]), statistics.median(times[True])
    print(f"{name:14s} plain {plain * 1000:7.1f} ms   recorded {rec * 1000:7.1f} ms   overhead {rec / plain - 1:+.1%}"
          f"   ({ROUNDS} rounds, medians; {'same output' if len(outs) == 1 else 'OUTPUTS DIFFER'})")
