"""Issue 18: a draft head trained on this machine, and TALON / the EAGLE-style tree drafting with it.

Training is seeded (two runs give the same weights); the trained head predicts the target's next token
far above chance on text it did not train on, measured here by plain uncached forwards of the target,
not by the trainer's own report; both tree methods stay lossless with it; the head's incremental cache
gives the same root prediction as a head run from scratch on the committed tokens.
"""

from __future__ import annotations

import random

import pytest
import torch

from helpers import compare_greedy, concentrated_llama, hf_greedy, make_engine, run, tiny_llama, torch_threads
from specviz_core.cli.commands import main
from specviz_core.drafters.talon.head import DraftHead, HeadRunner, load_head, save_head
from specviz_core.runtime.feature_tap import install_feature_tap, tapped_features
from specviz_core.runtime.head_files import head_info
from specviz_core.training.train import train_head

pytestmark = pytest.mark.usefixtures("one_thread")


VOCAB = 32


def prompts(n: int, seed: int, length: int = 8) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, VOCAB) for _ in range(length)] for _ in range(n)]


@pytest.fixture(scope="module")
def tiny():
    """A tiny target whose next token depends mostly on the current one: a head can learn it in seconds."""
    return concentrated_llama(0)


@pytest.fixture(scope="module")
def trained(tiny):
    with torch_threads(1):  # set up before the tests' one_thread fixture: trained on one thread too
        head, info = train_head(tiny, steps=300, text="own", text_tokens=8000, lr=1e-2, prompts=prompts(40, 1))
    return head, info


