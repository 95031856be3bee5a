"""``specviz compare``: sessions side by side, checked against each session's own cycles."""

from __future__ import annotations

import json

import pytest

from specviz_core.analysis.compare import compare
from specviz_core.cli.commands import main
from specviz_core.recording.store import Recording

PROMPT = "one two three one two three one two"


@pytest.fixture(scope="module")
def sessions(tiny_dir, tmp_path_factory):
    """AR, TR and PLD greedy on one prompt; two TR samples with different seeds."""
    db = tmp_path_factory.mktemp("cmp") / "c.db"
    runs = [("ar", []), ("tr", ["--param", "budget=12"]), ("pld", []),
            ("tr", ["--temperature", "1.0", "--seed", "1"]), ("tr", ["--temperature", "1.0", "--seed", "2"])]
    for method, extra in runs:
        assert main(["record", "--method", method, "--model", str(tiny_dir), "--prompt", PROMPT,
                     "--max-new-tokens", "40", "--db", str(db), "--quiet", *extra]) == 0
    with Recording(db) as rec:
        ids = [s.id for s in rec.sessions()]
    return db, ids


def run_json(capsys, db, ids) -> dict:
    assert main(["compare", "--db", str(db), *ids, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_greedy_sessions_are_identical_and_ratios_match_their_cycles(capsys, sessions):
    db, ids = sessions
    res = run_json(capsys, db, ids[:3])
    assert res["first_difference"] is None and res["same_prompt"]
    with Recording(db) as rec:
        own = []
        for sid in ids[:3]:
            cycles = list(rec.cycles(sid))
            tokens = sum(len(c.committed_ids) for c in cycles)
            ms = sum(sum(c.timings_ms.values()) for c in cycles)
            forwards = sum(not c.state.get("from_prefill") for c in cycles)  # the prefill gave a first token free
            own.append((tokens, forwards, tokens / forwards, 1000 * tokens / ms))
    for row, (tokens, forwards, tau, tps) in zip(res["sessions"], own):
        assert (row["tokens"], row["forwards"]) == (tokens, forwards)
        assert row["tau"] == pytest.approx(tau)
        assert row["tokens_per_s"] == pytest.approx(tps, rel=1e-6)
        assert row["speedup"] == pytest.approx(tps / own[0][3], rel=1e-6)
        assert row["tau_ratio"] == pytest.approx(tau / own[0][2])
    tr = res["sessions"][1]
    with Recording(db) as rec:
        accepted = sum(len(c.accepted_path) for c in rec.cycles(ids[1]))
    assert sum(v["accepted"] for v in tr["by_source"].values()) == accepted


def test_sampled_sessions_report_the_first_difference(capsys, sessions):
    db, ids = sessions
    with Recording(db) as rec:
        a, b = (rec.session(i).output_ids for i in ids[3:])
    expected = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    res = run_json(capsys, db, ids[3:])
    assert res["first_difference"] == expected
    assert main(["compare", "--db", str(db), *ids[3:]]) == 0
    assert f"first differ at position {expected} (sampled sessions)" in capsys.readouterr().out


def test_token_cycles_and_time_to_token_follow_the_cycles(sessions):
    db, ids = sessions
    with Recording(db) as rec:
        pairs = [(rec.session(i), rec.cycle_summaries(i)) for i in ids[:2]]
        cycles = list(rec.cycles(ids[1]))
    c = compare(pairs).sessions[1]
    starts = [k for k, (_, _, _, first) in enumerate(c.token_cycles()) if first]
    lengths = [len(r.committed_ids) for r in cycles]
    assert starts == [sum(lengths[:i]) for i in range(len(lengths))]
    ttt = c.time_to_token()
    assert ttt[-1][1] == sum(lengths) and all(b[0] >= a[0] and b[1] > a[1] for a, b in zip(ttt, ttt[1:]))
    assert sum(c.accepted_per_cycle().values()) == len(cycles)


def test_unknown_session_is_one_line(capsys, sessions):
    db, ids = sessions
    assert main(["compare", "--db", str(db), ids[0], "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"specviz: error: no session nosuch in {db} (specviz sessions --db {db} lists them)"


def test_the_text_names_a_budget_that_is_not_the_default(capsys, sessions):
    """tr at budget 12 reads ``tr budget=12``; the default (auto) tr and the methods without a budget read bare."""
    db, ids = sessions
    assert main(["compare", "--db", str(db), ids[0], ids[1], ids[3]]) == 0
    lines = capsys.readouterr().out.splitlines()
    cols = [line.split()[:3] for line in lines[1:4]]
    assert cols[0][1] == "ar" and cols[1][1:3] == ["tr", "budget=12"] and cols[2][1] == "tr"
    assert cols[2][2].isdigit()  # tokens follow the bare name


def test_sessions_of_different_models_are_refused_by_compare_and_race(capsys, sessions, tiny_dir, tmp_path):
    """A session of another model on the same prompt (here the same weights copied to another folder: another model
    as far as a recording can tell) is refused in one line by compare and by race, before any ratio is printed."""
    import shutil

    from specviz_app.cli import main as app_main

    db, ids = sessions
    other = tmp_path / "other-model"
    shutil.copytree(tiny_dir, other)
    assert main(["record", "--method", "ar", "--model", str(other), "--prompt", PROMPT, "--max-new-tokens", "8",
                 "--db", str(db), "--quiet"]) == 0
    with Recording(db) as rec:
        odd = next(s.id for s in rec.sessions() if s.model == str(other))
    capsys.readouterr()
    for argv in (["compare", "--db", str(db), ids[0], odd], ["race", "--db", str(db), ids[0], odd]):
        assert app_main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err == (f"specviz: error: sessions {ids[0]} and {odd} decode with different models ({tiny_dir} and "
                       f"{other}): compare and race sessions of one model, so that the ratios compare methods")


def test_race_without_sessions_takes_the_latest_prompts_ar_and_one_session_per_method(tiny_dir, tmp_path, capsys):
    from specviz_core.viewer.comparison import race_sessions

    db = tmp_path / "r.db"
    for method, prompt in (("ar", PROMPT), ("tr", PROMPT), ("pld", "another prompt"), ("tr", PROMPT),
                           ("pld", PROMPT)):
        assert main(["record", "--method", method, "--model", str(tiny_dir), "--prompt", prompt,
                     "--max-new-tokens", "8", "--db", str(db), "--quiet"]) == 0
    with Recording(db) as rec:
        by_order = [(s.method, s.prompt_text, s.id) for s in sorted(rec.sessions(), key=lambda s: s.created)]
    ar, _, latest_tr, pld = (i for m, p, i in by_order if p == PROMPT)
    assert race_sessions(db) == [ar, pld, latest_tr]
