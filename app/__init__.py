"""SpecViz's Qt application (PySide6 + pyqtgraph): views over the headless core."""
