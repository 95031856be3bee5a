"""Flattening: the verify order, the tree mask and the position ids."""

import numpy as np
import torch

from specviz_core.runtime.attention import additive_mask
from specviz_core.tree import DraftTree, flatten


def seed_example() -> DraftTree:
    # cur -> c0 -> (c2, c3); cur -> c1 -> (c4, c5), as in seed 003.
    t = DraftTree(root_token=100)
    c0 = t.add(0, 10, "draft")
    t.add(c0, 12, "draft")
    t.add(c0, 13, "draft")
    c1 = t.add(0, 11, "draft")
    t.add(c1, 14, "draft")
    t.add(c1, 15, "draft")
    return t


def test_mask_is_ancestors_and_self():
    b = flatten(seed_example())
    # Rows: root, c0, c2, c3, c1, c4, c5 (every node after its parent).
    assert b.tokens.tolist() == [100, 10, 12, 13, 11, 14, 15]
    expected = np.array([
        [1, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0, 0],
        [1, 1, 0, 1, 0, 0, 0],
        [1, 0, 0, 0, 1, 0, 0],
        [1, 0, 0, 0, 1, 1, 0],
        [1, 0, 0, 0, 1, 0, 1],
    ], dtype=bool)
    assert (b.mask == expected).all()
    assert b.positions(40).tolist() == [40, 41, 42, 42, 41, 42, 42]


def test_gated_nodes_are_not_verified():
    t = seed_example()
    g = t.add(1, 99, "draft", gated=True)
    t.add(g, 98, "draft", gated=True)
    b = flatten(t)
    assert 99 not in b.tokens.tolist() and len(b.order) == 7


def test_additive_mask_shape_and_values():
    b = flatten(seed_example())
    m = additive_mask(b.mask, 5, torch.float16, torch.device("cpu"))
    assert m.shape == (1, 1, 7, 12) and m.dtype == torch.float16
    assert (m[0, 0, :, :5] == 0).all()  # every row sees the whole cache
    assert (m[0, 0, :, 5:] == 0).numpy().tolist() == b.mask.tolist()
    assert float(m[0, 0, 1, 7]) == torch.finfo(torch.float16).min


def test_random_trees_mask_each_rows_ancestors_found_by_walking_up():
    """Trees of every shape (chains, bushes, gated subtrees): a row sees exactly the nodes met walking up its parents,
    and each row's parent row holds its parent node."""
    rng = np.random.default_rng(0)
    for trial in range(200):
        t = DraftTree(root_token=1)
        for _ in range(int(rng.integers(0, 40))):
            parent = len(t) - 1 if trial % 4 == 0 else int(rng.integers(0, len(t)))  # every 4th: a chain
            t.add(parent, int(rng.integers(0, 50)), "draft", gated=t.gated[parent] or rng.random() < 0.1)
        b = flatten(t)
        verified = [i for i in range(len(t)) if not t.gated[i]]
        assert b.order.tolist() == verified
        row_of = {node: row for row, node in enumerate(verified)}
        for row, node in enumerate(verified):
            up, seen = node, set()
            while up >= 0:
                seen.add(row_of[up])
                up = t.parents[up]
            assert set(np.flatnonzero(b.mask[row]).tolist()) == seen
            assert b.parent_rows[row] == (row_of[t.parents[node]] if node else -1)
