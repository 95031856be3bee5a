"""The ``specviz`` command line: argument parsing and printing only; the work is done in the layers below."""

from specviz_core.cli.commands import build_parser, main

__all__ = ["build_parser", "main"]
