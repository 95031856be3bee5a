"""The verify-cost curve: how long one target forward over a verify block of N tokens takes here.

Measured on the current device with a realistic cache (a few hundred committed
tokens) and stored as a small JSON file in the user data folder (``SPECVIZ_DATA`` moves
it, as it moves ``sessions.db``), one per model, device and dtype (:mod:`specviz_core.runtime.cost_files`
keeps them), so the GUI can plot it (:class:`~specviz_core.analysis.timing.CostCurve`) and ``budget=auto``
can weigh a bigger tree's extra accepted tokens against its extra forward time.

File format (``<data>/cost_curves/<model>__<device>__<dtype>.json``)::

    {"version": 1, "model": "default", "model_path": "...", "device": "cpu", "device_name": "...",
     "dtype": "float32", "threads": 2, "cache_len": 256, "reps": 5, "measured_at": "2025-...Z",
     "n": [1, 2, 4, ...], "ms": [66.1, 68.0, ...], "ms_min": [...], "host_ms": [0.4, 0.5, ...],
     "context": {"cache_len": 256, "long_cache_len": 2048, "n": [1, 2, 4, ...], "ms_per_token": [0.0, 0.017, ...]}}

``n`` is the number of verify-block rows (root included); ``ms`` the median forward time
of ``reps`` runs, ``ms_min`` the fastest; ``host_ms`` the median time the host then took to reduce the block's rows
(:func:`~specviz_core.target_rows.target_rows`: over a large vocabulary on a CPU, a share of a small model's cycle
that grows with the rows, which ``budget=auto`` prices beside the forward; absent in curves measured before).
``context`` is what each cached token beyond ``cache_len`` adds to a block's forward (attention reads them all: a
long prompt makes a big block dearer against a 1-row one), so ``budget=auto`` prices a cycle at its own cache's
length (:meth:`~specviz_core.analysis.timing.CostCurve.at`); a curve stored without it gets it measured, alone.
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
from specviz_core.tree import VerifyBlock, ancestor_mask

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
    return VerifyBlock(order=np.arange(n), tokens=tokens, depths=np.arange(n), parent_rows=np.arange(n) - 1,
                       mask=np.arange(n)[:, None] >= np.arange(n))


def _tree_block(n: int, vocab: int) -> VerifyBlock:
    """A block of ``n`` rows that is a tree, not a chain, from 3 rows (row 2 a sibling of row 1): its forward takes
    the tree mask's path, as a drafted tree's does (a chain's takes the model's causal path, which over a long cache
    costs less at a few rows: 4 rows over 2,048 tokens took 1.7x a chain's on the 2-core EPYC)."""
    chain = _chain_block(n, vocab)
    if n < 3:
        return chain
    parents = np.arange(n) - 1
    parents[2] = 0
    depths = np.where(np.arange(n) >= 2, np.arange(n) - 1, np.arange(n))
    return VerifyBlock(order=chain.order, tokens=chain.tokens, depths=depths, parent_rows=parents,
                       mask=ancestor_mask(parents))


#: Rows at which the cost of a longer cache is measured: its extra is smooth in the rows (the attention's work), but
#: for the step from 1 row (the kernels' path for a single query) to 2.
CONTEXT_SIZES = (1, 2, 4, 16, 64)
#: The longer cache the context's cost is measured on (or the model's context, less the largest block, if shorter).
LONG_CACHE = 2048


def _cache_of(target: LoadedModel, tokens: int, seed: int = 0) -> DynamicCache:
    """A cache holding ``tokens`` random prompt tokens of ``target``'s (the forward's cost does not read them)."""
    from specviz_core.runtime import kv

    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(3, min(target.vocab_size, 20000), (1, tokens), generator=g)
    cache = DynamicCache()
    for s in range(0, tokens, 512):  # in chunks, as the engine's prefill: a long one at once needs its whole mask
        out = target.model(input_ids=prompt[:, s:s + 512].to(target.device), use_cache=True,
                           **kv.cache_arg(target.model, cache))
        cache = kv.returned_cache(out)
    return cache


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
    context: bool = True,
) -> dict[str, Any]:
    """Time one verify forward of each size on top of a ``cache_len``-token cache; returns the stored dict.
    ``keep``: given the curve so far after every timed round (so an interrupted measurement keeps what it timed).
    ``context``: then measure what a longer cache adds (:func:`measure_context_cost`), stored as ``context``."""
    from specviz_core.engine.forward import verify_forward
    from specviz_core.runtime import kv

    load = threads.machine_load()  # other processes' running threads: a curve measured under load says so
    cache_len = max(1, min(cache_len, target.context_length - max(sizes) - 1))
    cache = _cache_of(target, cache_len)
    blocks = [_chain_block(n, target.vocab_size) for n in sizes]
    times: list[list[float]] = [[] for _ in sizes]
    host: list[list[float]] = [[] for _ in sizes]
    rounds = warmup + reps * (2 if context else 1)
    # Round-robin over the sizes, so a busy moment on a shared machine hits every size alike.
    for r in range(warmup + reps):
        for k, block in enumerate(blocks):
            synchronize(target.device)
            t0 = clock()
            verified = verify_forward(target, cache, block, cache_len)
            synchronize(target.device)
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
            progress(r + 1, rounds)
    curve = curve_dict(target, sizes, times, cache_len, reps, load=load, host_ms=_medians(host))
    del cache
    if context:
        def on_round(done: int, total: int) -> None:
            if progress is not None:
                progress(warmup + reps + done, rounds)

        # no warm-up of its own: the sizes were just run (the longer cache's first forward is a 1-row one)
        curve["context"] = measure_context_cost(target, [n for n in CONTEXT_SIZES if n <= max(sizes)], cache_len,
                                                reps=reps, warmup=0, progress=on_round, clock=clock)
        if keep is not None:
            keep(curve)
    return curve


