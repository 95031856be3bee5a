"""The window's panels. Each takes the :class:`~specviz_core.viewer.session_model.SessionModel` in its
constructor, connects to its events there, and draws only what the model says is current."""
