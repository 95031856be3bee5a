"""Bad command-line values, as a hostile tester types them, through the installed entry point's ``main``.

Every case must end in one line on stderr (argparse's usage line may precede it), a non-zero exit, no traceback,
and no file created. Each is refused before a model is loaded, so the sweep takes seconds.
"""

from __future__ import annotations

import pytest

from specviz_app.cli import main

BAD_NUMBERS = ["-1", "0x", "nan", "inf", "-inf", "1e999", "", "  ", "9" * 40, "1.5"]


def _record(*argv: str) -> list[str]:
    return ["record", "--prompt", "hi", "--quiet", *argv]


CASES: list[tuple[str, list[str]]] = [
    # record: every numeric option with every kind of bad number
    *[(f"record --max-new-tokens {v!r}", _record("--method", "ar", "--max-new-tokens", v)) for v in BAD_NUMBERS],
    *[(f"record --budget {v!r}", _record("--method", "tr", "--budget", v)) for v in BAD_NUMBERS],
    *[(f"record --seed {v!r}", _record("--method", "ar", "--seed", v)) for v in BAD_NUMBERS],
    *[(f"record --samples {v!r}", _record("--method", "ar", "--samples", v)) for v in BAD_NUMBERS],
    *[(f"record --temperature {v!r}", _record("--method", "ar", "--temperature", v))
      for v in ["-1", "nan", "inf", "-inf", "1e999", "", "x"]],
    # record: parameters
    ("record --param no equals", _record("--method", "tr", "--param", "budget")),
    ("record --fork-anyway without --fork", _record("--method", "ar", "--fork-anyway")),
    ("record --param empty key", _record("--method", "tr", "--param", "=3")),
    ("record --param unknown", _record("--method", "tr", "--param", "depth=3")),
    ("record --param wrong type", _record("--method", "tr", "--param", "k=many")),
    ("record --param nan", _record("--method", "talon", "--param", "mu=nan")),
    ("record --param inf", _record("--method", "talon", "--param", "mu=inf")),
    ("record --param negative", _record("--method", "tr", "--param", "budget=-5")),
    ("record --param huge", _record("--method", "tr", "--param", "budget=100000000")),
    ("record --param bool", _record("--method", "goose", "--param", "bigram=perhaps")),
    # record: names and files
    ("record --method unknown", _record("--method", "warp")),
    ("record --method empty", _record("--method", "")),
    ("record --model missing", _record("--method", "ar", "--model", "/no/such/model")),
    ("record --model a file", _record("--method", "ar", "--model", "/etc/hostname")),
    ("record --draft-model missing", _record("--method", "draft_tree", "--draft-model", "/no/such/model")),
    ("record draft_tree without draft", _record("--method", "draft_tree")),
    ("record --device unknown", _record("--method", "ar", "--device", "tpu")),
    ("record --device meta", _record("--method", "ar", "--device", "meta")),
    ("record --device cuda:7", _record("--method", "ar", "--device", "cuda:7")),
    ("record --device mps", _record("--method", "ar", "--device", "mps")),
    ("record --dtype unknown", _record("--method", "ar", "--dtype", "float13")),
    ("record --db folder", ["record", "--method", "ar", "--prompt", "hi", "--db", "{tmp}"]),
    ("record --db missing folder", ["record", "--method", "ar", "--prompt", "hi", "--db", "{tmp}/no/x.db"]),
    ("record --prompt empty", ["record", "--method", "ar", "--prompt", "", "--db", "{tmp}/x.db"]),
    # bytes that are not UTF-8 reach Python as lone surrogates (os.fsdecode of the shell's $'\xff\xfe bad')
    ("record --prompt not UTF-8", ["record", "--method", "ar", "--prompt", "\udcff\udcfe bad", "--db", "{tmp}/x.db"]),
    ("record --prompt-file missing", ["record", "--method", "ar", "--prompt-file", "{tmp}/none.txt"]),
    ("record --prompt-file folder", ["record", "--method", "ar", "--prompt-file", "{tmp}"]),
    ("record --prompt-file binary", ["record", "--method", "ar", "--prompt-file", "{tmp}/binary.txt"]),
    ("record no prompt", ["record", "--method", "ar"]),
    # sessions / export
    ("sessions --db missing", ["sessions", "--db", "{tmp}/none.db"]),
    ("sessions --db folder", ["sessions", "--db", "{tmp}"]),
    ("sessions --db text file", ["sessions", "--db", "{tmp}/text.db"]),
    ("sessions --db empty file", ["sessions", "--db", "{tmp}/empty.db"]),
    ("export --db missing", ["export", "--db", "{tmp}/none.db"]),
    ("export --db text file", ["export", "--db", "{tmp}/text.db"]),
    ("export --format csv", ["export", "--db", "{tmp}/none.db", "--format", "csv"]),
    ("export --out missing folder", ["export", "--db", "{tmp}/text.db", "--out", "{tmp}/no/x.jsonl"]),
    # bench
    *[(f"bench --repeats {v!r}", ["bench", "--repeats", v, "--out", "{tmp}/b.json"]) for v in ["0", "-1", "x"]],
    *[(f"bench --threads {v!r}", ["bench", "--threads", v, "--out", "{tmp}/b.json"]) for v in ["0", "-3", "x"]],
    ("bench --methods unknown", ["bench", "--methods", "warp", "--out", "{tmp}/b.json"]),
    ("bench --methods empty", ["bench", "--methods", "", "--out", "{tmp}/b.json"]),
    ("bench --suite unknown", ["bench", "--suite", "nosuch", "--out", "{tmp}/b.json"]),
    ("bench no --out", ["bench", "--methods", "ar"]),
    ("bench --report missing", ["bench", "--report", "{tmp}/none.json"]),
    ("bench --report not json", ["bench", "--report", "{tmp}/text.db"]),
    ("bench --max-new-tokens 0", ["bench", "--max-new-tokens", "0", "--out", "{tmp}/b.json"]),
    ("bench --temperature nan", ["bench", "--temperature", "nan", "--out", "{tmp}/b.json"]),
    # optimize-tree
    ("optimize-tree --keep 0", ["optimize-tree", "--method", "stand", "--prompt-file", "{tmp}/p.txt",
                                "--out", "{tmp}/t.json", "--keep", "0"]),
    ("optimize-tree --large -1", ["optimize-tree", "--method", "stand", "--prompt-file", "{tmp}/p.txt",
                                  "--out", "{tmp}/t.json", "--large", "-1"]),
    ("optimize-tree --out missing folder", ["optimize-tree", "--method", "stand", "--prompt-file", "{tmp}/p.txt",
                                            "--out", "{tmp}/no/t.json"]),
    ("optimize-tree --prompt-file missing", ["optimize-tree", "--method", "stand", "--prompt-file",
                                             "{tmp}/none.txt", "--out", "{tmp}/t.json"]),
    ("optimize-tree --method tr", ["optimize-tree", "--method", "tr", "--prompt-file", "{tmp}/p.txt",
                                   "--out", "{tmp}/t.json"]),
    ("optimize-tree --keep above --large", ["optimize-tree", "--prompt-file", "{tmp}/p.txt", "--out", "{tmp}/t.json",
                                            "--large", "50", "--keep", "51"]),
    ("optimize-tree --large huge", ["optimize-tree", "--prompt-file", "{tmp}/p.txt", "--out", "{tmp}/t.json",
                                    "--large", "1000000"]),
    # --minutes, on every long command
    *[(f"record --minutes {v!r}", _record("--method", "ar", "--minutes", v, "--db", "{tmp}/x.db")) for v in ["0", "-1", "nan", "inf", "x"]],
    *[(f"bench --minutes {v!r}", ["bench", "--minutes", v, "--out", "{tmp}/b.json"]) for v in ["0", "-1", "inf"]],
    *[(f"reproduce --minutes {v!r}", ["reproduce", "--paper", "goose", "--minutes", v]) for v in ["0", "1e9"]],
    ("optimize-tree --minutes 0", ["optimize-tree", "--prompt-file", "{tmp}/p.txt", "--out", "{tmp}/t.json",
                                   "--minutes", "0"]),
    # screenshot / gui (refused before Qt starts)
    ("screenshot --size 10x10", ["screenshot", "--db", "{tmp}/none.db", "--size", "10x10", "--out", "{tmp}/s.png"]),
    ("screenshot --size junk", ["screenshot", "--demo", "--size", "big", "--out", "{tmp}/s.png"]),
    ("screenshot --size huge", ["screenshot", "--demo", "--size", "99999x99999", "--out", "{tmp}/s.png"]),
    ("screenshot --out missing folder", ["screenshot", "--demo", "--out", "{tmp}/no/s.png"]),
    ("screenshot --out .gif", ["screenshot", "--demo", "--out", "{tmp}/s.gif"]),
    ("screenshot --db missing", ["screenshot", "--db", "{tmp}/none.db", "--out", "{tmp}/s.png"]),
    ("screenshot --db text file", ["screenshot", "--db", "{tmp}/text.db", "--out", "{tmp}/s.png"]),
    ("screenshot --live 0", ["screenshot", "--db", "{tmp}/x.db", "--live", "0", "--out", "{tmp}/s.png"]),
    ("screenshot --live unknown method", ["screenshot", "--db", "{tmp}/x.db", "--live", "2", "--method", "warp",
                                          "--out", "{tmp}/s.png"]),
    ("screenshot no --out", ["screenshot", "--demo"]),
    ("gui --db missing", ["gui", "--db", "{tmp}/none.db"]),
    ("gui --db text file", ["gui", "--db", "{tmp}/text.db"]),
    ("gui --db folder", ["gui", "--db", "{tmp}"]),
    # audit / compare / race
    ("audit --db missing", ["audit", "--db", "{tmp}/none.db"]),
    ("audit --db text file", ["audit", "--db", "{tmp}/text.db"]),
    ("compare one session", ["compare", "--db", "{tmp}/text.db", "abc"]),
    ("compare --db missing", ["compare", "--db", "{tmp}/none.db", "a", "b"]),
    ("race one session", ["race", "--db", "{tmp}/none.db", "a"]),
    ("race five sessions", ["race", "--db", "{tmp}/none.db", "a", "b", "c", "d", "e"]),
    ("race --out .png", ["race", "--db", "{tmp}/none.db", "a", "b", "--out", "{tmp}/r.png"]),
    ("race --fps 0", ["race", "--db", "{tmp}/none.db", "a", "b", "--fps", "0"]),
    ("race --slowdown nan", ["race", "--db", "{tmp}/none.db", "a", "b", "--slowdown", "nan"]),
    ("race --size 1x1", ["race", "--db", "{tmp}/none.db", "a", "b", "--size", "1x1", "--out", "{tmp}/r.gif"]),
    ("race --db missing", ["race", "--db", "{tmp}/none.db", "a", "b", "--out", "{tmp}/r.gif"]),
    # no such command
    ("unknown command", ["frobnicate"]),
]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00bad")
    (tmp_path / "text.db").write_text("not a database\n" * 50)
    (tmp_path / "empty.db").write_bytes(b"")
    (tmp_path / "p.txt").write_text("a prompt\n")
    return tmp_path


@pytest.mark.parametrize("name,argv", CASES, ids=[c[0] for c in CASES])
def test_bad_value_is_one_line(capsys, files, monkeypatch, name, argv):
    monkeypatch.setenv("SPECVIZ_DATA", str(files / "data"))
    argv = [a.replace("{tmp}", str(files)) for a in argv]
    before = sorted(p.name for p in files.iterdir())
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    lines = [x for x in err.strip().splitlines() if x.strip()]
    assert code not in (0, None), f"{name}: accepted ({err!r})"
    assert "Traceback" not in err and lines, f"{name}: {err!r}"
    message = [x for x in lines if not x.startswith(("usage:", " "))]
    assert len(message) == 1 and message[0].startswith(("specviz", "error")), f"{name}: {err!r}"
    assert "unexpected" not in message[0], f"{name}: a bug, not a refusal: {message[0]}"
    created = sorted(p.name for p in files.iterdir() if p.name != "data")
    assert created == [b for b in before if b != "data"], f"{name}: left files behind"
