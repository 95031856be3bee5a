"""The verify-cost curve: how long one target forward over a verify block of N tokens takes here.

Measured on the current device with a realistic cache (a few hundred committed
tokens) and stored as a small JSON file in the user data folder (``SPECVIZ_DATA`` moves
it, as it moves ``sessions.db``), one per model, device and dtype (:mod:`specviz_core.runtime.cost_files`
keeps them), so the GUI can plot it (:class:`~specviz_core.analysis.timing.CostCurve`) and ``budget=auto``
can weigh a bigger tree's extra accepted tokens against its extra forward time.

File format (``<data>/cost_curves/<model>__<device>__<dtype>.json``)::

    {"version": 1, "model": "default", "model_path": "...", "device": "cpu", "device_name": "...",
     "dtype": "float32", "threads": 2, "cache_len": 256, "reps": 5, "measured_at": "2025-...Z",
     "n": [1, 2, 4, ...], "ms": [66.1, 68.0, ...], "ms_min": [...], "host_ms": [0.4, 0.5, ...]}

``n`` is the number of verify-block rows (root included); ``ms`` the median forward time
of ``reps`` runs, ``ms_min`` the fastest; ``host_ms`` the median time the host then took to reduce the block's rows
(:func:`~specviz_core.target_rows.target_rows`: over a large vocabulary on a CPU, a share of a small model's cycle
that grows with the rows, which ``budget=auto`` prices beside the forward; absent in curves measured before).
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache

from specviz_core.runtime import threads
from specviz_core.runtime.cost_files import FORMAT_VERSION, device_key, load_cost_curve, save_cost_curve
from specviz_core.runtime.models import LoadedModel, synchronize
from specviz_core.target_rows import target_rows
from specviz_core.tree import VerifyBlock

#: Verify-block sizes measured by default (rows, root included): every size up to 16, where the CPU's matrix kernels
#: make the curve jagged (on a 2-core EPYC, 3 rows cost 130 ms and 4 rows 96 ms: interpolating over 2..4 or 4..8
#: hid it, and ``budget=auto`` kept choosing blocks of 3 and 7 rows that cost a third more than it predicted).
SIZES = tuple(range(1, 17)) + (20, 24, 28, 32, 40, 48, 64, 96, 128)
#: The curve measured once per device before a session needs it: every size up to 16 too, fewer above.
QUICK_SIZES = tuple(range(1, 17)) + (24, 32, 48, 64, 128)
#: The top-k the host's reduction is timed with (a table drafter's harvest reads the top 10).
HOST_K = 10
#: A stored curve measured at fewer small sizes (before they were all measured) is measured again.
DENSE_UP_TO = 16


def is_dense(curve: dict[str, Any]) -> bool:
    """Whether a stored curve has every size up to :data:`DENSE_UP_TO` (else ``budget=auto`` measures it again)."""
    return set(range(1, DENSE_UP_TO + 1)) <= {int(n) for n in curve.get("n", ())}


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    name = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return name or platform.processor() or platform.machine()


def _chain_block(n: int, vocab: int) -> VerifyBlock:
    # The mask's content does not change the cost of an sdpa forward with a float mask; a chain will do.
    tokens = 3 + np.arange(n, dtype=np.int64) % max(1, vocab - 3)
    return VerifyBlock(order=np.arange(n), tokens=tokens, depths=np.arange(n),
                       parent_rows=np.arange(n) - 1, mask=np.tril(np.ones((n, n), dtype=bool)))


@torch.no_grad()
def measure_cost_curve(
    target: LoadedModel,
    sizes: Sequence[int] = SIZES,
    cache_len: int = 256,
    reps: int = 5,
    warmup: int = 2,
    progress: Callable[[int, int], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    keep: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Time one verify forward of each size on top of a ``cache_len``-token cache; returns the stored dict.
    ``keep``: given the curve so far after every timed round (so an interrupted measurement keeps what it timed)."""
    from specviz_core.engine.forward import verify_forward
    from specviz_core.runtime import kv

    dev = target.device
    load = threads.machine_load()  # other processes' running threads: a curve measured under load says so
    cache_len = max(1, min(cache_len, target.context_length - max(sizes) - 1))
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(3, min(target.vocab_size, 20000), (1, cache_len), generator=g)
    cache = DynamicCache()
    out = target.model(input_ids=prompt.to(dev), use_cache=True, **kv.cache_arg(target.model, cache))
    cache = kv.returned_cache(out)
    blocks = [_chain_block(n, target.vocab_size) for n in sizes]
    times: list[list[float]] = [[] for _ in sizes]
    host: list[list[float]] = [[] for _ in sizes]
    # Round-robin over the sizes, so a busy moment on a shared machine hits every size alike.
    for r in range(warmup + reps):
        for k, block in enumerate(blocks):
            synchronize(dev)
            t0 = clock()
            verified = verify_forward(target, cache, block, cache_len)
            synchronize(dev)
            t1 = clock()
            target_rows(verified.logits, block.tokens, block.parent_rows, block.tokens - 1, HOST_K)
            t2 = clock()
            if r >= warmup:
                times[k].append((t1 - t0) * 1000.0)
                host[k].append((t2 - t1) * 1000.0)
            kv.crop(cache, cache_len)
        if keep is not None and r >= warmup:
            keep(curve_dict(target, sizes, times, cache_len, r + 1 - warmup, load=load, host_ms=_medians(host)))
        if progress is not None:
            progress(r + 1, warmup + reps)
    return curve_dict(target, sizes, times, cache_len, reps, load=load, host_ms=_medians(host))


