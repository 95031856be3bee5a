"""The running acceptance estimates behind ``budget=auto`` (:mod:`specviz_core.engine.budget`): for a node whose
parent is accepted, how likely it is to be accepted too (counted over the verified nodes, and under greedy decoding
from the cut ones as well), learned per session by source, score band and depth,
shrunk towards the drafter's own score (or, for a copy, towards the acceptance measured at its depth) while there is
little data, and forgetting old cycles."""

from __future__ import annotations

from specviz_core.records import CycleRecord

#: Upper edges of the score bands; scores at or above the last are "no confidence given" (a spine, a copy).
SCORE_BANDS = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9, 0.999)
#: Prior acceptance, given its parent was accepted, of a node whose drafter gives no confidence (score 1.0: a
#: copied spine or n-gram continuation), at depth 1, 2, 3 and 4+. Measured over the 15 prompts of
#: ``--suite all`` (official ``goose``, 96 tokens, the default model): a copy that survives its first tokens
#: runs on (92% from depth 4, 100% at depths 16-31). Each depth is its own class, never pooled: pooled, the
#: breaks at depth 1 made a deep spine node look 29% likely where 96% were accepted, and budget=auto cut
#: every spine to a few nodes (tau 1.46 where a 16-node tree gave 2.74 on the repeated-structure prompt).
COPY_PRIOR = (0.85, 0.80, 0.88, 0.92)
#: Pseudo-observations behind each prior.
PRIOR_WEIGHT = 2.0
#: Standard deviations of optimism added to each estimate (see ``AcceptanceStats.p``).
OPTIMISM = 1.0
#: Per-cycle forgetting of the acceptance counts (half-life about 35 cycles).
DECAY = 0.98


def score_band(score: float) -> int:
    for i, edge in enumerate(SCORE_BANDS):
        if score < edge:
            return i
    return len(SCORE_BANDS)


class AcceptanceStats:
    """Running acceptance of nodes whose parent was accepted (see :meth:`observe`), with exponential forgetting.

    Keyed coarse ``(source, score band)`` and fine ``(source, score band, depth 1/2/3/4+)``;
    the fine estimate is shrunk towards the coarse one, the coarse one towards the prior. An unscored
    node's (a copy's) fine estimate is shrunk towards its depth's prior directly.
    """

    def __init__(self, decay: float = DECAY) -> None:
        self.decay = decay
        self.t = 0  # observations so far (cycles)
        self._counts: dict[tuple, list[float]] = {}  # key -> [accepted, tried, t of last update]

    def _get(self, key: tuple) -> tuple[float, float]:
        c = self._counts.get(key)
        if c is None:
            return 0.0, 0.0
        f = self.decay ** (self.t - c[2])
        return c[0] * f, c[1] * f

    def _add(self, key: tuple, accepted: bool) -> None:
        a, n = self._get(key)
        self._counts[key] = [a + float(accepted), n + 1.0, self.t]

    @staticmethod
    def prior(score: float, depth: int = 1) -> float:
        """Acceptance before any data: the drafter's score, or for an unscored node (a copy) ``COPY_PRIOR``."""
        if score >= SCORE_BANDS[-1]:
            return COPY_PRIOR[min(max(depth, 1), 4) - 1]
        return min(max(score, 0.005), 0.95)

    def mean(self, source: str, score: float, depth: int) -> float:
        """Posterior mean acceptance of a node given that its parent is accepted."""
        return self._mean(source, score, depth)[0]

    def _mean(self, source: str, score: float, depth: int) -> tuple[float, float]:
        band = score_band(score)
        if band == len(SCORE_BANDS):  # a copy: its depths are not pooled (see COPY_PRIOR)
            centre = self.prior(score, depth)
        else:
            a, n = self._get((source, band))
            centre = (a + PRIOR_WEIGHT * self.prior(score)) / (n + PRIOR_WEIGHT)
        a, n = self._get((source, band, min(depth, 4)))
        return (a + PRIOR_WEIGHT * centre) / (n + PRIOR_WEIGHT), n

    def p(self, source: str, score: float, depth: int) -> float:
        """The mean plus ``OPTIMISM`` standard deviations of it (capped at 0.99).

        Optimism in the face of little data: without it a node class judged on one unlucky cycle
        (a spine rejected once) is never verified again, so never judged again.
        """
        return self.estimate(source, score, depth)[1]

    def estimate(self, source: str, score: float, depth: int) -> tuple[float, float, tuple]:
        """(mean, optimistic estimate, the node's class): the chooser takes the optimism once per class on a path."""
        mean, n = self._mean(source, score, depth)
        upper = min(0.99, mean + OPTIMISM * (mean * (1 - mean) / (n + PRIOR_WEIGHT)) ** 0.5)
        return mean, max(mean, upper), (source, score_band(score), min(depth, 4))

    def observe(self, record: CycleRecord, greedy: bool = False) -> None:
        """Count every verified node whose parent was accepted: was it accepted too?

        Under greedy decoding (``greedy``) also every drafted node that was not verified (cut by the budget or a
        gate) whose parent was accepted: it would have been accepted exactly when its token is the target's there
        (the accepted child's token, or the bonus token where the walk stopped). Counting only what was verified,
        the estimates saw only the nodes they had ranked best: those were accepted less often than estimated, and
        the ones cut were never seen again (a rank-0 candidate cut in an AR cycle was the target's token in 13 of
        30 such cycles of a Q&A session). Under sampling acceptance is a draw, so only verified nodes count."""
        self.t += 1
        accepted = {n.id for n in record.nodes if n.accepted}
        wanted: dict[int, int] = {}
        if greedy:
            path = [0, *record.accepted_path]
            by_id = record.node_by_id
            wanted = {a: by_id[b].token for a, b in zip(path, path[1:])}
            wanted[path[-1]] = int(record.bonus_token)
        for node in record.nodes:
            if node.id <= 0:
                continue
            if node.verified and node.parent in accepted:
                hit = node.accepted
            elif not node.verified and node.parent in wanted:
                hit = node.token == wanted[node.parent]
            else:
                continue
            self._add((node.source, score_band(node.score)), hit)
            self._add((node.source, score_band(node.score), min(node.depth, 4)), hit)
