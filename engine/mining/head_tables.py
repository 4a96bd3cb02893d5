"""Head tables: the supports of every closing atom of every one-atom body of a head relation,
in one vectorised pass per head instead of one sparse computation per candidate.

Atom codes: 2 * relation + direction. For the head r(a, b), an atom between a and a fresh x
has code 2p for p(a, x), 2p + 1 for p(x, a); one between x and b 2q for q(x, b), 2q + 1 for
q(b, x); one between a and b 2p for p(a, b), 2p + 1 for p(b, a). ``paths[cA, cB]`` is the
support of cA(a, x) ∧ cB(x, b) ⇒ r(a, b), ``pairs[c1, c2]`` that of c1 ∧ c2 on (a, b).
Dangling on b, the same rule is reached from the other end: one table serves both."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from kgengine.mining import budget
from kgengine.mining.counting import FRESH
from kgengine.mining.graph_index import KGIndex
from kgengine.mining.rules import Atom, is_variable
from kgengine.mining.sparse_kernels import gather_rows


class HeadTables:
    """The ``paths`` and ``pairs`` tables of the head being mined (the search asks for one
    head's rules at a time: the last two tables are kept)."""

    def __init__(self, index: KGIndex) -> None:
        self.index = index
        self._tables: dict[tuple[str, str, int], np.ndarray | None] = {}

    def counts(self, atoms: Sequence[Atom], shape: tuple[str, str], min_support: int
               ) -> dict[str, int] | None:
        """Counts of ``shape`` for the two-atom rule ``atoms`` from the head's tables (relations
        below ``min_support`` left out); None when the shape is not a closing atom they cover."""
        head, atom = atoms
        a, b = head.subject, head.object
        if (FRESH in shape or not (is_variable(a) and is_variable(b)) or a == b
                or not all(is_variable(t) for t in atom.terms) or atom.subject == atom.object
                or not {atom.relation, head.relation} <= self.index.relation_ids.keys()):
            return None
        rel = self.index.relation(atom.relation)
        new = set(shape)
        if set(atom.terms) == {a, b}:  # closed: both atoms on the head's pair
            if new != {a, b}:
                return None
            table = self._table(head.relation, "pairs", min_support)
            if table is None:
                return None
            row = table[2 * rel + (atom.subject == b)]
            column = 0 if shape == (a, b) else 1
        else:
            joined = [t for t in atom.terms if t in (a, b)]
            if len(joined) != 1:
                return None
            x = atom.object if atom.subject == joined[0] else atom.subject
            other = b if joined[0] == a else a
            if new != {x, other}:
                return None
            table = self._table(head.relation, "paths", min_support)
            if table is None:
                return None
            if joined[0] == a:  # cA fixed by the body atom, the shape picks cB
                row = table[2 * rel + (atom.subject == x)]
                column = 0 if shape == (x, b) else 1
            else:  # cB fixed, the shape picks cA
                row = table[:, 2 * rel + (atom.subject == b)]
                column = 0 if shape == (a, x) else 1
        counts = row[column::2]
        found = np.nonzero(counts >= max(min_support, 1))[0]
        return {self.index.relations[q]: int(counts[q]) for q in found}

    def _table(self, relation: str, kind: str, min_support: int) -> np.ndarray | None:
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
        if int(work.max(initial=0)) > budget.MESSAGE_BUDGET:
            return None  # one fact's walk alone passes the budget: the general path blocks it
        ends = np.cumsum(work)
        start = 0
        while start < len(x):
            limit = ends[start] - work[start] + budget.MESSAGE_BUDGET
            stop = max(int(np.searchsorted(ends, limit, "right")), start + 1)
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

