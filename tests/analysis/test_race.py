"""The race: lanes follow the recorded timings; the GIF has the frames and size asked for."""

from __future__ import annotations

import dataclasses

import pytest

from specviz_core.analysis.compare import Compared
from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.analysis.race import frame_times, make_race
from specviz_core.records import SessionInfo


def session(sid: str, prefill_ms: float, cycles: list[tuple[float, int, int]]) -> Compared:
    """cycles: (ms, tokens committed, of which accepted draft tokens)."""
    summaries, tok = [], 0
    for i, (ms, n, acc) in enumerate(cycles):
        ids = tuple(range(tok, tok + n))
        tok += n
        kinds = ("spine",) * acc + ("bonus",) * (n - acc)
        summaries.append(CycleSummary(index=i, mode="tree", n_verified=acc + 2, n_accepted=acc, committed_ids=ids,
                                      committed_kinds=kinds, cycle_ms=ms, spine_broke_at=None,
                                      spine_continued=False, frontier=1))
    info = SessionInfo(id=sid, model="m", tokenizer="", method="x", params={}, prompt_ids=(1,), prompt_text="p",
                       temperature=0.0, seed=0, device="cpu", dtype="float32", prefill_ms=prefill_ms,
                       output_ids=tuple(range(tok)), n_tokens=tok, n_forward=len(cycles),
                       decode_ms=sum(c[0] for c in cycles))
    return Compared(info, tuple(summaries))


def test_lanes_follow_the_recorded_clock():
    a = session("a", 100.0, [(50.0, 1, 0), (50.0, 1, 0), (50.0, 1, 0)])  # tokens land at 150, 200, 250 ms
    b = session("b", 100.0, [(80.0, 2, 1), (70.0, 1, 0)])  # at 180 (two), 250 (one)
    race = make_race([a, b])
    assert race.duration_ms == 250.0
    assert [len(s.tokens) for s in race.at(149.9)] == [0, 0]
    assert [len(s.tokens) for s in race.at(150.0)] == [1, 0]
    st = race.at(180.0)
    assert [len(s.tokens) for s in st] == [1, 2] and st[1].last_cycle == 2 and st[1].kinds == ("spine", "bonus")
    assert st[1].tokens_per_s == pytest.approx(1000 * 2 / 80)  # decoding time: the prefill's 100 ms excluded
    assert race.speedups(180.0)[1] == pytest.approx((2 / 80) / (1 / 80))
    end = race.at(10_000.0)
    assert all(s.finished for s in end) and [s.finish_ms for s in end] == [250.0, 250.0]
    assert end[0].tokens_per_s == pytest.approx(1000 * 3 / 150)
    # At the finish a lane's tokens/s is its session's own (what sessions and compare print).
    assert [s.tokens_per_s for s in end] == pytest.approx([a.info.tokens_per_s, b.info.tokens_per_s])
    # Without the prefill the clocks start at the first cycle.
    assert make_race([a, b], include_prefill=False).duration_ms == 150.0


def test_frame_times_pace_the_race():
    a = session("a", 100.0, [(50.0, 1, 0), (50.0, 1, 0), (50.0, 1, 0)])
    b = session("b", 100.0, [(80.0, 2, 1), (70.0, 1, 0)])
    race = make_race([a, b])
    # 10 frames per second of viewing, twice slower than recorded: a frame every 50 ms of race time.
    times = frame_times(race, fps=10, slowdown=2, hold_ms=1000)
    assert times[:6] == [0.0, 50.0, 100.0, 150.0, 200.0, 250.0]
    assert times[6:] == [250.0] * 10  # one second of the final state
    # Real time at 4 fps: 0, 250 and the hold.
    assert frame_times(race, fps=4, slowdown=1, hold_ms=500) == [0.0, 250.0, 250.0, 250.0]
    # A duration that is not a whole number of steps still ends on the finish.
    assert frame_times(race, fps=3, slowdown=1, hold_ms=0) == [0.0, 250.0]


def test_race_needs_two_to_four_lanes():
    a = session("a", 1.0, [(1.0, 1, 0)])
    with pytest.raises(ValueError):
        make_race([a])
    with pytest.raises(ValueError):
        make_race([a] * 5)


