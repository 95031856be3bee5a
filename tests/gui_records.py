"""Hand-built cycle records for the GUI tests: realistic trees and sessions without running a model.

``goose_cycle`` makes a Goose-like spine+branch tree (spine chain, harmonic branches, BFS-extended branches, gated
leaves) whose mask, positions, verify order, KV keep list, target tokens and top-5 rows agree with each other the way
the engine's would. ``goose_session`` wraps one in a :class:`LiveSource` whose context really contains the matched
n-gram and the copied spine, so "where did the spine come from" can be checked against token text.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specviz_core.records import CycleRecord, Node, SessionInfo
from specviz_core.runtime.vocab import TokenText
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import LiveSource

# Token id i decodes to WORDS[i]; ids 0-2 are punctuation and a newline so whitespace display can be checked.
WORDS: tuple[str, ...] = (".", ",", "\n") + tuple(" " + w for w in (
    "the of and to in is that it for was on are as with his they at be this from have or by one had not but what all "
    "were when we there can an your which their said if do will each about how up out them then she many some so "
    "these would other into has more her two like him see time could no make than first been its who now people my "
    "made over did down only way find use may water long little very after words called just where most know get "
    "through back much go good new write our me man too any day same right look think also around another came come "
    "work three word must because does part even place well such here take why help put different away again off went "
    "old number great tell men say small every found still between name should home big give air line set own under "
    "read last never us left end along while might next sound below saw something thought both few those always show "
    "large often together asked house world going want school important until form food keep children feet land side "
    "without boy once animal life enough took sometimes four head above kind began almost live page got earth need far "
    "hand high year mother light country father let night picture being study second soon story since white ever paper "
    "hard near sentence better best across during today however sure knew try told young sun thing whole hear example "
    "heard several change answer room sea against top turned learn point city play toward five himself usually money "
    "seen didn't car morning I'm body upon family later turn move face door cut done group true leave color red friends"
).split())


class WordTokenizer:
    """Just enough of a tokenizer for :class:`TokenText`: ``decode`` joins words."""

    def decode(self, ids: list[int], **_: Any) -> str:
        return "".join(WORDS[i] if 0 <= i < len(WORDS) else f"<{i}>" for i in ids)


def word_vocab() -> TokenText:
    return TokenText(WordTokenizer())


def word_id(word: str) -> int:
    """The id of ``' word'`` (or of ``.``, ``,``, ``\\n``)."""
    return WORDS.index(word if word in WORDS else " " + word)


@dataclass
class _Tree:
    """A draft tree under construction, in creation (= id) order, like the engine's DraftTree."""

    parents: list[int] = field(default_factory=lambda: [-1])
    tokens: list[int] = field(default_factory=list)
    sources: list[str] = field(default_factory=lambda: ["root"])
    scores: list[float] = field(default_factory=lambda: [1.0])
    gated: list[bool] = field(default_factory=lambda: [False])
    depths: list[int] = field(default_factory=lambda: [0])

    def add(self, parent: int, token: int, source: str, score: float, gated: bool = False) -> int:
        self.parents.append(parent)
        self.tokens.append(token)
        self.sources.append(source)
        self.scores.append(score)
        self.gated.append(gated or self.gated[parent])
        self.depths.append(self.depths[parent] + 1)
        return len(self.parents) - 1

    def children(self, node: int) -> list[int]:
        return [i for i, p in enumerate(self.parents) if p == node]


def ar_cycle(index: int, cache_len: int, root_token: int, token: int, p: float = 0.8, seed: int = 0) -> CycleRecord:
    """An AR cycle: the root alone is verified and the target's token is committed as the bonus."""
    rng = random.Random(seed * 7919 + index)
    others = rng.sample([t for t in range(len(WORDS)) if t != token], 4)
    top = ((token, p),) + tuple((t, round((1 - p) / (k + 2), 4)) for k, t in enumerate(others))
    return CycleRecord(
        index=index, mode="ar", cache_len=cache_len,
        nodes=(Node(0, -1, root_token, "root", 0, 1.0, True, accepted=True, target_token=token),),
        verify_order=(0,), mask=np.ones((1, 1), dtype=bool), positions=(cache_len,), accepted_path=(),
        bonus_token=token, committed_ids=(token,), kv_keep=(0,), target_topk=(top,),
        state={"spine_ratio": 0.3, "ema_p_s": 0.3, "consensus": False, "match_len": 0, "match": None, "spine_len": 0,
               "path": "none", "spine_continuation": False},
        timings_ms={"draft": 0.1, "forward": 8.0, "walk": 0.1},
    )


