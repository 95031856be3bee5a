"""The engine thread's jobs, one module each, run one at a time by the worker's queue
(:mod:`specviz_app.session.worker`; submitted through :class:`~specviz_app.session.engine_link.EngineLink`):

- :mod:`.session`: start a live session or a fork (``StartJob``), decode it (``DecodeJob``: Step, Run, Run to a
  breakpoint), end it (``ResetJob``), answer a fork's failed check (``ForkChoiceJob``); :mod:`.fork` re-runs a fork's
  parent cycles;
- :mod:`.measure`: the live session's AR baseline in the background (``BaselineJob``), an AR session recorded as the
  charts' baseline (``RecordBaselineJob``), the device's verify-cost curve (``CostCurveJob``);
- :mod:`.audit`: the session shown against plain decoding (``AuditJob``);
- :mod:`.race`: AR and a method recorded on one prompt for a race (``RaceJob``).

A job is a frozen dataclass of its request whose ``run(ctx)`` is a generator of reports (:mod:`.reports`) over what
the thread holds (:mod:`.holdings`), given as ``ctx`` (:mod:`.base`). Adding one: its module here, its report types in
:mod:`.reports` if it says something new, and the part of the window that submits it listens with
``engine.on(ReportType, handler)``; the worker, the link and the controller do not change.
"""
