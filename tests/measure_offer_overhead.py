"""What recording the candidate lists costs (maintainers; not a test): ``python tests/measure_offer_overhead.py
goose tr talon``. The same 64-token sessions on the default model, recorded to a temporary file, with the drafters'
candidate lists (``DraftTree.offer`` and the lazy offers of Goose and Token Recycling) on and off, alternating, one
thread; prints the median decode-and-record time of each (prefill excluded) and the overhead."""
import statistics
import sys
import time

import torch

torch.set_num_threads(1)
from specviz_core import tree as tree_mod
from specviz_core.runtime.models import encode_prompt, load_model

m = load_model(None, device="cpu")
TEXT = "Rename x to total:\n\ndef f(x):\n    x = x + 1\n    x = x * 2\n    return x\n\nThen explain the change in two sentences."
prompt, _ = encode_prompt(m, "Rename x to total:\n\ndef f(x):\n    x = x + 1\n    x = x * 2\n    return x\n\nThen explain the change in two sentences.", True)
orig_offer = tree_mod.DraftTree.offer
def off(*a, **k): pass

import specviz_core.drafters.goose.drafter as goose_mod
import specviz_core.drafters.token_recycling as tr_mod

orig_goose, orig_tr = goose_mod.offer_goose, tr_mod.TokenRecyclingDrafter._offer

def session(method, on):
    tree_mod.DraftTree.offer = orig_offer if on else off
    goose_mod.offer_goose = orig_goose if on else off
    tr_mod.TokenRecyclingDrafter._offer = orig_tr if on else off
    import os
    import tempfile

    from specviz_core.recording.store import Recording
    from specviz_core.session.spec import SessionRequest
    from specviz_core.session.session import Session
    d = tempfile.mkdtemp()
    with Recording(os.path.join(d, "o.db"), create=True) as rec:
        run = Session(SessionRequest(method=method, prompt=TEXT, max_new_tokens=64, chat_template=True).check(), m,
                            recording=rec)
        run.prefill()
        t0 = time.perf_counter()
        recs = [c.record for c in run.run()]  # decode, summarize (the stop cause, headroom) and store every cycle
        dt = time.perf_counter() - t0
    if not on:
        assert all(not r.state.get("offers") for r in recs)
    return dt, recs

for method in sys.argv[1:]:
    times = {True: [], False: []}
    for i in range(6):
        for on in (True, False) if i % 2 == 0 else (False, True):
            times[on].append(session(method, on)[0])
    a, b = statistics.median(times[True]), statistics.median(times[False])
    print(f"{method}: with lists {a*1000:.0f} ms, without {b*1000:.0f} ms, overhead {100*(a/b-1):+.1f}% (medians of 6)")
