"""The viewer's Qt-free helpers: the cycle table behind CSV export, the AR baseline of a replayed session."""

from __future__ import annotations

import csv
import dataclasses

from gui_records import WordTokenizer, ar_cycle, goose_session, session_info, word_vocab
from specviz_core.recording.store import Recording
from specviz_core.viewer.cycle_table import COLUMNS, cycle_rows, write_cycles_csv
from specviz_core.viewer.sources import RecordingSource


def test_cycle_rows_and_csv(tmp_path):
    source = goose_session(n_nodes=12, spine_len=5, spine_accepted=2, branch_continues=0)
    summaries = source.summaries()
    rows = list(cycle_rows(summaries, word_vocab()))
    assert len(rows) == len(summaries) == 5 and all(len(r) == len(COLUMNS) for r in rows)
    spine = source.cycle(4)
    committed = WordTokenizer().decode(list(spine.committed_ids))
    # The spine cycle: 12 draft nodes + root verified, 2 accepted, then the bonus; the spine broke at depth 3.
    assert rows[4][:8] == [4, "tree", 13, 2, 3, committed, f"{sum(spine.timings_ms.values()):.3f}", 3]
    assert rows[4][8:] == [0, 0.3, 0.3]
    assert rows[0][7] == "" and rows[0][1] == "ar"  # AR cycles: no spine to break
    out = tmp_path / "c.csv"
    assert write_cycles_csv(out, summaries, word_vocab()) == 5
    with open(out, newline="", encoding="utf-8") as fh:
        lines = list(csv.reader(fh))
    assert lines[0] == list(COLUMNS) and lines[5][:3] == ["4", "tree", "13"] and lines[5][5] == committed


def record_session(rec: Recording, info, n_cycles: int) -> str:
    writer = rec.new_session(info)
    for i in range(n_cycles):
        writer.append(ar_cycle(i, 10 + i, 5, 6 + i % 3))
    writer.finish("complete", "test")
    return info.id


def test_ar_baseline_is_an_ar_session_on_the_same_prompt(tmp_path):
    prompt = [4, 5, 6, 7]
    with Recording(tmp_path / "r.db", create=True) as rec:
        goose = record_session(rec, dataclasses.replace(session_info("goose", prompt), id="goose1"), 3)
        assert RecordingSource(rec, goose).ar_baseline() == (None, "", None)
        record_session(rec, dataclasses.replace(session_info("ar", prompt), id="short"), 5)  # under 8 tokens
        record_session(rec, dataclasses.replace(session_info("ar", [9, 9]), id="other"), 12)  # another prompt
        assert RecordingSource(rec, goose).ar_baseline() == (None, "", None)
        record_session(rec, dataclasses.replace(session_info("ar", prompt), id="ar1"), 9)
        tps, note, forward = RecordingSource(rec, goose).ar_baseline()
        assert tps > 0 and note == "AR session ar1 on the same prompt (9 tokens)"
        assert forward == 8.0  # its median forward (the load it ran under): every test cycle's forward took 8 ms
        tps, note, _ = RecordingSource(rec, "short").ar_baseline()
        assert tps > 0 and note == "this session is AR"
