"""Guards against known faults of the Qt bindings."""

from __future__ import annotations

import sys


def guard_none_refcount() -> None:
    """PySide6 6.12.0 under Python < 3.12 returns ``None`` from void Qt methods without a new reference,
    so every such call drops one of None's references and the interpreter aborts ("none_dealloc") after a
    few thousand. pyproject pins ``<6.12``; if 6.12 is installed anyway, give None a reference count no
    session can use up (None is never freed in CPython, so this changes nothing else)."""
    if sys.version_info >= (3, 12) or not _installed_pyside().startswith("6.12."):
        return
    import ctypes

    for obj in (None, True, False):  # 6.12.0 also drops a reference to True on Signal.emit
        refcnt = ctypes.c_ssize_t.from_address(id(obj))  # ob_refcnt is PyObject's first field
        if refcnt.value < 1 << 40:
            refcnt.value += 1 << 40


def _installed_pyside() -> str:
    """The installed PySide6's version, read from its metadata: importing PySide6 here would cost every command
    (``specviz record`` too) a tenth of a second."""
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("PySide6-Essentials", "PySide6"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    import PySide6  # installed some other way: ask the module itself

    return str(PySide6.__version__)
