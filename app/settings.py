"""Where the window remembers its layout: an INI file in the user's config folder (``SPECVIZ_CONFIG`` overrides)."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QSettings


def settings_path() -> Path:
    override = os.environ.get("SPECVIZ_CONFIG")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_config_dir("specviz")) / "gui.ini"


def settings() -> QSettings:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return QSettings(str(path), QSettings.Format.IniFormat)
