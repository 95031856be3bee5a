"""Serving-dashboard metrics (vLLM / SGLang definitions) and the lossless audit, against independent computations."""

from __future__ import annotations

import json
import sqlite3

import pytest
import torch

from helpers import plain_logits
from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.analysis.metrics import DEFINITIONS, session_metrics
from specviz_core.audit import classify
from specviz_core.cli.commands import main
from specviz_core.recording.store import Recording
from specviz_core.runtime.models import load_model


def summary(index: int, n_verified: int, n_accepted: int, frontier: int | None) -> CycleSummary:
    return CycleSummary(index=index, mode="tree" if n_verified > 1 else "ar", n_verified=n_verified,
                        n_accepted=n_accepted, committed_ids=(1,) * (n_accepted + 1),
                        committed_kinds=("bonus",), cycle_ms=1.0, spine_broke_at=None, spine_continued=False,
                        frontier=frontier)


def test_metrics_by_hand():
    # An AR cycle; 5 drafts, 2 accepted, 1 verified child rejected at position 3; 3 drafts, none accepted (2 children
    # of the root rejected); 2 drafts, both accepted, the draft ran out at position 3.
    m = session_metrics([summary(0, 1, 0, 0), summary(1, 6, 2, 1), summary(2, 4, 0, 2), summary(3, 3, 2, 0)])
    assert (m.cycles, m.drafting_cycles, m.drafted, m.accepted) == (4, 3, 10, 4)
    assert m.draft_acceptance_rate == pytest.approx(4 / 10)  # the bonus is not a draft token
    assert m.mean_acceptance_length == pytest.approx(1 + 4 / 4)
    by_pos = {p.position: (p.accepted, p.reached, p.unconditional, p.conditional) for p in m.positions}
    assert by_pos[1] == (2, 3, pytest.approx(2 / 3), pytest.approx(2 / 3))
    assert by_pos[2] == (2, 2, pytest.approx(2 / 3), pytest.approx(1.0))
    assert by_pos[3] == (0, 1, 0.0, 0.0)
    assert set(by_pos) == {1, 2, 3}


def test_metrics_of_an_old_recording_have_no_conditional_rate():
    m = session_metrics([summary(0, 4, 1, None)])
    assert m.positions[0].reached is None and m.positions[0].conditional is None
    assert "n/a" in "\n".join(m.lines())


@pytest.fixture(scope="module")
def recorded(tiny_dir, tmp_path_factory):
    """A greedy TR session and a sampled one of the tiny model, recorded through the CLI."""
    db = tmp_path_factory.mktemp("audit") / "r.db"
    for extra in ([], ["--temperature", "0.8"]):
        code = main(["record", "--method", "tr", "--model", str(tiny_dir), "--prompt", "one two three one two three",
                     "--max-new-tokens", "30", "--param", "budget=12", "--db", str(db), "--quiet", *extra])
        assert code == 0
    with Recording(db) as rec:
        greedy, sampled = sorted(rec.sessions(), key=lambda s: s.temperature)
    return db, greedy.id, sampled.id


def test_metrics_of_a_real_session_from_the_trees(recorded):
    """The metrics from summaries equal a count over the recorded trees themselves."""
    db, sid, _ = recorded
    with Recording(db) as rec:
        records = list(rec.cycles(sid))
        m = session_metrics(rec.cycle_summaries(sid))
    drafted = sum(sum(1 for n in r.nodes if n.verified and n.parent >= 0) for r in records)
    accepted = sum(len(r.accepted_path) for r in records)
    assert (m.drafted, m.accepted, m.cycles) == (drafted, accepted, len(records))
    for p in m.positions:
        reached = 0
        for r in records:
            if len(r.accepted_path) < p.position - 1:
                continue
            parent = r.accepted_path[p.position - 2] if p.position > 1 else r.verify_order[0]
            reached += any(n.verified and n.parent == parent for n in r.nodes)
        assert p.reached == reached
        assert p.accepted == sum(len(r.accepted_path) >= p.position for r in records)


