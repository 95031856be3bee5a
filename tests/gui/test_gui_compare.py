"""The Compare view (issue 20): chosen from the window, checked against the sessions' own cycles; clicking a token
opens its cycle; ``specviz compare --out`` writes it as a PNG."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QImage

from specviz_app.cli import main as app_main
from specviz_app.windows.compare.view import click_position
from specviz_core.cli.commands import main
from specviz_core.recording.store import Recording

PROMPT = "one two three one two three one two"
pytestmark = pytest.mark.qt_log_ignore("does not support raise", "does not support grabbing the keyboard")


def record(tiny_dir, db, *extra) -> str:
    assert main(["record", "--model", str(tiny_dir), "--max-new-tokens", "30", "--db", str(db), "--quiet",
                 *extra]) == 0
    with Recording(db) as rec:
        return rec.session().id


@pytest.fixture
def recorded(window, tiny_dir):
    db = window.db_path
    ar = record(tiny_dir, db, "--method", "ar", "--prompt", PROMPT)
    tr = record(tiny_dir, db, "--method", "tr", "--param", "budget=8", "--prompt", PROMPT)
    fork = record(tiny_dir, db, "--fork", f"{tr}:4", "--method", "pld")
    return db, ar, tr, fork


def test_compare_from_the_window_matches_the_sessions_and_opens_cycles(window, qtbot, recorded):
    db, ar, tr, fork = recorded
    assert window.controller.open_session(str(db), fork)
    dialog = window.whatif.compare_dialog()
    ticked = [window.whatif.compare_list.item(i).text().split()[0] for i in range(window.whatif.compare_list.count())
              if window.whatif.compare_list.item(i).checkState().value == 2]
    assert sorted(ticked) == sorted([ar, tr, fork])  # the fork shown, its parent, AR on the same prompt
    dialog.accept()
    cw = window.whatif.compare_windows[-1]
    view = cw.view
    assert [s.info.id for s in view.comparison.sessions] == [ar, tr, fork]  # AR first: the baseline
    with Recording(db) as rec:
        infos = [rec.session(i) for i in (ar, tr, fork)]
        cycles = {i: list(rec.cycles(i)) for i in (ar, tr, fork)}
    for row, info in enumerate(infos):
        assert view.table.item(row, 2).text() == str(info.n_tokens)
        assert view.table.item(row, 6).text() == f"{info.tokens_per_s / infos[0].tokens_per_s:.2f}×"
    assert view.headline.text().startswith(f"Identical outputs ({infos[0].n_tokens} tokens)")
    assert f"{fork} is a fork of {tr}@4" in view.headline.text()
    # The fork's own part starts where the parent's cycle 4 started.
    assert view.comparison.sessions[2].fork_position == sum(len(c.committed_ids) for c in cycles[tr][:4])
    # Clicking a token of the fork opens the cycle that committed it, in the main window.
    pos = len(infos[2].output_ids) - 1
    want = next(c.index for c in reversed(cycles[fork])
                if sum(len(x.committed_ids) for x in cycles[fork][:c.index]) <= pos)
    click_position(view, 2, pos)
    assert window.model.source.info.id == fork and window.model.index == want
    # ... and offers the cycle that committed that position in every session; each button opens its own.
    def committing(sid: str, position: int) -> int:
        return next(c.index for c in reversed(cycles[sid])
                    if sum(len(x.committed_ids) for x in cycles[sid][:c.index]) <= position)

    buttons = view.at_position.buttons
    assert view.at_position.label.text() == f"Position {pos}:" and len(buttons) == 3
    for b, sid in zip(buttons, (ar, tr, fork)):
        assert f"cycle {committing(sid, pos)} " in b.text()
        b.click()
        assert window.model.source.info.id == sid and window.model.index == committing(sid, pos)
    click_position(view, 1, 0)
    assert window.model.source.info.id == tr and window.model.index == 0
    cw.close()


def test_sampled_sessions_show_their_first_difference(window, tiny_dir):
    db = window.db_path
    a = record(tiny_dir, db, "--method", "tr", "--prompt", PROMPT, "--temperature", "1", "--seed", "1")
    b = record(tiny_dir, db, "--method", "tr", "--prompt", PROMPT, "--temperature", "1", "--seed", "2")
    with Recording(db) as rec:
        oa, ob = rec.session(a).output_ids, rec.session(b).output_ids
    first = next(i for i, (x, y) in enumerate(zip(oa, ob)) if x != y)
    cw = window.whatif.compare(db, [a, b])
    assert cw.view.headline.text().startswith(f"Outputs first differ at position {first} (sampled sessions).")
    cw.close()


def test_compare_out_writes_the_view_as_a_png(recorded, tmp_path, capsys):
    db, ar, tr, fork = recorded
    out = tmp_path / "compare.png"
    assert app_main(["compare", "--db", str(db), ar, tr, fork, "--out", str(out)]) == 0
    img = QImage(str(out))
    assert (img.width(), img.height()) == (1100, 700)
    big = tmp_path / "big.png"
    assert app_main(["compare", "--db", str(db), ar, tr, "--out", str(big), "--presentation", "--size",
                     "1920x1080"]) == 0
    assert QImage(str(big)).width() == 1920
    capsys.readouterr()
    assert app_main(["compare", "--db", str(db), ar, tr, "--out", str(tmp_path / "x.gif")]) == 2
    assert "--out must end in .png" in capsys.readouterr().err
