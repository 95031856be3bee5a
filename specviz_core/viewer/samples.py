"""Samples of one prompt decoded as a group (``specviz record --samples N``: STAND's tables carry over from sample
to sample, so acceptance should rise): the group of a session, for the charts' samples plot."""

from __future__ import annotations

from specviz_core.records import SessionInfo


def samples_of(recording, info: SessionInfo) -> list[SessionInfo]:
    """The sessions of ``info``'s group in the order they were decoded (``info`` among them); [] if it has none.
    ``recording`` is a :class:`~specviz_core.recording.store.Recording` (damaged sessions are left out)."""
    if not info.group_id:
        return []
    return [s for s in recording.sessions(damaged=[]) if s.group_id == info.group_id]
