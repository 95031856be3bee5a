"""The "why" charts screenshot in docs/screenshots (maintainers; not a test):
``python tests/make_why_shots.py RECORDING SESSION``.

Draws the Charts panel of one recorded session alone at 1100 x 420, showing only why cycles stopped, the headroom and
acceptance by draft position (the three charts of docs/metrics.md's "In the window"), light theme.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SPECVIZ_CONFIG", str(Path(tempfile.mkdtemp()) / "gui.ini"))


def main(db: str, session: str, out: Path = ROOT / "docs" / "screenshots" / "why-charts.png") -> None:
    from specviz_app.gui import make_app
    from specviz_app.panels.base import export_widget
    from specviz_app.panels.charts.panel import ChartsPanel
    from specviz_core.recording.store import Recording
    from specviz_core.runtime.vocab import load_token_text
    from specviz_core.viewer.session_model import SessionModel
    from specviz_core.viewer.sources import RecordingSource

    app = make_app(theme="light")
    rec = Recording(Path(db), read_only=True)
    source = RecordingSource(rec, session)
    model = SessionModel()
    panel = ChartsPanel(model)
    model.open(source, load_token_text(source.info.tokenizer))
    model.set_cycle(len(source) - 1)
    panel.flush()
    panel.shown = ["causes", "headroom", "positions"]
    panel._placed = ()
    panel._layout(3)
    panel.resize(1100, 420)
    panel.show()
    for _ in range(5):
        app.processEvents()
    export_widget(panel.export_target(), out)
    print(out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