def _medians(times: Sequence[Sequence[float]]) -> list[float]:
    return [round(statistics.median(t), 3) for t in times]


def curve_dict(target: LoadedModel, sizes: Sequence[int], times: Sequence[Sequence[float]], cache_len: int,
               reps: int, **extra: Any) -> dict[str, Any]:
    """The stored form of a curve measured on ``target``: per size, the median and fastest of its timed forwards."""
    dev = target.device
    return {
        "version": FORMAT_VERSION, "model": target.name, "model_path": target.path, "device": device_key(dev),
        "device_name": device_name(dev), "dtype": str(target.dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(), "cache_len": cache_len, "reps": reps,
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "n": [int(n) for n in sizes], "ms": [round(statistics.median(t), 3) for t in times],
        "ms_min": [round(min(t), 3) for t in times], **extra,
    }

def ensure_device_curve(target: LoadedModel, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """This device's verify-cost curve for ``target``, measured once (the quick sizes, in seconds) when none is
    stored: before a ``budget=auto`` session needs it, never in a session's own time. Each timed round is stored as
    it finishes, so a measurement cut short is kept, and the next session uses it rather than measuring again."""
    curve = load_cost_curve(target.name, target.device, target.dtype)
    if curve is not None and is_dense(curve):
        return curve

    def keep(partial: dict[str, Any]) -> None:
        try:
            save_cost_curve(partial)
        except OSError:
            pass  # a read-only data folder: this session has the curve anyway

    return measure_cost_curve(target, QUICK_SIZES, reps=2, warmup=1, progress=progress, keep=keep)


def ensure_cost_curve(target: LoadedModel, quick: bool = True, force: bool = False,
                      progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """The stored curve for ``target``, measuring (and storing) one first if there is none (or ``force``)."""
    curve = None if force else load_cost_curve(target.name, target.device, target.dtype)
    if curve is None or not is_dense(curve):
        curve = measure_cost_curve(target, QUICK_SIZES if quick else SIZES, reps=3 if quick else 5, progress=progress)
        try:
            save_cost_curve(curve)
        except OSError:
            pass  # a read-only cache still gets the curve for this session
    return curve
