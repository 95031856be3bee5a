"""How often a cycle waits for the device: copies from the device to the host, counted per cycle for every method.

On a GPU every read of a device tensor on the host (``.tolist()``, ``.item()``, ``int(t)``, ``.cpu()``,
``.numpy()``) waits for everything queued before it. These tests run on the CPU, where nothing is a device, so a
tracker decides what would be one: the models' parameters and buffers, and everything computed from them (a
torch dispatch mode follows every op); tensors built on the host (``torch.tensor``, ``torch.from_numpy``) are not.
A torch function mode counts every read of a tracked tensor on the host, inside each cycle's ``step``.

A method that drafts from the context or a table copies once a cycle (the verify's statistics, which its harvest
reads too). A draft-model tree (draft_tree), and EAGLE's trees (``eagle``, ``eagle_static``) drafted by a head or a
draft model, are built on the device level by level, as EAGLE's official code builds its tree, and copied once: two
copies a cycle however deep they draft (counted as on a GPU, where ``eagle`` does not read whether it could stop
early either). TALON with a head or a draft model copies once more a draft step: its confidence gate decides from the
values how many nodes each layer runs, and its budget when to stop, so each layer's candidates come back to the host.
"""

from __future__ import annotations

import pytest
import torch
from test_eagle_layouts import write_checkpoint
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakTensorKeyDictionary

from helpers import make_session, tiny_llama
from specviz_core.drafters import METHODS

#: Reads of a tensor's values on the host (each a device-to-host copy on a GPU).
READS = {"tolist", "item", "numpy", "cpu", "__array__", "__int__", "__float__", "__bool__", "__index__"}
#: The most device-to-host copies a cycle may make: the verify's statistics, and one or two of a drafter's.
MAX_COPIES = 3


class DeviceTracker(TorchDispatchMode):
    """Marks every tensor computed from a marked one (the device's) and counts reads of marked tensors."""

    def __init__(self, *modules: torch.nn.Module) -> None:
        super().__init__()
        self.device = WeakTensorKeyDictionary()
        for m in modules:
            for t in (*m.parameters(), *m.buffers()):
                self.device[t] = True
        self.reads: list[str] = []
        self.counting = False
        outer = self

        class Reads(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                name = getattr(func, "__name__", "")
                if outer.counting and name in READS and args and isinstance(args[0], torch.Tensor) \
                        and args[0] in outer.device:
                    outer.reads.append(name)
                    if name == "cpu":  # the copy is the host's own: reading it again is no wait
                        copy = args[0].detach().clone()
                        outer.device.pop(copy, None)
                        return copy
                return func(*args, **kwargs)

        self.function_mode = Reads()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        if any(t in self.device for t in inputs):
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    self.device[t] = True
        return out

    def __enter__(self):
        super().__enter__()
        self.function_mode.__enter__()
        return self

    def __exit__(self, *exc):
        self.function_mode.__exit__(*exc)
        return super().__exit__(*exc)


def copies_per_cycle(session, modules, drafting: torch.nn.Module | None = None) -> list[tuple[int, int]]:
    """(device-to-host copies, forwards of the ``drafting`` module) of each cycle's ``engine.step`` (the prefill not
    counted)."""
    counts, steps = [], [0]
    hook = drafting.register_forward_hook(lambda *_: steps.__setitem__(0, steps[0] + 1)) if drafting else None
    try:
        with DeviceTracker(*modules) as tracker:
            session.prefill()
            while not session.done:
                tracker.reads.clear()
                steps[0] = 0
                tracker.counting = True
                session.engine.step()
                tracker.counting = False
                counts.append((len(tracker.reads), steps[0]))
    finally:
        if hook is not None:
            hook.remove()
    return counts


@pytest.fixture(scope="module")
def heads(tmp_path_factory, tiny):
    base = tmp_path_factory.mktemp("copy-heads")
    write_checkpoint(base / "eagle", "eagle", tiny.model.config, seed=5)
    write_checkpoint(base / "eagle3", "eagle3", tiny.model.config, draft_vocab=20, seed=6)
    return base


PATTERN = [3, 17, 9, 25, 4, 11, 6, 25, 5, 3, 17, 9, 25, 4, 11, 6, 25, 5, 3, 17]
CASES = {m: {} for m in METHODS if not m.startswith("hf_")} | {
    "talon-head": ("talon", {"head": "eagle"}), "eagle-head": ("eagle", {"head": "eagle"}),
    "eagle3-head": ("eagle", {"head": "eagle3"}), "talon-model": ("talon", {"drafter": "model"}),
    "eagle-model": ("eagle", {"drafter": "model"}), "eagle_static-head": ("eagle_static", {"head": "eagle3"}),
}


#: Drafters that build their tree on the device and copy it once.
BUILT_ON_DEVICE = {"draft_tree", "eagle-head", "eagle3-head", "eagle-model", "eagle_static-head"}


@pytest.mark.parametrize("case", list(CASES))
def test_copies_to_host_per_cycle(tiny, heads, case):
    method, params = CASES[case] if isinstance(CASES[case], tuple) else (case, {})
    params = dict(params)
    if "head" in params:
        params["head"] = str(heads / params["head"])
    draft = tiny_llama(seed=1) if METHODS[method].needs_draft_model or params.get("drafter") == "model" \
        else None
    session = make_session(tiny, method, PATTERN, 24, draft=draft, **params)
    session.engine.drafter.reads_wait = True  # as on a GPU
    modules = [tiny.model] + ([draft.model] if draft is not None else [])
    head = getattr(getattr(getattr(session.engine.drafter, "source", None), "runner", None), "head", None)
    if head is not None:
        modules.append(head)
    drafting = head if head is not None else draft.model if draft is not None else None
    counts = copies_per_cycle(session, modules, drafting)
    assert len(counts) > 3
    if drafting is None:  # a table or the context drafts: the verify's one copy, and no more than two besides
        assert max(c for c, _ in counts) <= MAX_COPIES, f"{case}: copies per cycle {counts}"
    elif case in BUILT_ON_DEVICE:  # a tree of several draft forwards, copied to the host once
        assert max(c for c, _ in counts) <= MAX_COPIES, f"{case}: (copies, draft steps) per cycle {counts}"
        assert any(steps >= MAX_COPIES for _, steps in counts), f"{case} never drafted deep: {counts}"
    else:  # a draft model or head: one copy a draft step (its candidates), and the verify's
        assert all(c <= 1 + steps for c, steps in counts), f"{case}: (copies, draft steps) per cycle {counts}"
        assert any(steps > 1 for _, steps in counts), f"{case} never drafted: {counts}"