@torch.no_grad()
def measure_context_cost(
    target: LoadedModel,
    sizes: Sequence[int] = CONTEXT_SIZES,
    cache_len: int = 256,
    long_len: int = LONG_CACHE,
    reps: int = 3,
    warmup: int = 1,
    progress: Callable[[int, int], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Any]:
    """What each cached token beyond ``cache_len`` adds to a forward of each size: every size timed on a
    ``cache_len``-token and on a ``long_len``-token cache, alternately (so a busy moment hits both alike), and the
    median of each round's difference over the tokens between. The curve's ``context`` entry::

        {"cache_len": 256, "long_cache_len": 2048, "n": [1, 2, ...], "ms_per_token": [0.0003, ...], "reps": 3}
    """
    from specviz_core.engine.forward import verify_forward
    from specviz_core.runtime import kv

    sizes = list(sizes) or [1]
    long_len = min(long_len, target.context_length - max(sizes) - 1)
    if long_len < 2 * cache_len:  # a context too short for a longer cache to tell: nothing to add
        if progress is not None:
            progress(warmup + reps, warmup + reps)
        return {"cache_len": cache_len, "long_cache_len": cache_len, "n": [], "ms_per_token": [], "reps": 0}
    caches = {cache_len: _cache_of(target, cache_len), long_len: _cache_of(target, long_len, seed=1)}
    blocks = [_tree_block(n, target.vocab_size) for n in sizes]  # the drafted trees' path, which it prices
    diffs: list[list[float]] = [[] for _ in sizes]
    for r in range(warmup + reps):
        for k, block in enumerate(blocks):
            ms = {}
            for length, cache in caches.items():
                synchronize(target.device)
                t0 = clock()
                verify_forward(target, cache, block, length)
                synchronize(target.device)
                ms[length] = (clock() - t0) * 1000.0
                kv.crop(cache, length)
            if r >= warmup:
                diffs[k].append((ms[long_len] - ms[cache_len]) / (long_len - cache_len))
        if progress is not None:
            progress(r + 1, warmup + reps)
    return {"cache_len": cache_len, "long_cache_len": long_len, "n": [int(n) for n in sizes],
            "ms_per_token": [round(max(0.0, statistics.median(d)), 6) for d in diffs], "reps": reps}


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


def curve_threads(target: LoadedModel) -> int | None:
    """The threads a CPU session runs ``target`` with, whose curve prices it (None off the CPU)."""
    return torch.get_num_threads() if device_key(target.device) == "cpu" else None


def load_device_curve(target: LoadedModel) -> dict[str, Any] | None:
    """The curve stored for ``target`` as it runs now: its device and dtype, and on a CPU its threads."""
    return load_cost_curve(target.name, target.device, target.dtype, threads=curve_threads(target))


def has_context(curve: dict[str, Any]) -> bool:
    """Whether a stored curve says what a longer cache adds (measured, or found not measurable for its model)."""
    return isinstance(curve.get("context"), dict)


#: Other processes' running threads while a curve was measured from which it is measured again, once, by a session
#: that finds the machine quiet: a 1-row forward slows more under load than a big block does (memory bandwidth), so
#: a curve measured beside another job prices rows too cheaply (one read 137 ms for a 1-row forward that took 82 ms,
#: and priced 28 rows at 2.65x where they ran at 3.6x).
BUSY = 1.0
#: ... and what counts as quiet for that.
QUIET = 0.5


def to_measure(curve: dict[str, Any] | None, context: bool = False, load: Callable[[], float | None] | None = None
               ) -> str:
    """What of a stored curve must be measured before a session may use it: ``"all"`` (none, one with gaps below
    :data:`DENSE_UP_TO` rows, or one measured under load now that the machine is quiet), ``"context"`` (what a
    longer cache adds, where ``context`` asks for it), or ``""`` (nothing). ``load``: the machine's load now (read
    only for a curve measured under load)."""
    if curve is None or not is_dense(curve):
        return "all"
    busy = curve.get("load")
    if isinstance(busy, (int, float)) and busy >= BUSY:
        now = (load or threads.machine_load)()
        if now is not None and now < QUIET:
            return "all"
    return "context" if context and not has_context(curve) else ""


def ensure_device_curve(target: LoadedModel, progress: Callable[[int, int], None] | None = None,
                        context: bool = True) -> dict[str, Any]:
    """This device's verify-cost curve for ``target``, measured once (the quick sizes, in seconds) when none is
    stored: before a ``budget=auto`` session needs it, never in a session's own time. Each timed round is stored as
    it finishes, so a measurement cut short is kept, and the next session uses it rather than measuring again. A
    curve measured under load is measured again once the machine is quiet (:func:`to_measure`).
    ``context``: with what a longer cache adds (:func:`measure_context_cost`; measured alone where a stored curve
    lacks it), which a session on a long prompt needs and a short one does not pay for."""
    curve = load_device_curve(target)
    what = to_measure(curve, context)
    if not what:
        return curve  # type: ignore[return-value]

    def keep(partial: dict[str, Any]) -> None:
        try:
            save_cost_curve(partial)
        except OSError:
            pass  # a read-only data folder: this session has the curve anyway

    if curve is not None and what == "context":  # measured before a longer cache's cost was: that part alone
        curve = dict(curve, context=measure_context_cost(target, [n for n in CONTEXT_SIZES if n <= max(curve["n"])],
                                                         int(curve.get("cache_len", 256)), reps=2, warmup=1,
                                                         progress=progress))
        keep(curve)
        return curve
    context = context or (curve is not None and has_context(curve))  # measured again: all it had
    return measure_cost_curve(target, QUICK_SIZES, reps=2, warmup=1, progress=progress, keep=keep, context=context)


def ensure_cost_curve(target: LoadedModel, quick: bool = True, force: bool = False,
                      progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """The stored curve for ``target``, measuring (and storing) one first if there is none (or ``force``)."""
    curve = None if force else load_device_curve(target)
    if curve is None or not is_dense(curve):
        curve = measure_cost_curve(target, QUICK_SIZES if quick else SIZES, reps=3 if quick else 5, progress=progress)
        try:
            save_cost_curve(curve)
        except OSError:
            pass  # a read-only cache still gets the curve for this session
    return curve
