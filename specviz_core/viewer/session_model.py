"""The one current session and cycle that every view shows (no Qt here).

Views take a :class:`SessionModel` in their constructor and connect to its events; only the model
changes the current cycle, and it tells everyone when it does. It also holds the session-wide facts every view
shares: the open recording (where live sessions are recorded and replays come from), the AR baseline that speed-ups
are measured against, and the verify-cost curve of the session's model on its device. No view loads them itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.errors import DamagedCycle, SpecVizError
from specviz_core.records import CycleRecord
from specviz_core.runtime.vocab import TokenText
from specviz_core.viewer.events import Event
from specviz_core.viewer.filters import CycleFilter
from specviz_core.viewer.selection import BONUS, committed_node
from specviz_core.viewer.sources import CycleSource, LiveSource


class SessionModel:
    """Current session (a :class:`CycleSource`), current cycle, selected node, cycle filter."""

    def __init__(self) -> None:
        self.source: CycleSource | None = None
        self.vocab = TokenText(None)
        self.index: int = -1
        self.record: CycleRecord | None = None
        """The current cycle's record; None with no session, or when the current cycle is damaged."""
        self.damage_text = ""
        """Why the current cycle cannot be shown ('Cycle 7 is damaged: ...'); '' when it can."""
        self.selected_node: int | None = None
        self.filter = CycleFilter()
        self.follow_live = True
        """While decoding, move to each new cycle as it arrives."""
        self.recording_path: Path | None = None
        """The open recording: the file live sessions are recorded to and replays, forks and comparisons read."""
        self.ar_baseline: tuple[float | None, str, float | None] = (None, "", None)
        """(AR tokens/s on the session's prompt, model and device, or None; where it comes from; its median forward
        in ms, or None), as :meth:`~specviz_core.viewer.sources.RecordingSource.ar_baseline` gives it."""
        self.cost_curve: dict[str, Any] | None = None
        """The stored verify-cost curve of the session's model, device and dtype (see
        :mod:`specviz_core.engine.cost_curve`), or None where none was measured."""
        # Events: (source), (), (record, or None for a damaged cycle), (summaries appended), (node id or None),
        # (filter)
        self.session_opened = Event("session_opened")
        self.session_closed = Event("session_closed")
        self.cycle_changed = Event("cycle_changed")
        self.cycles_appended = Event("cycles_appended")
        self.node_selected = Event("node_selected")
        self.filter_changed = Event("filter_changed")
        # Session-wide facts: (path), (tokens/s or None, note, forward ms or None), (curve dict or None)
        self.recording_changed = Event("recording_changed")
        self.baseline_changed = Event("baseline_changed")
        self.cost_curve_changed = Event("cost_curve_changed")

    # -- session-wide facts -----------------------------------------------------
    def set_recording(self, path: str | Path | None) -> None:
        """Make ``path`` the open recording (told to every view if it changed)."""
        new = Path(path).expanduser() if path else None
        if new != self.recording_path:
            self.recording_path = new
            self.recording_changed.emit(new)

    def set_ar_baseline(self, tokens_per_s: float | None, note: str = "", forward_ms: float | None = None) -> None:
        """The AR speed the session's speed-up is measured against (None: not measured), and its median forward."""
        value = (tokens_per_s, note, forward_ms) if tokens_per_s is not None else (None, "", None)
        if value != self.ar_baseline:
            self.ar_baseline = value
            self.baseline_changed.emit(*value)

    def set_cost_curve(self, curve: dict[str, Any] | None) -> None:
        """The verify-cost curve of the session's model on its device (None: not measured)."""
        if curve != self.cost_curve:
            self.cost_curve = curve
            self.cost_curve_changed.emit(curve)

    # -- session --------------------------------------------------------------
    def open(self, source: CycleSource, vocab: TokenText | None = None, *,
             ar_baseline: tuple[float | None, str, float | None] = (None, "", None),
             cost_curve: dict[str, Any] | None = None) -> None:
        """Show ``source``; its session-wide facts are set before the views are told, so they draw once."""
        if self.source is not None:
            self.close()
        self.source = source
        self.ar_baseline = ar_baseline if ar_baseline[0] is not None else (None, "", None)
        self.cost_curve = cost_curve
        if vocab is not None:
            self.vocab = vocab
        self.index = -1
        self.record = None
        self.damage_text = ""
        self.selected_node = None
        self.session_opened.emit(source)
        if len(source):
            self.set_cycle(len(source) - 1 if source.live else 0)

    def close(self) -> None:
        if self.source is None:
            return
        self.source = None
        self.ar_baseline, self.cost_curve = (None, "", None), None
        self.index = -1
        self.record = None
        self.damage_text = ""
        self.selected_node = None
        self.session_closed.emit()

    @property
    def n_cycles(self) -> int:
        return len(self.source) if self.source is not None else 0

    def summaries(self) -> list[CycleSummary]:
        return self.source.summaries() if self.source is not None else []

    # -- cycles -----------------------------------------------------------------
    def set_cycle(self, index: int) -> bool:
        """Make cycle ``index`` current (clamped); False if there is nothing to show.

        A cycle its recording cannot give back is current all the same, with no record and ``damage_text``
        saying why: the index and what the views draw never part."""
        if self.source is None or not len(self.source):
            return False
        index = max(0, min(index, len(self.source) - 1))
        if index == self.index and (self.record is not None or self.damage_text):
            return True
        try:
            record, damage = self.source.cycle(index), ""
        except DamagedCycle as e:
            record, damage = None, f"Cycle {index} is damaged: {e.reason}"
        except SpecVizError as e:
            record, damage = None, f"Cycle {index} cannot be read: {e}"
        self.index, self.record, self.damage_text = index, record, damage
        self.selected_node = None
        self.cycle_changed.emit(record)
        return True

    def move(self, delta: int) -> bool:
        """Move ``delta`` recorded cycles (negative: back), skipping cycles the filter hides. (Decoding a cycle is
        the session controller's ``step``.)"""
        if self.source is None or not len(self.source):
            return False
        matching = self.visible_indices()
        if not matching:
            return False
        if delta > 0:
            later = [i for i in matching if i > self.index]
            target = later[min(delta, len(later)) - 1] if later else matching[-1]
        else:
            earlier = [i for i in matching if i < self.index]
            target = earlier[max(len(earlier) + delta, 0)] if earlier else matching[0]
        return self.set_cycle(target)

    def visible_indices(self) -> list[int]:
        return self.filter.matching(self.summaries())

    def set_filter(self, f: CycleFilter) -> None:
        self.filter = f
        self.filter_changed.emit(f)

    def append(self, record: CycleRecord, summary: CycleSummary | None = None, follow: bool | None = None) -> None:
        """A live cycle arrived (the source must be a :class:`LiveSource`); ``summary`` if already computed. It is
        shown when ``follow`` (default: :attr:`follow_live`) or when no cycle is shown yet."""
        if not isinstance(self.source, LiveSource):
            raise TypeError("cycles can only be appended to a live session")
        summary = self.source.append(record, summary)
        self.cycles_appended.emit([summary])
        if (self.follow_live if follow is None else follow) or self.index < 0:
            self.set_cycle(record.index)

    # -- selection --------------------------------------------------------------
    def select_node(self, node_id: int | None) -> None:
        """Select a node of the current cycle, or its bonus token (:data:`BONUS`); None (or an unknown id) clears."""
        if node_id == self.selected_node:
            return
        if node_id is not None and (self.record is None or (node_id not in self.record.node_by_id
                                                            and node_id != BONUS)):
            node_id = None
        self.selected_node = node_id
        self.node_selected.emit(node_id)

    def select_committed(self, cycle: int, k: int) -> bool:
        """Go to ``cycle`` and select the node that committed its ``k``-th token (the bonus token for the last)."""
        if not self.set_cycle(cycle) or self.record is None:
            return False
        self.select_node(committed_node(self.record, k))
        return True
