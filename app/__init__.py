"""SpecViz's Qt application (PySide6 + pyqtgraph): views over the headless core."""

from specviz_app._compat import guard_none_refcount

guard_none_refcount()
