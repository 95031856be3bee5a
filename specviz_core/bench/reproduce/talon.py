"""TALON's claims (seed 001), on the model's draft head: R against EAGLE's static tree per suite, the tree's shape
by the head's confidence, and the head against the n-gram tables."""

from __future__ import annotations

import statistics

from specviz_core.bench.reproduce.claims import Claim, Say, Work
from specviz_core.cycle_state import TalonFacts
from specviz_core.errors import SpecVizError
from specviz_core.runtime.models import LoadedModel


def _shape_by_confidence(records: list) -> dict[str, float] | None:
    """Mean depth and widest layer of TALON's trees where the head's root top-1 is above / below its median."""
    rows = []
    for r in records:
        first = [n.score for n in r.nodes if n.depth == 1]
        talon = TalonFacts.read(r.state)
        widths = talon.layer_widths or []
        if first and widths:
            rows.append((max(first), talon.depth or 0, max(widths)))
    if len(rows) < 4:
        return None
    cut = statistics.median(c for c, _, _ in rows)
    hi = [x for x in rows if x[0] > cut]
    lo = [x for x in rows if x[0] <= cut]
    if not hi or not lo:
        return None
    return {"depth_sure": statistics.mean(d for _, d, _ in hi), "depth_unsure": statistics.mean(d for _, d, _ in lo),
            "width_sure": statistics.mean(w for _, _, w in hi), "width_unsure": statistics.mean(w for _, _, w in lo)}


def _trace(records: list) -> list[dict]:
    """Per TALON cycle: the head's root top-1, the tree's depth, and at depth 2 (the first gated layer) how many
    candidates the gate let through against the places the budget had left after the root's top-K."""
    rows = []
    for r in records:
        first = [n.score for n in r.nodes if n.depth == 1]
        t = TalonFacts.read(r.state)
        widths, passed = t.layer_widths or [], t.layer_passed or []
        if not first or not widths or len(passed) < 2:
            continue
        rows.append({"conf": max(first), "depth": t.depth or 0, "passed2": passed[1],
                     "room2": max((t.nodes or 0) - widths[0], 0) if t.ended_by == "budget" else None})
    return rows


def shape_cause(records: list) -> str:
    """Why TALON's trees are (not) deeper and narrower when the head is sure, measured: at depth 2, the first gated
    layer, whether the gate cut the candidates below the places the budget had left (a narrow layer, a deeper tree)
    or let more through (the budget fills depth 2 and the tree ends there), in the sure and the unsure half; and how
    sure the head is at all."""
    rows = _trace(records)
    if len(rows) < 4:
        return ""
    cut = statistics.median(x["conf"] for x in rows)
    sure, unsure = [x for x in rows if x["conf"] > cut], [x for x in rows if x["conf"] <= cut]
    if not sure or not unsure:
        return ""

    def filled(xs: list[dict]) -> float:
        known = [x for x in xs if x["room2"] is not None]
        return sum(1 for x in known if x["passed2"] >= x["room2"]) / len(known) if known else 0.0

    def med(xs: list[dict], k: str) -> str:
        vals = [x[k] for x in xs if x[k] is not None]
        return f"{statistics.median(vals):.0f}" if vals else "-"

    rooms = [x["room2"] for x in rows if x["room2"] is not None]
    room = f"the {statistics.median(rooms):.0f} places" if rooms else "the places"
    text = (f"at depth 2 the gate let through a median {med(sure, 'passed2')} candidates when the head was sure and "
            f"{med(unsure, 'passed2')} when not, for {room} the budget had left, and filled them in "
            f"{filled(sure):.0%} vs {filled(unsure):.0%} of cycles; the trees were {med(sure, 'depth')} vs "
            f"{med(unsure, 'depth')} deep")
    if min(filled(sure), filled(unsure)) >= 0.5:
        text = "the gate cut too little to shape the trees (the budget ended most at depth 2): " + text
    confident = sum(1 for x in rows if x["conf"] >= 0.5) / len(rows)
    text += (f"; the head is rarely sure: the halves split at a root top-1 of {cut:.2f}, and it is 0.5 or more in "
             f"{confident:.0%} of cycles") if cut < 0.5 else f"; the halves split at a root top-1 of {cut:.2f}"
    return text


def copyable_share(prompt: list[int], output: list[int], n: int = 3) -> float:
    """The share of ``output`` tokens a prompt lookup predicts: the token after the latest earlier occurrence of the
    ``n`` tokens before it, in the prompt and the output so far (how much of the answer copies its context)."""
    text = list(prompt)
    last: dict[tuple[int, ...], int] = {}  # n-gram -> the position after its latest occurrence that has one
    for i in range(n, len(text)):
        last[tuple(text[i - n:i])] = i
    hits = 0
    for tok in output:
        key = tuple(text[-n:])
        at = last.get(key)
        hits += at is not None and text[at] == tok
        if len(text) >= n:
            last[key] = len(text)
        text.append(tok)
    return hits / len(output) if output else 0.0


