"""``specviz record --fork SESSION:CYCLE``: continue a recorded session from a cycle with other settings."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specviz_core.cli.options import progress_bar
from specviz_core.errors import SpecVizError
from specviz_core.methods import parse_kv


def refuse_with_fork(args: argparse.Namespace) -> None:
    """Options a fork takes from its parent, refused when given with ``--fork``."""
    for given, option in ((args.prompt is not None or args.prompt_file is not None, "--prompt"),
                          (args.generate_kwargs is not None, "--generate-kwargs"),
                          (args.samples != 1, "--samples"), (args.no_chat_template, "--no-chat-template")):
        if given:
            raise SpecVizError(f"{option} does not go with --fork: a fork continues its parent's prompt")
    if getattr(args, "minutes", None) is not None:
        raise SpecVizError("--minutes does not go with --fork: a fork re-runs its parent's cycles first, to the end")


def cmd_fork(args: argparse.Namespace) -> int:
    from specviz_core.audit import audit_device
    from specviz_core.recording.store import Recording
    from specviz_core.session.factory import load_checked_model
    from specviz_core.session.fork import Fork, ForkMismatch, check_fork_point, fork_request, parse_fork_point
    from specviz_core.session.session import summary_line

    refuse_with_fork(args)
    sid, cycle = parse_fork_point(args.fork)
    if not Path(args.db).exists():
        raise SpecVizError(f"no recording at {args.db}: a fork is written beside its parent")
    with Recording(args.db) as rec:
        parent = rec.session(sid)
        if args.model not in (None, parent.model):
            raise SpecVizError(f"--model {args.model}: a fork runs its parent's model ({parent.model})")
        params = parse_kv(args.param) | ({"head": args.draft_head} if getattr(args, "draft_head", None) else {})
        spec = fork_request(parent, args.method, params, args.budget, args.temperature, args.seed,
                               args.max_new_tokens, args.draft_model, args.device or audit_device(parent.device),
                               args.dtype or parent.dtype)
        check_fork_point(parent, cycle)  # refused before a model is loaded
        progress = _progress(args.quiet)
        target = load_checked_model(parent.model, spec.device, spec.dtype, progress)
        run = Fork.start(rec, parent, cycle, spec, target, progress, anyway=args.fork_anyway)
        bars = _Bars(args.quiet, cycle, f"re-running {parent.id} to cycle {cycle}")
        try:
            while not run.done:
                was = run.switched
                try:
                    run.step()
                except ForkMismatch as e:
                    run.stop()
                    raise SpecVizError(f"{e} (the fork is saved as failed; --fork-anyway continues from the re-run "
                                       "state)") from None
                bars.update(run, was, spec.max_new_tokens, f"fork: {spec.method}")
        except KeyboardInterrupt:
            run.finish("interrupted", "stopped by the user")
            print("specviz: interrupted; the cycles so far are saved", file=sys.stderr)
            return 130
        finally:
            bars.close()
        info = rec.session(run.info.id)
    if run.mismatch is not None:
        print(f"specviz: warning: {run.mismatch.message()}; continued anyway (--fork-anyway)", file=sys.stderr)
    print(f"session {info.id}: {info.method}, fork of {parent.id} at cycle {cycle} ({run.check_text()})")
    print(summary_line(info))
    return 0


class _Bars:
    """Progress on stderr: the cycles re-run, then the fork's tokens."""

    def __init__(self, quiet: bool, cycles: int, desc: str) -> None:
        self.quiet, self.tokens = quiet, None
        self.rerun = self._bar(cycles, desc, "cycle") if cycles and not quiet else None

    @staticmethod
    def _bar(total: int, desc: str, unit: str, initial: int = 0):

        return progress_bar(total=total, initial=initial, unit=unit, desc=desc)

    def update(self, run, was_switched: bool, max_new_tokens: int, desc: str) -> None:
        if self.quiet:
            return
        if not was_switched and self.rerun is not None:
            self.rerun.update(1)
        if run.switched:
            if self.rerun is not None:
                self.rerun.close()
                self.rerun = None
            n = len(run.output_ids)
            if self.tokens is None:
                self.tokens = self._bar(max_new_tokens, desc, "tok", n)
            else:
                self.tokens.update(n - self.tokens.n)

    def close(self) -> None:
        for bar in (self.rerun, self.tokens):
            if bar is not None:
                bar.close()


def _progress(quiet: bool):
    def report(stage: str, fraction: float | None) -> None:
        if not quiet:
            pct = f" {fraction * 100:3.0f}%" if fraction is not None else ""
            print(f"[specviz]{pct} {stage}", file=sys.stderr, flush=True)
    return report
