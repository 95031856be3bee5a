"""Options several commands share."""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from specviz_core.errors import SpecVizError
from specviz_core.files import new_file_mode


class Parser(argparse.ArgumentParser):
    """argparse, with a bad argument reported like every other error: one line, ``specviz: error: ...``."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"specviz: error: {message} (see {self.prog} --help)\n")


def add_db_arg(p: argparse.ArgumentParser, what: str = "the recording") -> None:
    """``--db``: a recording, by default the one every live session of the window goes to (``sessions.db`` in the
    user data folder; ``SPECVIZ_DATA`` moves it)."""
    from specviz_core.runtime.locations import data_dir

    p.add_argument("--db", type=Path, default=data_dir() / "sessions.db",
                   help=f"{what} (default: %(default)s, where the window records)")


def bounded_int(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: an integer from ``lo`` to ``hi``."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"must be from {lo:,} to {hi:,}, got {v:,}")
        return v
    return parse


def budget_arg(text: str) -> int | str:
    """An argparse type for ``--budget``: ``auto`` (chosen for this device), ``paper`` (the method's own) or a
    number of draft nodes, checked against the method's own bounds once the method is known
    (:func:`specviz_core.methods.params.check_budget`, the same check as ``--param budget=``)."""
    word = text.strip().lower()
    if word in ("auto", "paper"):
        return word
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"auto, paper or a whole number of draft nodes, got {text!r}") from None


def finite_float(lo: float, hi: float) -> Callable[[str], float]:
    """An argparse type: a finite number from ``lo`` to ``hi`` (nan and inf are refused)."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(v) or not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"must be a finite number from {lo:g} to {hi:g}, got {text}")
        return v
    return parse


def read_prompt_file(path: Path) -> str:
    """A prompt file's text; unreadable, non-UTF-8 or empty files are refused in one line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecVizError(f"cannot read the prompt file: {e.strerror}: {path}") from None
    except UnicodeDecodeError as e:
        raise SpecVizError(f"the prompt file is not UTF-8 text (byte {e.start}): {path}") from None
    if not text.strip():
        raise SpecVizError(f"the prompt file is empty: {path}")
    return text


def check_writable(out: Path) -> None:
    """Refuse an output path that cannot be written, before any slow work."""
    parent = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        raise SpecVizError(f"--out {out} is a folder")
    if not parent.is_dir():
        raise SpecVizError(f"cannot write {out}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise SpecVizError(f"cannot write {out}: permission denied")


def refuse_overwriting(out: Path, inputs: Sequence[Path]) -> None:
    """An output file must never be a file the command reads (same path, or the same file by another name)."""
    for src in inputs:
        same = out.resolve() == src.resolve()
        try:
            same = same or (out.exists() and os.path.samefile(out, src))
        except OSError:
            pass
        if same:
            raise SpecVizError(f"--out {out} is the recording being read: choose another file")


@contextmanager
def atomic_output(out: Path) -> Iterator[IO[str]]:
    """Write ``out`` through a temporary file beside it and a rename: a crash never leaves half a file."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent if str(out.parent) else ".")
    except OSError as e:
        raise SpecVizError(f"cannot write {out}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            yield fh
        os.chmod(tmp, new_file_mode())  # mkstemp makes it private; a plain open would not have
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def add_minutes_arg(p: argparse.ArgumentParser, what: str) -> None:
    """``--minutes``: the time a long command may take, model loading included; ``what`` says what it keeps."""
    from specviz_core.runtime.time_limit import MAX_MINUTES

    p.add_argument("--minutes", type=finite_float(0.0, MAX_MINUTES), default=None, metavar="M",
                   help=f"stop cleanly after M minutes in all, model loading included, keeping {what} "
                        "(default: no limit)")


def time_limit(args: argparse.Namespace) -> Any:
    """The command's :class:`~specviz_core.runtime.time_limit.TimeLimit`, started now (bad minutes refused)."""
    from specviz_core.runtime.time_limit import TimeLimit

    return TimeLimit(args.minutes)


def counted(n: int, word: str) -> str:
    """``1 prompt``, ``3 prompts``: a count with its noun in the right number."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def say_plan(args: argparse.Namespace, text: str) -> None:
    """The work a long command is about to do, one line on stderr before it starts (none with --quiet)."""
    import sys

    if not getattr(args, "quiet", False):
        m = getattr(args, "minutes", None)
        limit = f"; at most {m:g} minute{'' if m == 1 else 's'} (--minutes)" if m else ""
        print(f"[specviz] {text}{limit}", file=sys.stderr, flush=True)


def add_device_args(p: argparse.ArgumentParser) -> None:
    """``--device``, ``--dtype`` and ``--threads``, the same for every command that loads a model."""
    p.add_argument("--device", default=None, metavar="DEVICE",
                   help="auto (default: the GPU if any, else Apple MPS, else the CPU), cpu, cuda, cuda:N or mps; "
                        "a model larger than one GPU is spread over every GPU and the CPU")
    p.add_argument("--dtype", default=None, metavar="DTYPE",
                   help="auto (default: float16 on a GPU, float32 on the CPU), float32, bfloat16 or float16")
    p.add_argument("--threads", type=bounded_int(1, 1024), default=None, metavar="N",
                   help="CPU threads for the model's forwards (default: the cores other processes leave free)")


def progress_bar(**kw: Any) -> Any:
    """A tqdm bar on standard error. On a terminal it goes away when done; elsewhere (a pipe, a log file) a bar
    redraws with carriage returns and no newline, so it stays and ends its line: what is printed next starts on a
    line of its own instead of running on after the bar."""
    import sys

    from tqdm import tqdm

    tty = sys.stderr.isatty()
    kw["leave"] = kw.get("leave", False) if tty else True
    if not tty:
        kw.setdefault("mininterval", 2.0)
    return tqdm(file=sys.stderr, **kw)


def stopped_early(stopped: str | None, kept: str) -> int:
    """How a long command that stopped before the end of its work ends, after its result: ``stopped`` is
    ``interrupted`` (Ctrl+C: exit 130) or why it stopped (a time limit: exit 0), None when it did not; ``kept``
    says what was finished and saved. One line on standard error."""
    import sys

    if stopped is None:
        return 0
    if stopped == "interrupted":
        print(f"specviz: interrupted; {kept}", file=sys.stderr)
        return 130
    print(f"specviz: stopped: {stopped}; {kept}", file=sys.stderr)
    return 0