def head_loss_cause(copies: list[tuple[str, float, float]], pairs: list[tuple[float, float]]) -> str:
    """Where the tables beat the head, and how much of each output a lookup of its own context predicts (what
    tables of the target's own distributions, keyed by the context, can give and a head must predict)."""
    rows = [(name, a, b, c3, c1) for (name, c3, c1), (a, b) in zip(copies, pairs)]
    won = [r for r in rows if r[2] > r[1]]
    lost = [r for r in rows if r[2] <= r[1]]
    text = f"the tables draft better on {len(won)} of {len(rows)} prompts"
    if won and lost:
        rep = lambda rs: statistics.mean(r[4] for r in rs)  # noqa: E731
        text += (f"; their outputs repeat their context more ({rep(won):.0%} of tokens follow the previous token as "
                 f"it was followed before, against {rep(lost):.0%} where the head wins)" if rep(won) > rep(lost)
                 else "; their outputs repeat their context no more than the others'")
    return text + ": " + "; ".join(f"{n}: head {a:.2f}, tables {b:.2f}, {c3:.0%} / {c1:.0%} of the output a 3-gram "
                                   f"/ 1-gram lookup predicts" for n, a, b, c3, c1 in rows)


def reproduce_talon(target: LoadedModel, prompts: list[tuple[str, str, list[int]]], n: int, say: Say,
                    work: Work, head: str = "") -> list[Claim]:
    """TALON's claims on the model's trained head, or on the EAGLE head folder ``head``."""
    from specviz_core.analysis.cycle_summary import summarize
    from specviz_core.analysis.metrics import session_metrics
    from specviz_core.runtime.head_files import head_info

    if not head and head_info(target) is None:
        raise SpecVizError(f"TALON's claims are about a trained draft head and {target.name} has none: "
                           f"run specviz train-head --model {target.name} first (about 10 minutes)")
    per_suite: dict[str, dict[str, list]] = {}
    all_talon = []
    copies: list[tuple[str, float, float]] = []  # per prompt, the output's share a 3-gram, a 1-gram lookup predicts
    with work:
        for suite, pid, ids in work.each(prompts):
            say(f"talon: {suite}/{pid}")
            got = {}
            on_head = {"drafter": "head", **({"head": head} if head else {})}
            for key, method, params in (("talon", "talon", on_head), ("eagle_static", "eagle_static", on_head),
                                        ("talon_table", "talon", {"drafter": "table"})):
                got[key] = work.decode(f"talon {suite}/{pid} {key}", target, method, params, ids, n)[0]
            row = per_suite.setdefault(suite, {"talon": [], "eagle_static": [], "talon_table": []})
            for key, run in got.items():  # a prompt counts once all its sessions finished
                m = session_metrics(summarize(r) for r in run.records)
                r = run.tau / (1 + m.step_cost * m.delta) if m.step_cost is not None else None  # Eq. 7
                row[key].append({"tau": run.tau, "delta": m.delta, "c": m.step_cost, "r": r})
            all_talon += got["talon"].records
            out = got["talon"].output
            copies.append((f"{suite}/{pid}", copyable_share(ids, out), copyable_share(ids, out, 1)))
    if not per_suite:
        return []
    claims = []
    for suite, row in per_suite.items():
        t, e = row["talon"], row["eagle_static"]

        def mean(rows: list, k: str) -> float:
            vals = [x[k] for x in rows if x[k] is not None]
            return statistics.mean(vals) if vals else 0.0

        tt, et, td, ed, tr, er = (mean(t, "tau"), mean(e, "tau"), mean(t, "delta"), mean(e, "delta"),
                                  mean(t, "r"), mean(e, "r"))
        claims.append(Claim("talon", f"{suite}: R = tau / (1 + c delta) over EAGLE's static tree", "TALON higher",
                            f"R {tr:.2f} vs {er:.2f} (tau {tt:.2f} vs {et:.2f}, delta {td:.2f} vs {ed:.2f})", tr > er,
                            "equal budget (60 nodes), both on the same head", paper_value=None,
                            ours_value=tr / er - 1 if er else None, data=row))
    shape = _shape_by_confidence(all_talon)
    if shape:
        ok = shape["depth_sure"] > shape["depth_unsure"] and shape["width_sure"] < shape["width_unsure"]
        claims.append(Claim("talon", "deep-narrow when the head is sure, shallow-wide when not",
                            "yes (Sec. 5.2)", f"depth {shape['depth_sure']:.1f} vs {shape['depth_unsure']:.1f}, widest "
                            f"layer {shape['width_sure']:.1f} vs {shape['width_unsure']:.1f} (sure vs unsure)", ok,
                            "cycles split at the median of the head's root top-1 probability", data=shape,
                            cause="" if ok else shape_cause(all_talon)))
    chat = [(x["tau"], y["tau"]) for s, row in per_suite.items() if s == "chat"
            for x, y in zip(row["talon"], row["talon_table"])]
    pairs = chat or [(x["tau"], y["tau"]) for row in per_suite.values() for x, y in zip(row["talon"], row["talon_table"])]
    h, tb = statistics.mean(a for a, _ in pairs), statistics.mean(b for _, b in pairs)
    cause = ""
    if h <= tb and not chat:
        cause = head_loss_cause(copies, pairs)
    claims.append(Claim("talon", f"a trained head drafts better than the n-gram tables ({'chat' if chat else 'all'})",
                        "the paper drafts with a head", f"tau {h:.2f} vs {tb:.2f}", h > tb,
                        "SpecViz's question, not the paper's", data={"pairs": pairs, "copyable": copies},
                        cause=cause))
    return claims