def test_sessions_metrics_prints_the_definitions_names(capsys, recorded):
    db, sid, _ = recorded
    assert main(["sessions", "--db", str(db), "--metrics"]) == 0
    out = capsys.readouterr().out
    assert "draft acceptance rate" in out and "mean acceptance length" in out and "accepted / reached" in out


def test_docs_define_every_metric():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    for name, text in DEFINITIONS.items():
        assert name in doc and text in " ".join(doc.split()), name


def test_audit_of_a_lossless_session_is_identical(capsys, recorded):
    db, sid, _ = recorded
    assert main(["audit", "--db", str(db), "--session", sid, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["verdict"] == "identical" and res["compared"] > 0


def test_audit_of_a_sampled_session_does_not_apply(capsys, recorded, monkeypatch):
    import specviz_core.session.factory as factory

    monkeypatch.setattr(factory, "load_checked_model", lambda *a, **k: pytest.fail("no model is needed"))
    db, _, sid = recorded
    assert main(["audit", "--db", str(db), "--session", sid, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "not applicable"


def test_audit_finds_a_planted_divergence(capsys, recorded, tiny_dir, tmp_path):
    """One committed token of cycle 3 replaced by the target's least likely token: the audit names that cycle."""
    import shutil

    src, sid, _ = recorded
    db = tmp_path / "planted.db"
    shutil.copy(src, db)
    with Recording(src) as rec:
        info = rec.session(sid)
        records = list(rec.cycles(sid))
    pos = sum(len(r.committed_ids) for r in records[:3])  # the first token committed by cycle 3
    model = load_model(str(tiny_dir), device="cpu")
    logits = plain_logits(model, list(info.prompt_ids) + list(info.output_ids[:pos]))
    worst = int(logits.argmin())
    ids = list(records[3].committed_ids)
    ids[0] = worst
    con = sqlite3.connect(db)
    con.execute("UPDATE cycles SET committed_ids = ? WHERE session_id = ? AND idx = 3", (json.dumps(ids), sid))
    con.commit()
    con.close()
    assert main(["audit", "--db", str(db), "--session", sid, "--json"]) == 1
    res = json.loads(capsys.readouterr().out)
    assert (res["verdict"], res["position"], res["cycle"], res["session_token"]) == ("divergence", pos, 3, worst)
    assert res["plain_token"] == int(logits.argmax())
    top2 = logits.topk(2)
    assert res["gap"] == pytest.approx(float(top2.values[0] - top2.values[1]), rel=1e-4)


def test_classify_ties_and_divergences():
    logits = torch.tensor([0.0, 5.0, 5.0004, 1.0])
    assert classify(logits, 1, 2, "float32")[0] == "tie"  # top-2 within 1e-3, both tokens in it
    assert classify(logits, 3, 2, "float32")[0] == "divergence"  # the session's token is not in the top-2
    wide = torch.tensor([0.0, 5.0, 5.2, 1.0])
    assert classify(wide, 1, 2, "float32")[0] == "divergence"
    assert classify(wide, 1, 2, "bfloat16")[0] == "divergence"
    assert classify(torch.tensor([0.0, 5.0, 5.04]), 1, 2, "float16")[0] == "tie"


def test_oracle_runs_continue_through_cycles_whose_sources_offered_w():
    """Worked by hand: cycle 0 accepted 2 and some source offered w (headroom 3), cycle 1 accepted 1 but no source
    offered w (headroom 1), cycle 2 offered w, cycle 3 (the last) offered w but has no next cycle."""
    from specviz_core.analysis.cycle_summary import CycleSummary
    from specviz_core.analysis.metrics import oracle_runs

    def cyc(acc: int, room: int | None) -> CycleSummary:
        return CycleSummary(index=0, mode="tree", n_verified=8, n_accepted=acc, committed_ids=(1,) * (acc + 1),
                            committed_kinds=("bonus",), cycle_ms=1.0, spine_broke_at=None, spine_continued=False,
                            headroom={} if room is None else {"*": room})

    runs = oracle_runs([cyc(2, 3), cyc(1, 1), cyc(0, 1), cyc(4, 5), cyc(0, None), cyc(3, 4)])
    assert runs == [3 + 1, 1, 1 + 5, 5, None, 4]