@pytest.fixture
def heads(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_HEADS", str(tmp_path / "heads"))
    return tmp_path / "heads"


def test_training_is_deterministic_given_a_seed(tiny):
    kw = {"steps": 12, "text": "own", "text_tokens": 600, "prompts": prompts(4, 2)}
    a, info_a = train_head(tiny, seed=5, **kw)
    b, info_b = train_head(tiny, seed=5, **kw)
    c, _ = train_head(tiny, seed=6, **kw)
    sa, sb, sc = a.trained_state(), b.trained_state(), c.trained_state()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert any(not torch.equal(sa[k], sc[k]) for k in sa)
    assert info_a["agreement"] == info_b["agreement"]


@torch.no_grad()
def root_top5(head: DraftHead, m, ids: list[int]) -> list[int]:
    """The head's top-5 after ``ids``, fed the target's features from one plain forward."""
    install_feature_tap(m.model, head.feature_layers, owner=head)  # the tap keeps features while the head lives
    m.model(input_ids=torch.tensor([ids[:-1]]))
    runner = HeadRunner(head, m)
    runner.add_features(0, tapped_features(m.model, len(ids) - 1))
    top, _ = runner.logits.top(runner.catch_up(ids)[None], 5)
    return top[0].tolist()


def test_trained_head_agrees_with_the_target_above_chance(tiny, trained):
    head, _ = trained
    untrained = DraftHead(tiny.model.config).eval()
    hits = {"trained": [0, 0], "untrained": [0, 0]}
    n = 0
    g = torch.Generator().manual_seed(0)
    for p in prompts(6, 99):  # prompts it never saw, continued by the target as it writes its training text (T=0.8)
        ids = list(p)
        for _ in range(24):
            logits = tiny.model(input_ids=torch.tensor([ids])).logits[0, -1]
            ids.append(int(torch.multinomial(torch.softmax(logits / 0.8, -1), 1, generator=g)))
        for cut in range(len(p), len(ids)):
            want = int(tiny.model(input_ids=torch.tensor([ids[:cut]])).logits[0, -1].argmax())
            for name, h in (("trained", head), ("untrained", untrained)):
                top = root_top5(h, tiny, ids[:cut])
                hits[name][0] += top[0] == want
                hits[name][1] += want in top
            n += 1
    top1, top5 = hits["trained"][0] / n, hits["trained"][1] / n
    assert top5 > 1.5 * 5 / VOCAB and top1 > 2 / VOCAB, f"top-1 {top1:.3f}, top-5 {top5:.3f} over {n} positions"
    assert hits["trained"][1] > hits["untrained"][1]


@pytest.mark.parametrize("method", ["talon", "eagle_static"])
def test_drafting_with_the_head_is_lossless_greedy(tiny, trained, heads, method):
    save_head(tiny, trained[0], trained[1])
    accepted = 0
    for p in prompts(3, 7) + [[5, 9, 5, 9, 5, 9, 5, 9]]:
        ref = hf_greedy(tiny, p, 40)
        ours, records = run(tiny, method, p, 40)  # drafter=auto: the saved head
        assert all(r.state["drafter"] == "head" for r in records)
        assert not compare_greedy(tiny, p, ours, ref).startswith("diverged")
        assert all(r.state["draft_step_ms"] > 0 for r in records if r.state["draft_steps"])
        assert all(n.source == "head" for r in records for n in r.nodes if n.id)
        accepted += sum(r.n_accepted for r in records)
    assert accepted > 0


def test_incremental_head_cache_matches_a_fresh_run(tiny, trained, heads):
    """After a session of accepted paths and dropped tree rows, the head's root prediction equals the one from a
    head run once over the committed tokens on the target's plain features."""
    save_head(tiny, trained[0], trained[1])
    p = prompts(1, 11)[0]
    e = make_engine(tiny, "talon", p, 30)
    for _ in e.cycles():
        pass
    source = e.drafter.source
    inc, _ = source.runner.logits.top(source.runner.catch_up(e.ids)[None], 5)
    assert inc[0].tolist() == root_top5(load_head(tiny), tiny, e.ids)


def test_auto_without_a_head_is_the_tables_and_head_without_one_is_one_error(tiny, heads, capsys, tmp_path):
    _, records = run(tiny, "talon", [4, 5, 6, 7], 8)
    assert records[0].state["drafter"] == "table"
    code = main(["record", "--method", "talon", "--param", "drafter=head", "--prompt", "hi", "--max-new-tokens", "4",
                 "--db", str(tmp_path / "x.db")])
    err = capsys.readouterr().err
    assert code == 2 and "specviz train-head" in err and "Traceback" not in err


def test_save_and_load_round_trip(tiny, trained, heads):
    assert head_info(tiny) is None and load_head(tiny) is None
    save_head(tiny, trained[0], dict(trained[1], note="x"))
    assert head_info(tiny)["note"] == "x"
    loaded, state = load_head(tiny).trained_state(), trained[0].trained_state()
    assert all(torch.equal(loaded[k].cpu(), state[k].float().cpu()) for k in state)
    other = tiny_llama(vocab=48)  # another architecture under the same name: no head for it
    assert head_info(other) is None


def test_session_metrics_give_talons_r(tiny, trained, heads):
    """R = tau / (1 + c * delta) (seed 001), c the median head step over the cycle's target forward, from the records."""
    import statistics

    from specviz_core.analysis.cycle_summary import summarize
    from specviz_core.analysis.metrics import session_metrics

    save_head(tiny, trained[0], trained[1])
    _, records = run(tiny, "talon", prompts(1, 21)[0], 40)
    m = session_metrics(summarize(r) for r in records)
    delta = sum(r.state["draft_steps"] for r in records) / len(records)
    c = statistics.median(r.state["draft_step_ms"] / r.timings_ms["forward"] for r in records)
    tau = 1 + sum(r.n_accepted for r in records) / len(records)
    assert m.delta == pytest.approx(delta) and m.step_cost == pytest.approx(c)
    assert m.r == pytest.approx(tau / (1 + c * delta))
    assert any(line.startswith("draft cost") for line in m.lines())


def test_the_fitted_temperature_is_the_scale_that_explains_the_labels():
    """Temperature scaling recovers a known miscalibration: labels drawn from softmax(z), the head reporting 2z
    (over-confident) is given T = 2, the head reporting z / 2 (under-confident) T = 0.5."""
    from specviz_core.training.train import fit_temperature

    g = torch.Generator().manual_seed(0)
    z = torch.randn(20000, 30, generator=g) * 2
    labels = torch.multinomial(torch.softmax(z, -1), 1, generator=g)[:, 0]
    assert fit_temperature([(2 * z, labels)]) == pytest.approx(2.0, rel=0.05)
    assert fit_temperature([(z / 2, labels)]) == pytest.approx(0.5, rel=0.05)
    assert fit_temperature([]) == 1.0


def test_a_trained_head_is_calibrated_on_held_out_text(tiny, trained, heads):
    """After training, the head's mean top-1 probability on text it never saw is nearer its top-1 accuracy than
    before calibration, and a saved head keeps its temperature (an older file without one loads as trained)."""
    from specviz_core.drafters.talon.head import DraftLogits
    from specviz_core.training.train import agreement

    head, info = trained
    assert info["calibration"]["applied"] and float(head.temperature) == pytest.approx(info["calibration"]["temperature"],
                                                                                       abs=1e-4)
    kept: list = []
    held_text = prompts(12, 99)
    from specviz_core.training.reading import teacher_force
    from specviz_core.training.train import generate_text

    seqs, _ = generate_text(tiny, held_text, 1500, seed=5)
    held = teacher_force(tiny, seqs)
    agreement(head, tiny, held, kept)
    lg = torch.cat([a for a, _ in kept]) * float(head.temperature)  # the logits before calibration
    want = torch.cat([b for _, b in kept])
    acc = float((lg.argmax(-1) == want).float().mean())

    def gap(t: float) -> float:
        return abs(float(torch.softmax(lg / t, -1).max(-1).values.mean()) - acc)

    assert gap(float(head.temperature)) < gap(1.0)
    save_head(tiny, head, info)
    assert float(load_head(tiny).temperature) == pytest.approx(float(head.temperature))
    assert DraftLogits(load_head(tiny), tiny.model).temperature == pytest.approx(float(head.temperature))
