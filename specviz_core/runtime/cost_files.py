"""Where measured verify-cost curves are kept, and reading and writing them (torch-free).

One small JSON file per model, device and dtype, in the user data folder (``SPECVIZ_DATA`` moves it, as it
moves ``sessions.db``): ``<data>/cost_curves/<model>__<device>__<dtype>.json``. Its keys are described in
:mod:`specviz_core.engine.cost_curve`, which measures them. A replay reads the curve of its recorded model,
device and dtype from here without loading torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from specviz_core.runtime.choices import DTYPE_ALIASES, default_dtype
from specviz_core.runtime.locations import DEFAULT_MODEL, DEFAULT_MODEL_NAME, cache_dir, data_dir, model_reference

FORMAT_VERSION = 1


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "model"


def model_key(model_name: str | None) -> str:
    """A file-name-safe key for a model as the user names it (``default``, a folder, a hub id). The default model
    loaded by its folder (as ``specviz.load()`` names it) shares the curve of ``default``."""
    if not model_name or model_reference(model_name) == DEFAULT_MODEL:
        return DEFAULT_MODEL_NAME
    p = Path(model_name).expanduser()
    if p.exists():
        full = str(p.resolve())
        return f"{_slug(p.name)}-{hashlib.sha1(full.encode()).hexdigest()[:8]}"
    return _slug(model_name)


def device_key(device: Any) -> str:
    """``cpu``, ``mps``, ``cuda0``...: for a device name (``"cuda:1"``) or a ``torch.device``. None: the device a
    session would pick here (which loads torch to look for a GPU)."""
    if device is None:
        from specviz_core.runtime.devices import pick_device

        device = pick_device(None)
    kind, _, index = str(device).partition(":")
    if kind.startswith("cuda"):
        return f"cuda{index or kind.removeprefix('cuda') or 0}"
    return kind


def dtype_name(device: str, dtype: Any) -> str:
    """The dtype's name (``float32``...): as given (a name or a ``torch.dtype``), or the device's default (half
    precision on a GPU, float32 on the CPU) when None or ``auto``."""
    if dtype is None or dtype == "auto":
        return default_dtype(device)
    name = str(dtype).removeprefix("torch.")
    return DTYPE_ALIASES.get(name, name)


def curve_path(model_name: str | None, device: Any, dtype: Any = None, root: Path | None = None,
               threads: int | None = None) -> Path:
    """Where the curve of this model, device and dtype is kept: ``<data folder>/cost_curves/`` (or under ``root``).
    ``threads``: a CPU's curve measured with that many threads (``...__t2.json``); None: the last one measured."""
    dev = device_key(device)
    per = f"__t{int(threads)}" if threads is not None and dev == "cpu" else ""
    return (root or data_dir()) / "cost_curves" / f"{model_key(model_name)}__{dev}__{dtype_name(dev, dtype)}{per}.json"


