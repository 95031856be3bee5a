"""A tiny observer: the Qt-free stand-in for a signal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Event:
    """Callbacks connected to one kind of change, called in connection order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._callbacks: list[Callable[..., Any]] = []

    def connect(self, callback: Callable[..., Any]) -> None:
        self._callbacks.append(callback)

    def emit(self, *args: Any) -> None:
        for cb in list(self._callbacks):
            cb(*args)

    def __repr__(self) -> str:
        return f"Event({self.name!r}, {len(self._callbacks)} callbacks)"
