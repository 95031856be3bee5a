"""``specviz check``: the command line of :mod:`specviz_core.recording.check`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from specviz_core.cli.options import add_db_arg
from specviz_core.recording.check import FileCheck, check_recording


def add_parser(sub: Any) -> None:
    c = sub.add_parser(
        "check", help="report the integrity of a recording, without changing it",
        description="Check a recording file without changing it: SQLite's own integrity check, then every session "
                    "and every cycle against the record contract (docs/record-format.md). Prints what is damaged, "
                    "by session and cycle. Exit status: 0 clean, 1 damaged (or not a recording), 2 a usage error.")
    add_db_arg(c, "the recording to check")
    c.add_argument("--session", default=None, help="check only this session (default: all)")
    c.add_argument("--quick", action="store_true",
                   help="SQLite's quick check instead of its full integrity check (skips index consistency; faster "
                        "on large files)")
    c.add_argument("--salvage", type=Path, default=None, metavar="OUT",
                   help="write every session and cycle still readable in a damaged file (one cut short, or with bad "
                        "pages) to the new recording OUT, and say what was kept and lost")


def cmd_check(args: argparse.Namespace) -> int:
    if args.salvage is not None:
        return _salvage(args.db, args.salvage)
    report = check_recording(args.db, args.session, args.quick)
    for line in report_lines(report):
        print(line)
    return 0 if report.clean else 1


def _salvage(db: Path, out: Path) -> int:
    from specviz_core.cli.options import check_writable
    from specviz_core.errors import SpecVizError
    from specviz_core.recording.salvage import salvage, write_salvaged

    if out.exists():
        raise SpecVizError(f"{out} exists: --salvage writes a new recording; give another name")
    check_writable(out)
    found = salvage(db)
    lines = write_salvaged(found, out)
    for line in lines:
        print(_safe(line))
    n = sum(1 for _ in found.cycles)
    print(f"salvaged {len(found.sessions)} sessions and {n} cycle rows from {db} ({found.pages} whole pages) into "
          f"{out}" + (f"; {found.unreadable} rows could not be read" if found.unreadable else ""))
    return 0


def _safe(text: str) -> str:
    return text if text.isprintable() else ascii(text)


def report_lines(r: FileCheck) -> list[str]:
    if r.error:
        return [r.error, f"{r.path} is damaged: it cannot be read as a recording"]
    kind = "quick check" if r.quick else "integrity check"
    lines = [f"{r.path}: SQLite {kind}: {'ok' if r.sqlite == ['ok'] else 'FAILED'}"]
    if r.sqlite != ["ok"]:
        lines += [f"  {_safe(x)}" for x in r.sqlite]
    n_cycles = n_damaged = 0
    for s in r.sessions:
        head = f"session {_safe(s.id)}"
        if s.info is None:
            lines.append(f"{head}: damaged: {_safe(s.damaged[0][1])}")
            continue
        head += f" ({_safe(s.info.method)}, {s.info.status})"
        bad = s.damaged_cycles
        n_cycles += s.n_cycles
        n_damaged += len(bad)
        if not s.damaged:
            lines.append(f"{head}: {_count(s.n_cycles, 'cycle')} ok")
            continue
        lines.append(f"{head}: {s.n_cycles - len(bad)} of {_count(s.n_cycles, 'cycle')} ok" +
                     (f"; damaged: {', '.join(map(str, bad))}" if bad else ""))
        lines += [f"  {'session' if i is None else f'cycle {i}'}: {_safe(why)}" for i, why in s.damaged]
    if r.clean:
        lines.append(f"{r.path} is clean: {_count(len(r.sessions), 'session')}, {_count(n_cycles, 'cycle')}")
    else:
        in_sessions = sum(1 for s in r.sessions if s.damaged_cycles)
        sessions = sum(1 for s in r.sessions if any(i is None for i, _ in s.damaged))
        what = [f"{n_damaged} damaged cycle{'s' * (n_damaged != 1)} in {in_sessions} "
                f"session{'s' * (in_sessions != 1)}"] if n_damaged else []
        what += [f"{sessions} damaged session{'s' * (sessions != 1)}"] if sessions else []
        what += ["SQLite's check failed"] if r.sqlite != ["ok"] else []
        lines.append(f"{r.path} is damaged: {', '.join(what)}")
    return lines


def _count(n: int, noun: str) -> str:
    """``1 cycle``, ``2 cycles``."""
    return f"{n} {noun}{'s' * (n != 1)}"
