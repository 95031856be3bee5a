"""TALON and the drafters that share its parts (seed 001).

- :mod:`.drafter`: TALON's budget-driven adaptive tree (Algorithm 2: top-k at the root, then the candidates within
  ``mu`` of a layer's best path probability, until the node budget);
- :mod:`.eagle`: EAGLE's trees and heads: its static tree (TALON's baseline: top-k per parent and per layer, pruned
  to the budget), EAGLE-2's dynamic tree (``eagle``), and heads in EAGLE-1/2's and EAGLE-3's published layouts;
- :mod:`.next_token`: where both read the next-token distributions of a draft: a draft head, a draft model, or the
  n-gram tables of the target's own outputs (STAND's table drafter reads these too);
- :mod:`.head`: the draft head itself (SpecViz's own layout, trained by :mod:`specviz_core.training`; its files are
  found by :mod:`specviz_core.runtime.head_files`, torch-free);
- :mod:`.ngram_tables`: the n-gram tables.

The methods' cards (names, parameters, descriptions; torch-free) are :mod:`specviz_core.methods.talon` and
:mod:`specviz_core.methods.eagle_static` and :mod:`specviz_core.methods.eagle`.
"""
