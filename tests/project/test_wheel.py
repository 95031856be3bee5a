"""A built wheel carries every resource and runs on its own: installed into a fresh virtualenv, its
``specviz screenshot --demo`` renders the bundled demo from the installed files, not from this checkout.

No network: the wheel is built without build isolation and installed without dependencies into a venv
that sees this interpreter's site-packages (torch, Qt and the rest are reused, not downloaded), whether this
interpreter is the system's or a virtualenv's.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the wheel is built from: the project's own files, copied, so the build's egg-info and build/ folders
# land in a temporary folder instead of the checkout.
SOURCES = ("pyproject.toml", "README.md", "app", "specviz_core", "resources")
TIMEOUT_S = 600  # generous: a busy two-core machine builds, installs and imports torch slowly

WHERE = """
import json, sys
import specviz, specviz_app, specviz_core, specviz_resources
print(json.dumps({
    "modules": {m.__name__: m.__file__ for m in (specviz, specviz_app, specviz_core, specviz_resources)},
    "prefix": sys.prefix,
    "meta_path": [getattr(f, "__name__", type(f).__name__) for f in sys.meta_path],
    "icons": sorted(p.name for p in specviz_resources.files("icons").iterdir()),
}))
"""


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _venv_bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / name


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    out = tmp / "dist"
    _run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "--no-index",
          "-q", "-w", str(out)], cwd=tmp)
    (whl,) = out.glob("specviz-*.whl")
    return whl


def _site_packages(venv: Path) -> Path:
    """The venv's own site-packages folder, asked of its python (its layout differs by platform)."""
    proc = _run([str(_venv_bin(venv, "python")), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                cwd=venv.parent)
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("venv") / "env"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=venv.parent)
    # The venv sees what this interpreter sees: not ``--system-site-packages``, which gives the *base*
    # interpreter's folders (run from a virtualenv, that misses everything installed in it), but this
    # interpreter's own site folders (and those its .pth files added), after the venv's own. Plain paths, not ``addsitedir``: an editable
    # install's finder of the checkout is not carried over.
    seen = [p for p in (*site.getsitepackages(), site.getusersitepackages() if site.ENABLE_USER_SITE else "",
                        *(p for p in sys.path if Path(p or ".").name in ("site-packages", "dist-packages")))
            if p and Path(p).is_dir()]
    seen = list(dict.fromkeys(seen))
    (_site_packages(venv) / "specviz-test-parent.pth").write_text("\n".join(seen) + "\n", encoding="utf-8")
    # This interpreter's pip, run by the venv's python, installs into the venv.
    _run([str(_venv_bin(venv, "python")), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
         cwd=venv.parent)
    return venv


def _clean_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(QT_QPA_PLATFORM="offscreen", SPECVIZ_CONFIG=str(tmp / "gui.ini"), HF_HUB_OFFLINE="1")
    return env


def test_wheel_holds_every_resource_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    want = {"specviz_resources/" + p.relative_to(ROOT / "resources").as_posix()
            for p in (ROOT / "resources").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".py", ".pyc")}
    assert want and not want - names, f"missing from the wheel: {sorted(want - names)}"
    assert "specviz_resources/__init__.py" in names and "specviz_resources/demo/goose-demo.db" in names
    # The Python API is the package ``specviz`` (typed), not a second copy under the core.
    assert {"specviz/__init__.py", "specviz/session.py", "specviz/py.typed"} <= names
    assert not any(n.startswith("specviz_core/api/") for n in names)


def test_installed_wheel_imports_from_the_venv(venv, tmp_path):
    run_dir = tmp_path / "elsewhere"  # not the checkout: nothing importable in the cwd
    run_dir.mkdir()
    proc = _run([str(_venv_bin(venv, "python")), "-c", WHERE], cwd=run_dir, env=_clean_env(tmp_path))
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(info["prefix"]).resolve() == venv.resolve()
    for name, file in info["modules"].items():
        # An editable install of the checkout in the base site-packages appends its finder to sys.meta_path,
        # after the PathFinder that searches the venv's own site-packages first: the venv must win.
        assert Path(file).resolve().is_relative_to(venv.resolve()), f"{name} came from {file}"
        assert not Path(file).resolve().is_relative_to(ROOT.resolve()), f"{name} came from the checkout"
    meta = info["meta_path"]
    editable = [i for i, n in enumerate(meta) if "Editable" in n]
    if editable:
        assert meta.index("PathFinder") < editable[0], meta
    assert {"specviz.svg", "run.svg", "step.svg"} <= set(info["icons"])


def test_installed_wheel_renders_the_demo(venv, tmp_path):
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    out = run_dir / "demo.png"
    _run([str(_venv_bin(venv, "specviz")), "screenshot", "--demo", "--out", "demo.png"], cwd=run_dir,
         env=_clean_env(tmp_path))
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
    from PySide6.QtGui import QImage

    img = QImage(str(out))
    assert not img.isNull() and (img.width(), img.height()) == (1500, 940)
    colours = {img.pixel(x, y) for x in range(0, img.width(), 9) for y in range(0, img.height(), 9)}
    assert len(colours) > 8
