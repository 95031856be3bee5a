"""Benchmarks: the runner, transformers' reference rows, summaries and reports, prompt suites, and
STAND's tree optimizer. No argument parsing here (that is ``specviz_core.cli``)."""
