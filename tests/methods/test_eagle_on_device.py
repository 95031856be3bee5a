"""EAGLE's trees drafted on the device (issue 53): with a head or a draft model, ``eagle`` and ``eagle_static`` draft
every level without reading a value back, then read the levels back once and write the tree down with the same
builder the n-gram tables' lists go through.

The tree is checked against the official selection written from EAGLE-2's steps on a source whose next-token lists
are a fixed function of the path (as ``test_eagle_method.py`` checks the host's), and every record is checked against
the same session drafted on the host a level at a time (the candidates read back at every step), with a read costing
nothing (the CPU: drafting stops early where it can) and with every read waiting (a GPU: it drafts on and writes the
same tree down). The copies counted per cycle are in ``tests/engine/test_host_copies.py``.
"""

from __future__ import annotations

import math

import pytest
import torch
from test_eagle_layouts import write_checkpoint
from test_eagle_method import PathSource, lists_after, official_selection, path_of

from helpers import concentrated_llama, hf_greedy, make_engine
from specviz_core.drafters.base import DraftContext
from specviz_core.drafters.talon.eagle.dynamic import EagleDrafter
from specviz_core.methods.eagle import EagleParams

pytestmark = pytest.mark.usefixtures("one_thread")


class DevicePathSource(PathSource):
    """:class:`PathSource` as a head gives it: each level's lists as tensors, the rows' paths kept from their parents'
    rows and tokens (as a head keeps its rows' features)."""

    on_device = True

    def top_root(self, ctx, m):
        self.rows: list[tuple[int, ...]] = []
        self.steps += 1
        return self._tensors([lists_after((), m)])

    def top_level(self, parent_rows, tokens, depth, mask, m):
        paths = [(self.rows[p] if p >= 0 else ()) + (t,) for p, t in zip(parent_rows.tolist(), tokens.tolist())]
        assert mask.shape == (len(paths), len(self.rows) + len(paths))
        for i, path in enumerate(paths):  # a row sees the rows of its path's prefixes (its ancestors) and itself
            want = {j for j, q in enumerate(self.rows) if path[:len(q)] == q}
            assert set(torch.nonzero(mask[i, :len(self.rows)]).flatten().tolist()) == want
            assert mask[i, len(self.rows):].tolist() == [j == i for j in range(len(paths))]
        self.rows += paths
        self.steps += 1
        return self._tensors([lists_after(p, m) for p in paths])

    @staticmethod
    def _tensors(lists):
        return (torch.tensor([ids for ids, _ in lists]), torch.tensor([q for _, q in lists], dtype=torch.float32))


@pytest.mark.parametrize("reads_wait", [False, True], ids=["cpu", "gpu"])
@pytest.mark.parametrize("k,depth,budget", [(10, 7, 59), (4, 3, 10), (3, 5, 40), (4, 6, 5)])
def test_the_tree_drafted_on_the_device_is_the_official_selection(k, depth, budget, reads_wait):
    d = EagleDrafter.__new__(EagleDrafter)
    d.params = EagleParams(top_k=k, depth=depth, budget=budget, drafter="head")
    d.source, d.steps_total, d.cycles, d.reads_wait = DevicePathSource(), 0, 0, reads_wait
    ctx = DraftContext(ids=[1, 2, 3], cache_len=2, max_depth=64, generator=torch.Generator(), temperature=0.0)
    tree = d.draft(ctx)
    # float32 probabilities (as a head gives them) choose the same paths as the float64 lists of the reference
    assert {path_of(tree, n) for n in range(1, len(tree)) if not tree.gated[n]} == official_selection(k, depth, budget)
    levels = tree.state.get("stopped_early", depth + 1) - 1
    assert tree.state["candidates"] == k + levels * k * k
    # on the CPU it drafts no level past the early stop; where reads wait it drafts every one
    assert d.source.steps == (1 + depth if reads_wait else 1 + levels)
    for n in range(1, len(tree)):
        path = path_of(tree, n)
        want = math.prod(float(torch.tensor(lists_after(path[:i], k)[1][lists_after(path[:i], k)[0].index(t)],
                                            dtype=torch.float32)) for i, t in enumerate(path))
        assert tree.scores[n] == pytest.approx(want, rel=1e-9)


@pytest.fixture(scope="module")
def tiny():
    return concentrated_llama(0)


@pytest.fixture(scope="module")
def heads(tmp_path_factory, tiny):
    base = tmp_path_factory.mktemp("eagle-device-heads")
    write_checkpoint(base / "eagle", "eagle", tiny.model.config, seed=5)
    write_checkpoint(base / "eagle3", "eagle3", tiny.model.config, draft_vocab=20, seed=6)
    return base


def same(a, b, where="record") -> None:
    """``a == b``, floats to 1e-9 (a path's log-probability summed by torch or by ``math``)."""
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-300), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    elif hasattr(a, "__dataclass_fields__"):
        for f in a.__dataclass_fields__:
            same(getattr(a, f), getattr(b, f), f"{where}.{f}")
    else:
        assert a == b, where


#: What differs between the ways the levels were drafted: how many draft steps, and their time.
STEPS = {"draft_steps", "delta", "draft_step_ms", "draft_forwards"}
PROMPT = [3, 17, 9, 25, 4, 11, 6, 25, 5]


@pytest.mark.parametrize("method", ["eagle", "eagle_static"])
@pytest.mark.parametrize("kw", [{"head": "eagle"}, {"head": "eagle3"}, {"drafter": "model"},
                                {"head": "eagle", "temperature": 0.8, "seed": 3},
                                {"head": "eagle", "top_k": 4, "depth": 6, "budget": 6}],
                         ids=["eagle-head", "eagle3-head", "model", "sampled", "small"])
def test_a_session_drafted_on_the_device_records_what_the_host_drafts(tiny, heads, monkeypatch, method, kw):
    kw = dict(kw)
    if "head" in kw:
        kw["head"] = str(heads / kw["head"])
    draft = concentrated_llama(1, noise=0.3) if kw.get("drafter") == "model" else None
    runs = {}
    for way in ("host", "cpu", "gpu"):
        engine = make_engine(tiny, method, PROMPT, 40, draft=draft, **kw)
        drafter = engine.drafter
        drafter.reads_wait = way == "gpu"
        if way == "host":  # the candidates read back at every step, as TALON drafts
            monkeypatch.setattr(drafter.source, "on_device", False)
        runs[way] = (list(engine.cycles()), engine.output_ids, drafter.source.steps)
    host, host_ids, host_steps = runs["host"]
    if "temperature" not in kw:
        assert host_ids[:40] == hf_greedy(tiny, PROMPT, 40)
    for way in ("cpu", "gpu"):
        records, ids, steps = runs[way]
        assert ids == host_ids, way
        assert len(records) == len(host)
        for r, h in zip(records, host):
            same(r.nodes, h.nodes, f"{way} cycle {r.index} nodes")
            same({k: v for k, v in r.state.items() if k not in STEPS},
                 {k: v for k, v in h.state.items() if k not in STEPS}, f"{way} cycle {r.index} state")
        if way == "cpu" or method == "eagle_static":  # the same steps; where reads wait eagle drafts past its stop
            assert steps == host_steps, way
        else:
            assert steps >= host_steps
    if method == "eagle" and kw.get("budget") == 6:
        assert any("stopped_early" in r.state for r in host)  # the early stop was exercised
        assert runs["gpu"][2] > host_steps

