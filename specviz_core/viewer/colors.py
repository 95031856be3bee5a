"""The colours of the pictures, one per node source and outcome: the window's and the notebook's (no Qt).

Each is readable on light and dark backgrounds."""

from __future__ import annotations

# How a node or a committed token came to be: one colour each, readable on light and dark backgrounds.
SOURCE_COLORS: dict[str, str] = {
    "prompt": "#8a8f98",
    "root": "#5f6b7a",
    "spine": "#1f77d0",
    "branch": "#e07b00",
    "draft": "#8e44ad",
    "ngram": "#159a8c",
    "recycle": "#c0392b",
    "table": "#b8860b",
    "head": "#d6509b",
    "bonus": "#2e9e44",
    "ar": "#6c7a89",
}
SOURCE_LABELS: dict[str, str] = {
    "prompt": "prompt", "root": "root", "spine": "spine (context match)", "branch": "branch (adjacency table)",
    "draft": "draft model", "ngram": "n-gram copy", "recycle": "recycled token", "table": "table drafter",
    "head": "draft head",
    "bonus": "bonus token", "ar": "AR (one token)",
}
FALLBACK = "#7f8c8d"

ACCEPTED = "#2e9e44"
REJECTED = "#d64541"
GATED = "#9aa0a6"
