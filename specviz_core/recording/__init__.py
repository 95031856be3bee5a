"""Sessions on disk: the SQLite store (``store``), a cycle as a table row (``rows``), and the public JSON-lines
export (``export``)."""
