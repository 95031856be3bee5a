"""The host-work benchmark (``specviz bench --host-work``): what it prints is what the sessions recorded."""

from __future__ import annotations

import statistics

from helpers import hf_greedy
from specviz_core.bench import host_work


def test_the_plain_loop_is_greedy_decoding():
    m = host_work.two_layer_model(96)
    ids = host_work.prompt_ids(96)
    assert host_work.plain_greedy(m.model, ids, 16) == hf_greedy(m, ids, 16)


def test_host_work_is_every_recorded_stage_but_the_forward(tmp_path):
    from specviz_core.recording.store import Recording

    m = host_work.two_layer_model(96)
    row = host_work.host_work(m, "goose", 24, tmp_path)
    with Recording(tmp_path / "goose.db", read_only=True) as rec:
        info = rec.sessions()[0]
        records = list(rec.cycles(info.id))[1:]
    assert row.cycles == len(records) > 3
    host = statistics.median(sum(v for k, v in r.timings_ms.items() if k != "forward") for r in records)
    assert row.host_ms == host and row.forward_ms == statistics.median(r.timings_ms["forward"] for r in records)
    assert row.rows == statistics.median(len(r.verify_order) for r in records)
    assert max(len(r.verify_order) for r in records) > 1  # goose drafted trees
    # By the wall clock a cycle holds every stage it timed and more (the summary, the SQLite write): cycle by cycle,
    # so in the median too.
    assert row.wall_host_ms >= row.host_ms > 0


def test_the_table_names_every_method_and_the_plain_loop():
    lines: list[str] = []
    res = host_work.run(vocabs=(96,), tokens=12, rounds=1, methods=("ar", "pld"), say=lines.append)
    text = "\n".join(lines)
    assert "  ar " in text and "  pld " in text and "a plain greedy loop" in text and "same output" in text
    assert res["vocabs"][96]["same_output"] is True
