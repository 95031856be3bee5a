"""One recorded session as one self-contained HTML page that replays it in any browser (``specviz share``)."""
