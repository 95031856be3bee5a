"""Run → Audit against plain decoding: the verdict on a live greedy session, and on a sampled one."""

from __future__ import annotations

from PySide6.QtCore import Qt

from specviz_app.session.jobs.reports import Busy

from specviz_core.audit import plain_greedy
from specviz_core.runtime.models import load_model


def test_audit_of_a_live_greedy_session_is_identical(window, qtbot, tiny_dir):
    w = window
    qtbot.keyClick(w, Qt.Key.Key_F10)
    qtbot.waitUntil(lambda: w.model.n_cycles >= 1 and w.controller.idle, timeout=60000)
    qtbot.keyClick(w, Qt.Key.Key_F10)
    qtbot.waitUntil(lambda: w.model.n_cycles >= 2 and w.controller.idle, timeout=60000)
    info = w.model.source.info
    output = [t for s in w.model.source.summaries() for t in s.committed_ids]
    # Every report names its job: the audit goes through the controller, and its Busy is the audit's, not a guess.
    heard = []
    w.controller.engine.on(Busy, lambda rep: heard.append((rep.on, type(w.controller.engine.reporting).__name__,
                                                           w.controller.state.detail)))
    w.audit.audit_session()
    qtbot.waitUntil(lambda: w.audit.result is not None, timeout=60000)
    assert (True, "AuditJob", "Auditing against plain decoding") in heard, heard
    # Independently: the tiny model's own greedy continuation of the prompt.
    ref = plain_greedy(load_model(str(tiny_dir), device="cpu"), info.prompt_ids, len(output))
    assert len(output) >= 2 and output == ref
    assert w.audit.result.verdict == "identical", w.audit.result.message
    assert w.audit.box is not None and w.audit.box.text().startswith(f"Identical: all {len(output)} tokens")
    w.audit.box.close()


def test_audit_of_a_sampled_session_does_not_apply(window, qtbot):
    w = window
    w.run_panel.temperature.setValue(0.8)
    qtbot.keyClick(w, Qt.Key.Key_F10)
    qtbot.waitUntil(lambda: w.model.n_cycles >= 1 and w.controller.idle, timeout=60000)
    w.audit.audit_session()
    assert w.audit.result.verdict == "not applicable" and "sampled" in w.audit.result.message
    w.audit.box.close()


def test_audit_with_nothing_open_says_so(window):
    window.audit.audit_session()
    assert "Nothing to audit" in window.run_panel.message.text()
