"""The Run panel's Device field: ``auto`` and ``cpu`` at once, the GPUs looked up when the list first opens.

Looking for GPUs loads torch (a second or two, once), which a replay never needs: so the lookup waits for the
user to open the list, or for a session's settings to be read (:meth:`DeviceCombo.fill_devices`).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QComboBox, QWidget

TIP = ("Where the models run: auto takes the GPU if there is one, else Apple's MPS, else the CPU; a model larger "
       "than one GPU is spread over every GPU and the CPU")


class DeviceCombo(QComboBox):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.addItems(["auto", "cpu"])
        self.setToolTip(TIP)
        self.looked_up = False
        """Whether this machine's GPUs were looked for (and added)."""

    def fill_devices(self) -> None:
        """Add this machine's GPUs (and MPS), once; the choice shown stays."""
        if self.looked_up:
            return
        self.looked_up = True
        QGuiApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            from specviz_core.runtime.devices import available_devices

            devices = available_devices()
        finally:
            QGuiApplication.restoreOverrideCursor()
        for d in devices:
            if self.findText(d) < 0:
                self.addItem(d)

    def showPopup(self) -> None:
        self.fill_devices()
        super().showPopup()
