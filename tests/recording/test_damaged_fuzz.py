"""Issue 15.4: a recording with bytes flipped or cut off at any offset never gives a traceback. Each command gives
valid output or one clear line, the viewer steps through what it can read, and the damaged file is left as it was.

Seeded, a few hundred cases on one small recording (built once), in-process: a few seconds.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import pytest
from test_damaged import clean, good  # noqa: F401 - the recording, built once per module

from specviz_core.cli import commands
from specviz_core.cli.commands import main
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import RecordingSource

SEED = 15
N_FLIPS = 200
N_CUTS = 100


def cases(data: bytes) -> list[tuple[str, bytes]]:
    """Byte flips (one to three bytes, XORed with a random non-zero byte) and truncations, at seeded offsets; a few
    of each in the 100-byte header, where SQLite keeps its page size, journal mode and counts."""
    rng = random.Random(SEED)
    out = []
    for k in range(N_FLIPS):
        b = bytearray(data)
        offsets = [rng.randrange(100) if k < 10 else rng.randrange(len(b)) for _ in range(rng.randint(1, 3))]
        for o in offsets:
            b[o] ^= rng.randrange(1, 256)
        out.append((f"flip {offsets}", bytes(b)))
    page = int.from_bytes(data[16:18], "big")
    cuts = sorted({0, 1, 50, 100, page, page + 1, len(data) - 1} | {rng.randrange(len(data)) for _ in range(N_CUTS)})
    out += [(f"cut at {c}", data[:c]) for c in cuts[:N_CUTS]]
    return out


def check_export(path: Path) -> None:
    """A JSON-lines export as docs/record-format.md says a reader may check it."""
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    session, cycles = lines[0], lines[1:]
    assert session["type"] == "session" and isinstance(session["output_ids"], list)
    indices = [c["index"] for c in cycles]
    assert indices == sorted(set(indices)) and all(0 <= i < session["n_cycles"] for i in indices)
    for c in cycles:
        assert c["type"] == "cycle" and c["session"] == session["id"]
        parent = {n["id"]: n["parent"] for n in c["nodes"]}
        depth = {n["id"]: n["depth"] for n in c["nodes"]}
        order, mask = c["verify_order"], c["mask"]
        row = {v: i for i, v in enumerate(order)}
        assert order[0] == 0 and len(row) == len(order) == len(mask) == len(c["positions"])
        ancestors: dict[int, set[int]] = {}
        for i, v in enumerate(order):
            p = parent[v]
            assert i == 0 or row[p] < i, "a node before its parent"
            ancestors[v] = (ancestors[p] if i else set()) | {v}
            # Row i attends to exactly its ancestors and itself.
            assert mask[i].count("1") == len(ancestors[v]) and all(mask[i][row[a]] == "1" for a in ancestors[v])
            assert c["positions"][i] == c["cache_len"] + depth[v]
        assert c["kv_keep"][0] == 0 and len(c["kv_keep"]) == len(c["accepted_path"]) + 1


def run_viewer(path: Path) -> None:
    """What the window does with a recording: open each session, step through every cycle."""
    try:
        rec = Recording(path)
    except SpecVizError:
        return
    with rec:
        try:
            ids = [s.id for s in rec.sessions(damaged=[])]
        except SpecVizError:
            return
        for sid in ids:
            try:
                source = RecordingSource(rec, sid)
            except SpecVizError:
                continue
            model = SessionModel()
            model.open(source)
            for i in range(model.n_cycles):
                model.set_cycle(i)
                assert model.index == i
                assert (model.record is None) == bool(model.damage_text)
                assert model.record is None or model.record.index == i


def test_flipped_and_truncated_recordings(good, tmp_path, capsys, monkeypatch):  # noqa: F811
    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path / "data"))  # where a crash log would go
    # main() builds the whole command line's parser for each command: 1,200 commands here, where building it took
    # more than half the test's time. Built once (after SPECVIZ_DATA is set: its defaults read it), the same parser
    # reads every command; each still runs through main() and its handler, as from a shell.
    parser = commands.build_parser()
    monkeypatch.setattr(commands, "build_parser", lambda extra=None: parser)  # main(argv) gives no extra commands
    folder = tmp_path / "in"
    folder.mkdir()
    path, out = folder / "r.db", tmp_path / "out.jsonl"
    data = good[0].read_bytes()
    seen = {0: 0, 1: 0, 2: 0}
    clean_line = clean(good)
    for name, damaged in cases(data):
        path.write_bytes(damaged)
        before = hashlib.sha256(damaged).hexdigest()
        for argv in (["sessions"], ["export", "--out", str(out)], ["export", "--session", "trsession", "--out",
                                                                   str(out)], ["check"]):
            code = main([argv[0], "--db", str(path), *argv[1:]])
            std = capsys.readouterr()
            what = f"{name}: specviz {argv[0]} -> {code}\n{std.err}"
            assert code in (0, 1, 2) and "Traceback" not in std.err + std.out and "unexpected" not in std.err, what
            errors = [x for x in std.err.splitlines() if x.startswith("specviz: error:")]
            assert len(errors) == (code == 2) and all(x.startswith("specviz: skipped cycle ")
                                                       for x in std.err.splitlines() if x not in errors), what
            if argv[0] == "export":
                if code == 0:
                    check_export(out)
                    out.unlink()
                assert not out.exists() and not list(tmp_path.glob(".out.jsonl.*")), what
            elif argv[0] == "check":
                assert code != 0 or std.out.rstrip().endswith(clean_line), what
            seen[code] += 1
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before, f"{name}: the damaged file was changed"
        assert sorted(p.name for p in folder.iterdir()) == ["r.db"], f"{name}: files left beside it"
        shutil.copy(path, tmp_path / "viewer.db")  # the window opens files for writing: a copy
        run_viewer(tmp_path / "viewer.db")
        for extra in ("", "-wal", "-shm"):
            Path(f"{tmp_path / 'viewer.db'}{extra}").unlink(missing_ok=True)
    assert not (tmp_path / "data" / "logs").exists(), "an unexpected error wrote a crash log"
    assert seen[1] > 50 and seen[2] > 20, seen  # the cases do damage, and are told apart from usage errors


@pytest.mark.parametrize("offset", [18, 19])
def test_a_flip_in_the_journal_mode_bytes_changes_nothing(good, tmp_path, capsys, offset):  # noqa: F811
    """Bytes 18-19 say WAL (2); flipped to 1 (rollback journal), opening the file for writing would switch it
    back, rewriting the header: reading commands open it read-only."""
    path = tmp_path / "r.db"
    data = bytearray(good[0].read_bytes())
    data[offset] ^= 0x03
    path.write_bytes(bytes(data))
    for argv in (["sessions"], ["export"], ["check"]):
        main([argv[0], "--db", str(path)])
    capsys.readouterr()
    assert path.read_bytes() == bytes(data)
