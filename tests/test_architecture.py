"""The core stays headless: an import-linter contract, checked on every test run."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_core_imports_no_gui():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    p = subprocess.run([exe, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 kept, 0 broken" in p.stdout


def test_core_runs_without_qt_loaded():
    code = "import sys, specviz_core.cli, specviz_core.session, specviz_core.recording; " \
           "assert not any(m.startswith(('PySide6', 'pyqtgraph')) for m in sys.modules), 'Qt imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
