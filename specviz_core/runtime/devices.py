"""Where a model runs: the devices this machine has, the dtype, timing synchronisation, and whether the weights fit
before anything is loaded (read from the safetensors headers)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from specviz_core.errors import SpecVizError
from specviz_core.runtime.catalog import header_params
from specviz_core.runtime.choices import DEVICES, DTYPE_ALIASES, DTYPES, default_dtype  # noqa: F401 - DTYPES re-exported


def available_devices() -> list[str]:
    """The devices this machine can run on, as ``--device`` values: ``auto``, ``cpu``, each GPU, ``mps``."""
    out = ["auto", "cpu"]
    if torch.cuda.is_available():
        out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        out.append("mps")
    return out


def pick_device(device: str | None = None) -> torch.device:
    """``auto`` (or None): the GPU when there is one, else Apple's MPS, else the CPU."""
    if device and device != "auto":
        try:
            dev = torch.device(device)
        except RuntimeError:
            raise SpecVizError(f"unknown device {device!r}: use one of {', '.join(DEVICES)}") from None
        if dev.type == "cuda":
            if not torch.cuda.is_available():
                raise SpecVizError("CUDA was asked for but no GPU is available")
            if dev.index is not None and dev.index >= torch.cuda.device_count():
                raise SpecVizError(f"there is no GPU {dev.index} (GPUs: {torch.cuda.device_count()})")
        elif dev.type == "mps" and not torch.backends.mps.is_available():
            raise SpecVizError("MPS was asked for but this machine has no Apple GPU")
        elif dev.type not in ("cpu", "cuda", "mps"):
            raise SpecVizError(f"unsupported device {device!r}: use one of {', '.join(DEVICES)}")
        return dev
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def pick_dtype(device: torch.device, dtype: str | None = None) -> torch.dtype:
    if dtype and dtype != "auto":
        try:
            return {"float32": torch.float32, "float16": torch.float16,
                    "bfloat16": torch.bfloat16}[DTYPE_ALIASES.get(dtype, dtype)]
        except KeyError:
            raise SpecVizError(f"unknown dtype {dtype!r}: use float32, float16 or bfloat16") from None
    return getattr(torch, default_dtype(device.type))


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so a wall-clock timing covers it (GPU kernels run asynchronously)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


@dataclass(frozen=True)
class MemoryPlan:
    """Whether a model fits before it is loaded: its weights' size and where they will go."""

    weights_gb: float
    """The weights at the chosen dtype, in GB (10**9 bytes)."""
    free_gb: float
    """Free memory on the chosen device, in GB (on CUDA, on that GPU)."""
    device_map: str | None
    """None: the whole model on the device; ``auto``: spread over every GPU and the CPU (accelerate)."""

    def describe(self) -> str:
        where = "spread over the GPUs and the CPU" if self.device_map else "on the device"
        return f"~{self.weights_gb:.2g} GB of weights, {self.free_gb:.3g} GB free, {where}"


def weights_bytes(path: Path, dtype: torch.dtype) -> int:
    """The size of a model folder's weights at ``dtype``, from the safetensors headers (nothing is loaded)."""
    n_params = sum(header_params(f) for f in sorted(path.glob("*.safetensors")))
    if not n_params:  # .bin checkpoints: their file size, at the stored dtype
        return sum(f.stat().st_size for f in path.glob("*.bin"))
    return n_params * torch.tensor([], dtype=dtype).element_size()


def plan_memory(path: Path, device: torch.device, dtype: torch.dtype) -> MemoryPlan:
    """Where the weights fit: on the device, spread with accelerate's ``device_map="auto"``, or nowhere (an error)."""
    import psutil

    need = weights_bytes(path, dtype)
    ram = psutil.virtual_memory().available
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
        if need <= 0.9 * free:
            return MemoryPlan(need / 1e9, free / 1e9, None)
        total = sum(torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count())) + ram
        if need <= 0.9 * total:
            return MemoryPlan(need / 1e9, free / 1e9, "auto")
        raise SpecVizError(f"the model needs ~{need / 1e9:.3g} GB at {str(dtype).removeprefix('torch.')}; "
                           f"the GPUs and RAM have {total / 1e9:.3g} GB free: try --dtype float16 or a smaller model")
    if need > 0.9 * ram:
        raise SpecVizError(f"the model needs ~{need / 1e9:.3g} GB at {str(dtype).removeprefix('torch.')}; "
                           f"this machine has {ram / 1e9:.3g} GB of RAM free: try --dtype bfloat16 or a smaller model")
    return MemoryPlan(need / 1e9, ram / 1e9, None)
