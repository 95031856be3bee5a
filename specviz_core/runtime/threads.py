"""How many CPU threads torch runs a forward on, chosen for the machine it runs on.

torch's own default is one thread per core. On a machine whose cores are busy with other work, a thread pool that
wants every core waits on the busiest one: on a 2-core machine running two other jobs, a 1-token forward of the
default model took 1,936 ms with 2 threads against 53 ms with 1. So SpecViz takes the cores that are free when it
loads a model (the cores this process may use, less the threads other processes are running, at least one), unless
the user says a number (``--threads``, the Run panel's threads field, ``specviz.Session(threads=...)``).

Torch-free until :func:`apply` runs: a replay never imports torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from specviz_core.errors import SpecVizError

#: The most threads anyone may ask for.
MAX_THREADS = 1024


@dataclass(frozen=True)
class ThreadChoice:
    """The threads a model's CPU forwards run on, and why."""

    threads: int
    cores: int
    """The cores this process may use."""
    load: float | None
    """Other processes' runnable threads when chosen (:func:`machine_load`), where the system reports it."""
    asked: bool
    """The user gave the number."""

    def describe(self) -> str:
        if self.asked:
            return f"{self.threads} CPU thread{'s' if self.threads != 1 else ''} (asked for)"
        load = f", load {self.load:.1f}" if self.load is not None else ""
        return f"{self.threads} CPU thread{'s' if self.threads != 1 else ''} ({self.cores} cores{load})"

    def as_json(self) -> dict[str, object]:
        return {"threads": self.threads, "cores": self.cores, "load": self.load, "asked": self.asked}


_requested: int | None = None
_chosen: ThreadChoice | None = None


def check_threads(value: object, option: str = "threads") -> int | None:
    """A thread count as the user gave it (None: choose), or one clear error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise SpecVizError(f"{option} must be a whole number from 1 to {MAX_THREADS:,}, got {value!r}")
    try:
        n = int(str(value).strip())
    except ValueError:
        raise SpecVizError(f"{option} must be a whole number from 1 to {MAX_THREADS:,}, got {value!r}") from None
    if not 1 <= n <= MAX_THREADS:
        raise SpecVizError(f"{option} must be a whole number from 1 to {MAX_THREADS:,}, got {n}")
    return n


def request(threads: int | None) -> None:
    """The user's thread count for this process's models from now on (None: choose for the machine)."""
    global _requested, _chosen
    _requested = check_threads(threads)
    _chosen = None


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def machine_load(samples: int = 5, gap_s: float = 0.01) -> float | None:
    """Runnable threads of other processes now: on Linux the median of a few readings of ``/proc/loadavg``'s running
    count less this process's own (the 1-minute mean would count what this process itself ran a moment ago);
    elsewhere the 1-minute load; None where the system reports neither."""
    import statistics
    import time

    readings = []
    for i in range(samples):
        try:
            with open("/proc/loadavg", encoding="ascii") as fh:
                running = int(fh.read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            break
        readings.append(max(0, running - 1))
        if i + 1 < samples:
            time.sleep(gap_s)
    if readings:
        return float(statistics.median(readings))
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def choose(requested: int | None = None, n_cores: int | None = None, load: float | None = None) -> ThreadChoice:
    """``requested``, else the cores left free by the load of other processes (at least one)."""
    n_cores = cores() if n_cores is None else n_cores
    if requested is not None:
        return ThreadChoice(requested, n_cores, load, True)
    busy = int(load + 0.5) if load is not None else 0
    return ThreadChoice(max(1, min(n_cores, n_cores - busy)), n_cores, load, False)


def apply(device: object = "cpu") -> ThreadChoice | None:
    """Set torch's intra-op threads for a model on ``device`` (a CPU model only; chosen once per process unless the
    user asks again); returns the choice (None for a model off the CPU)."""
    global _chosen
    if str(device).split(":")[0] not in ("cpu", "None"):
        return None
    if _chosen is None:
        import torch

        _chosen = choose(_requested, load=machine_load() if _requested is None else None)
        torch.set_num_threads(_chosen.threads)
    return _chosen


def current() -> ThreadChoice | None:
    """The choice in force in this process (None before a CPU model was loaded)."""
    return _chosen
