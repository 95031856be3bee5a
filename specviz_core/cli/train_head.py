"""``specviz train-head``: the command line of :mod:`specviz_core.train_head`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from specviz_core.cli.options import add_device_args
from specviz_core.errors import SpecVizError


def add_parser(sub: Any) -> None:
    t = sub.add_parser(
        "train-head", help="train a draft head for a model (TALON's and EAGLE's drafter), kept in the user cache",
        description="Train a small EAGLE-style draft head for the model on this machine: the model answers the "
                    "shipped seed prompts, its features are read, one decoder layer learns to predict them. "
                    "talon and eagle_static then draft with it (drafter=auto picks it up).")
    t.add_argument("--model", default=None, help="model folder or cached hub id (default: the embedded model)")
    t.add_argument("--minutes", type=float, default=10.0,
                   help="time for the whole run: 60%% writing text, the rest training (default 10)")
    t.add_argument("--steps", type=int, default=None,
                   help="training steps (default: as many as fit); with --text-tokens a run repeats exactly")
    t.add_argument("--text-tokens", type=int, default=None,
                   help="answer tokens to write (default: as many as fit in 60%% of the minutes)")
    t.add_argument("--seed", type=int, default=0, help="seed of the text and the training (default 0)")
    add_device_args(t)
    t.add_argument("--quiet", action="store_true", help="no progress lines")


class _Bar:
    """One progress line on stderr, rewritten in place on a terminal."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.last = ""

    def __call__(self, stage: str, fraction: float | None) -> None:
        if self.quiet:
            return
        kind = stage.split(":", 1)[0]
        bar = ""
        if fraction is not None:
            filled = round(20 * fraction)
            bar = f"[{'#' * filled}{'.' * (20 - filled)}] {fraction * 100:3.0f}% "
        line = f"[specviz] {bar}{stage}"
        if self.tty:
            end = "\n" if kind != self.last and self.last else ""
            print(f"{end}\r{line[:150]:<150}", end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)
        self.last = kind

    def done(self) -> None:
        if self.tty and not self.quiet and self.last:
            print(file=sys.stderr)


def cmd_train_head(args: argparse.Namespace) -> int:
    from specviz_core.drafters.head import head_info, save_head
    from specviz_core.session.factory import load_checked_model
    from specviz_core.train_head import train_head

    if not args.minutes > 0:
        raise SpecVizError(f"--minutes must be above 0, got {args.minutes}")
    for name, v in (("--steps", args.steps), ("--text-tokens", args.text_tokens)):
        if v is not None and v < 1:
            raise SpecVizError(f"{name} must be at least 1, got {v}")
    bar = _Bar(args.quiet)
    target = load_checked_model(args.model, args.device, args.dtype, progress=bar)
    old = head_info(target)
    head, info = train_head(target, minutes=args.minutes, steps=args.steps, seed=args.seed,
                            text_tokens=args.text_tokens, progress=bar)
    bar.done()
    path = save_head(target, head, info)
    a = info["agreement"]
    print(f"held-out agreement with {target.name} ({a['positions']:,} positions of {info['held_out_answers']} "
          f"answers it did not train on): top-1 {a['top1']:.1%}, top-5 {a['top5']:.1%} at the root; "
          f"top-1 {a['top1_step2']:.1%}, top-5 {a['top5_step2']:.1%} a step further")
    print(f"trained {info['steps']} steps on {info['text_tokens']:,} tokens in {info['minutes']:.1f} min; "
          f"saved {path}{' (replacing the previous head)' if old else ''}")
    print(f"to repeat it exactly: specviz train-head --seed {args.seed} --steps {info['steps']} "
          f"--text-tokens {info['answer_tokens']}")
    print("talon and eagle_static now draft with it (drafter=auto); drafter=table keeps the n-gram tables")
    return 0
