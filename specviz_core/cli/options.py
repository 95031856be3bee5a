"""Options several commands share."""

from __future__ import annotations

import argparse


def add_device_args(p: argparse.ArgumentParser) -> None:
    """``--device`` and ``--dtype``, the same for every command that loads a model."""
    p.add_argument("--device", default=None, metavar="DEVICE",
                   help="auto (default: the GPU if any, else Apple MPS, else the CPU), cpu, cuda, cuda:N or mps; "
                        "a model larger than one GPU is spread over every GPU and the CPU")
    p.add_argument("--dtype", default=None, metavar="DTYPE",
                   help="auto (default: float16 on a GPU, float32 on the CPU), float32, bfloat16 or float16")
