"""The matrix engine's index of one graph (``KGIndex``): entity ids 0..n-1, per relation and
direction a CSR adjacency over the relation's own subjects (objects), the entity × relation
incidence matrices, the fact-pair index and the any-relation adjacency, all views of a few
flat arrays (``build_arrays``) that ``kgengine.mining.index`` writes to disk and maps back.
The counting strategies read it (``kgengine.mining.matrix``); it is read-only."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import numpy as np
import scipy.sparse as sp
from kgengine.mining.budget import check_budget
from kgengine.mining.measures import RelationStats
from kgengine.mining.sparse_kernels import csr, gather_rows, wrap_csr
from kgengine.model import Triple
from kgengine.store import KGStore

_BUILD_CHUNK = 1 << 18  # triples per step of the index build (and of its progress)
T = TypeVar("T")


def _batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


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
        self.matrix = csr(local, cols, (k + 1, n))
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
        check_budget(int((self.matrix.indptr[pos + 1] - self.matrix.indptr[pos]).sum()))
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
        check_budget(int((self.matrix.indptr[pos + 1] - self.matrix.indptr[pos]).sum()))
        local = wrap_csr(message.data, pos.astype(message.indices.dtype), message.indptr,
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
            m = csr(local, cs, (len(domain) + 1, n))
            domains.append(domain)
            indptrs.append(m.indptr.astype(itype))
            indices.append(m.indices.astype(itype))
        out[f"{name}_domain"] = np.concatenate(domains) if domains else np.zeros(0, dtype=np.int64)
        sizes = [len(d) for d in domains]
        out[f"{name}_domain_off"] = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        out[f"{name}_indptr"] = np.concatenate(indptrs) if indptrs else np.zeros(0, dtype=itype)
        out[f"{name}_indices"] = np.concatenate(indices) if indices else np.zeros(0, dtype=itype)
    for name, column in (("subject_inc", s), ("object_inc", o)):
        m = csr(column, r, (n, nrel))
        out[f"{name}_indptr"], out[f"{name}_indices"] = m.indptr.astype(itype), m.indices.astype(itype)
    pair = s * n + o
    del s, o
    order = np.argsort(pair, kind="stable")  # stable: relations stay sorted per pair
    pair, rel_sorted = pair[order], r[order]
    del order, r
    pair_keys, first = np.unique(pair, return_index=True)
    del pair
    out["pair_keys"] = pair_keys
    any_fwd = csr(pair_keys // max(n, 1), pair_keys % max(n, 1), (n, n))
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
                matrix = wrap_csr(ones[: f1 - f0], indices[f0:f1], indptrs[p0 : p0 + k + 2], (k + 1, n))
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
        self.subject_incidence = wrap_csr(ones[: len(arrays["subject_inc_indices"])],
                                          arrays["subject_inc_indices"], arrays["subject_inc_indptr"], shape)
        self.object_incidence = wrap_csr(ones[: len(arrays["object_inc_indices"])],
                                         arrays["object_inc_indices"], arrays["object_inc_indptr"], shape)
        # fact-pair index: sorted distinct s*n+o, and for each pair the relations linking it
        self.pair_keys = arrays["pair_keys"]
        # any relation at all: which pairs are linked (closing atoms intersect with this first);
        # the data is 1 + the pair's position in the fact-pair index (sorted s*n+o = CSR order)
        self.any_fwd = wrap_csr(arrays["any_fwd_data"], arrays["any_fwd_indices"],
                                arrays["any_fwd_indptr"], (n, n))
        self.any_bwd = wrap_csr(arrays["any_bwd_data"], arrays["any_bwd_indices"],
                                arrays["any_bwd_indptr"], (n, n))
        # a bitmap of the linked pairs, when n² bits fit in 256 MiB (FB15k-237: 26 MiB): most
        # looked-up pairs are not linked, and a bit test is far cheaper than a binary search
        self.pair_bits: np.ndarray | None = arrays.get("pair_bits")
        # pair x relation, CSR: the relations of each distinct linked pair
        rel_sorted = arrays["pair_rel_indices"]
        self.pair_relation_matrix = wrap_csr(ones[: len(rel_sorted)], rel_sorted, arrays["pair_rel_indptr"],
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

    def iter_triples(self) -> Iterator[Triple]:
        """Every fact as a triple of names, relation by relation (the index persisted at load
        gives the answerers the graph in memory without reading the store again)."""
        names = self.entities
        for relation, name in enumerate(self.relations):
            heads, tails = self.facts_of(relation)
            for head, tail in zip(heads.tolist(), tails.tolist(), strict=True):
                yield Triple(names[head], name, names[tail])

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
