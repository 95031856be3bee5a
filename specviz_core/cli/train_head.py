"""``specviz train-head``: the command line of :mod:`specviz_core.training.train`."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from specviz_core.cli.options import add_device_args, say_plan
from specviz_core.errors import SpecVizError
from specviz_core.runtime.head_files import DEFAULT_FEATURES, FEATURES


def add_parser(sub: Any) -> None:
    t = sub.add_parser(
        "train-head", help="train a draft head for a model (TALON's and EAGLE's drafter), kept in the user cache",
        description="Train a small EAGLE-style draft head for the model on this machine: the model reads the "
                    "shipped answers (the embedded model's own, to 350 seed prompts) or writes its own, its features "
                    "are read, one decoder layer learns to predict them. talon and eagle_static then draft with it "
                    "(drafter=auto picks it up).")
    t.add_argument("--model", default=None, help="model folder or cached hub id (default: the embedded model)")
    t.add_argument("--minutes", type=float, default=10.0,
                   help="time for the whole run: half reading the text (60%% writing it, with --text own), "
                        "the rest training (default 10)")
    t.add_argument("--text", choices=("shipped", "own"), default="shipped",
                   help="shipped: the shipped answers, read (fast, most text); own: the model writes its own "
                        "answers to the seed prompts first (slower, fewer tokens; its own words) (default shipped)")
    t.add_argument("--features", choices=FEATURES, default=DEFAULT_FEATURES,
                   help="what the head reads of the model: last, its last hidden state (EAGLE-1); eagle3, three "
                        "layers' (low, middle, high) fused, trained over 3 unrolled draft steps (EAGLE-3) "
                        f"(default {DEFAULT_FEATURES})")
    t.add_argument("--format", choices=("specviz", "eagle", "eagle3"), default="specviz", dest="layout",
                   help="specviz: SpecViz's own head, kept per model in the user cache (drafter=auto finds it); eagle "
                        "/ eagle3: a head in EAGLE-1/2's / EAGLE-3's published layout (config.json and "
                        "model.safetensors), which the serving engines load and --draft-head drafts with here "
                        "(it fixes the features: eagle reads the last hidden state, eagle3 three layers); "
                        "docs/eagle-heads.md (default specviz)")
    t.add_argument("--for", dest="engine", choices=("vllm", "sglang"), default=None,
                   help="with --format eagle|eagle3: the serving engine the folder is written for (default vllm). "
                        "eagle3 writes one folder both load (architectures LlamaForCausalLMEagle3); eagle writes "
                        "vLLM's (LlamaForCausalLM, no fc.bias: its EAGLE-1 fc has none) or SGLang's "
                        "(LlamaForCausalLMEagle and a zero fc.bias, which its fc always has). SpecViz drafts with "
                        "either; docs/eagle-heads.md")
    t.add_argument("--out", metavar="DIR", default=None,
                   help="with --format eagle|eagle3: the folder to write (default: <heads folder>/<model>-<format>, "
                        "which specviz models lists)")
    t.add_argument("--steps", type=int, default=None,
                   help="training steps (default: as many as fit); with --text-tokens a run repeats exactly")
    t.add_argument("--text-tokens", type=int, default=None,
                   help="answer tokens to read or write (default: as many as fit in the text's share of the minutes)")
    t.add_argument("--write-text", metavar="FILE", default=None,
                   help="instead of training, write the model's answers to the seed prompts to FILE (JSON lines; "
                        "resumes an unfinished FILE): how resources/head-text/answers.jsonl.gz was made")
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


def check_folder(out: Path) -> None:
    """A folder a head can be written to (made if missing), or one line saying why not."""
    if out.exists() and not out.is_dir():
        raise SpecVizError(f"--out {out} is a file: give a folder (the head is a folder: config.json and "
                           "model.safetensors)")
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise SpecVizError(f"cannot write the head to {out}: {probe} is not a folder this user may write to")


def cmd_train_head(args: argparse.Namespace) -> int:
    from specviz_core.drafters.talon.head import save_head
    from specviz_core.runtime.head_files import head_info
    from specviz_core.session.factory import load_checked_model
    from specviz_core.training.train import train_head

    if not args.minutes > 0:
        raise SpecVizError(f"--minutes must be above 0, got {args.minutes}")
    for name, v in (("--steps", args.steps), ("--text-tokens", args.text_tokens)):
        if v is not None and v < 1:
            raise SpecVizError(f"{name} must be at least 1, got {v}")
    if args.write_text and args.write_text.endswith(".gz"):
        raise SpecVizError("--write-text writes plain JSON lines (so an interrupted run can resume): compress the "
                           "finished file yourself (gzip -9)")
    layout = getattr(args, "layout", "specviz")
    if layout != "specviz" and args.features != DEFAULT_FEATURES and args.features != (
            "eagle3" if layout == "eagle3" else "last"):
        raise SpecVizError(f"--format {layout} reads {'three layers' if layout == 'eagle3' else 'the last hidden state'}"
                           f": leave --features out")
    if args.out is not None and layout == "specviz":
        raise SpecVizError("--out is for --format eagle or eagle3 (SpecViz's own head is kept per model)")
    if getattr(args, "engine", None) is not None and layout == "specviz":
        raise SpecVizError("--for is for --format eagle or eagle3 (serving engines do not load SpecViz's own head)")
    engine = getattr(args, "engine", None) or "vllm"
    if args.out is not None:  # where the head goes is checked before minutes of training, not after
        check_folder(Path(args.out))
    if not args.write_text:
        what = {"specviz": "SpecViz's", "eagle": "an EAGLE-1/2-layout", "eagle3": "an EAGLE-3-layout"}[layout]
        say_plan(args, f"train {what} draft head for {args.model or 'the default model'} on "
                       f"{'the shipped answers' if args.text == 'shipped' else 'answers it writes itself'}: "
                       f"read the text, then train, in {args.minutes:g} minutes"
                       + (f" into {args.out}" if args.out else ""))
    bar = _Bar(args.quiet)
    started = time.monotonic()
    target = load_checked_model(args.model, args.device, args.dtype, progress=bar)
    old = head_info(target)
    if args.write_text:
        return _write_text(target, args, bar)
    # --minutes is the whole run's: loading the model came out of it (saving the head after takes a second)
    left = max(args.minutes - (time.monotonic() - started) / 60, 0.05 * args.minutes)
    head, info = train_head(target, minutes=left, steps=args.steps, seed=args.seed, text=args.text,
                            text_tokens=args.text_tokens, features=args.features, layout=layout, progress=bar)
    bar.done()
    if layout != "specviz":
        from specviz_core.drafters.talon.eagle.heads import save_eagle_head
        from specviz_core.runtime.head_files import head_key, heads_dir

        out = Path(args.out) if args.out else heads_dir() / f"{head_key(target)}-{layout}"
        existed = (out / "config.json").exists()
        save_eagle_head(head, target.model.config, out, info, engine=engine)
        path = out
    else:
        path = save_head(target, head, info)
    a = info["agreement"]
    print(f"held-out agreement with {target.name} ({a['positions']:,} positions of {info['held_out_answers']} "
          f"answers it did not train on): top-1 {a['top1']:.1%}, top-5 {a['top5']:.1%} at the root; "
          f"top-1 {a['top1_step2']:.1%}, top-5 {a['top5_step2']:.1%} a step further")
    t, applied = info["calibration"]["temperature"], info["calibration"]["applied"]
    print(f"calibrated on the held-out answers: its probabilities are softmax(logits / {t:.2f})" if applied else
          "its probabilities are as trained: EAGLE-1/2's layout reads the model's own LM head, which a head file "
          "cannot recalibrate")
    print(f"trained {info['steps']} steps on {info['text_tokens']:,} tokens in {info['minutes']:.1f} min; "
          f"saved {path}{' (replacing the previous head)' if (existed if layout != 'specviz' else old) else ''}")
    how = f"--format {layout}" if layout != "specviz" else f"--features {args.features}"
    if getattr(args, "engine", None):
        how += f" --for {engine}"
    print(f"to repeat it exactly: specviz train-head --seed {args.seed} --text {args.text} {how} "
          f"--steps {info['steps']} --text-tokens {info['answer_tokens']}")
    if layout != "specviz":
        name = "EAGLE-3" if layout == "eagle3" else "EAGLE-1/2"
        serves = "vLLM and SGLang load that folder" if layout == "eagle3" else (
            "SGLang loads that folder (--speculative-algorithm EAGLE); for vLLM write it with --for vllm"
            if engine == "sglang" else "vLLM loads that folder (method eagle); for SGLang write it with --for sglang")
        print(f"it is in {name}'s published layout: draft with it here with --draft-head {path} (talon, eagle_static, "
              f"eagle); {serves} (docs/eagle-heads.md)")
    else:
        print("talon, eagle_static and eagle now draft with it (drafter=auto); drafter=table keeps the n-gram tables")
    return 0


def _write_text(target: Any, args: argparse.Namespace, bar: _Bar) -> int:
    from pathlib import Path

    from specviz_core.training.text import write_answers
    from specviz_core.training.train import seed_prompts

    out = Path(args.write_text)
    n = write_answers(target, seed_prompts(), out, seed=args.seed, progress=bar)
    bar.done()
    print(f"wrote {n:,} answer tokens to {out}")
    return 0
