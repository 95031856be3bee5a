"""What ``--device`` and ``--dtype`` accept, and the dtype each device gets by default: torch-free, so a window
can offer them (and a replay name a recorded session's curve file) without loading torch."""

from __future__ import annotations

#: What ``--device`` accepts.
DEVICES = ("auto", "cpu", "cuda", "cuda:N", "mps")
#: What ``--dtype`` accepts.
DTYPES = ("auto", "float32", "bfloat16", "float16")
#: Short dtype names users write, to the full ones.
DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def default_dtype(device_type: str) -> str:
    """float16 on GPUs (fast, and what the papers measure); float32 on CPUs, where half precision is slow and its
    rounding makes near-ties common."""
    return "float16" if device_type.startswith(("cuda", "mps")) else "float32"
