"""From what a user asks for to a running, recorded session: the one engine factory the window,
``specviz record``, ``specviz bench`` and ``specviz optimize-tree`` share."""
