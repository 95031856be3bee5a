"""The charts panel: how a session's speculation went, cycle by cycle (pyqtgraph)."""
