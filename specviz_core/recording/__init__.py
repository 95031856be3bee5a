"""Sessions on disk: the SQLite store (``store``) and the public JSON-lines export (``export``)."""