def test_race_gif_has_the_frames_and_size(tiny_dir, tmp_path, qapp, capsys):
    from PIL import Image

    from specviz_app.cli import main
    from specviz_core.recording.store import Recording

    db = tmp_path / "r.db"
    for method in ("ar", "tr"):
        assert main(["record", "--method", method, "--model", str(tiny_dir), "--prompt", "one two three one two",
                     "--max-new-tokens", "12", "--db", str(db), "--quiet"]) == 0
    with Recording(db) as rec:
        infos = rec.sessions()
        records = {s.id: list(rec.cycles(s.id)) for s in infos}
    # The race's length from the records themselves: prefill, then every step of every cycle.
    duration = max(s.prefill_ms + sum(sum(c.timings_ms.values()) for c in records[s.id]) for s in infos)
    fps, slowdown = 10, 4.0
    step = 1000 / fps / slowdown
    n_frames = int(duration // step) + 1 + (1 if (int(duration // step)) * step < duration else 0) + 20  # 2 s hold
    out = tmp_path / "race.gif"
    capsys.readouterr()
    assert main(["race", "--db", str(db), *[s.id for s in infos], "--out", str(out), "--fps", str(fps),
                 "--slowdown", str(slowdown), "--size", "640x360"]) == 0
    said = capsys.readouterr().out
    with Image.open(out) as im:
        assert im.size == (640, 360)
        total = 0
        for k in range(im.n_frames):  # identical neighbours are one frame, their durations added up
            im.seek(k)
            total += im.info["duration"]
        written = im.n_frames
    assert total == n_frames * 100
    assert f"({written} frames," in said, f"the command reports the frames the file holds: {said!r}"


def test_race_of_different_prompts_is_refused(tiny_dir, tmp_path, capsys):
    from specviz_app.cli import main
    from specviz_core.recording.store import Recording

    db = tmp_path / "r.db"
    for prompt in ("one two", "three four"):
        assert main(["record", "--method", "ar", "--model", str(tiny_dir), "--prompt", prompt,
                     "--max-new-tokens", "3", "--db", str(db), "--quiet"]) == 0
    with Recording(db) as rec:
        ids = [s.id for s in rec.sessions()]
    assert main(["race", "--db", str(db), *ids, "--out", str(tmp_path / "x.gif")]) == 2
    assert "different prompts" in capsys.readouterr().err
    assert not (tmp_path / "x.gif").exists()


def test_lane_labels_name_method_and_budget():
    s = session("abcdef123456", 1.0, [(1.0, 1, 0)])
    s2 = dataclasses.replace(s.info, method="goose", params={"budget": 20, "ema": 0.3})
    assert Compared(s2, s.summaries).label == "goose (budget=20) abcdef"


def test_a_lane_behind_plain_decoding_says_why(tmp_path, monkeypatch):
    """A speculative lane that finishes after the AR lane says why, from its own timings against AR's mean step
    (computed here by hand); a lane ahead says nothing."""
    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))  # no stored cost curve: the arithmetic alone
    ar = session("ar0001", 10.0, [(20.0, 1, 0)] * 12)
    slow = session("slow01", 10.0, [(60.0, 2, 1)] * 6)  # 12 tokens in 360 ms against AR's 240
    fast = session("fast01", 10.0, [(30.0, 3, 2)] * 4)
    for s in (ar, slow, fast):
        timed = tuple(dataclasses.replace(c, timings_ms={"draft": 0.1 * c.cycle_ms, "forward": 0.8 * c.cycle_ms,
                                                          "walk": 0.1 * c.cycle_ms}) for c in s.summaries)
        object.__setattr__(s, "summaries", timed)
    ar = dataclasses.replace(ar, info=dataclasses.replace(ar.info, method="ar"))
    race = make_race([ar, slow, fast])
    assert race.notes[0] == "" and race.notes[2] == ""
    # Verify 48 ms against AR's 20 ms step, drafting and bookkeeping 12 ms more, 2 tokens a forward.
    assert race.notes[1] == ("Slower here: its 3-row verify costs 2.4x one ar step, drafting and bookkeeping 0.6x "
                             "more, for 2.00 tokens a forward.")
