"""The ``matrix`` counting engine: AMIE's counts as sparse linear algebra on an integer index.

The index maps entity ids to 0..n-1 and keeps, per relation, its adjacency as a scipy.sparse
CSR matrix (and the transpose for the other direction). All counts are counts of *distinct
head bindings* (AMIE's support, body size, PCA body size), computed without materialising a
dense matrix:

- a rule is evaluated over "rows": tuples of fixed variables (the head pairs (x, y) for
  supports, one head variable for body sizes), one group per distinct head binding;
- a free variable's consistent values per row come from boolean message passing over the
  free-variable forest: an atom joining a fixed and a free variable gathers CSR rows
  (``A[x_values]``, a selection-matrix product), a path through another free variable is a
  sparse product (``M @ A``), two atoms on the same variables an element-wise product, and
  an atom read against its direction uses the transpose;
- the support of *every* candidate atom of a refinement comes from one sparse product with an
  entity×relation incidence matrix (dangling atoms) or from the fact-pair index (closing
  atoms: the candidate pairs are first intersected with the any-relation adjacency, an
  element-wise product whose data are the pairs' positions in the index, or tested against a
  bitmap of linked pairs), then a count of distinct (head binding, relation) cells.

Read-only after construction: ``--threads`` forks worker processes that share the index.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from kgengine.mining.measures import RelationStats
from kgengine.mining.rules import Atom, is_variable
from kgengine.mining.search import FRESH
from kgengine.model import Triple
from kgengine.store import KGStore
from scipy.sparse import _sparsetools

# rows per chunk when counting body sizes: bounds the memory of one sparse product, and lets
# a capped count stop early
_CHUNK_ROWS = 4096


def _csr(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    data = np.ones(len(rows), dtype=np.int32)
    m = sp.csr_matrix((data, (rows, cols)), shape=shape)
    m.sum_duplicates()
    m.data[:] = 1
    return m


def _binarise(m: sp.csr_matrix) -> sp.csr_matrix:
    """Path counts -> 0/1 (products count paths; AMIE counts distinct bindings)."""
    m = m.tocsr()
    m.eliminate_zeros()
    m.data = np.ones(len(m.data), dtype=np.int32)
    return m


def gather_rows(m: sp.csr_matrix, rows: np.ndarray) -> sp.csr_matrix:
    """``m[rows]`` for a CSR matrix: the product of a row-selection matrix with ``m``, done with
    scipy's own kernel directly (its fancy indexing spends more time in checks than in it)."""
    rows = np.asarray(rows, dtype=m.indices.dtype)
    lengths = m.indptr[rows + 1] - m.indptr[rows]
    indptr = np.zeros(len(rows) + 1, dtype=m.indptr.dtype)
    np.cumsum(lengths, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), dtype=m.indices.dtype)
    data = np.empty(int(indptr[-1]), dtype=m.data.dtype)
    # scipy's own C kernel for A[rows] (what fancy indexing calls after its checks)
    _sparsetools.csr_row_index(len(rows), rows, m.indptr, m.indices, m.data, indices, data)
    return _wrap_csr(data, indices, indptr, (len(rows), m.shape[1]))


def _wrap_csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
              shape: tuple[int, int]) -> sp.csr_matrix:
    """A CSR matrix over arrays known to be valid (same index dtype, sorted, no duplicates),
    without the constructor's format checks: the miner builds tens of thousands of small
    matrices and those checks cost more than the arithmetic on them."""
    out = sp.csr_matrix.__new__(sp.csr_matrix)
    out._shape = shape
    out.maxprint = 50
    out.data, out.indices, out.indptr = data, indices, indptr
    out.has_sorted_indices = True
    out.has_canonical_format = True
    return out


