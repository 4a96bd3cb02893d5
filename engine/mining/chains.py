"""Closing atoms between the ends of two chains, counted by a compiled kernel (numba).

A rule whose body is two chains of atoms hanging from the head's variables, each ending at
one variable of the new closing atom, e.g. ``r(a, b) <= p(a, x) ∧ q(x, y)`` closed by
``l(y, b)`` (a three-hop path) or ``r(a, b) <= p(a, x) ∧ s(b, y)`` closed by ``l(x, y)``:
given a head fact, the two ends take independent value sets U and V (a head variable is its
own one-value set), and the support of ``l(u, v)`` is the number of head facts with some
linked pair in U × V under ``l``. These rules are most of the length-3 nodes of a max-len 4
search, and the general path spends ~0.9 ms of small sparse operations on each; here one
pass over the head facts builds U and V, walks the any-relation neighbours of the side
with fewer of them, and marks (fact, relation) cells in per-relation stamps, for every
relation and both directions at once, with O(n) memory and no per-rule matrices.

The kernel (``kgengine.mining.chain_kernel``, numba) is imported by the first count, so that
runs which never meet such a rule do not pay numba's start-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from kgengine.mining.counting import FRESH
from kgengine.mining.rules import Atom, is_variable


class ChainIndex(Protocol):
    """What the counter reads of an index (``kgengine.mining.graph_index.KGIndex``; a protocol
    keeps this module independent of the index's)."""

    n: int
    relations: list[str]

    def arrays(self) -> dict[str, np.ndarray]: ...

    def facts_of(self, relation: int) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass(frozen=True)
class Chain:
    """Atoms from a head variable (column 0: subject, 1: object of the head facts) to a closing
    atom's variable: step i follows relation ``relations[i]`` forward (subject to object) when
    ``forward[i]``. No steps: the head variable itself."""

    start: int
    relations: tuple[int, ...]
    forward: tuple[bool, ...]


def chains_of(atoms: Sequence[Atom], shape: tuple[str, str], relation_ids: dict[str, int]
              ) -> tuple[Chain, Chain] | None:
    """The body of the rule ``atoms`` (head first) as two chains from the head's variables to
    the two terms of the closing ``shape``, every body atom in exactly one of them; None when
    it is not that (constants, reflexive atoms, a variable in more atoms than a chain has, a
    body atom off both chains, an unknown relation)."""
    head, body = atoms[0], atoms[1:]
    a, b = head.subject, head.object
    if (not body or FRESH in shape or shape[0] == shape[1] or not (is_variable(a) and is_variable(b))
            or a == b or head.relation not in relation_ids):
        return None
    uses: dict[str, list[int]] = {}
    for k, atom in enumerate(body):
        if (atom.subject == atom.object or not all(is_variable(t) for t in atom.terms)
                or atom.relation not in relation_ids):
            return None
        for t in atom.terms:
            uses.setdefault(t, []).append(k)
    chains, covered = [], []
    for end in shape:
        relations: list[int] = []
        forward: list[bool] = []
        var, came_by = end, None
        while var not in (a, b):  # from the end back to a head variable
            mine = uses.get(var, [])
            if len(mine) != (1 if came_by is None else 2):
                return None
            k = mine[0] if mine[0] != came_by else mine[-1]
            atom = body[k]
            other = atom.object if atom.subject == var else atom.subject
            relations.append(relation_ids[atom.relation])
            forward.append(atom.subject == other)  # the step goes from other to var
            covered.append(k)
            var, came_by = other, k
        chains.append(Chain(0 if var == a else 1, tuple(relations[::-1]), tuple(forward[::-1])))
    if sorted(covered) != list(range(len(body))):
        return None
    return chains[0], chains[1]


# an x on a chain table's path with this many times more neighbours than the head fact's other
# end has is searched for that end's neighbours (a binary search each) instead of walked: a hub
# such as a country or a gender
SEARCH_RATIO = 16
# x-y pairs a chain table lists at most for one e (shared by e's facts): 4M, ~70 MB
REACH_MAX = 1 << 22
# tables kept per head relation (the search asks for one head's rules at a time), in bytes
_TABLE_BUDGET = 128 << 20


class ChainCounter:
    """The kernel over one index's arrays, with its scratch space (arrays of n stamps reused
    from call to call: each call stamps with tags no earlier call used) and the current head
    relation's chain tables.

    A rule whose chains are a two-step path from one head variable and the other head variable
    itself (``p(a, x) ∧ q(x, y)`` closed on ``y–b``), or one step from each head variable
    (``p(a, x) ∧ s(b, y)`` closed on ``x–y``), is a cell of the table of its first step
    (``chain_table``: every m and l of ``p(a, x) ∧ m(x, y) ∧ l(y, b)`` in one pass over the
    head facts), which the other rules through that step share; other rules are counted one
    by one (``closing_counts``)."""

    def __init__(self, index: ChainIndex) -> None:
        arrays = index.arrays()
        self.index = index
        self.n, self.nrel = index.n, len(index.relations)
        # each direction's per-relation CSR arrays, as chain_kernel.neighbours reads them
        csr = ("domain", "domain_off", "indptr", "indices")
        self._fwd, self._bwd = (tuple(arrays[f"{side}_{k}"] for k in csr) + (arrays["fact_off"],)
                                for side in ("fwd", "bwd"))
        any_csr = ("indptr", "indices", "data")
        self._any_fwd, self._any_bwd = (tuple(arrays[f"any_{side}_{k}"] for k in any_csr)
                                        for side in ("fwd", "bwd"))
        self._pair_rel = (arrays["pair_rel_indptr"], arrays["pair_rel_indices"])
        self._levels = 0
        self._tag = 0
        self._scratch: dict[str, np.ndarray] = {}
        self._table_scratch: dict[str, np.ndarray] = {}
        self._head = -1
        self._heads = np.zeros((0, 2), dtype=np.int64)
        self._orders: dict[int, np.ndarray] = {}
        self._tables: dict[tuple[int, int, bool], np.ndarray] = {}

    def _space(self, levels: int) -> dict[str, np.ndarray]:
        """Scratch of the one-by-one count (the stamps of chains of up to ``levels`` steps)."""
        if levels > self._levels:
            n = max(self.n, 1)
            self._levels = levels
            self._scratch = {
                "stamps_u": np.full((levels, n), -1, dtype=np.int64),
                "stamps_v": np.full((levels, n), -1, dtype=np.int64),
                **{name: np.full(n, -1, dtype=np.int64) for name in ("member_u", "member_v")},
                **{name: np.zeros(n, dtype=np.int64) for name in ("buf_u", "buf_v", "spare")},
                "seen": np.full(2 * max(self.nrel, 1), -1, dtype=np.int64)}
        return self._scratch

    def _table_space(self) -> dict[str, np.ndarray]:
        """Scratch of the chain tables (allocated apart: a run may use only one of the two)."""
        if not self._table_scratch:
            n = max(self.n, 1)
            self._table_scratch = {
                **{name: np.full(n, -1, dtype=np.int64)
                   for name in ("near_out", "near_in", "pair_out", "pair_in")},
                "cells": np.full(4 * max(self.nrel, 1) ** 2, -1, dtype=np.int64),
                "near_list": np.zeros(n, dtype=np.int64),
                "reach_tag": np.full(n, -1, dtype=np.int64), "reach_first": np.zeros(n, dtype=np.int64)}
        return self._table_scratch

    def _tags(self) -> int:
        """The first of the head facts' tags for one call (never reused: a stamp equal to the
        current tag was set by this call)."""
        tag0 = self._tag
        self._tag += len(self._heads)
        return tag0

    def _use_head(self, head: int) -> None:
        if head != self._head:
            self._head, self._heads = head, np.stack(self.index.facts_of(head), axis=1)
            self._orders = {}
            self._tables.clear()

    def _order(self, start: int) -> np.ndarray:
        """The head facts' positions grouped by the value in column ``start``."""
        if start not in self._orders:
            self._orders[start] = np.argsort(self._heads[:, start], kind="stable")
        return self._orders[start]

    def counts(self, head: int, u: Chain, v: Chain) -> np.ndarray:
        """(2, relations): row 0 the support of every r(u, v), row 1 of every r(v, u), over the
        facts of the relation ``head`` (an id)."""
        self._use_head(head)
        for near, far, swap in ((u, v, False), (v, u, True)):
            if len(near.relations) == 2 and not far.relations and far.start != near.start:
                # path from near's head variable; far is the other one: table[m, l of y-far]
                table = self._table(near.start, near.relations[0], near.forward[0])
                m = 2 * near.relations[1] + (not near.forward[1])
                found = np.stack([table[m, 0::2], table[m, 1::2]])  # l(y, far), l(far, y)
                return found[::-1] if swap else found
        if len(u.relations) == 1 and len(v.relations) == 1 and u.start != v.start:
            cached = (v.start, v.relations[0], v.forward[0]) in self._tables
            near, far = (v, u) if cached else (u, v)
            table = self._table(near.start, near.relations[0], near.forward[0])
            last = 2 * far.relations[0] + far.forward[0]  # y-e': s(e', y) is 2s + 1
            found = np.stack([table[0::2, last], table[1::2, last]])  # m(x, y), m(y, x)
            return found[::-1] if cached else found
        s = self._space(max(len(u.relations), len(v.relations), 1))
        from kgengine.mining.chain_kernel import closing_counts

        return closing_counts(
            self._heads, np.array(u.relations, dtype=np.int64), np.array(u.forward, dtype=np.bool_), u.start,
            np.array(v.relations, dtype=np.int64), np.array(v.forward, dtype=np.bool_), v.start,
            self._fwd, self._bwd, self._any_fwd, self._any_bwd, *self._pair_rel, self.nrel,
            s["stamps_u"], s["stamps_v"], s["member_u"], s["member_v"], s["seen"], self._tags(),
            s["buf_u"], s["buf_v"], s["spare"])

    def _table(self, start: int, relation: int, forward: bool) -> np.ndarray:
        key = (start, relation, forward)
        if key not in self._tables:
            s = self._table_space()
            from kgengine.mining.chain_kernel import chain_table

            if len(self._tables) * s["cells"].nbytes >= _TABLE_BUDGET:
                self._tables.pop(next(iter(self._tables)))  # the oldest
            self._tables[key] = chain_table(
                self._heads, self._order(start), start, relation, forward, self._fwd, self._bwd,
                self._any_fwd, self._any_bwd, *self._pair_rel, self.nrel, s["near_out"], s["near_in"],
                s["pair_out"], s["pair_in"], s["cells"], s["near_list"], s["reach_tag"], s["reach_first"],
                self._tags(), SEARCH_RATIO, REACH_MAX)
        return self._tables[key]

    def path_sizes(self, row_ptr: np.ndarray, row_x: np.ndarray, weights: np.ndarray,
                   paths: Sequence[tuple[tuple[int, bool], ...]], caps: Sequence[int | None]) -> list[int]:
        """Per path (one or two steps, (relation id, forward) each), the distinct ends reached
        from each row's x values (``row_x[row_ptr[r]:row_ptr[r + 1]]``), summed over the rows
        with their ``weights``; a path's count stops once it reaches its cap (the body sizes of
        ``MatrixEngine.body_sizes``, walked with stamps instead of sparse products)."""
        from kgengine.mining.chain_kernel import path_sizes

        order = sorted(range(len(paths)), key=lambda q: paths[q][0])  # a shared first step: adjacent
        first = np.array([paths[q][0] for q in order], dtype=np.int64).reshape(-1, 2)
        last = np.array([paths[q][1] if len(paths[q]) > 1 else (-1, 0) for q in order],
                        dtype=np.int64).reshape(-1, 2)
        s = self._space(1)
        counts, self._tag = path_sizes(
            row_ptr.astype(np.int64), row_x.astype(np.int64), weights.astype(np.int64),
            first[:, 0], first[:, 1].astype(np.bool_), last[:, 0], last[:, 1].astype(np.bool_),
            np.array([-1 if caps[q] is None else caps[q] for q in order], dtype=np.int64),
            self._fwd, self._bwd, s["stamps_u"][0], s["stamps_v"][0], self._tag, s["buf_u"], s["buf_v"])
        out = [0] * len(paths)
        for position, q in enumerate(order):
            out[q] = int(counts[position])
        return out
