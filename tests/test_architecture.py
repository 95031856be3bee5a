"""The core stays headless and layered, with no import circle: import-linter contracts and a cycle check."""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("specviz", "specviz_core", "specviz_app", "specviz_resources")


def lint_imports(cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    return subprocess.run([exe, "--config", str(cwd / "pyproject.toml")], cwd=cwd, capture_output=True, text=True,
                          env=env)


def contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_contracts_kept():
    p = lint_imports(ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"{len(contracts())} kept, 0 broken" in p.stdout


def test_layers_contract_names_every_core_subpackage():
    layers = next(c for c in contracts() if c["type"] == "layers")
    assert layers.get("exhaustive") is True
    named = {m.strip() for layer in layers["layers"] for m in layer.split("|")} | set(layers["exhaustive_ignores"])
    assert layers["exhaustive_ignores"] == ["api"]  # the Python API, installed as ``specviz``: only it is left out
    children = {p.stem if p.is_file() else p.name for p in (ROOT / "specviz_core").iterdir()
                if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()}
    assert named == children


@pytest.mark.parametrize("bad", ["records_imports_session", "new_unlisted_module"])
def test_a_wrong_import_breaks_the_layers(tmp_path, bad):
    """A copy of the tree with one deliberate mistake must fail lint-imports."""
    shutil.copytree(ROOT / "specviz_core", tmp_path / "specviz_core", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "app", tmp_path / "specviz_app", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "resources", tmp_path / "specviz_resources", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    if bad == "records_imports_session":
        with open(tmp_path / "specviz_core" / "records.py", "a") as fh:
            fh.write("\nfrom specviz_core.session import run  # noqa\n")
    else:
        (tmp_path / "specviz_core" / "scratch.py").write_text("X = 1\n")
    import os

    p = lint_imports(tmp_path, env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert p.returncode != 0, p.stdout
    want = "specviz_core.records is not allowed to import specviz_core.session" if bad == "records_imports_session" \
        else "specviz_core.scratch"
    assert want in p.stdout


def test_no_import_cycle():
    """No module imports itself through others (lazy imports inside functions count too)."""
    g = grimp.build_graph(*PACKAGES)
    dg = nx.DiGraph((m, d) for m in g.modules for d in g.find_modules_directly_imported_by(m))
    cycles = sorted(nx.simple_cycles(dg), key=len)
    assert not cycles, f"import circles: {cycles[:5]}"


def test_core_runs_without_qt_loaded():
    code = "import sys, specviz_core.cli, specviz_core.session.run, specviz_core.recording.store, " \
           "specviz_core.viewer.session_model; " \
           "assert not any(m.startswith(('PySide6', 'pyqtgraph')) for m in sys.modules), 'Qt imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_every_package_is_listed_for_the_wheel():
    """setuptools is given an explicit package list (specviz_app lives in app/, specviz_resources in resources/,
    specviz in specviz_core/api/): it must be complete."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {"specviz_core": "specviz_core", "app": "specviz_app"}
    found = {".".join((folders[p.relative_to(ROOT).parts[0]], *p.relative_to(ROOT).parts[1:-1]))
             for d in folders for p in (ROOT / d).rglob("__init__.py")} | {"specviz_resources"}
    # The core's api/ folder is the Python API, installed as ``specviz`` and not as a subpackage of the core.
    found = {"specviz" if p == "specviz_core.api" else p for p in found}
    assert listed == found
