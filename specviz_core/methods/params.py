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
        try:
            if isinstance(value, str) and kind is bool:
                if value.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(value)
                v: Any = value.lower() in ("1", "true", "yes", "on")
            elif isinstance(value, str) and kind in (int, float):
                v = kind(float(value)) if kind is int and float(value).is_integer() else kind(value)
            else:
                v = kind(value)
        except (TypeError, ValueError, OverflowError):
            raise SpecVizError(f"parameter {key} must be a {kind.__name__}, got {value!r}") from None
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
