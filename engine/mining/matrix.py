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

import itertools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np
import scipy.sparse as sp
from kgengine.mining.chains import Chain, ChainCounter, chains_of
from kgengine.mining.counting import FRESH
from kgengine.mining.measures import RelationStats
from kgengine.mining.rules import Atom, is_variable
from kgengine.model import Triple
from kgengine.store import KGStore
from scipy.sparse import _sparsetools

# rows per chunk when counting body sizes: bounds the memory of one sparse product, and lets
# a capped count stop early
_CHUNK_ROWS = 4096
# nonzeros one message (a sparse rows x entities matrix) may hold before its block is halved:
# ~200 MB with its intermediates; a hub entity's neighbours are what reaches it
_MESSAGE_BUDGET = 16_000_000
_BUILD_CHUNK = 1 << 18  # triples per step of the index build (and of its progress)
# a free variable tied only to fixed ones is found by walking the fixed one's neighbours when
# its own values would be this many times more (a binary search per neighbour vs ~10 ns each)
_WALK_NEIGHBOURS = 8
# two unrelated free variables of a closing atom are counted by fixing one of them when their
# value pairs over all rows are at most this many, else relation by relation (memory)
_FIX_FREE_PAIRS = 4_000_000
T = TypeVar("T")


def _batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


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


def _weighted_column_counts(m: sp.csc_matrix, entry_weights: np.ndarray) -> np.ndarray:
    """Per column of a CSC matrix, the sum of its entries' weights (their count, weighted)."""
    columns = np.repeat(np.arange(m.shape[1]), np.diff(m.indptr))
    return np.bincount(columns, weights=entry_weights, minlength=m.shape[1]).astype(np.int64)


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


class MessageTooLarge(Exception):
    """A message of the block being evaluated would pass the memory budget: the caller splits
    the block in two and evaluates the halves (hub entities are why; see ``_in_blocks``)."""


_GUARD = threading.local()  # whether the budget applies (off for a single-row block)


def _check_budget(nonzeros: int) -> None:
    if nonzeros > _MESSAGE_BUDGET and getattr(_GUARD, "on", False):
        raise MessageTooLarge(nonzeros)


