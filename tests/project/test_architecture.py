"""The core stays headless and layered, with no import circle: import-linter contracts and a cycle check."""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
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
    code = "import sys, specviz_core.cli, specviz_core.session.session, specviz_core.recording.store, " \
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


def engine_private_names() -> set[str]:
    """The private members of :class:`~specviz_core.engine.cycle.Engine`: its ``_`` methods and ``self._`` fields."""
    import ast

    tree = ast.parse((ROOT / "specviz_core" / "engine" / "cycle.py").read_text(encoding="utf-8"))
    engine = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    names = {n.name for n in engine.body if isinstance(n, ast.FunctionDef) and n.name.startswith("_")
             and not n.name.startswith("__")}
    names |= {n.attr for n in ast.walk(engine) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
              and n.value.id == "self" and n.attr.startswith("_")}
    return names


def test_nothing_outside_the_engine_reads_its_private_members():
    """Every face drives the engine through the one Session and the engine's public members: no module outside
    ``specviz_core/engine`` (tests included) reads or sets one of its ``_`` members."""
    import ast

    private = engine_private_names()
    assert {"_prefilled", "_first_row"} <= private  # the scan sees the engine's own fields
    reach = []
    for folder in ("specviz_core", "app", "resources", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            if (ROOT / "specviz_core" / "engine") in path.parents:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr in private and not (
                        isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    reach.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    assert reach == []


def test_one_place_builds_an_engine():
    """``build_engine`` has one caller, the core Session: the API, the command line, the benchmarks, the window's
    jobs and a fork all decode through that object."""
    import ast

    calls: dict[str, list[str]] = {"build_engine": [], "Engine": []}
    for folder in ("specviz_core", "app", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                    if name in calls:
                        calls[name].append(str(path.relative_to(ROOT)))
    assert calls == {"build_engine": ["specviz_core/session/session.py"], "Engine": ["specviz_core/session/factory.py"]}
