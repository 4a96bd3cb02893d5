"""Candidate counts by the general path: the support of every candidate atom of a refinement
(and of every constant of an instantiated atom), over the rows of the rule's head bindings.

The support of *every* candidate atom comes from one sparse product with an entity×relation
incidence matrix (dangling atoms) or from the fact-pair index (closing atoms: the candidate
pairs are first intersected with the any-relation adjacency, an element-wise product whose
data are the pairs' positions in the index, or tested against a bitmap of linked pairs), then
a count of distinct (head binding, relation) cells. The vectorised passes of
``kgengine.mining.head_tables`` and ``kgengine.mining.chains`` serve the common shapes
faster; this path serves every shape and is what they are tested against."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from kgengine.mining import budget
from kgengine.mining.counting import FRESH
from kgengine.mining.evaluation import RuleEvaluator, other_term
from kgengine.mining.rows import Bound, Rows
from kgengine.mining.rules import Atom
from kgengine.mining.sparse_kernels import gather_rows, weighted_column_counts

# a free variable tied only to fixed ones is found by walking the fixed one's neighbours when
# its own values would be this many times more (a binary search per neighbour vs ~10 ns each)
_WALK_NEIGHBOURS = 8
# two unrelated free variables of a closing atom are counted by fixing one of them when their
# value pairs over all rows are at most this many, else relation by relation (memory)
_FIX_FREE_PAIRS = 4_000_000


class CandidateCounts:
    """Supports of candidate atoms, one sparse computation per refinement (``refinement_counts``)
    or per instantiated atom (``constant_counts``)."""

    def __init__(self, evaluator: RuleEvaluator) -> None:
        self.evaluator = evaluator
        self.index = evaluator.index

    def refinement_counts(
        self, atoms: Sequence[Atom], shapes: Sequence[tuple[str, str]], min_support: int = 0
    ) -> list[dict[str, int]]:
        """Per shape (subject, object) of a new atom (FRESH for the new variable): relation ->
        support of the rule ``atoms`` (head first) extended by that atom, every shape through
        the general path. Relations below ``min_support`` may be left out."""
        head_rows = self.evaluator.head_rows(atoms[0])
        body = list(atoms[1:])
        # A count that does not involve every head variable (body and new atom both leave one
        # out) is counted once per distinct binding of the others, weighted by the head
        # bindings sharing it: rules like r(a, b) <= p(x, b) are counted per b, not per (a, b),
        # which is what keeps a hub object from being visited once per head fact.
        used = {v for a in body for v in a.variables}
        by_dependency: dict[tuple[str, ...], list[int]] = {}
        for i, shape in enumerate(shapes):
            needed = used | set(shape)
            by_dependency.setdefault(tuple(v for v in head_rows.values if v in needed), []).append(i)
        totals: list[dict[str, int]] = [{} for _ in shapes]
        for dependency, indices in by_dependency.items():
            rows = (head_rows if len(dependency) == len(head_rows.values)
                    else head_rows.project(dependency, self.index.n))
            group = [shapes[i] for i in indices]
            prefer = [v for shape in group for v in shape if v != FRESH]

            def evaluate(block: Rows, whole: bool, group: list[tuple[str, str]] = group,
                         prefer: list[str] = prefer) -> list[dict[str, int]]:
                bound = self.evaluator.bind(block, body, prefer)
                # a relation below the threshold in one block may pass it overall
                return [self._shape_counts(bound, s, min_support if whole else 0) for s in group]

            for counts in budget.in_blocks(rows, evaluate):
                for i, found in zip(indices, counts, strict=True):
                    total = totals[i]
                    for rel, n in found.items():
                        total[rel] = total.get(rel, 0) + n
        return totals

    def constant_counts(
        self, atoms: Sequence[Atom], variable: str, join: str, min_support: int = 1
    ) -> dict[str, int]:
        """Instantiated atoms: for the dangling variable ``variable`` of the rule ``atoms``,
        entity -> support of the rule with ``variable`` bound to it, for the constants with at
        least ``min_support`` whose binding leaves ``join`` (the other variable of that atom)
        at least 2 distinct values (AMIE's DefaultMiningAssistant skips the others)."""
        bound = self.evaluator.bind(self.evaluator.head_rows(atoms[0]), list(atoms[1:]))
        if not len(bound.rows):
            return {}
        per_group = self.evaluator.per_group(bound, variable)
        support = np.asarray((per_group > 0).sum(axis=0)).ravel()
        out = {}
        for e in np.nonzero(support >= max(min_support, 1))[0]:
            constant = self.index.entities[int(e)]
            fixed = [a.rename({variable: constant}) for a in atoms]
            if self._distinct_values(fixed, join) >= 2:
                out[constant] = int(support[e])
        return out

    def _distinct_values(self, atoms: Sequence[Atom], variable: str) -> int:
        bound = self.evaluator.bind(self.evaluator.head_rows(atoms[0]), list(atoms[1:]))
        if not len(bound.rows):
            return 0
        if variable in bound.rows.values:
            return len(np.unique(bound.rows.values[variable]))
        values = self.evaluator.value_sets(bound, variable)
        return int(np.count_nonzero(np.diff(values.tocsc().indptr)))

    def _shape_counts(self, bound: Bound, shape: tuple[str, str], min_support: int = 0) -> dict[str, int]:
        idx = self.index
        if not len(bound.rows):
            return {}
        subject, obj = shape
        if FRESH in (subject, obj):  # dangling: one product with an incidence matrix
            joined = obj if subject == FRESH else subject
            incidence = idx.object_incidence if subject == FRESH else idx.subject_incidence
            per_group = self.evaluator.per_group(bound, joined)
            # groups x relations, positive where some value of the joined variable has an r edge
            hits = (per_group @ incidence).tocsc()
            if bound.rows.weights is None:
                counts = np.diff(hits.indptr)
            else:
                # per_group is groups x n, or rows x n when the rows are one per group
                by_row = per_group.shape[0] != bound.rows.groups
                groups = bound.rows.group[hits.indices] if by_row else hits.indices
                counts = weighted_column_counts(hits, bound.rows.weights[groups])
            return {idx.relations[i]: int(c) for i, c in enumerate(counts) if c}
        # closing: (row, subject value, object value) triples looked up in the fact-pair index
        if subject not in bound.rows.values and obj not in bound.rows.values:
            if self.evaluator.independent(bound, subject, obj):
                s_values = self.evaluator.value_sets(bound, subject)
                o_values = self.evaluator.value_sets(bound, obj)
                pairs = int(np.dot(np.diff(s_values.indptr), np.diff(o_values.indptr)))
                if pairs > _FIX_FREE_PAIRS:
                    return self._free_pair_counts(bound, subject, obj, min_support)
                # few (row, x, y) combinations (small dense KGs): fixing one variable counts
                # every relation at once, where the relation-by-relation loop costs a sparse
                # product per relation
            # two free variables: fix the one with fewer values (the other one's values are
            # then filtered per row); both directions of the pair share it
            fix = min((subject, obj), key=lambda v: (self.evaluator.value_sets(bound, v).nnz, v))
            if fix not in bound.fixed:
                bound.fixed[fix] = self.evaluator.fix(bound, fix)
            bound = bound.fixed[fix]
        rows = bound.rows
        if subject in rows.values and obj in rows.values:
            hit, rels = idx.pair_relations(rows.values[subject] * idx.n + rows.values[obj])
            return self._count_cells(rows, rows.group[hit], rels)
        fixed, free = (subject, obj) if subject in rows.values else (obj, subject)
        row_ids, free_values, pair_ids = self._linked_values(bound, fixed, free, fixed == subject)
        if pair_ids is not None:
            hit, rels = idx.relations_of_pairs(pair_ids)
        else:
            fixed_values = rows.values[fixed][row_ids]
            hit, rels = idx.pair_relations(fixed_values * idx.n + free_values if fixed == subject
                                           else free_values * idx.n + fixed_values)
        return self._count_cells(rows, rows.group[row_ids[hit]], rels)

    def _free_pair_counts(self, bound: Bound, subject: str, obj: str, min_support: int) -> dict[str, int]:
        """Closing atom r(subject, obj) between two independent free variables, relation by
        relation: rows where (S @ A_r) ∘ O is not empty, S and O the per-row value sets. Memory
        stays within one product (fixing one variable would pair every value of one with every
        value of the other); relations that cannot reach ``min_support`` are skipped on a bound
        (some value of S with an r edge out and some value of O with one in, in the same row)."""
        idx = self.index
        rows = bound.rows
        s_values, o_values = self.evaluator.value_sets(bound, subject), self.evaluator.value_sets(bound, obj)
        both = (s_values @ idx.subject_incidence).multiply(o_values @ idx.object_incidence).tocsc()
        bounds = (np.diff(both.indptr) if rows.weights is None
                  else weighted_column_counts(both, rows.weights[rows.group[both.indices]]))
        counts: dict[str, int] = {}
        for rel in np.nonzero(bounds >= max(min_support, 1))[0]:
            candidates = both.indices[both.indptr[rel] : both.indptr[rel + 1]]  # rows to test
            hits = idx.fwd[rel].times(gather_rows(s_values, candidates)).multiply(
                gather_rows(o_values, candidates)).tocsr()
            found = candidates[np.diff(hits.indptr) > 0]
            groups = rows.group[found] if rows.one_per_group else np.unique(rows.group[found])
            weights = rows.group_weights(groups)
            support = len(groups) if weights is None else int(weights.sum())
            if support:
                counts[idx.relations[rel]] = support
        return counts

    def _linked_values(
        self, bound: Bound, fixed: str, free: str, forward: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(row, value, fact-pair position or None) for the free variable's values. When the
        fixed values have few neighbours, an element-wise product with their gathered
        any-relation adjacency keeps only the linked values, and its data are the pairs'
        positions in the fact-pair index (no lookup needed); otherwise every value is kept and
        the caller looks the pairs up."""
        idx = self.index
        anyrel = idx.any_fwd if forward else idx.any_bwd
        rows = bound.rows
        fixed_values = rows.values[fixed]
        degrees = anyrel.indptr[fixed_values + 1] - anyrel.indptr[fixed_values]
        neighbours = int(degrees.sum())
        leaf = None if free in bound.cache else self.evaluator.leaf_atoms(rows, bound.atoms, free)
        if leaf and all(isinstance(self.evaluator.term(rows, other_term(a, free)), np.ndarray) for a in leaf):
            # a free variable tied only to fixed ones whose values were never built: when its
            # values would far outnumber the fixed variable's neighbours (a hub anchors it),
            # walk the neighbours and test the variable's atoms on each instead
            adjacencies = [idx.adjacency(idx.relation(a.relation), a.object == free) for a in leaf]
            anchors = [rows.values[other_term(a, free)] for a in leaf]
            values_bound = min(int(adj.degrees(v).sum()) for adj, v in zip(adjacencies, anchors, strict=True))
            if _WALK_NEIGHBOURS * neighbours < values_bound:
                budget.check_budget(neighbours)
                gathered = gather_rows(anyrel, fixed_values)
                row_ids = np.repeat(np.arange(len(rows)), degrees)
                candidates = gathered.indices.astype(np.int64)
                keep = np.ones(len(candidates), dtype=bool)
                for atom, anchor in zip(leaf, anchors, strict=True):
                    other = anchor[row_ids]
                    keys = candidates * idx.n + other if atom.subject == free else other * idx.n + candidates
                    keep &= idx.has_pairs(idx.relation(atom.relation), keys)
                return row_ids[keep], candidates[keep], gathered.data[keep].astype(np.int64) - 1
        values = self.evaluator.value_sets(bound, free)
        pair_ids = None
        if neighbours < 16 * values.nnz:  # ~10 ns per gathered element vs ~200 ns per lookup
            values = values.multiply(gather_rows(anyrel, fixed_values)).tocsr()
            values.eliminate_zeros()
            pair_ids = values.data.astype(np.int64) - 1
        counts = np.diff(values.indptr)
        return np.repeat(np.arange(len(counts)), counts), values.indices.astype(np.int64), pair_ids

    def _count_cells(self, rows: Rows, groups: np.ndarray, rels: np.ndarray) -> dict[str, int]:
        """Distinct (head binding, relation) cells -> count per relation."""
        nrel = len(self.index.relations)
        cells = groups * nrel + rels
        if rows.groups * nrel <= 8 * len(cells) + 65536:  # a small dense table: no sort
            marked = np.zeros(rows.groups * nrel, dtype=bool)
            marked[cells] = True
            table = marked.reshape(rows.groups, nrel)
            counts = (table.sum(axis=0) if rows.weights is None
                      else rows.weights @ table.astype(np.int64))
        else:
            cells = np.unique(cells)
            counts = np.bincount(cells % nrel, weights=rows.group_weights(cells // nrel),
                                 minlength=nrel).astype(np.int64)
        return {self.index.relations[i]: int(counts[i]) for i in np.nonzero(counts)[0]}

