"""The decode cycle: draft, flatten, one target forward, walk, trim, harvest, record.

``cycle`` (the engine), ``forward`` (the one target forward), ``verify`` (greedy and sampling walks),
``budget`` and ``cost_curve`` (budget=auto and the measured verify cost).
"""
