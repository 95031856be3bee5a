"""Method parameters: a frozen dataclass per method whose fields carry a default, a help text and bounds.

The command line (``--param key=value``), the window's editors and the bench all check values against the
same fields through :func:`parse_params`. Torch-free, so a window can list methods without loading a model.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from specviz_core.errors import SpecVizError


def param(default: Any, help: str, minimum: float | None = None, choices: tuple[str, ...] | None = None,
          maximum: float | None = None) -> Any:
    """A method parameter: a dataclass field with a default, a help text and bounds (the CLI and the window's
    editors both check against them)."""
    return dataclasses.field(default=default, metadata={"help": help, "minimum": minimum, "maximum": maximum,
                                                        "choices": choices})


@dataclass(frozen=True)
class NoParams:
    """A method without parameters."""


def param_specs(params_cls: type) -> list[dataclasses.Field]:
    return list(dataclasses.fields(params_cls))


def parse_kv(items: Iterable[str]) -> dict[str, str]:
    """``--param key=value`` arguments as a dict of strings (``parse_params`` checks them per method)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecVizError(f"--param takes key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


_KIND_WORDS = {int: "a whole number", float: "a number", bool: "true or false", str: "a text"}


def _typed(kind: type, value: Any) -> Any:
    """``value`` (a string from the command line, or a Python value from the API or the window) as ``kind``; a
    fraction is not a whole number and a bool is not a number (ValueError)."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("1", "0", "true", "false", "yes", "no", "on", "off"):
            return value.strip().lower() in ("1", "true", "yes", "on")
        raise ValueError(value)
    if kind in (int, float):
        if isinstance(value, bool):
            raise ValueError(value)
        number = float(value.strip()) if isinstance(value, str) else value
        if not isinstance(number, (int, float)):
            raise TypeError(value)
        if kind is int:
            if isinstance(number, float) and not number.is_integer():
                raise ValueError(value)
            return int(number)
        return float(number)
    return kind(value)


def budget_bounds(params_cls: type) -> tuple[int, int]:
    """The numbers a method's ``budget`` takes: its own minimum (Goose counts the root: 2) to its maximum."""
    meta = params_cls.__dataclass_fields__["budget"].metadata
    return int(meta.get("minimum") or 1), int(meta.get("maximum") or 1024)


def budget_words(method: str, params_cls: type) -> str:
    """What ``budget`` takes, in one phrase the command line, the API and the window all say."""
    lo, hi = budget_bounds(params_cls)
    return f"auto, paper or a whole number from {lo:,} to {hi:,}"


def check_budget(method: str, params_cls: type, value: Any) -> int:
    """``budget`` as a number of draft nodes, checked against the method's own bounds; the one check behind
    ``--budget``, ``--param budget=``, ``Session(budget=...)`` and the Run panel (the words ``auto`` and ``paper``
    are taken before it: :func:`specviz_core.engine.budget.split_auto`)."""
    lo, hi = budget_bounds(params_cls)
    try:
        n = _typed(int, value)
    except (TypeError, ValueError, OverflowError):
        n = None
    if n is None or not lo <= n <= hi:
        raise SpecVizError(f"budget for {method} must be {budget_words(method, params_cls)}, got {value!r}")
    return n


def parse_params(method: str, params_cls: type, raw: dict[str, str | Any]) -> Any:
    """Build a params dataclass from ``key=value`` strings (or typed values), checking every one."""
    fields = {f.name: f for f in dataclasses.fields(params_cls)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in fields:
            known = ", ".join(sorted(fields)) or "none"
            raise SpecVizError(f"unknown parameter {key!r} for method {method} (known: {known})")
        f = fields[key]
        kind = type(f.default)
        if key == "budget" and kind is int:
            values[key] = check_budget(method, params_cls, value)
            continue
        try:
            v: Any = _typed(kind, value)
        except (TypeError, ValueError, OverflowError):
            raise SpecVizError(f"parameter {key} must be {_KIND_WORDS.get(kind, 'a ' + kind.__name__)}, "
                               f"got {value!r}") from None
        if isinstance(v, float) and not math.isfinite(v):
            raise SpecVizError(f"parameter {key} must be a finite number, got {value!r}")
        lo, hi = f.metadata.get("minimum"), f.metadata.get("maximum")
        if lo is not None and v < lo:
            raise SpecVizError(f"parameter {key} must be at least {lo:g}, got {v}")
        if hi is not None and v > hi:
            raise SpecVizError(f"parameter {key} must be at most {hi:g}, got {v}")
        choices = f.metadata.get("choices")
        if choices and v not in choices:
            raise SpecVizError(f"parameter {key} must be one of {', '.join(choices)}, got {v!r}")
        values[key] = v
    return params_cls(**values)