def goose_cycle(n_nodes: int = 60, spine_len: int = 9, spine_accepted: int = 3, branch_continues: int = 2,
                n_gated: int = 8, *, index: int = 0, cache_len: int = 140, root_token: int | None = None,
                spine_tokens: list[int] | None = None, wanted: int | None = None, mode: str = "tree",
                spine_source: str = "spine", state: dict[str, Any] | None = None, seed: int = 0) -> CycleRecord:
    """A Goose-like cycle. ``n_nodes`` verified draft nodes (root excluded), plus ``n_gated`` gated ones.

    The spine is a chain of ``spine_len`` nodes (ids 1..spine_len); its first ``spine_accepted`` are accepted, the next
    is rejected. If ``branch_continues`` > 0, a branch child of the last accepted spine node (the rejected node's
    sibling) holds the token the target wanted and the path goes on for that many branch tokens; otherwise the target
    wanted ``wanted`` (a token no verified sibling proposed). ``mode='bypass'`` or ``'chain'`` gives the spine alone.
    """
    rng = random.Random(seed)
    linear = mode in ("bypass", "chain")
    if linear:
        n_nodes, n_gated, branch_continues = spine_len, 0, 0
    assert 0 <= spine_accepted <= spine_len and n_nodes >= spine_len + branch_continues
    assert not (branch_continues and spine_accepted == spine_len), "a branch continues only where the spine broke"
    vocab_ids = list(range(3, len(WORDS)))
    if spine_tokens is None:
        spine_tokens = rng.sample(vocab_ids, spine_len)
    root_token = rng.choice(vocab_ids) if root_token is None else root_token
    t = _Tree(tokens=[root_token])

    spine = [0]
    for tok in spine_tokens[:spine_len]:
        spine.append(t.add(spine[-1], tok, spine_source, 1.0))
    fork = spine[spine_accepted]  # the last accepted spine node (the root if none was)
    broke = spine[spine_accepted + 1] if spine_accepted < spine_len else None

    def fresh(parent: int, avoid: set[int] = frozenset()) -> int:
        used = {t.tokens[c] for c in t.children(parent)} | set(avoid)
        return rng.choice([v for v in vocab_ids if v not in used])

    continuation: list[int] = []
    if branch_continues:
        node = fork
        for k in range(branch_continues):
            node = t.add(node, fresh(node), "branch", round(0.6 - 0.1 * k, 3))
            continuation.append(node)
    # Root and spine branches, wider near the root (the 1/i rule), then BFS extension within the budget.
    budget = n_nodes - spine_len - branch_continues
    frontier: list[int] = []
    if budget > 0:
        for i, s in enumerate(spine[:-1]):
            for _ in range(max(1, 3 // (i + 1)) if i < 4 else 0):
                if budget <= 0:
                    break
                frontier.append(t.add(s, fresh(s, {wanted} if wanted is not None else set()), "branch",
                                      round(rng.uniform(0.05, 0.5), 3)))
                budget -= 1
    while budget > 0 and frontier:
        nxt = []
        for f in frontier:
            for _ in range(rng.choice((1, 1, 2, 3))):
                if budget <= 0 or t.depths[f] >= 7:
                    break
                nxt.append(t.add(f, fresh(f), "branch", round(t.scores[f] * rng.uniform(0.3, 0.9), 3)))
                budget -= 1
        frontier = nxt or frontier[:1]
    leaves = [i for i in range(1, len(t.parents)) if not t.children(i) and t.sources[i] == "branch"
              and i not in continuation]
    for g in range(n_gated if leaves else 0):
        parent = leaves[(g * 7) % len(leaves)]
        t.add(parent, fresh(parent), "branch", round(rng.uniform(0.001, 0.009), 4), gated=True)

    # The target: along the accepted path it wants the next accepted token, then the bonus.
    accepted_path = spine[1:spine_accepted + 1] + continuation
    last = accepted_path[-1] if accepted_path else 0
    if broke is not None and not continuation:
        wanted = fresh(fork) if wanted is None else wanted
    want: dict[int, int] = {}
    for a, b in zip([0] + accepted_path, accepted_path):
        want[a] = t.tokens[b]
    if broke is not None:
        want[fork] = t.tokens[continuation[0]] if continuation else wanted
    bonus = fresh(last) if last not in want else want[last]
    want[last] = bonus

    order = [i for i, g in enumerate(t.gated) if not g]
    row_of = {nid: r for r, nid in enumerate(order)}
    topk: list[tuple[tuple[int, float], ...]] = []
    prob: dict[int, float] = {}
    for nid in order:
        target = want.get(nid, fresh(nid))
        kids = [c for c in t.children(nid) if not t.gated[c] and t.tokens[c] != target]
        # The rejected spine node is the target's second choice, so the break shows two real probabilities.
        kids.sort(key=lambda c: (c != broke, -t.scores[c]))
        p1 = round(rng.uniform(0.35, 0.8), 3)
        rest = [t.tokens[c] for c in kids[:4]]
        rest += rng.sample([v for v in vocab_ids if v != target and v not in rest], 4 - len(rest))
        ps, left = [], 1.0 - p1
        for _ in rest:
            left *= 0.45
            ps.append(round(left, 4))
        row = ((target, p1),) + tuple(zip(rest, ps))
        topk.append(row)
        for c in t.children(nid):
            if not t.gated[c]:
                prob[c] = dict(row).get(t.tokens[c], round(rng.uniform(0.0005, 0.004), 4))
    accepted = {0, *accepted_path}
    nodes = tuple(
        Node(id=i, parent=t.parents[i], token=t.tokens[i], source=t.sources[i], depth=t.depths[i], score=t.scores[i],
             verified=not t.gated[i], gated=t.gated[i], accepted=i in accepted,
             target_token=topk[row_of[i]][0][0] if i in row_of else -1,
             target_prob=prob.get(i))
        for i in range(len(t.parents)))
    n = len(order)
    mask = np.zeros((n, n), dtype=bool)
    for r, nid in enumerate(order):
        if t.parents[nid] >= 0:
            mask[r] = mask[row_of[t.parents[nid]]]
        mask[r, r] = True
    st = {"spine_ratio": 0.3, "ema_p_s": 0.3, "consensus": False, "match_len": spine_len, "match": None,
          "spine_len": spine_len,
          "spine_broke_at": spine_accepted + 1 if spine_accepted < spine_len else None,
          "path": ("spine_continuation" if spine_accepted and continuation else "pure_branch" if continuation
                   else "pure_spine" if spine_accepted else "none"),
          "spine_continuation": bool(spine_accepted and continuation)}
    st.update(state or {})
    return CycleRecord(
        index=index, mode=mode, cache_len=cache_len, nodes=nodes, verify_order=tuple(order), mask=mask,
        positions=tuple(cache_len + t.depths[i] for i in order), accepted_path=tuple(accepted_path),
        bonus_token=bonus, committed_ids=tuple(t.tokens[a] for a in accepted_path) + (bonus,),
        kv_keep=tuple(row_of[i] for i in [0] + accepted_path),
        target_topk=tuple(topk), state=st,
        timings_ms={"draft": 0.6, "forward": 11.0, "walk": 0.2, "trim": 0.1, "harvest": 0.3},
    )


def session_info(method: str, prompt_ids: list[int], **params: Any) -> SessionInfo:
    return SessionInfo(
        id="test", model="hand-built", tokenizer="", method=method, params=dict(params), prompt_ids=tuple(prompt_ids),
        prompt_text=WordTokenizer().decode(prompt_ids), temperature=0.0, seed=0, device="cpu", dtype="float32")


def goose_session(n_nodes: int = 60, spine_len: int = 9, spine_accepted: int = 3, branch_continues: int = 2,
                  n_gated: int = 8, *, ngram: int = 4, prompt_len: int = 140, match_at: int = 100,
                  method: str = "goose", mode: str = "tree", wanted: int | None = None,
                  state: dict[str, Any] | None = None, seed: int = 0) -> LiveSource:
    """A live session whose last cycle is a spine cycle (``goose_cycle``) with a consistent context match.

    The prompt holds an n-gram at ``match_at`` followed by the spine's tokens; AR cycles then commit the same n-gram,
    so the spine cycle's context ends with it and Goose (or PLD, ``method='pld'``) copies what followed.
    """
    rng = random.Random(seed + 1)
    vocab_ids = list(range(3, len(WORDS)))
    phrase = rng.sample(vocab_ids, ngram + spine_len)
    filler = [rng.choice([v for v in vocab_ids if v not in phrase]) for _ in range(prompt_len)]
    prompt = filler[:match_at] + phrase + filler[match_at + len(phrase):]
    source = LiveSource(session_info(method, prompt, long_match=8) if method == "goose"
                        else session_info(method, prompt, max_ngram=3, num_pred_tokens=10))
    ids = list(prompt)
    for k in range(ngram):
        source.append(ar_cycle(k, len(ids) - 1, ids[-1], phrase[k], seed=seed))
        ids.append(phrase[k])
    copy = [match_at + ngram, match_at + ngram + spine_len]
    st = {"match": {"ngram": ngram, "match_span": [match_at, match_at + ngram], "copy_span": copy},
          "match_len": spine_len}
    if method == "pld":
        st = {"match": st["match"]}
    st.update(state or {})
    rec = goose_cycle(n_nodes, spine_len, spine_accepted, branch_continues, n_gated, index=ngram,
                      cache_len=len(ids) - 1, root_token=ids[-1], spine_tokens=phrase[ngram:],
                      wanted=wanted, mode=mode, spine_source="ngram" if method == "pld" else "spine",
                      state=st, seed=seed)
    if method == "pld":
        rec = rec.replace(state=st)
    source.append(rec)
    return source


def spine_nodes(record: CycleRecord) -> list[Node]:
    """The spine of a record built here: its spine (or n-gram) nodes, which these builders chain from the root."""
    return sorted((n for n in record.nodes if n.source in ("spine", "ngram")), key=lambda n: n.depth)


def first_rejected_spine(record: CycleRecord) -> Node | None:
    return next((n for n in spine_nodes(record) if not n.accepted), None)


# -- Builders for the mask and KV panels: verify order by depth, so a row index is not its node id ------------------


def tree_record(parents: list[int], sources: list[str], tokens: list[int], *, accepted_path: tuple[int, ...],
                bonus_token: int, cache_len: int, index: int = 0, mode: str = "tree",
                gated: frozenset[int] = frozenset(), seed: int = 0) -> CycleRecord:
    """A record from a parent list (node 0 the root, parent -1). Verify order is breadth-first (depth, then id),
    as a tree verifier may send it, so rows and node ids differ; gated nodes stay out of the verify block."""
    rng = random.Random(seed)
    depth = [0] * len(parents)
    for i, p in enumerate(parents[1:], 1):
        assert 0 <= p < i, "a parent's id is smaller than its children's"
        depth[i] = depth[p] + 1
    on_path = (0, *accepted_path)
    wants = dict(zip(on_path, (*(tokens[a] for a in accepted_path), bonus_token)))
    order = sorted((i for i in range(len(parents)) if i not in gated), key=lambda i: (depth[i], i))
    row = {nid: r for r, nid in enumerate(order)}
    nodes = tuple(
        Node(id=i, parent=p, token=tokens[i], source=sources[i], depth=depth[i],
             score=1.0 if i == 0 else round(rng.uniform(0.01, 0.9), 3), verified=i not in gated, gated=i in gated,
             accepted=i in on_path, target_token=wants.get(i, rng.randrange(3, len(WORDS))) if i not in gated else -1,
             target_prob=None if i == 0 or i in gated else round(rng.uniform(0.001, 0.95), 3))
        for i, p in enumerate(parents))
    mask = np.zeros((len(order), len(order)), dtype=bool)
    for r, nid in enumerate(order):
        a = nid
        while a >= 0:  # ancestors and self
            mask[r, row[a]] = True
            a = parents[a]
    topk = tuple(((nodes[nid].target_token, 0.6),) + tuple((rng.randrange(3, len(WORDS)), 0.08) for _ in range(4))
                 for nid in order)
    return CycleRecord(
        index=index, mode=mode, cache_len=cache_len, nodes=nodes, verify_order=tuple(order), mask=mask,
        positions=tuple(cache_len + depth[i] for i in order), accepted_path=tuple(accepted_path),
        bonus_token=bonus_token, committed_ids=tuple(tokens[a] for a in accepted_path) + (bonus_token,),
        kv_keep=tuple(row[a] for a in on_path), target_topk=topk, state={},
        timings_ms={"draft": 0.5, "forward": 10.0, "walk": 0.2, "trim": 0.1},
    )


def bfs_goose_cycle(n_nodes: int = 60, *, spine_len: int = 8, spine_accepted: int = 3, branch_accepted: int = 2,
                    n_gated: int = 4, cache_len: int = 125, root_token: int = 5, index: int = 0,
                    seed: int = 0) -> CycleRecord:
    """A spine+branch tree of ``n_nodes`` verified nodes (root included), verify order breadth-first.

    The spine (ids 1..spine_len) is accepted for ``spine_accepted`` tokens, then a branch under the last accepted
    spine node continues for ``branch_accepted``; other branches hang off the root and the first spine nodes.
    """
    rng = random.Random(seed)
    parents, sources = [-1] + list(range(spine_len)), ["root"] + ["spine"] * spine_len
    anchor = spine_accepted
    cont = []
    for _ in range(branch_accepted):
        parents.append(cont[-1] if cont else anchor)
        sources.append("branch")
        cont.append(len(parents) - 1)
    depth = [0]
    for p in parents[1:]:
        depth.append(depth[p] + 1)
    while len(parents) < n_nodes:
        p = rng.choice([0, 0, 1, 2, 3]) if rng.random() < 0.5 else rng.choice(
            [i for i in range(len(parents)) if depth[i] < 5])
        parents.append(p)
        sources.append("branch")
        depth.append(depth[p] + 1)
    gated = set()
    for _ in range(n_gated):
        parents.append(rng.randrange(1, n_nodes))
        sources.append("branch")
        gated.add(len(parents) - 1)
    tokens = [root_token] + [rng.randrange(3, len(WORDS)) for _ in parents[1:]]
    accepted = tuple(range(1, spine_accepted + 1)) + tuple(cont)
    return tree_record(parents, sources, tokens, accepted_path=accepted, bonus_token=rng.randrange(3, len(WORDS)),
                       cache_len=cache_len, index=index, gated=frozenset(gated), seed=seed)


def small_cycle(*, cache_len: int = 6, root_token: int = 4, index: int = 0) -> CycleRecord:
    """Root -> a (accepted) -> b, root -> c, a -> d, c -> e (gated). Verify order: root, a, c, b, d."""
    return tree_record([-1, 0, 1, 0, 1, 3], ["root", "spine", "spine", "branch", "branch", "branch"],
                       [root_token, 10, 11, 12, 13, 14], accepted_path=(1,), bonus_token=15, cache_len=cache_len,
                       index=index, gated=frozenset({5}))


def single_cycle_source(record: CycleRecord, method: str = "goose") -> LiveSource:
    """A live source holding one cycle (its index must be 0): the prompt is the cache, ending with the root token."""
    prompt = [3 + (7 * p) % (len(WORDS) - 3) for p in range(record.cache_len)] + [record.nodes[0].token]
    source = LiveSource(session_info(method, prompt))
    source.append(record)
    return source


def model_for(source: LiveSource, index: int | None = None) -> SessionModel:
    """A session model over ``source`` with word token text, showing cycle ``index`` (the last by default)."""
    model = SessionModel()
    model.open(source, word_vocab())
    model.set_cycle(len(source) - 1 if index is None else index)
    return model


def keep_none_alive() -> None:
    """Work around PySide6 6.12.0 on Python < 3.12: every call of a void Qt method drops a reference to None
    (the bindings return Py_None without a new reference, harmless only where None is immortal, 3.12+). None
    starts near 5,000 references, so a few thousand Qt calls abort the interpreter ("none_dealloc"). Give None a
    reference count no session can use up."""
    import ctypes
    import sys

    if sys.version_info < (3, 12):
        refcnt = ctypes.c_ssize_t.from_address(id(None))  # ob_refcnt is PyObject's first field
        if refcnt.value < 1 << 40:
            refcnt.value += 1 << 40