def _read_curve(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("version") == FORMAT_VERSION and data.get("n") else None


def load_cost_curve(model_name: str | None, device: Any, dtype: Any = None, threads: int | None = None
                    ) -> dict[str, Any] | None:
    """The stored curve for this model on this device (and dtype, default: the device's default), or None.
    ``threads``: on a CPU, the curve measured with that many threads (a block's rows share the cores, so the curve's
    shape depends on them: on a 2-core EPYC 16 rows cost 1.75x a 1-row forward with 2 threads, 2.1x with 1), or
    None where none was; None: the last curve measured, with any number (what a plot or a replay shows).

    The dict has the keys described in :mod:`specviz_core.engine.cost_curve`; plot ``ms`` against ``n``.
    """
    if threads is not None and device_key(device) == "cpu":
        own = _read_curve(curve_path(model_name, device, dtype, threads=threads))
        if own is not None:
            return own
        # measured before curves were kept per thread count (or written without saying its threads: used for any)
        last = load_cost_curve(model_name, device, dtype)
        return last if last is not None and last.get("threads", threads) == threads else None
    # Curves measured before they moved to the data folder were kept in the user cache: still found there.
    for root in (None, cache_dir()):
        data = _read_curve(curve_path(model_name, device, dtype, root))
        if data is not None:
            return data
    return None


def save_cost_curve(curve: dict[str, Any]) -> Path:
    """Store a measured curve as the last one for its model, device and dtype, and on a CPU as the one for its
    threads too."""
    path = curve_path(curve["model"], curve["device"], curve["dtype"])
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(curve, indent=1)
    threads = curve.get("threads")
    paths = [path]
    if isinstance(threads, int) and device_key(curve["device"]) == "cpu":
        paths.append(curve_path(curve["model"], curve["device"], curve["dtype"], threads=threads))
    for p in paths:
        tmp = p.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
    return path


def draft_cost_path(model_name: str | None, device: Any, dtype: Any, drafter_key: str,
                    root: Path | None = None) -> Path:
    """Where a drafter's step cost on this target, device and dtype is kept, beside the target's curve."""
    curve = curve_path(model_name, device, dtype, root)
    tag = f"{_slug(drafter_key)[-40:]}-{hashlib.sha1(drafter_key.encode()).hexdigest()[:8]}"
    return curve.with_name(f"{curve.stem}__draft-{tag}.json")


def _read_draft_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("version") == FORMAT_VERSION else {}


def _write_draft_file(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return path


def load_draft_cost(model_name: str | None, device: Any, dtype: Any, drafter_key: str) -> float | None:
    """A draft step's stored cost, in 1-row target forwards (``budget=auto`` prices drafting with it), or None."""
    cost = _read_draft_file(draft_cost_path(model_name, device, dtype, drafter_key)).get("step_cost")
    return float(cost) if isinstance(cost, (int, float)) and cost > 0 else None


def save_draft_cost(model_name: str | None, device: Any, dtype: Any, drafter_key: str, step_cost: float,
                    steps: int) -> Path:
    """Store a draft step's cost in 1-row target forwards, measured over ``steps`` steps."""
    path = draft_cost_path(model_name, device, dtype, drafter_key)
    return _write_draft_file(path, {**_read_draft_file(path), "version": FORMAT_VERSION, "model": model_name,
                                    "device": device_key(device), "drafter": drafter_key, "step_cost": step_cost,
                                    "steps": steps})


def load_catch_up_row(model_name: str | None, device: Any, dtype: Any, drafter_key: str) -> float | None:
    """What a row of the drafter's catch-up costs, in 1-row target forwards (:func:`save_catch_up_row`), or None."""
    cost = _read_draft_file(draft_cost_path(model_name, device, dtype, drafter_key)).get("catch_up_row")
    return float(cost) if isinstance(cost, (int, float)) and cost > 0 else None


def load_catch_up_rows(model_name: str | None, device: Any, dtype: Any, drafter_key: str) -> int:
    """The rows of the catch-up the stored row cost was measured on (:func:`save_catch_up_row`); 0 if not said."""
    rows = _read_draft_file(draft_cost_path(model_name, device, dtype, drafter_key)).get("catch_up_rows")
    return rows if isinstance(rows, int) and not isinstance(rows, bool) and rows > 0 else 0


def save_catch_up_row(model_name: str | None, device: Any, dtype: Any, drafter_key: str, cost: float,
                      rows: int | None = None) -> Path:
    """Keep, beside the drafter's step cost, what a row of its catch-up costs in 1-row target forwards, measured on a
    catch-up of ``rows`` rows: a draft head or model runs the committed tokens it has not seen before it drafts (the
    whole prompt at its first draft), and ``budget=auto`` prices a long one before deciding to draft."""
    path = draft_cost_path(model_name, device, dtype, drafter_key)
    return _write_draft_file(path, {**_read_draft_file(path), "version": FORMAT_VERSION, "model": model_name,
                                    "device": device_key(device), "drafter": drafter_key,
                                    "catch_up_row": float(cost), **({"catch_up_rows": int(rows)} if rows else {})})


def load_draft_outcome(model_name: str | None, device: Any, dtype: Any, drafter_key: str
                       ) -> tuple[float, int] | None:
    """What the last session drafting with this drafter on this device found (:func:`save_draft_outcome`): its
    drafted cycles' gain over a plain cycle and the plain cycles it then ran between two drafts; None if unknown."""
    out = _read_draft_file(draft_cost_path(model_name, device, dtype, drafter_key)).get("outcome")
    if not isinstance(out, dict):
        return None
    gain, gap = out.get("gain"), out.get("gap")
    if not isinstance(gain, (int, float)) or not isinstance(gap, int) or gain < 0 or gap < 1:
        return None
    return float(gain), gap


def save_draft_outcome(model_name: str | None, device: Any, dtype: Any, drafter_key: str, gain: float,
                       gap: int) -> Path:
    """Keep, beside the drafter's step cost, whether its drafts paid here: the gain over a plain cycle its drafted
    cycles gave (decayed) and the plain cycles between two drafts that followed from it."""
    path = draft_cost_path(model_name, device, dtype, drafter_key)
    return _write_draft_file(path, {**_read_draft_file(path), "version": FORMAT_VERSION, "model": model_name,
                                    "device": device_key(device), "drafter": drafter_key,
                                    "outcome": {"gain": round(float(gain), 4), "gap": int(gap)}})
