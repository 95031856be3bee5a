"""EAGLE's trees and heads, beside TALON (which drafts with the same heads and compares with the static tree).

- :mod:`.static`: EAGLE's static tree, TALON's baseline (seed 001, Algorithm 1);
- :mod:`.dynamic`: EAGLE-2's dynamic tree (the official ``topK_genrate``), the ``eagle`` method;
- :mod:`.heads`: EAGLE-1/2 and EAGLE-3 heads in their published layouts, loaded and written.
"""