class Adjacency:
    """One relation read in one direction: a CSR matrix over the entities that have an edge
    (its ``domain``, sorted) rather than over all n entities. A full n x n CSR per relation
    keeps n + 1 row offsets even for a relation of ten facts: 2 x 822 of them are ~30 GB on
    Wikidata5m's 4.6M entities; this costs the facts and the domain only."""

    __slots__ = ("domain", "lookup", "matrix", "n")

    def __init__(self, rows: np.ndarray, cols: np.ndarray, n: int, lookup: bool = False) -> None:
        self.n = n
        self.domain, local = np.unique(rows, return_inverse=True)
        k = len(self.domain)
        # one more row, always empty: entities outside the domain gather it
        self.matrix = _csr(local, cols, (k + 1, n))
        # entity -> local row as an array (4n bytes) where the index can afford it: a lookup
        # is several times faster than the binary search
        self.lookup: np.ndarray | None = None
        if lookup:
            self.lookup = np.full(n, k, dtype=np.int64)
            self.lookup[self.domain] = np.arange(k)

    @classmethod
    def of(cls, domain: np.ndarray, matrix: sp.csr_matrix, n: int, lookup: bool) -> Adjacency:
        """The adjacency over an existing domain and matrix (the index's arrays, not copied)."""
        adj = cls.__new__(cls)
        adj.n, adj.domain, adj.matrix, adj.lookup = n, domain, matrix, None
        if lookup:
            k = len(domain)
            adj.lookup = np.full(n, k, dtype=np.int64)
            adj.lookup[domain] = np.arange(k)
            adj.lookup.flags.writeable = False
        return adj

    def positions(self, entities: np.ndarray) -> np.ndarray:
        """Local row of each entity; the empty last row for an entity outside the domain."""
        if self.lookup is not None:
            return self.lookup[entities]
        k = len(self.domain)
        if k == 0:
            return np.zeros(len(entities), dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.domain, entities), k - 1)
        return np.where(self.domain[pos] == entities, pos, k)

    def degrees(self, entities: np.ndarray) -> np.ndarray:
        pos = self.positions(entities)
        return self.matrix.indptr[pos + 1] - self.matrix.indptr[pos]

    def gather(self, entities: np.ndarray) -> sp.csr_matrix:
        """len(entities) x n: each entity's neighbours (``A[entities]`` of the full matrix)."""
        pos = self.positions(np.asarray(entities, dtype=np.int64))
        _check_budget(int((self.matrix.indptr[pos + 1] - self.matrix.indptr[pos]).sum()))
        return gather_rows(self.matrix, pos)

    def row(self, entity: int) -> np.ndarray:
        pos = int(self.positions(np.array([entity]))[0])
        return self.matrix.indices[self.matrix.indptr[pos] : self.matrix.indptr[pos + 1]]

    def domain_mask(self) -> np.ndarray:
        mask = np.zeros(self.n, dtype=bool)
        mask[self.domain] = True
        return mask

    def reachable(self, sources: np.ndarray | None) -> np.ndarray:
        """Bool mask of the entities one step from ``sources`` (a bool mask; None: anywhere)."""
        mask = np.zeros(self.n, dtype=bool)
        if sources is None:
            mask[self.matrix.indices] = True
        else:
            mask[self.gather(np.nonzero(sources)[0]).indices] = True
        return mask

    def times(self, message: sp.csr_matrix) -> sp.csr_matrix:
        """``message @ A`` (path counts) for a rows x n message: its columns are mapped to the
        domain's local rows, the ones outside the domain dropped, before the product."""
        message = message.tocsr()
        pos = self.positions(message.indices.astype(np.int64))
        _check_budget(int((self.matrix.indptr[pos + 1] - self.matrix.indptr[pos]).sum()))
        local = _wrap_csr(message.data, pos.astype(message.indices.dtype), message.indptr,
                          (message.shape[0], len(self.domain) + 1))
        return local @ self.matrix

    def intersect(self, other: Adjacency) -> Adjacency:
        """The pairs in both (two atoms on the same two variables)."""
        mine, theirs = self.keys(), other.keys()
        both = np.intersect1d(mine, theirs, assume_unique=True)
        return Adjacency(both // self.n, both % self.n, self.n, self.lookup is not None)

    def keys(self) -> np.ndarray:
        rows = np.repeat(self.domain, np.diff(self.matrix.indptr)[:-1])
        return rows * self.n + self.matrix.indices.astype(np.int64)


def build_arrays(triples: Iterable[Triple], on_read: Callable[[int], None] | None = None
                 ) -> tuple[list[str], list[str], dict[str, np.ndarray]]:
    """(entity names, relation names, the flat arrays of ``KGIndex``) of a stream of triples,
    read in chunks (``on_read(n)`` after every n triples)."""
    entity_ids: dict[str, int] = {}
    relation_ids: dict[str, int] = {}
    chunks: list[np.ndarray] = []
    entity, relation = entity_ids.setdefault, relation_ids.setdefault
    for batch in _batched(triples, _BUILD_CHUNK):
        # ids in order of first appearance (head, then tail, triple by triple)
        ends = [entity(e, len(entity_ids)) for h, _, t in batch for e in (h, t)]
        rels = [relation(r, len(relation_ids)) for _, r, _ in batch]
        ids = np.empty((len(batch), 3), dtype=np.int64)
        ids[:, [0, 2]] = np.array(ends, dtype=np.int64).reshape(-1, 2)
        ids[:, 1] = rels
        chunks.append(ids)
        if on_read is not None:
            on_read(len(batch))
    entities = list(entity_ids)
    del entity_ids
    # relations sorted by name so that ids (and every tie-break) are reproducible
    relations = sorted(relation_ids)
    remap = np.zeros(len(relation_ids), dtype=np.int64)
    for name, old in relation_ids.items():
        remap[old] = relations.index(name)
    n, nrel = len(entities), len(relations)
    ids = np.concatenate(chunks) if chunks else np.zeros((0, 3), dtype=np.int64)
    del chunks
    # set semantics: a triple given twice is one fact; sorted by (relation, subject, object)
    key = (remap[ids[:, 1]] * n + ids[:, 0]) * n + ids[:, 2]
    del ids
    key = np.unique(key)
    o = key % n if n else key
    s = (key // n) % n if n else key
    r = key // (n * n) if n else key
    del key
    # one index dtype for every matrix (what scipy picks for them: int32 unless too large)
    itype = np.int32 if max(n, len(r)) < 2**31 - 1 else np.int64
    out: dict[str, np.ndarray] = {"shape": np.array([n, nrel], dtype=np.int64)}
    bounds = np.searchsorted(r, np.arange(nrel + 1))
    out["fact_off"] = bounds.astype(np.int64)
    out["fact_keys"] = s * n + o  # sorted per relation: the facts are
    for name, (rows, cols) in (("fwd", (s, o)), ("bwd", (o, s))):
        domains, indptrs, indices = [], [], []
        for i in range(nrel):
            rs, cs = rows[bounds[i] : bounds[i + 1]], cols[bounds[i] : bounds[i + 1]]
            domain, local = np.unique(rs, return_inverse=True)
            # one more row, always empty: entities outside the domain gather it
            m = _csr(local, cs, (len(domain) + 1, n))
            domains.append(domain)
            indptrs.append(m.indptr.astype(itype))
            indices.append(m.indices.astype(itype))
        out[f"{name}_domain"] = np.concatenate(domains) if domains else np.zeros(0, dtype=np.int64)
        sizes = [len(d) for d in domains]
        out[f"{name}_domain_off"] = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        out[f"{name}_indptr"] = np.concatenate(indptrs) if indptrs else np.zeros(0, dtype=itype)
        out[f"{name}_indices"] = np.concatenate(indices) if indices else np.zeros(0, dtype=itype)
    for name, column in (("subject_inc", s), ("object_inc", o)):
        m = _csr(column, r, (n, nrel))
        out[f"{name}_indptr"], out[f"{name}_indices"] = m.indptr.astype(itype), m.indices.astype(itype)
    pair = s * n + o
    del s, o
    order = np.argsort(pair, kind="stable")  # stable: relations stay sorted per pair
    pair, rel_sorted = pair[order], r[order]
    del order, r
    pair_keys, first = np.unique(pair, return_index=True)
    del pair
    out["pair_keys"] = pair_keys
    any_fwd = _csr(pair_keys // max(n, 1), pair_keys % max(n, 1), (n, n))
    any_fwd.data = np.arange(1, any_fwd.nnz + 1, dtype=np.int32)
    any_bwd = any_fwd.T.tocsr()
    for name, m in (("any_fwd", any_fwd), ("any_bwd", any_bwd)):
        out[f"{name}_indptr"], out[f"{name}_indices"] = m.indptr.astype(itype), m.indices.astype(itype)
        out[f"{name}_data"] = m.data
    if 0 < n * n <= 1 << 31:
        bits = np.zeros((n * n + 7) // 8, dtype=np.uint8)
        np.bitwise_or.at(bits, pair_keys >> 3, (1 << (pair_keys & 7)).astype(np.uint8))
        out["pair_bits"] = bits
    out["pair_rel_indices"] = rel_sorted.astype(np.int32)
    out["pair_rel_indptr"] = np.append(first, len(rel_sorted)).astype(np.int32)
    # the data of every 0/1 matrix: one shared array of ones (views of it)
    out["ones"] = np.ones(max(len(rel_sorted), 1), dtype=np.int32)
    return entities, relations, out


class KGIndex:
    """Integer index of one graph: per-relation adjacency in both directions, incidence
    matrices, the sorted fact-pair index and per-relation statistics (cached: they are asked
    for constantly). Built from a stream of triples in chunks: memory is the index's numpy
    arrays plus the entity-name table, never a Python object per triple.

    Everything is held in a few flat arrays (``arrays()``; the matrices are views of them), so
    that ``kgengine.mining.index`` can write them to one file and map them back: an index
    built here and one mapped from disk are the same object over the same arrays. The arrays
    are read-only either way (a write would fail on a mapped file, so it fails here too)."""

    def __init__(self, triples: Iterable[Triple], on_read: Callable[[int], None] | None = None) -> None:
        entities, relations, arrays = build_arrays(triples, on_read)
        self._assemble(arrays, relations, entities)

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], relations: list[str],
                    entities: list[str] | Callable[[], list[str]]) -> KGIndex:
        """The index over ``arrays`` (as ``arrays()`` gives them; memory-mapped ones are not
        copied); ``entities`` may be a function that decodes the names when first asked for
        (only rules with constants and instantiated heads need them)."""
        index = cls.__new__(cls)
        index._assemble(arrays, relations, entities)
        return index

    def _assemble(self, arrays: dict[str, np.ndarray], relations: list[str],
                  entities: list[str] | Callable[[], list[str]]) -> None:
        for array in arrays.values():
            array.flags.writeable = False
        self._arrays = arrays
        self.mapped_from: Path | None = None  # the file the arrays are mapped from, if any
        self._entities: list[str] | None = None if callable(entities) else entities
        self._decode_entities = entities if callable(entities) else None
        self._entity_ids: dict[str, int] | None = None
        self.relations = list(relations)
        self.relation_ids = {name: i for i, name in enumerate(self.relations)}
        n = self.n = int(arrays["shape"][0])
        nrel = len(self.relations)
        ones = arrays["ones"]
        fact_off = arrays["fact_off"]
        self.fwd: list[Adjacency] = []
        self.bwd: list[Adjacency] = []
        # entity -> row lookup arrays for every relation when they take <= 256 MiB in all
        # (Family, FB15k-237), else for the relations with at least n/2 facts only
        all_lookups = 2 * nrel * n * 8 <= 1 << 28
        for name, out in (("fwd", self.fwd), ("bwd", self.bwd)):
            domains, domain_off = arrays[f"{name}_domain"], arrays[f"{name}_domain_off"]
            indptrs, indices = arrays[f"{name}_indptr"], arrays[f"{name}_indices"]
            for i in range(nrel):
                d0, d1 = int(domain_off[i]), int(domain_off[i + 1])
                k = d1 - d0
                p0 = d0 + 2 * i  # each relation's indptr has k + 2 entries (k + 1 rows)
                f0, f1 = int(fact_off[i]), int(fact_off[i + 1])
                matrix = _wrap_csr(ones[: f1 - f0], indices[f0:f1], indptrs[p0 : p0 + k + 2], (k + 1, n))
                out.append(Adjacency.of(domains[d0:d1], matrix, n, all_lookups or 2 * (f1 - f0) >= n))
        fact_keys = arrays["fact_keys"]
        # sorted s*n+o per relation (membership tests)
        self.rel_keys: list[np.ndarray] = [fact_keys[fact_off[i] : fact_off[i + 1]] for i in range(nrel)]
        self.stats: dict[str, RelationStats] = {
            name: RelationStats(facts=int(fact_off[i + 1] - fact_off[i]), subjects=len(self.fwd[i].domain),
                                objects=len(self.bwd[i].domain))
            for i, name in enumerate(self.relations)}
        # entity x relation incidence: is e a subject (object) of r; a dangling atom's support
        # for all relations at once is one product with these
        shape = (n, nrel)
        self.subject_incidence = _wrap_csr(ones[: len(arrays["subject_inc_indices"])],
                                           arrays["subject_inc_indices"], arrays["subject_inc_indptr"], shape)
        self.object_incidence = _wrap_csr(ones[: len(arrays["object_inc_indices"])],
                                          arrays["object_inc_indices"], arrays["object_inc_indptr"], shape)
        # fact-pair index: sorted distinct s*n+o, and for each pair the relations linking it
        self.pair_keys = arrays["pair_keys"]
        # any relation at all: which pairs are linked (closing atoms intersect with this first);
        # the data is 1 + the pair's position in the fact-pair index (sorted s*n+o = CSR order)
        self.any_fwd = _wrap_csr(arrays["any_fwd_data"], arrays["any_fwd_indices"],
                                 arrays["any_fwd_indptr"], (n, n))
        self.any_bwd = _wrap_csr(arrays["any_bwd_data"], arrays["any_bwd_indices"],
                                 arrays["any_bwd_indptr"], (n, n))
        # a bitmap of the linked pairs, when n² bits fit in 256 MiB (FB15k-237: 26 MiB): most
        # looked-up pairs are not linked, and a bit test is far cheaper than a binary search
        self.pair_bits: np.ndarray | None = arrays.get("pair_bits")
        # pair x relation, CSR: the relations of each distinct linked pair
        rel_sorted = arrays["pair_rel_indices"]
        self.pair_relation_matrix = _wrap_csr(ones[: len(rel_sorted)], rel_sorted, arrays["pair_rel_indptr"],
                                              (len(self.pair_keys), max(nrel, 1)))
        self.triples = len(rel_sorted)

    def arrays(self) -> dict[str, np.ndarray]:
        """The flat arrays the index is made of (what ``kgengine.mining.index`` writes)."""
        return dict(self._arrays)

    @property
    def entities(self) -> list[str]:
        """Entity names by index (decoded when first asked for on a mapped index)."""
        if self._entities is None:
            assert self._decode_entities is not None
            self._entities = self._decode_entities()
        return self._entities

    @property
    def entity_ids(self) -> dict[str, int]:
        if self._entity_ids is None:
            self._entity_ids = {name: i for i, name in enumerate(self.entities)}
        return self._entity_ids

    @classmethod
    def from_store(cls, store: KGStore, graph: str,
                   on_read: Callable[[int], None] | None = None) -> KGIndex:
        return cls(store.triples(graph), on_read)

    def entity(self, name: str) -> int:
        try:
            return self.entity_ids[name]
        except KeyError:
            raise KeyError(f"entity {name!r} is not in the graph") from None

    def relation(self, name: str) -> int:
        return self.relation_ids[name]

    def adjacency(self, relation: int, forward: bool) -> Adjacency:
        return self.fwd[relation] if forward else self.bwd[relation]

    def facts_of(self, relation: int) -> tuple[np.ndarray, np.ndarray]:
        """(subjects, objects) of the relation's facts, sorted; read-only, shared."""
        keys = self.rel_keys[relation]
        return keys // self.n, keys % self.n

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

    def linked(self, keys: np.ndarray) -> np.ndarray:
        """Whether each pair ``keys`` (s*n+o) is linked by some relation."""
        if len(self.pair_keys) == 0:
            return np.zeros(len(keys), dtype=bool)
        if self.pair_bits is not None:
            return ((self.pair_bits[keys >> 3] >> (keys & 7).astype(np.uint8)) & 1).astype(bool)
        pos = np.minimum(np.searchsorted(self.pair_keys, keys), len(self.pair_keys) - 1)
        return self.pair_keys[pos] == keys

    def undirected_degrees(self, entities: np.ndarray) -> np.ndarray:
        """Linked pairs each entity is in, either way (a pair linked both ways counts twice)."""
        fwd, bwd = self.any_fwd.indptr, self.any_bwd.indptr
        return (fwd[entities + 1] - fwd[entities] + bwd[entities + 1] - bwd[entities]).astype(np.int64)

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
    # head bindings each group stands for, when rows were deduplicated on the head variables
    # a count depends on (None: one each); supports sum these
    weights: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.group)

    def take(self, keep: np.ndarray) -> Rows:
        return Rows({v: a[keep] for v, a in self.values.items()}, self.group[keep], self.groups,
                    self.weights)

    def window(self, start: int, stop: int) -> Rows:
        """Rows start..stop of rows that are one per group, renumbered from 0."""
        weights = None if self.weights is None else self.weights[start:stop]
        return Rows({v: a[start:stop] for v, a in self.values.items()},
                    np.arange(stop - start, dtype=np.int64), stop - start, weights)

    def project(self, variables: Sequence[str], n: int) -> Rows:
        """The distinct bindings of ``variables`` among rows that are one per group (and
        unweighted), each weighted by how many rows share it."""
        if not variables:
            return Rows({}, np.zeros(1, dtype=np.int64), 1, np.array([len(self)], dtype=np.int64))
        key = np.zeros(len(self), dtype=np.int64)
        for v in variables:
            key = key * n + self.values[v]
        unique, counts = np.unique(key, return_counts=True)
        values = {}
        for v in reversed(variables):
            values[v] = unique % n
            unique = unique // n
        return Rows(values, np.arange(len(counts), dtype=np.int64), len(counts), counts)

    def group_weights(self, groups: np.ndarray) -> np.ndarray | None:
        return None if self.weights is None else self.weights[groups]

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
        self._tables: dict[tuple[str, str], np.ndarray | None] = {}
        self._chain_counter: ChainCounter | None = None

    # -- protocol ------------------------------------------------------------------------------
    def relation_stats(self) -> dict[str, RelationStats]:
        return dict(self.index.stats)

    def refinement_counts(
        self, atoms: Sequence[Atom], shapes: Sequence[tuple[str, str]], min_support: int = 0
    ) -> list[dict[str, int]]:
        """For the rule ``atoms`` (head first) and each shape (subject, object) of a new atom
        (FRESH for the new variable): relation -> support of the rule extended by that atom.
        Relations below ``min_support`` may be left out."""
        totals: list[dict[str, int]] = [{} for _ in shapes]
        rest = list(range(len(shapes)))
        if len(atoms) == 2:  # closing atoms of every one-atom body: from the head's tables
            rest = [i for i in rest if not self._from_head_tables(atoms, shapes[i], min_support, totals, i)]
        # closing atoms between the ends of two chains (three-hop paths and the like): compiled
        rest = self._from_chains(atoms, shapes, rest, min_support, totals)
        if not rest:
            return totals
        shapes = [shapes[i] for i in rest]
        for i, found in zip(rest, self._refinement_counts(atoms, shapes, min_support), strict=True):
            totals[i] = found
        return totals

    def _refinement_counts(
        self, atoms: Sequence[Atom], shapes: Sequence[tuple[str, str]], min_support: int = 0
    ) -> list[dict[str, int]]:
        head_rows = self._head_rows(atoms[0])
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
                bound = self._bind(block, body, prefer)
                # a relation below the threshold in one block may pass it overall
                return [self._shape_counts(bound, s, min_support if whole else 0) for s in group]

            for counts in self._in_blocks(rows, evaluate):
                for i, found in zip(indices, counts, strict=True):
                    total = totals[i]
                    for rel, n in found.items():
                        total[rel] = total.get(rel, 0) + n
        return totals

    # -- head tables: every closing atom of every one-atom body at once ---------------------
    # Atom codes: 2 * relation + direction. For the head r(a, b), an atom between a and a fresh
    # x has code 2p for p(a, x), 2p + 1 for p(x, a); one between x and b 2q for q(x, b), 2q + 1
    # for q(b, x); one between a and b 2p for p(a, b), 2p + 1 for p(b, a). ``paths[cA, cB]`` is
    # the support of cA(a, x) ∧ cB(x, b) ⇒ r(a, b), ``pairs[c1, c2]`` that of c1 ∧ c2 on (a, b).
    # Dangling on b, the same rule is reached from the other end: one table serves both.
    def _from_head_tables(self, atoms: Sequence[Atom], shape: tuple[str, str], min_support: int,
                          totals: list[dict[str, int]], i: int) -> bool:
        """Counts of ``shape`` for the two-atom rule ``atoms`` from the head's tables into
        ``totals[i]``; False when the shape is not a closing atom they cover."""
        head, atom = atoms
        a, b = head.subject, head.object
        if (FRESH in shape or not (is_variable(a) and is_variable(b)) or a == b
                or not all(is_variable(t) for t in atom.terms) or atom.subject == atom.object
                or not {atom.relation, head.relation} <= self.index.relation_ids.keys()):
            return False
        rel = self.index.relation(atom.relation)
        new = set(shape)
        if set(atom.terms) == {a, b}:  # closed: both atoms on the head's pair
            if new != {a, b}:
                return False
            table = self._head_table(head.relation, "pairs", min_support)
            if table is None:
                return False
            row = table[2 * rel + (atom.subject == b)]
            column = 0 if shape == (a, b) else 1
        else:
            joined = [t for t in atom.terms if t in (a, b)]
            if len(joined) != 1:
                return False
            x = atom.object if atom.subject == joined[0] else atom.subject
            other = b if joined[0] == a else a
            if new != {x, other}:
                return False
            table = self._head_table(head.relation, "paths", min_support)
            if table is None:
                return False
            if joined[0] == a:  # cA fixed by the body atom, the shape picks cB
                row = table[2 * rel + (atom.subject == x)]
                column = 0 if shape == (x, b) else 1
            else:  # cB fixed, the shape picks cA
                row = table[:, 2 * rel + (atom.subject == b)]
                column = 0 if shape == (a, x) else 1
        counts = row[column::2]
        found = np.nonzero(counts >= max(min_support, 1))[0]
        totals[i] = {self.index.relations[q]: int(counts[q]) for q in found}
        return True

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
            if done[key] is None:
                left.append(i)
                continue
            first, counts = done[key]
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
            self._chain_counter = ChainCounter(self.index)
        return self._chain_counter

    def _head_table(self, relation: str, kind: str, min_support: int) -> np.ndarray | None:
        """The head's ``paths`` or ``pairs`` table (kept for the head being mined: the search
        asks for one head's rules at a time), or None when it would pass the memory budget.
        Cells below ``min_support`` may be left at any lower value (the caller drops them)."""
        key = (relation, kind, min_support)
        if key not in self._tables:
            if len(self._tables) >= 2:
                self._tables.clear()
            x, y = self.index.facts_of(self.index.relation(relation))
            self._tables[key] = (self._pair_table(x, y) if kind == "pairs"
                                 else self._path_table(x, y, min_support))
        return self._tables[key]

    def _frequent_codes(self, ends: np.ndarray, min_support: int) -> np.ndarray:
        """Per atom code between a head end and a fresh variable (2r: r(end, v), 2r + 1:
        r(v, end)), whether at least ``min_support`` head facts have such an edge at ``ends``:
        a path through a rarer atom has fewer facts still, so its cell is never asked for."""
        idx = self.index
        c = 2 * len(idx.relations)
        counts = np.zeros(c, dtype=np.int64)
        for direction, incidence in ((0, idx.subject_incidence), (1, idx.object_incidence)):
            hits = gather_rows(incidence, ends).indices
            counts[direction::2] = np.bincount(hits, minlength=len(idx.relations))
        return counts >= max(min_support, 1)

    def _codes(self, left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(item, code) of every atom between left[i] and right[i]: 2r for r(left, right),
        2r + 1 for r(right, left); by item."""
        n = self.index.n
        at, rels = self.index.pair_relations(left * n + right)
        back, back_rels = self.index.pair_relations(right * n + left)
        items = np.concatenate([at, back])
        codes = np.concatenate([2 * rels, 2 * back_rels + 1])
        order = np.argsort(items, kind="stable")
        return items[order], codes[order]

    def _pair_table(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        c = 2 * len(self.index.relations)
        facts, codes = self._codes(x, y)
        incidence = sp.csr_matrix((np.ones(len(facts), dtype=np.int64), (facts, codes)), shape=(len(x), c))
        return (incidence.T @ incidence).toarray()

    def _path_table(self, x: np.ndarray, y: np.ndarray, min_support: int) -> np.ndarray | None:
        """Supports of every two-atom path a - v - b over the head facts (a, b): per fact, the
        values v linked to both ends (the end with fewer links walked, the other tested on the
        pair bitmap), then the distinct (fact, a-v code, v-b code) cells, fact blocks bounded
        by the message budget."""
        idx = self.index
        n, c = idx.n, 2 * len(idx.relations)
        table = np.zeros(c * c, dtype=np.int64)
        frequent_a, frequent_b = self._frequent_codes(x, min_support), self._frequent_codes(y, min_support)
        frequent_b = frequent_b.reshape(-1, 2)[:, ::-1].ravel()  # at b: 2q is q(v, b), 2q + 1 q(b, v)
        if not (frequent_a.any() and frequent_b.any()):
            return table.reshape(c, c)
        dx, dy = idx.undirected_degrees(x), idx.undirected_degrees(y)
        walk_x = dx <= dy
        work = np.minimum(dx, dy)
        if int(work.max(initial=0)) > _MESSAGE_BUDGET:
            return None  # one fact's walk alone passes the budget: the general path blocks it
        ends = np.cumsum(work)
        start = 0
        while start < len(x):
            stop = max(int(np.searchsorted(ends, ends[start] - work[start] + _MESSAGE_BUDGET, "right")),
                       start + 1)
            block = np.arange(start, min(stop, len(x)))
            start = int(block[-1]) + 1
            walked = np.where(walk_x[block], x[block], y[block])
            fact, v = [], []
            for anyrel in (idx.any_fwd, idx.any_bwd):
                gathered = gather_rows(anyrel, walked)
                fact.append(np.repeat(block, np.diff(gathered.indptr)))
                v.append(gathered.indices.astype(np.int64))
            # a value linked both ways is met twice: keep its forward meeting only
            start_of = np.where(walk_x[fact[1]], x[fact[1]], y[fact[1]])
            once = ~idx.linked(start_of * n + v[1])
            fact_ids, v_ids = np.concatenate([fact[0], fact[1][once]]), np.concatenate([v[0], v[1][once]])
            other = np.where(walk_x[fact_ids], y[fact_ids], x[fact_ids])
            keep = idx.linked(v_ids * n + other) | idx.linked(other * n + v_ids)
            fact_ids, v_ids = fact_ids[keep], v_ids[keep]
            a_item, a_code = self._codes(x[fact_ids], v_ids)
            b_item, b_code = self._codes(v_ids, y[fact_ids])
            frequent = frequent_a[a_code]
            a_item, a_code = a_item[frequent], a_code[frequent]
            frequent = frequent_b[b_code]
            b_item, b_code = b_item[frequent], b_code[frequent]
            # every a-v code with every v-b code of the same item
            per_item = np.bincount(b_item, minlength=len(fact_ids))
            b_start = np.cumsum(per_item) - per_item
            reps = per_item[a_item]
            first = np.repeat(np.arange(len(a_item)), reps)
            within = np.arange(int(reps.sum())) - np.repeat(np.cumsum(reps) - reps, reps)
            item = a_item[first]
            cells = np.unique((fact_ids[item] * c + a_code[first]) * c + b_code[b_start[item] + within])
            table += np.bincount(cells % (c * c), minlength=c * c)
        return table.reshape(c, c)

    @staticmethod
    def _in_blocks(rows: Rows, evaluate: Callable[[Rows, bool], T]) -> Iterator[T]:
        """``evaluate`` on blocks of at most _CHUNK_ROWS rows (one per group), in order; the
        results add up over the blocks (disjoint head bindings). A block whose messages would
        pass _MESSAGE_BUDGET is halved and retried, down to one row (then it runs whatever its
        size: one binding's values are at most the entities). ``whole`` tells ``evaluate``
        that its block is all the rows."""
        pending = [(start, min(start + _CHUNK_ROWS, len(rows)))
                   for start in range(0, len(rows), _CHUNK_ROWS)][::-1]
        while pending:
            start, stop = pending.pop()
            _GUARD.on = stop - start > 1
            try:
                result = evaluate(rows.window(start, stop), stop - start == len(rows))
            except MessageTooLarge:
                middle = (start + stop) // 2
                pending += [(middle, stop), (start, middle)]
                continue
            finally:
                _GUARD.on = False
            yield result

    def body_size(self, atoms: Sequence[Atom], cap: int | None = None) -> int:
        return self._pair_count(atoms, pca=False, cap=cap)

    # -- body sizes of many path rules at once -----------------------------------------------
    def body_sizes(self, rules: Sequence[Sequence[Atom]], pca: bool = False, subject_side: bool = True,
                   caps: Sequence[int | None] | None = None) -> list[int | None]:
        """Exact body sizes (PCA body sizes with ``pca``, counted on the head's subject when
        ``subject_side``) of path rules ``r(a, b) <= near(a, x) ∧ far(x, b)`` and
        ``r(a, b) <= near(a, x) ∧ middle(x, y) ∧ far(y, b)`` (atoms either way round, in any
        order), counted together: the rules that share the head and the atom at the counted
        head variable share one walk from that variable's values, and the steps after it are
        one sparse product each, shared by the rules with the same steps so far. None for the
        other rules (the caller counts them one by one). A rule's count stops once it reaches
        its cap (``caps[i]``, AMIE's lazy counting): it is then some value at or above the cap,
        as the one-by-one count's is (which value depends on the blocks; any of them decides
        the same: the threshold is not reached)."""
        out: list[int | None] = [None] * len(rules)
        on_subject = subject_side or not pca  # body sizes count per head subject (_pair_count)
        groups: dict[tuple[str, str, bool], list[tuple[int, list[tuple[Atom, str]], int | None]]] = {}
        for i, atoms in enumerate(rules):
            path = self._path_shape(atoms)
            if path is None:
                continue
            head = atoms[0]
            fixed = head.subject if on_subject else head.object
            if not on_subject:  # walked from b: the same atoms the other way along
                path = [(atom, self._other(atom, start)) for atom, start in reversed(path)]
            near, *steps = path
            cap = caps[i] if caps is not None else None
            groups.setdefault((head.relation, near[0].relation, near[0].subject == fixed), []).append(
                (i, steps, cap))
        for (head_relation, near_relation, forward), members in groups.items():
            counts = self._path_group(head_relation, near_relation, forward, on_subject, members, pca)
            if counts is None:
                continue
            for (i, *_), count in zip(members, counts, strict=True):
                out[i] = count
        return out

    def _path_shape(self, atoms: Sequence[Atom]) -> list[tuple[Atom, str]] | None:
        """The body of a two- or three-atom path from the head's subject to its object, as
        (atom, the variable it is entered from) in path order; None for any other rule."""
        if len(atoms) not in (3, 4):
            return None
        head, *body = atoms
        a, b = head.subject, head.object
        known = self.index.relation_ids
        if not (is_variable(a) and is_variable(b)) or a == b or head.relation not in known:
            return None
        for atom in body:
            if (not all(is_variable(t) for t in atom.terms) or atom.subject == atom.object
                    or atom.relation not in known):
                return None
        path, at, rest = [], a, list(body)
        while rest:
            step = [atom for atom in rest if at in atom.terms]
            if len(step) != 1:
                return None
            path.append((step[0], at))
            rest.remove(step[0])
            at = self._other(step[0], at)
            if (at == b) != (not rest) or at == a:
                return None
        return path

    def _path_group(self, head_relation: str, near_relation: str, forward: bool, on_subject: bool,
                    members: list[tuple[int, list[tuple[Atom, str]], int | None]],
                    pca: bool) -> list[int] | None:
        """Per member, the distinct (fixed, other) pairs joined by near(fixed, x) and its steps
        (``forward``: near's subject is the fixed variable): the fixed variable's values are
        the near atom's (those with a head fact at that end with ``pca``), walked in blocks
        whose messages stay within the budget; None when one value passes it.

        A value with one near neighbour x reaches what x reaches: such values are walked once
        per distinct x, weighted by how many share it (a functional near atom such as a gender
        or a country would otherwise walk the hub behind x once per value). Where the compiled
        kernel is loaded, it walks all the rows with stamps (``ChainCounter.path_sizes``)."""
        idx = self.index
        near = idx.adjacency(idx.relation(near_relation), forward)
        values = near.domain
        if pca:
            head_rel = idx.relation(head_relation)
            head_adj = idx.fwd[head_rel] if on_subject else idx.bwd[head_rel]
            values = values[head_adj.degrees(values) > 0]
        # each member's steps as (relation, forward): a prefix of them names the values it reaches
        keys = [tuple((atom.relation, atom.subject == start) for atom, start in member_steps)
                for _, member_steps, _ in members]
        caps = [cap for *_, cap in members]
        counts = [0] * len(members)
        active = list(range(len(members)))
        positions = near.positions(values)
        degrees = near.matrix.indptr[positions + 1] - near.matrix.indptr[positions]
        if int(degrees.max(initial=0)) > _MESSAGE_BUDGET:
            return None
        single = degrees == 1
        shared, weights = np.unique(near.matrix.indices[near.matrix.indptr[positions[single]]],
                                    return_counts=True)
        # the rows walked: the distinct x of the one-neighbour values (a unit row each), then
        # the near rows of the others; each with the number of values it stands for
        walked = ~single  # a near value has one neighbour at least
        many = positions[walked]
        weights = np.concatenate([weights, np.ones(len(many), dtype=weights.dtype)])
        if self._chain_counter is not None:  # the compiled kernel is loaded: it walks them all
            message = self._near_rows(near, shared, many, 0, len(weights))
            paths = [tuple((idx.relation(relation), along) for relation, along in key) for key in keys]
            return self._chain_counter.path_sizes(message.indptr, message.indices, weights, paths, caps)
        degrees = np.concatenate([np.ones(len(shared), dtype=degrees.dtype), degrees[walked]])
        ends = np.cumsum(degrees)
        start = 0
        while start < len(weights) and active:
            stop = max(int(np.searchsorted(ends, ends[start] - degrees[start] + _MESSAGE_BUDGET, "right")),
                       start + 1)
            stop = min(stop, start + _CHUNK_ROWS)  # blocks as _pair_count's: a capped count stops early
            message = self._near_rows(near, shared, many, start, stop)
            block_weights = weights[start:stop]
            start = stop
            # block x values after each prefix of steps, shared by the members that take it
            reached: dict[tuple[tuple[str, bool], ...], sp.csr_matrix] = {(): message}
            for j in list(active):
                last = len(keys[j])
                for k in range(1, last + 1):
                    if k < last and keys[j][:k] in reached:
                        continue
                    relation, along = keys[j][k - 1]
                    message, step = reached[keys[j][:k - 1]], idx.adjacency(idx.relation(relation), along)
                    pos = step.positions(message.indices.astype(np.int64))
                    if int((step.matrix.indptr[pos + 1] - step.matrix.indptr[pos]).sum()) > _MESSAGE_BUDGET \
                            and message.shape[0] > 1:
                        return None  # a hub on the path: the one-by-one count blocks it
                    product = step.times(message)
                    if k < last:
                        reached[keys[j][:k]] = _binarise(product)
                # the last product's non-zeros per row are the distinct others of its values
                counts[j] += int(np.diff(product.indptr) @ block_weights)
                if caps[j] is not None and counts[j] >= caps[j]:
                    active.remove(j)
        return counts

    @staticmethod
    def _near_rows(near: Adjacency, shared: np.ndarray, many: np.ndarray, start: int, stop: int
                   ) -> sp.csr_matrix:
        """Rows start..stop of the walk's message: unit rows for the ``shared`` entities first,
        then the near rows at the local positions ``many``."""
        k = len(shared)
        units = shared[start:min(stop, k)].astype(near.matrix.indices.dtype)
        rows = gather_rows(near.matrix, many[max(start - k, 0):max(stop - k, 0)])
        if not len(units):
            return rows
        indptr = np.concatenate([np.arange(len(units), dtype=rows.indptr.dtype), len(units) + rows.indptr])
        return _wrap_csr(np.concatenate([np.ones(len(units), dtype=rows.data.dtype), rows.data]),
                         np.concatenate([units, rows.indices]), indptr, (stop - start, near.n))

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
            values = {head.subject: idx.bwd[rel].row(idx.entity(head.object)).astype(np.int64)}
        elif is_variable(head.object):
            values = {head.object: idx.fwd[rel].row(idx.entity(head.subject)).astype(np.int64)}
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
            leaf = self._leaf_atoms(rows, atoms, root) if len(component) == 1 else None
            if leaf is not None and len(leaf) == 1 and leaf[0].relation in self.index.relation_ids:
                # one atom to a fixed variable: satisfiable where that value has an edge; the
                # values themselves (a hub's can be millions per row) are left until asked for
                atom = leaf[0]
                anchor = self._term(rows, self._other(atom, root))
                if isinstance(anchor, np.ndarray):
                    adj = self.index.adjacency(self.index.relation(atom.relation), atom.object == root)
                    keep &= adj.degrees(anchor) > 0
                    continue
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
            rows, atoms = self._filter_fixed(Rows(values, rows.group[r], rows.groups, rows.weights), atoms)

    # -- message passing -----------------------------------------------------------------------
    def _anchor(self, rows: Rows, atom: Atom, node: str) -> Message:
        """Values of ``node`` reachable through ``atom`` from its fixed (or constant) term."""
        idx = self.index
        other = atom.object if atom.subject == node else atom.subject
        value = self._term(rows, other)
        adj = idx.adjacency(idx.relation(atom.relation), atom.object == node)
        if isinstance(value, np.ndarray):
            return adj.gather(value)  # selection-matrix product: one CSR row per row
        mask = np.zeros(idx.n, dtype=bool)
        mask[adj.row(int(value))] = True
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
                edge = adj if edge is None else edge.intersect(adj)
            result = self._combine(result, self._propagate(incoming, edge))
        return result

    @staticmethod
    def _propagate(message: Message, edge: Adjacency) -> Message:
        """One path step: values of the next variable reachable from the message's values."""
        if message is None or isinstance(message, np.ndarray):
            return edge.reachable(message)
        return _binarise(edge.times(message))

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
            _check_budget(len(rows) * len(cols))
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
        return Bound(Rows(values, rows.group[r], rows.groups, rows.weights), bound.atoms)

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
            if bound.rows.weights is None:
                counts = np.diff(hits.indptr)
            else:
                # per_group is groups x n, or rows x n when the rows are one per group
                by_row = per_group.shape[0] != bound.rows.groups
                groups = bound.rows.group[hits.indices] if by_row else hits.indices
                counts = _weighted_column_counts(hits, bound.rows.weights[groups])
            return {idx.relations[i]: int(c) for i, c in enumerate(counts) if c}
        # closing: (row, subject value, object value) triples looked up in the fact-pair index
        if subject not in bound.rows.values and obj not in bound.rows.values:
            if self._independent(bound, subject, obj):
                s_values, o_values = self._values(bound, subject), self._values(bound, obj)
                pairs = int(np.dot(np.diff(s_values.indptr), np.diff(o_values.indptr)))
                if pairs > _FIX_FREE_PAIRS:
                    return self._free_pair_counts(bound, subject, obj, min_support)
                # few (row, x, y) combinations (small dense KGs): fixing one variable counts
                # every relation at once, where the relation-by-relation loop costs a sparse
                # product per relation
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

    def _leaf_atoms(self, rows: Rows, atoms: list[Atom], variable: str) -> list[Atom] | None:
        """The atoms of a free variable whose other terms are all fixed or constants (None when
        it shares an atom with another free variable)."""
        mine = [a for a in atoms if variable in a.variables]
        if any(self._term(rows, self._other(a, variable)) is None for a in mine):
            return None
        return mine

    @staticmethod
    def _other(atom: Atom, variable: str) -> str:
        return atom.object if atom.subject == variable else atom.subject

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
        bounds = (np.diff(both.indptr) if rows.weights is None
                  else _weighted_column_counts(both, rows.weights[rows.group[both.indices]]))
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
        leaf = None if free in bound.cache else self._leaf_atoms(rows, bound.atoms, free)
        if leaf and all(isinstance(self._term(rows, self._other(a, free)), np.ndarray) for a in leaf):
            # a free variable tied only to fixed ones whose values were never built: when its
            # values would far outnumber the fixed variable's neighbours (a hub anchors it),
            # walk the neighbours and test the variable's atoms on each instead
            adjacencies = [idx.adjacency(idx.relation(a.relation), a.object == free) for a in leaf]
            anchors = [rows.values[self._other(a, free)] for a in leaf]
            values_bound = min(int(adj.degrees(v).sum()) for adj, v in zip(adjacencies, anchors, strict=True))
            if _WALK_NEIGHBOURS * neighbours < values_bound:
                _check_budget(neighbours)
                gathered = gather_rows(anyrel, fixed_values)
                row_ids = np.repeat(np.arange(len(rows)), degrees)
                candidates = gathered.indices.astype(np.int64)
                keep = np.ones(len(candidates), dtype=bool)
                for atom, anchor in zip(leaf, anchors, strict=True):
                    other = anchor[row_ids]
                    keys = candidates * idx.n + other if atom.subject == free else other * idx.n + candidates
                    keep &= idx.has_pairs(idx.relation(atom.relation), keys)
                return row_ids[keep], candidates[keep], gathered.data[keep].astype(np.int64) - 1
        values = self._values(bound, free)
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
            candidates = candidates[adj.degrees(candidates) > 0]
        def evaluate(block: Rows, whole: bool) -> int:
            bound = self._bind(block, body, [other] if other else [])
            if other is None:
                return bound.rows.distinct_groups()
            return int(self._per_group(bound, other).nnz) if len(bound.rows) else 0

        rows = Rows({fixed_var: candidates.astype(np.int64)},
                    np.arange(len(candidates), dtype=np.int64), len(candidates))
        total = 0
        for count in self._in_blocks(rows, evaluate):
            total += count
            if cap is not None and total >= cap:
                break
        return total

    def _candidates(self, body: list[Atom], variable: str) -> np.ndarray:
        """Entities that can bind ``variable``: in the domain of every atom that mentions it."""
        idx = self.index
        mask = np.ones(idx.n, dtype=bool)
        for atom in body:
            if variable in atom.variables:
                adj = idx.adjacency(idx.relation(atom.relation), atom.subject == variable)
                mask &= adj.domain_mask()
        return np.nonzero(mask)[0]
