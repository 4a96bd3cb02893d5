"""The ``matrix`` counting engine: AMIE's counts as sparse linear algebra on an integer index.

All counts are counts of *distinct head bindings* (AMIE's support, body size, PCA body size),
computed without materialising a dense matrix. ``MatrixEngine`` sends each count to the
strategy that serves it fastest; the modules it is made of, in the order a count meets them:

- ``graph_index``: the index (``KGIndex``): entity ids 0..n-1, per relation and direction a
  scipy.sparse CSR adjacency, the incidence matrices and the fact-pair index;
- ``head_tables``: closing atoms of every one-atom body of a head, one pass per head;
- ``chains``: closing atoms between the ends of two chains (three-hop paths and the like),
  counted by a compiled kernel;
- ``candidate_counts``: every other candidate count, the general path, over ``evaluation``
  (a rule's body over rows of fixed variables: message passing over the free-variable
  forest), ``rows`` and ``budget`` (blocks of rows within a memory budget);
- ``body_sizes``: the confidence denominators, one rule at a time or path rules in batches;
- ``sparse_kernels``: the sparse operations they share (and the only scipy private API).

Read-only after construction: ``--threads`` forks worker processes that share the index.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from kgengine.mining.body_sizes import BodySizes
from kgengine.mining.candidate_counts import CandidateCounts
from kgengine.mining.chains import Chain, ChainCounter, chains_of
from kgengine.mining.evaluation import RuleEvaluator
from kgengine.mining.graph_index import KGIndex
from kgengine.mining.head_tables import HeadTables
from kgengine.mining.measures import RelationStats
from kgengine.mining.rules import Atom


class MatrixEngine:
    """The counting engine the miner calls (``kgengine.mining.counting.CountingEngine``)."""

    name = "matrix"
    parallel = "processes"  # see Miner.mine: forked workers share the index

    def __init__(self, index: KGIndex) -> None:
        self.index = index
        evaluator = RuleEvaluator(index)
        self.head_tables = HeadTables(index)
        self.candidates = CandidateCounts(evaluator)
        self.denominators = BodySizes(evaluator)
        self._chain_counter: ChainCounter | None = None

    def relation_stats(self) -> dict[str, RelationStats]:
        return dict(self.index.stats)

    # -- candidate counts ----------------------------------------------------------------------
    def refinement_counts(
        self, atoms: Sequence[Atom], shapes: Sequence[tuple[str, str]], min_support: int = 0
    ) -> list[dict[str, int]]:
        """For the rule ``atoms`` (head first) and each shape (subject, object) of a new atom
        (FRESH for the new variable): relation -> support of the rule extended by that atom.
        Relations below ``min_support`` may be left out."""
        totals: list[dict[str, int]] = [{} for _ in shapes]
        rest = list(range(len(shapes)))
        if len(atoms) == 2:  # closing atoms of every one-atom body: from the head's tables
            rest = self._from_head_tables(atoms, shapes, rest, min_support, totals)
        # closing atoms between the ends of two chains (three-hop paths and the like): compiled
        rest = self._from_chains(atoms, shapes, rest, min_support, totals)
        if not rest:
            return totals
        shapes = [shapes[i] for i in rest]
        for i, found in zip(rest, self.candidates.refinement_counts(atoms, shapes, min_support), strict=True):
            totals[i] = found
        return totals

    def _from_head_tables(self, atoms: Sequence[Atom], shapes: Sequence[tuple[str, str]], rest: list[int],
                          min_support: int, totals: list[dict[str, int]]) -> list[int]:
        """Counts of the shapes ``rest`` that the head's tables cover into ``totals``; the others."""
        left: list[int] = []
        for i in rest:
            found = self.head_tables.counts(atoms, shapes[i], min_support)
            if found is None:
                left.append(i)
            else:
                totals[i] = found
        return left

    def _from_chains(self, atoms: Sequence[Atom], shapes: Sequence[tuple[str, str]], rest: list[int],
                     min_support: int, totals: list[dict[str, int]]) -> list[int]:
        """Counts of the shapes ``rest`` that close a body of two chains (``kgengine.mining.
        chains``) into ``totals``, both directions of a pair in one pass; the others."""
        left: list[int] = []
        done: dict[frozenset[str], tuple[tuple[str, str], np.ndarray] | None] = {}
        for i in rest:
            shape = shapes[i]
            key = frozenset(shape)
            if key not in done:
                chains = chains_of(atoms, shape, self.index.relation_ids)
                done[key] = None if chains is None else (shape, self._chain_counts(atoms[0], *chains))
            counted = done[key]
            if counted is None:
                left.append(i)
                continue
            first, counts = counted
            row = counts[0 if shape == first else 1]
            found = np.nonzero(row >= max(min_support, 1))[0]
            totals[i] = {self.index.relations[r]: int(row[r]) for r in found}
        return left

    def _chain_counts(self, head: Atom, u: Chain, v: Chain) -> np.ndarray:
        return self.chain_counter().counts(self.index.relation(head.relation), u, v)

    def chain_counter(self) -> ChainCounter:
        """The compiled kernel's counter, made on first use (a rule of two chains, from max-len 4
        on). From then on the batched path body sizes are walked by the kernel too."""
        if self._chain_counter is None:
            self._chain_counter = self.denominators.kernel = ChainCounter(self.index)
        return self._chain_counter

    def constant_counts(
        self, atoms: Sequence[Atom], variable: str, join: str, min_support: int = 1
    ) -> dict[str, int]:
        """Instantiated atoms (``CandidateCounts.constant_counts``)."""
        return self.candidates.constant_counts(atoms, variable, join, min_support)

    # -- confidence denominators ---------------------------------------------------------------
    def body_size(self, atoms: Sequence[Atom], cap: int | None = None) -> int:
        return self.denominators.count(atoms, pca=False, cap=cap)

    def pca_body_size(self, atoms: Sequence[Atom], subject_side: bool, cap: int | None = None) -> int:
        return self.denominators.count(atoms, pca=True, cap=cap, subject_side=subject_side)

    def body_sizes(self, rules: Sequence[Sequence[Atom]], pca: bool = False, subject_side: bool = True,
                   caps: Sequence[int | None] | None = None) -> list[int | None]:
        """Body sizes of path rules counted together, None for the others
        (``BodySizes.batched``)."""
        return self.denominators.batched(rules, pca, subject_side, caps)
