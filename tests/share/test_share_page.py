"""The shared page's data against the recording it comes from: every drawn box is a node of the record (or a gated
marker, or the bonus), the mask is the recorded one, the output is the committed tokens, and the headline speed-up
is the two sessions' own arithmetic (tokens over the sum of their cycles' timings)."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest

from specviz_app.demo import copy_demo
from specviz_core.analysis.stop_cause import stop_cause
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.runtime.vocab import load_token_text
from specviz_core.share.page import render, share
from specviz_core.share.payload import page_data
from specviz_core.viewer.tree_layout import BONUS, is_marker


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The shipped demo recording (a goose session and the AR session of its prompt), with its tokenizer."""
    return copy_demo(tmp_path_factory.mktemp("share"))


def rate(rec: Recording, session_id: str) -> float:
    """Tokens/s from the stored cycles alone: committed tokens over the sum of every cycle's recorded stages."""
    cycles = list(rec.cycles(session_id))
    return 1000.0 * sum(len(c.committed_ids) for c in cycles) / sum(sum(c.timings_ms.values()) for c in cycles)


def test_every_cycle_is_drawn_as_recorded(demo):
    with Recording(demo, read_only=True) as rec:
        goose = next(s for s in rec.sessions() if s.method == "goose")
        ar = next(s for s in rec.sessions() if s.method == "ar")
        data = page_data(rec, goose.id)
        records = list(rec.cycles(goose.id))
        text = load_token_text(goose.tokenizer)
        assert len(data["cycles"]) == len(records) == goose.n_cycles
        tokens = data["tokens"]
        for c, r in zip(data["cycles"], records):
            boxes = {b["id"]: b for b in c["tree"]["boxes"]}
            drawn = {n.id for n in r.nodes if not n.gated}
            assert {i for i in boxes if i >= 0} == drawn  # every node the target saw, no gated one
            for n in r.nodes:
                if not n.gated:
                    b = boxes[n.id]
                    assert tokens[b["token"]] == text.piece(n.token) and b["source"] == n.source
                    assert (b["kind"] == "accepted") == (n.id in {0, *r.accepted_path})
            gated = sum(n.gated for n in r.nodes)
            markers = [b for i, b in boxes.items() if is_marker(i)]
            assert sum(int(re.match(r"\+(\d+) gated", b["label"]).group(1)) for b in markers) == gated
            assert tokens[boxes[BONUS]["token"]] == text.piece(r.bonus_token)
            n = len(r.verify_order)
            bits = np.unpackbits(np.frombuffer(base64.b64decode(c["mask"]), dtype=np.uint8), count=n * n)
            assert np.array_equal(bits.reshape(n, n).astype(bool), r.mask)
            assert [row["pos"] for row in c["rows"]] == list(r.positions)
            assert c["kv_keep"] == list(r.kv_keep) and c["cache_len"] == r.cache_len
            assert [tokens[t] for t, _ in c["committed"]] == [text.piece(t) for t in r.committed_ids]
            kinds = [r.node_by_id[i].source for i in r.accepted_path] + ["bonus"]
            assert [k for _, k in c["committed"]] == (kinds if r.mode != "ar" else ["ar"])[:len(r.committed_ids)]
            assert c["why"] == stop_cause(r).sentence(lambda t: repr(text.label(t)))
        want = rate(rec, goose.id) / rate(rec, ar.id)
    assert data["headline"]["value"] == pytest.approx(want, rel=1e-3)
    assert data["headline"]["short"] == f"{want:.2f}x AR" and ar.id in data["headline"]["text"]
    assert data["charts"]["tokens"] == [len(r.committed_ids) for r in records]
    # each cycle's own rate; none for a token from the prefill, which ran no forward
    want_rates = [None if r.state.get("from_prefill") else
                  round(1000.0 * len(r.committed_ids) / sum(r.timings_ms.values()), 2) for r in records]
    assert data["charts"]["rate"] == want_rates


def test_the_page_is_one_file_with_its_data_and_no_network(demo, tmp_path):
    page = share(demo, tmp_path / "p.html")
    html = page.path.read_text(encoding="utf-8")
    assert page.size_bytes == len(html.encode("utf-8")) and page.n_cycles > 0
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # nothing fetched
    data = json.loads(re.search(r'<script type="application/json" id="specviz-data">(.*?)</script>', html,
                                re.S).group(1))
    assert data["session"]["id"] == page.session_id and len(data["cycles"]) == page.n_cycles
    assert "{data}" not in html and "{js}" not in html


def test_a_token_that_closes_a_script_cannot_end_the_data_early():
    data = {"session": {"method": "goose", "model": "m", "id": "x"}, "tokens": ["</script><b>", "{js}"],
            "cycles": []}
    html = render(data)
    body = re.search(r'<script type="application/json" id="specviz-data">(.*?)</script>', html, re.S).group(1)
    assert json.loads(body)["tokens"] == ["</script><b>", "{js}"]


def test_the_command_line_writes_the_page_and_says_what_is_wrong(demo, tmp_path, capsys):
    from specviz_core.cli.commands import main

    out = tmp_path / "s.html"
    assert main(["share", "--db", str(demo), "--out", str(out)]) == 0
    assert out.is_file() and f"wrote {out}" in capsys.readouterr().out
    assert main(["share", "--db", str(tmp_path / "none.db"), "--out", str(out)]) == 2
    assert "no recording at" in capsys.readouterr().err
    assert main(["share", "--db", str(demo), "--session", "nope", "--out", str(out)]) == 2
    assert "no session 'nope'" in capsys.readouterr().err
    assert main(["share", "--db", str(demo), "--out", str(demo)]) == 2  # never over the recording it reads
    with pytest.raises(SpecVizError, match="is a folder"):
        share(demo, tmp_path)


def test_the_window_shares_the_session_it_shows(window, demo, tmp_path):
    w = window
    with Recording(demo, read_only=True) as rec:
        goose = next(s for s in rec.sessions() if s.method == "goose")
    assert w.controller.open_session(str(demo), goose.id)
    page = w.export.share(tmp_path / "shown.html")
    assert page.session_id == goose.id and page.n_cycles == goose.n_cycles and page.path.is_file()
    assert "Share as web page" in {a.text().replace("&", "") .rstrip("…") for a in w.actions()}


def test_a_damaged_cycle_is_left_out_and_said(demo, tmp_path):
    import shutil
    import sqlite3

    db = tmp_path / "damaged.db"
    shutil.copy(demo, db)
    with Recording(db, read_only=True) as rec:
        goose = next(s for s in rec.sessions() if s.method == "goose")
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE cycles SET nodes = 'not json' WHERE session_id = ? AND idx = 3", [goose.id])
    conn.close()
    page = share(db, tmp_path / "d.html", goose.id)
    data = json.loads(re.search(r'<script type="application/json" id="specviz-data">(.*?)</script>',
                                page.path.read_text(encoding="utf-8"), re.S).group(1))
    assert data["session"]["damaged"] == [3] and 3 not in [c["index"] for c in data["cycles"]]
    assert page.n_cycles == goose.n_cycles - 1