class KGIndex:
    """Integer index of one graph: per-relation CSR adjacency, incidence matrices, the sorted
    fact-pair index and per-relation statistics (cached: they are asked for constantly)."""

    def __init__(self, triples: Iterable[Triple]) -> None:
        entity_ids: dict[str, int] = {}
        relation_ids: dict[str, int] = {}
        heads, rels, tails = [], [], []
        for h, r, t in triples:
            heads.append(entity_ids.setdefault(h, len(entity_ids)))
            tails.append(entity_ids.setdefault(t, len(entity_ids)))
            rels.append(relation_ids.setdefault(r, len(relation_ids)))
        self.entities = list(entity_ids)
        self.entity_ids = entity_ids
        # relations sorted by name so that ids (and every tie-break) are reproducible
        self.relations = sorted(relation_ids)
        remap = np.array([0] * len(relation_ids), dtype=np.int64)
        for name, old in relation_ids.items():
            remap[old] = self.relations.index(name)
        self.relation_ids = {name: i for i, name in enumerate(self.relations)}
        n = self.n = len(self.entities)
        nrel = len(self.relations)
        s = np.asarray(heads, dtype=np.int64)
        o = np.asarray(tails, dtype=np.int64)
        r = remap[np.asarray(rels, dtype=np.int64)] if rels else np.zeros(0, dtype=np.int64)
        # set semantics: a triple given twice is one fact
        if len(s):
            key = (r * n + s) * n + o
            key = np.unique(key)
            o = key % n
            s = (key // n) % n
            r = key // (n * n)
        self.fwd: list[sp.csr_matrix] = []
        self.bwd: list[sp.csr_matrix] = []
        self.rel_keys: list[np.ndarray] = []  # sorted s*n+o per relation (membership tests)
        self.stats: dict[str, RelationStats] = {}
        bounds = np.searchsorted(r, np.arange(nrel + 1))
        for i, name in enumerate(self.relations):
            rs, ro = s[bounds[i] : bounds[i + 1]], o[bounds[i] : bounds[i + 1]]
            fwd = _csr(rs, ro, (n, n))
            self.fwd.append(fwd)
            self.bwd.append(fwd.T.tocsr())
            self.rel_keys.append(np.sort(rs * n + ro))
            self.stats[name] = RelationStats(
                facts=int(fwd.nnz),
                subjects=int(np.count_nonzero(np.diff(fwd.indptr))),
                objects=int(np.count_nonzero(np.diff(self.bwd[-1].indptr))),
            )
        # any relation at all: which pairs are linked (closing atoms intersect with this first);
        # the data is 1 + the pair's position in the fact-pair index (sorted s*n+o = CSR order)
        self.any_fwd = _csr(s, o, (n, n))
        self.any_fwd.data = np.arange(1, self.any_fwd.nnz + 1, dtype=np.int32)
        self.any_bwd = self.any_fwd.T.tocsr()
        # entity x relation incidence: is e a subject (object) of r; a dangling atom's support
        # for all relations at once is one product with these
        self.subject_incidence = _csr(s, r, (n, nrel)) if n else sp.csr_matrix((0, nrel))
        self.object_incidence = _csr(o, r, (n, nrel)) if n else sp.csr_matrix((0, nrel))
        # fact-pair index: sorted distinct s*n+o, and for each pair the relations linking it
        pair = s * n + o
        order = np.lexsort((r, pair))
        pair, rel_sorted = pair[order], r[order]
        self.pair_keys, first = np.unique(pair, return_index=True)
        # a bitmap of the linked pairs, when n² bits fit in 256 MiB (FB15k-237: 26 MiB): most
        # looked-up pairs are not linked, and a bit test is far cheaper than a binary search
        self.pair_bits: np.ndarray | None = None
        if 0 < n * n <= 1 << 31:
            self.pair_bits = np.zeros((n * n + 7) // 8, dtype=np.uint8)
            np.bitwise_or.at(self.pair_bits, self.pair_keys >> 3,
                             (1 << (self.pair_keys & 7)).astype(np.uint8))
        # pair x relation, CSR: the relations of each distinct linked pair
        self.pair_relation_matrix = sp.csr_matrix(
            (np.ones(len(pair), dtype=np.int32), rel_sorted.astype(np.int32),
             np.append(first, len(pair)).astype(np.int32)),
            shape=(len(self.pair_keys), max(nrel, 1)))
        self.triples = len(s)

    @classmethod
    def from_store(cls, store: KGStore, graph: str) -> KGIndex:
        return cls(store.triples(graph))

    def entity(self, name: str) -> int:
        try:
            return self.entity_ids[name]
        except KeyError:
            raise KeyError(f"entity {name!r} is not in the graph") from None

    def relation(self, name: str) -> int:
        return self.relation_ids[name]

    def adjacency(self, relation: int, forward: bool) -> sp.csr_matrix:
        return self.fwd[relation] if forward else self.bwd[relation]

    def facts_of(self, relation: int) -> tuple[np.ndarray, np.ndarray]:
        """(subjects, objects) of the relation's facts, sorted; read-only, shared."""
        fwd = self.fwd[relation]
        subjects = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(fwd.indptr))
        return subjects, fwd.indices.astype(np.int64)

    def pair_relations(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For the pairs ``keys`` (s*n+o): (position in keys, relation id) of every fact."""
        if len(self.pair_keys) == 0 or len(keys) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        if self.pair_bits is not None:
            linked = np.nonzero((self.pair_bits[keys >> 3] >> (keys & 7).astype(np.uint8)) & 1)[0]
            where, rels = self.pair_relations_of(keys[linked])
            return linked[where], rels
        return self.pair_relations_of(keys)

    def pair_relations_of(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(keys) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        if len(keys) > 4096:
            # sorted needles make the binary searches walk memory in order: ~4x faster on
            # millions of keys, far more than the sort costs
            order = np.argsort(keys)
            pos = np.searchsorted(self.pair_keys, keys[order])
            pos = np.minimum(pos, len(self.pair_keys) - 1)
            found = self.pair_keys[pos] == keys[order]
            hit, pos = order[found], pos[found]
        else:
            pos = np.searchsorted(self.pair_keys, keys)
            pos = np.minimum(pos, len(self.pair_keys) - 1)
            hit = np.nonzero(self.pair_keys[pos] == keys)[0]
            pos = pos[hit]
        where, rels = self.relations_of_pairs(pos)
        return hit[where], rels

    def relations_of_pairs(self, pair_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For positions in the fact-pair index: (index into pair_ids, relation id) per fact."""
        found = gather_rows(self.pair_relation_matrix, pair_ids)
        return np.repeat(np.arange(len(pair_ids)), np.diff(found.indptr)), found.indices.astype(np.int64)

    def has_pairs(self, relation: int, keys: np.ndarray) -> np.ndarray:
        ref = self.rel_keys[relation]
        if len(ref) == 0:
            return np.zeros(len(keys), dtype=bool)
        pos = np.minimum(np.searchsorted(ref, keys), len(ref) - 1)
        return ref[pos] == keys


# ---- rule evaluation over rows -------------------------------------------------------------
# A message about a free variable: per-row value sets (sparse rows x n), a row-independent value
# set (bool vector), or None (unconstrained).
Message = sp.csr_matrix | np.ndarray | None


@dataclass
class Rows:
    """Bindings of the fixed variables, one per row; ``group`` names the distinct head binding
    each row belongs to (rows of one group differ only in non-head fixed variables)."""

    values: dict[str, np.ndarray]
    group: np.ndarray
    groups: int

    def __len__(self) -> int:
        return len(self.group)

    def take(self, keep: np.ndarray) -> Rows:
        return Rows({v: a[keep] for v, a in self.values.items()}, self.group[keep], self.groups)

    @property
    def one_per_group(self) -> bool:
        """No two rows share a head binding. Rows stay in group order (filters keep it, fixing a
        variable expands a row in place), so groups are unique when strictly increasing."""
        g = self.group
        return len(g) <= 1 or bool((g[1:] > g[:-1]).all())

    def distinct_groups(self) -> int:
        return len(self.group) if self.one_per_group else len(np.unique(self.group))


@dataclass
class Bound:
    """Rows for which the whole body is satisfiable, the body atoms that still mention a free
    variable (the free-variable graph is a forest), and the marginals computed on the way."""

    rows: Rows
    atoms: list[Atom]
    cache: dict[str, Message] = field(default_factory=dict)
    fixed: dict[str, Bound] = field(default_factory=dict)  # the same rows, one variable fixed


class MatrixEngine:
    """The counting engine the miner calls (``kgengine.mining.search.CountingEngine``)."""

    name = "matrix"
    parallel = "processes"  # see Miner.mine: forked workers share the index

    def __init__(self, index: KGIndex) -> None:
        self.index = index

    # -- protocol ------------------------------------------------------------------------------
    def relation_stats(self) -> dict[str, RelationStats]:
        return dict(self.index.stats)

    def refinement_counts(
        self, atoms: Sequence[Atom], shapes: Sequence[tuple[str, str]], min_support: int = 0
    ) -> list[dict[str, int]]:
        """For the rule ``atoms`` (head first) and each shape (subject, object) of a new atom
        (FRESH for the new variable): relation -> support of the rule extended by that atom.
        Relations below ``min_support`` may be left out."""
        prefer = [v for shape in shapes for v in shape if v != FRESH]
        head_rows = self._head_rows(atoms[0])
        if len(head_rows) <= _CHUNK_ROWS:
            bound = self._bind(head_rows, list(atoms[1:]), prefer)
            return [self._shape_counts(bound, shape, min_support) for shape in shapes]
        # Large heads in blocks of head bindings: supports add up over disjoint blocks, and the
        # memory of a message (rows x values of a free variable) stays bounded. A relation
        # below the threshold in one block may pass it overall, so blocks count everything.
        totals: list[dict[str, int]] = [{} for _ in shapes]
        for start in range(0, len(head_rows), _CHUNK_ROWS):
            block = head_rows.take(np.arange(start, min(start + _CHUNK_ROWS, len(head_rows))))
            block = Rows(block.values, block.group - start, len(block))
            bound = self._bind(block, list(atoms[1:]), prefer)
            for total, shape in zip(totals, shapes, strict=True):
                for rel, n in self._shape_counts(bound, shape).items():
                    total[rel] = total.get(rel, 0) + n
        return totals

    def body_size(self, atoms: Sequence[Atom], cap: int | None = None) -> int:
        return self._pair_count(atoms, pca=False, cap=cap)

    def pca_body_size(self, atoms: Sequence[Atom], subject_side: bool, cap: int | None = None) -> int:
        return self._pair_count(atoms, pca=True, cap=cap, subject_side=subject_side)

    def constant_counts(
        self, atoms: Sequence[Atom], variable: str, join: str, min_support: int = 1
    ) -> dict[str, int]:
        """Instantiated atoms: for the dangling variable ``variable`` of the rule ``atoms``,
        entity -> support of the rule with ``variable`` bound to it, for the constants with at
        least ``min_support`` whose binding leaves ``join`` (the other variable of that atom)
        at least 2 distinct values (AMIE's DefaultMiningAssistant skips the others)."""
        bound = self._bind(self._head_rows(atoms[0]), list(atoms[1:]))
        if not len(bound.rows):
            return {}
        per_group = self._per_group(bound, variable)
        support = np.asarray((per_group > 0).sum(axis=0)).ravel()
        out = {}
        for e in np.nonzero(support >= max(min_support, 1))[0]:
            constant = self.index.entities[int(e)]
            fixed = [a.rename({variable: constant}) for a in atoms]
            if self._distinct_values(fixed, join) >= 2:
                out[constant] = int(support[e])
        return out

    def _distinct_values(self, atoms: Sequence[Atom], variable: str) -> int:
        bound = self._bind(self._head_rows(atoms[0]), list(atoms[1:]))
        if not len(bound.rows):
            return 0
        if variable in bound.rows.values:
            return len(np.unique(bound.rows.values[variable]))
        values = self._values(bound, variable)
        return int(np.count_nonzero(np.diff(values.tocsc().indptr)))

    # -- rows --------------------------------------------------------------------------------
    def _head_rows(self, head: Atom) -> Rows:
        idx = self.index
        rel = idx.relation(head.relation)
        if is_variable(head.subject) and is_variable(head.object):
            x, y = idx.facts_of(rel)
            values = {head.subject: x, head.object: y}
        elif is_variable(head.subject):
            values = {head.subject: idx.bwd[rel][idx.entity(head.object)].indices.astype(np.int64)}
        elif is_variable(head.object):
            values = {head.object: idx.fwd[rel][idx.entity(head.subject)].indices.astype(np.int64)}
        else:
            raise ValueError(f"head {head} has no variable")
        count = len(next(iter(values.values())))
        return Rows(values, np.arange(count, dtype=np.int64), count)

    def _bind(self, rows: Rows, body: list[Atom], prefer: Sequence[str] = ()) -> Bound:
        """Keep the rows for which ``body`` is satisfiable: every component of free variables
        has a non-empty marginal at its root (a ``prefer``red variable when it has one, so that
        its marginal is kept for the counts that follow)."""
        rows, atoms = self._filter_fixed(rows, body)
        rows, atoms = self._forest(rows, atoms)
        keep = np.ones(len(rows), dtype=bool)
        cache: dict[str, Message] = {}
        for component in self._components(rows, atoms):
            root = next((v for v in prefer if v in component), component[0])
            message = cache[root] = self._message(rows, atoms, root, None)
            if isinstance(message, np.ndarray):
                keep &= bool(message.any())
            elif message is not None:
                keep &= np.diff(message.indptr) > 0
        if not keep.all():
            selected = np.nonzero(keep)[0]
            rows = rows.take(selected)
            cache = {v: gather_rows(m, selected) if isinstance(m, sp.csr_matrix) else m
                     for v, m in cache.items()}
        return Bound(rows, atoms, cache)

    def _filter_fixed(self, rows: Rows, body: list[Atom]) -> tuple[Rows, list[Atom]]:
        """Apply the atoms whose terms are all fixed (or constants); return the others."""
        free_atoms = []
        for atom in body:
            s, o = self._term(rows, atom.subject), self._term(rows, atom.object)
            if s is None or o is None:
                free_atoms.append(atom)
                continue
            keys = np.broadcast_to(np.asarray(s) * self.index.n + o, (len(rows),))
            rows = rows.take(self.index.has_pairs(self.index.relation(atom.relation), keys))
        return rows, free_atoms

    def _term(self, rows: Rows, term: str) -> np.ndarray | int | None:
        if not is_variable(term):
            return self.index.entity(term)
        return rows.values.get(term)

    def _components(self, rows: Rows, atoms: list[Atom]) -> list[list[str]]:
        order = list(dict.fromkeys(v for a in atoms for v in a.variables if v not in rows.values))
        seen: set[str] = set()
        out = []
        for start in order:
            if start in seen:
                continue
            component, stack = [], [start]
            seen.add(start)
            while stack:
                v = stack.pop()
                component.append(v)
                for a in atoms:
                    if v in a.variables:
                        for w in a.variables:
                            if w not in rows.values and w not in seen:
                                seen.add(w)
                                stack.append(w)
            out.append(component)
        return out

    def _forest(self, rows: Rows, atoms: list[Atom]) -> tuple[Rows, list[Atom]]:
        """Fix variables until the free variables form a forest (message passing is exact on
        trees). Only bodies of 4+ atoms can hold a cycle among free variables; a variable of the
        cycle is fixed to each of its anchor's candidate values (the body check that follows
        drops the inconsistent ones)."""
        while True:
            cyclic = None
            for component in self._components(rows, atoms):
                pairs = {frozenset(a.variables) for a in atoms
                         if all(v in component for v in a.variables) and len(set(a.variables)) == 2}
                if len(pairs) >= len(component):
                    cyclic = component
                    break
            if cyclic is None:
                return rows, atoms
            anchored = [v for v in cyclic if any(
                v in a.variables and any(self._term(rows, t) is not None for t in a.terms if t != v)
                for a in atoms)]
            variable = anchored[0]
            anchors = None
            for atom in atoms:
                other = atom.object if atom.subject == variable else atom.subject
                if variable in atom.variables and self._term(rows, other) is not None:
                    anchors = self._combine(anchors, self._anchor(rows, atom, variable))
            coo = self._as_rows(rows, anchors).tocoo()
            r = coo.row.astype(np.int64)
            values = {v: a[r] for v, a in rows.values.items()}
            values[variable] = coo.col.astype(np.int64)
            rows, atoms = self._filter_fixed(Rows(values, rows.group[r], rows.groups), atoms)

    # -- message passing -----------------------------------------------------------------------
    def _anchor(self, rows: Rows, atom: Atom, node: str) -> Message:
        """Values of ``node`` reachable through ``atom`` from its fixed (or constant) term."""
        idx = self.index
        other = atom.object if atom.subject == node else atom.subject
        value = self._term(rows, other)
        adj = idx.adjacency(idx.relation(atom.relation), atom.object == node)
        if isinstance(value, np.ndarray):
            return gather_rows(adj, value)  # selection-matrix product: one CSR row per row
        mask = np.zeros(idx.n, dtype=bool)
        mask[adj[int(value)].indices] = True
        return mask

    def _message(self, rows: Rows, atoms: list[Atom], node: str, parent: str | None) -> Message:
        """Values of ``node`` consistent with the subtree hanging from it (away from ``parent``)."""
        idx = self.index
        result: Message = None
        neighbours: dict[str, list[Atom]] = {}
        for atom in atoms:
            if node not in atom.variables:
                continue
            if atom.subject == atom.object:
                raise ValueError(f"reflexive atom {atom} is not supported")
            other = atom.object if atom.subject == node else atom.subject
            if self._term(rows, other) is not None:
                result = self._combine(result, self._anchor(rows, atom, node))
            elif other != parent:
                neighbours.setdefault(other, []).append(atom)
        for child, child_atoms in neighbours.items():
            incoming = self._message(rows, atoms, child, node)
            edge = None  # child values x node values; parallel atoms: element-wise product
            for atom in child_atoms:
                adj = idx.adjacency(idx.relation(atom.relation), atom.subject == child)
                edge = adj if edge is None else _binarise(edge.multiply(adj))
            result = self._combine(result, self._propagate(incoming, edge))
        return result

    @staticmethod
    def _propagate(message: Message, edge: sp.csr_matrix) -> Message:
        """One path step: values of the next variable reachable from the message's values."""
        if message is None:
            return np.diff(edge.tocsc().indptr) > 0
        if isinstance(message, np.ndarray):
            return np.diff(edge[np.nonzero(message)[0]].tocsc().indptr) > 0
        return _binarise(message @ edge)

    @staticmethod
    def _combine(a: Message, b: Message) -> Message:
        """Both constraints on the same variable: intersection (element-wise product)."""
        if a is None:
            return b
        if b is None:
            return a
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return a & b
        if isinstance(a, np.ndarray):
            a, b = b, a
        if isinstance(b, np.ndarray):
            coo = a.tocoo()
            keep = b[coo.col]
            return _csr(coo.row[keep], coo.col[keep], a.shape)
        return _binarise(a.multiply(b))

    def _as_rows(self, rows: Rows, message: Message) -> sp.csr_matrix:
        if message is None:
            raise ValueError("unconstrained variable")
        if isinstance(message, np.ndarray):
            cols = np.nonzero(message)[0]
            r = np.repeat(np.arange(len(rows)), len(cols))
            return _csr(r, np.tile(cols, len(rows)), (len(rows), self.index.n))
        return message

    def _values(self, bound: Bound, variable: str) -> sp.csr_matrix:
        """Per-row value sets (rows x n, 0/1) of a free variable."""
        message = bound.cache.get(variable)
        if message is None:
            message = bound.cache[variable] = self._message(bound.rows, bound.atoms, variable, None)
        return self._as_rows(bound.rows, message)

    def _per_group(self, bound: Bound, variable: str) -> sp.csr_matrix:
        """groups x n: the values ``variable`` takes in each head binding's satisfying rows."""
        rows = bound.rows
        if variable in rows.values:
            return _csr(rows.group, rows.values[variable], (rows.groups, self.index.n))
        per_row = self._values(bound, variable)
        if rows.one_per_group:
            return per_row
        agg = _csr(rows.group, np.arange(len(rows)), (rows.groups, len(rows)))
        return _binarise(agg @ per_row)

    def _fix(self, bound: Bound, variable: str) -> Bound:
        """The same bindings with ``variable`` fixed too: one row per consistent value (exact:
        the values come from its marginal, so each new row extends to a full binding)."""
        rows = bound.rows
        coo = self._values(bound, variable).tocoo()
        r = coo.row.astype(np.int64)
        values = {v: a[r] for v, a in rows.values.items()}
        values[variable] = coo.col.astype(np.int64)
        return Bound(Rows(values, rows.group[r], rows.groups), bound.atoms)

    # -- candidate counts --------------------------------------------------------------------
    def _shape_counts(self, bound: Bound, shape: tuple[str, str], min_support: int = 0) -> dict[str, int]:
        idx = self.index
        if not len(bound.rows):
            return {}
        subject, obj = shape
        if FRESH in (subject, obj):  # dangling: one product with an incidence matrix
            joined = obj if subject == FRESH else subject
            incidence = idx.object_incidence if subject == FRESH else idx.subject_incidence
            per_group = self._per_group(bound, joined)
            # groups x relations, positive where some value of the joined variable has an r edge
            hits = (per_group @ incidence).tocsc()
            counts = np.diff(hits.indptr)
            return {idx.relations[i]: int(c) for i, c in enumerate(counts) if c}
        # closing: (row, subject value, object value) triples looked up in the fact-pair index
        if subject not in bound.rows.values and obj not in bound.rows.values:
            if self._independent(bound, subject, obj):
                return self._free_pair_counts(bound, subject, obj, min_support)
            # two free variables: fix the one with fewer values (the other one's values are
            # then filtered per row); both directions of the pair share it
            fix = min((subject, obj), key=lambda v: (self._values(bound, v).nnz, v))
            if fix not in bound.fixed:
                bound.fixed[fix] = self._fix(bound, fix)
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

    def _independent(self, bound: Bound, u: str, v: str) -> bool:
        """Free variables in different components: given a row, their values are independent."""
        return not any(u in c and v in c for c in self._components(bound.rows, bound.atoms))

    def _free_pair_counts(self, bound: Bound, subject: str, obj: str, min_support: int) -> dict[str, int]:
        """Closing atom r(subject, obj) between two independent free variables, relation by
        relation: rows where (S @ A_r) ∘ O is not empty, S and O the per-row value sets. Memory
        stays within one product (fixing one variable would pair every value of one with every
        value of the other); relations that cannot reach ``min_support`` are skipped on a bound
        (some value of S with an r edge out and some value of O with one in, in the same row)."""
        idx = self.index
        rows = bound.rows
        s_values, o_values = self._values(bound, subject), self._values(bound, obj)
        both = (s_values @ idx.subject_incidence).multiply(o_values @ idx.object_incidence).tocsc()
        counts: dict[str, int] = {}
        for rel in np.nonzero(np.diff(both.indptr) >= max(min_support, 1))[0]:
            candidates = both.indices[both.indptr[rel] : both.indptr[rel + 1]]  # rows to test
            hits = (gather_rows(s_values, candidates) @ idx.fwd[rel]).multiply(
                gather_rows(o_values, candidates)).tocsr()
            found = candidates[np.diff(hits.indptr) > 0]
            support = len(found) if rows.one_per_group else len(np.unique(rows.group[found]))
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
        values = self._values(bound, free)
        anyrel = idx.any_fwd if forward else idx.any_bwd
        fixed_values = bound.rows.values[fixed]
        neighbours = int((anyrel.indptr[fixed_values + 1] - anyrel.indptr[fixed_values]).sum())
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
            counts = marked.reshape(rows.groups, nrel).sum(axis=0)
        else:
            counts = np.bincount(np.unique(cells) % nrel, minlength=nrel)
        return {self.index.relations[i]: int(counts[i]) for i in np.nonzero(counts)[0]}

    # -- body sizes ----------------------------------------------------------------------------
    def _pair_count(
        self, atoms: Sequence[Atom], pca: bool, cap: int | None, subject_side: bool = True
    ) -> int:
        """Distinct head bindings satisfying the body (and, for the PCA body, the head relation
        on the functional side). Rows are values of the functional head variable, in chunks, so
        that a capped count stops as soon as it reaches the cap (AMIE's lazy counting)."""
        idx = self.index
        head, body = atoms[0], list(atoms[1:])
        head_rel = idx.relation(head.relation)
        variables = [t for t in (head.subject, head.object) if is_variable(t)]
        if len(variables) == 2:
            fixed_var = head.subject if subject_side else head.object
            other = head.object if subject_side else head.subject
        else:
            fixed_var, other = variables[0], None
            subject_side = head.subject == fixed_var
        candidates = self._candidates(body, fixed_var)
        if pca:  # the functional variable has some head fact
            adj = idx.fwd[head_rel] if subject_side else idx.bwd[head_rel]
            candidates = candidates[np.diff(adj.indptr)[candidates] > 0]
        total = 0
        for start in range(0, len(candidates), _CHUNK_ROWS):
            chunk = candidates[start : start + _CHUNK_ROWS].astype(np.int64)
            rows = Rows({fixed_var: chunk}, np.arange(len(chunk), dtype=np.int64), len(chunk))
            bound = self._bind(rows, body, [other] if other else [])
            if other is None:
                total += bound.rows.distinct_groups()
            elif len(bound.rows):
                total += int(self._per_group(bound, other).nnz)
            if cap is not None and total >= cap:
                return total
        return total

    def _candidates(self, body: list[Atom], variable: str) -> np.ndarray:
        """Entities that can bind ``variable``: in the domain of every atom that mentions it."""
        idx = self.index
        mask = np.ones(idx.n, dtype=bool)
        for atom in body:
            if variable in atom.variables:
                adj = idx.adjacency(idx.relation(atom.relation), atom.subject == variable)
                mask &= np.diff(adj.indptr) > 0
        return np.nonzero(mask)[0]
