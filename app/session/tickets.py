"""Tickets: how a request sent to the engine thread knows it was paused or cancelled after it was sent.

Each request carries the :class:`Ticket` :meth:`Tickets.ticket` gave when it was sent: a pause cancels every request
sent before it, even one still queued behind a model that is loading, and a cancel (Reset, close) also stops a load
at its next stage. A request sent after the pause runs.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Ticket:
    """The worker's pause, cancel and preempt counts when a request was sent."""

    pauses: int
    cancels: int
    preempts: int = 0


class Tickets:
    """The pause, cancel and preempt counts: bumped from the UI thread, read on the engine thread (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pauses = 0
        self._cancels = 0
        self._preempts = 0

    def ticket(self) -> Ticket:
        """Stamp a request with the current counts."""
        with self._lock:
            return Ticket(self._pauses, self._cancels, self._preempts)

    def pause(self) -> None:
        """Every request sent before now is paused."""
        with self._lock:
            self._pauses += 1

    def cancel(self) -> None:
        """Every request sent before now is paused, and a load stops at its next stage."""
        with self._lock:
            self._pauses += 1
            self._cancels += 1

    def preempt(self) -> None:
        """A request of the user's is on its way: background work gives way."""
        with self._lock:
            self._preempts += 1

    def preempted(self, ticket: Ticket) -> bool:
        """A request of the user's came after ``ticket``: background work sent with it gives way."""
        return self._preempts != ticket.preempts

    def paused(self, ticket: Ticket) -> bool:
        """A pause (or cancel) came after ``ticket``."""
        return self._pauses != ticket.pauses

    def cancelled(self, ticket: Ticket) -> bool:
        """A cancel came after ``ticket``."""
        return self._cancels != ticket.cancels
