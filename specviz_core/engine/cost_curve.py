"""The verify-cost curve: how long one target forward over a verify block of N tokens takes here.

Measured on the current device with a realistic cache (a few hundred committed
tokens) and stored as a small JSON file in the user data folder (``SPECVIZ_DATA`` moves
it, as it moves ``sessions.db``), one per model, device and dtype, so the GUI can plot it and ``budget=auto`` can weigh a bigger tree's
extra accepted tokens against its extra forward time.

File format (``<data>/cost_curves/<model>__<device>__<dtype>.json``)::

    {"version": 1, "model": "default", "model_path": "...", "device": "cpu", "device_name": "...",
     "dtype": "float32", "threads": 2, "cache_len": 256, "reps": 5, "measured_at": "2025-...Z",
     "n": [1, 2, 4, ...], "ms": [66.1, 68.0, ...], "ms_min": [...]}

``n`` is the number of verify-block rows (root included); ``ms`` the median forward time
of ``reps`` runs, ``ms_min`` the fastest.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import statistics
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache

from specviz_core.runtime.locations import data_dir
from specviz_core.runtime.models import (
    DEFAULT_MODEL,
    DEFAULT_MODEL_NAME,
    LoadedModel,
    cache_dir,
    pick_device,
    pick_dtype,
    synchronize,
)
from specviz_core.tree import VerifyBlock

FORMAT_VERSION = 1
#: Verify-block sizes measured by default (rows, root included).
SIZES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128)
#: A quick curve for ``budget=auto`` when none is stored yet (about a quarter of the time).
QUICK_SIZES = (1, 4, 8, 16, 32, 64, 128)


@dataclass(frozen=True)
class CostCurve:
    """Forward time (ms) against verify-block rows, linearly interpolated between measured points."""

    n: tuple[int, ...]
    """Verify-block rows measured, ascending (root included)."""
    ms: tuple[float, ...]
    """Median forward time at each size, ms."""

    def __call__(self, rows: float) -> float:
        """Predicted forward ms for ``rows`` rows; beyond the last point the last slope continues."""
        n, ms = self.n, self.ms
        if len(n) == 1:
            return ms[0]
        if rows <= n[0]:
            return ms[0]
        i = bisect_left(n, rows)
        if i >= len(n):
            i = len(n) - 1
        x0, x1, y0, y1 = n[i - 1], n[i], ms[i - 1], ms[i]
        return y0 + (y1 - y0) * (rows - x0) / (x1 - x0)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CostCurve:
        pairs = sorted(zip(d["n"], d["ms"]))
        # The curve the chooser uses never falls as n grows: a point above a later one (a busy
        # moment while it was timed) is lowered to it.
        ms = [float(m) for _, m in pairs]
        for i in range(len(ms) - 2, -1, -1):
            ms[i] = min(ms[i], ms[i + 1])
        return cls(tuple(int(n) for n, _ in pairs), tuple(ms))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "model"


def model_key(model_name: str | None) -> str:
    """A file-name-safe key for a model as the user names it (``default``, a folder, a hub id)."""
    if not model_name or model_name == DEFAULT_MODEL:
        return DEFAULT_MODEL_NAME
    p = Path(model_name).expanduser()
    if p.exists():
        full = str(p.resolve())
        return f"{_slug(p.name)}-{hashlib.sha1(full.encode()).hexdigest()[:8]}"
    return _slug(model_name)


def device_key(device: str | torch.device | None) -> str:
    dev = torch.device(device) if device is not None else pick_device(None)
    if dev.type == "cuda":
        return f"cuda{dev.index or 0}"
    return dev.type


def curve_path(model_name: str | None, device: str | torch.device | None, dtype: str | torch.dtype | None = None,
               root: Path | None = None) -> Path:
    """Where the curve of this model, device and dtype is kept: ``<data folder>/cost_curves/`` (or under ``root``)."""
    dev = torch.device(device) if device is not None else pick_device(None)
    dt = pick_dtype(dev, None) if dtype is None else (pick_dtype(dev, dtype) if isinstance(dtype, str) else dtype)
    dt_name = str(dt).removeprefix("torch.")
    return (root or data_dir()) / "cost_curves" / f"{model_key(model_name)}__{device_key(dev)}__{dt_name}.json"


def load_cost_curve(model_name: str | None, device: str | torch.device | None,
                    dtype: str | torch.dtype | None = None) -> dict[str, Any] | None:
    """The stored curve for this model on this device (and dtype, default: the device's default), or None.

    The dict has the keys described in the module docstring; plot ``ms`` against ``n``.
    """
    # Curves measured before they moved to the data folder were kept in the user cache: still found there.
    for root in (None, cache_dir()):
        try:
            data = json.loads(curve_path(model_name, device, dtype, root).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("version") == FORMAT_VERSION and data.get("n"):
            return data
    return None


def save_cost_curve(curve: dict[str, Any]) -> Path:
    path = curve_path(curve["model"], curve["device"], curve["dtype"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(curve, indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return path


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
) -> dict[str, Any]:
    """Time one verify forward of each size on top of a ``cache_len``-token cache; returns the stored dict."""
    from specviz_core.engine.forward import verify_forward
    from specviz_core.runtime import kv

    dev = target.device
    cache_len = max(1, min(cache_len, target.context_length - max(sizes) - 1))
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(3, min(target.vocab_size, 20000), (1, cache_len), generator=g)
    cache = DynamicCache()
    out = target.model(input_ids=prompt.to(dev), use_cache=True, **kv.cache_arg(target.model, cache))
    cache = kv.returned_cache(out)
    blocks = [_chain_block(n, target.vocab_size) for n in sizes]
    times: list[list[float]] = [[] for _ in sizes]
    # Round-robin over the sizes, so a busy moment on a shared machine hits every size alike.
    for r in range(warmup + reps):
        for k, block in enumerate(blocks):
            synchronize(dev)
            t0 = clock()
            verify_forward(target, cache, block, cache_len)
            synchronize(dev)
            if r >= warmup:
                times[k].append((clock() - t0) * 1000.0)
            kv.crop(cache, cache_len)
        if progress is not None:
            progress(r + 1, warmup + reps)
    med = [round(statistics.median(t), 3) for t in times]
    low = [round(min(t), 3) for t in times]
    return {
        "version": FORMAT_VERSION, "model": target.name, "model_path": target.path, "device": device_key(dev),
        "device_name": device_name(dev), "dtype": str(target.dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(), "cache_len": cache_len, "reps": reps,
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "n": [int(n) for n in sizes], "ms": med, "ms_min": low,
    }


def ensure_cost_curve(target: LoadedModel, quick: bool = True, force: bool = False,
                      progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """The stored curve for ``target``, measuring (and storing) one first if there is none (or ``force``)."""
    curve = None if force else load_cost_curve(target.name, target.device, target.dtype)
    if curve is None:
        curve = measure_cost_curve(target, QUICK_SIZES if quick else SIZES, reps=3 if quick else 5, progress=progress)
        try:
            save_cost_curve(curve)
        except OSError:
            pass  # a read-only cache still gets the curve for this session
    return curve
