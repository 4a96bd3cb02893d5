"""A rule's body evaluated over rows of fixed variables, the general path of every count:
which rows satisfy the body, and per row the values a free variable takes.

A free variable's consistent values per row come from boolean message passing over the
free-variable forest: an atom joining a fixed and a free variable gathers CSR rows
(``A[x_values]``, a selection-matrix product), a path through another free variable is a
sparse product (``M @ A``), two atoms on the same variables an element-wise product, and an
atom read against its direction uses the transpose. Variables of a cycle are fixed first."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from kgengine.mining.budget import check_budget
from kgengine.mining.graph_index import Adjacency, KGIndex
from kgengine.mining.rows import Bound, Message, Rows
from kgengine.mining.rules import Atom, is_variable
from kgengine.mining.sparse_kernels import binarise, csr, gather_rows


def other_term(atom: Atom, variable: str) -> str:
    """The atom's term that is not ``variable``."""
    return atom.object if atom.subject == variable else atom.subject


class RuleEvaluator:
    """Rows and messages of rule bodies over one index (what every counting strategy that is
    not a vectorised pass of its own is made of)."""

    def __init__(self, index: KGIndex) -> None:
        self.index = index

    # -- rows --------------------------------------------------------------------------------
    def head_rows(self, head: Atom) -> Rows:
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

    def bind(self, rows: Rows, body: list[Atom], prefer: Sequence[str] = ()) -> Bound:
        """Keep the rows for which ``body`` is satisfiable: every component of free variables
        has a non-empty marginal at its root (a ``prefer``red variable when it has one, so that
        its marginal is kept for the counts that follow)."""
        rows, atoms = self._filter_fixed(rows, body)
        rows, atoms = self._forest(rows, atoms)
        keep = np.ones(len(rows), dtype=bool)
        cache: dict[str, Message] = {}
        for component in self._components(rows, atoms):
            root = next((v for v in prefer if v in component), component[0])
            leaf = self.leaf_atoms(rows, atoms, root) if len(component) == 1 else None
            if leaf is not None and len(leaf) == 1 and leaf[0].relation in self.index.relation_ids:
                # one atom to a fixed variable: satisfiable where that value has an edge; the
                # values themselves (a hub's can be millions per row) are left until asked for
                atom = leaf[0]
                anchor = self.term(rows, other_term(atom, root))
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
            s, o = self.term(rows, atom.subject), self.term(rows, atom.object)
            if s is None or o is None:
                free_atoms.append(atom)
                continue
            keys = np.broadcast_to(np.asarray(s) * self.index.n + o, (len(rows),))
            rows = rows.take(self.index.has_pairs(self.index.relation(atom.relation), keys))
        return rows, free_atoms

    def term(self, rows: Rows, term: str) -> np.ndarray | int | None:
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
                v in a.variables and any(self.term(rows, t) is not None for t in a.terms if t != v)
                for a in atoms)]
            variable = anchored[0]
            anchors = None
            for atom in atoms:
                other = atom.object if atom.subject == variable else atom.subject
                if variable in atom.variables and self.term(rows, other) is not None:
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
        value = self.term(rows, other)
        adj = idx.adjacency(idx.relation(atom.relation), atom.object == node)
        if isinstance(value, np.ndarray):
            return adj.gather(value)  # selection-matrix product: one CSR row per row
        if value is None:
            raise ValueError(f"{atom} has no fixed term besides {node}")
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
            if self.term(rows, other) is not None:
                result = self._combine(result, self._anchor(rows, atom, node))
            elif other != parent:
                neighbours.setdefault(other, []).append(atom)
        for child, child_atoms in neighbours.items():
            incoming = self._message(rows, atoms, child, node)
            # child values x node values; parallel atoms: element-wise product
            edges = [idx.adjacency(idx.relation(a.relation), a.subject == child) for a in child_atoms]
            edge = edges[0]
            for parallel in edges[1:]:
                edge = edge.intersect(parallel)
            result = self._combine(result, self._propagate(incoming, edge))
        return result

    @staticmethod
    def _propagate(message: Message, edge: Adjacency) -> Message:
        """One path step: values of the next variable reachable from the message's values."""
        if message is None or isinstance(message, np.ndarray):
            return edge.reachable(message)
        return binarise(edge.times(message))

    @staticmethod
    def _combine(a: Message, b: Message) -> Message:
        """Both constraints on the same variable: intersection (element-wise product)."""
        if a is None:
            return b
        if b is None:
            return a
        if isinstance(a, np.ndarray):
            return a & b if isinstance(b, np.ndarray) else RuleEvaluator._masked(b, a)
        if isinstance(b, np.ndarray):
            return RuleEvaluator._masked(a, b)
        return binarise(a.multiply(b))

    @staticmethod
    def _masked(per_row: sp.csr_matrix, mask: np.ndarray) -> sp.csr_matrix:
        """Per-row value sets restricted to a row-independent one."""
        coo = per_row.tocoo()
        keep = mask[coo.col]
        return csr(coo.row[keep], coo.col[keep], per_row.shape)

    def _as_rows(self, rows: Rows, message: Message) -> sp.csr_matrix:
        if message is None:
            raise ValueError("unconstrained variable")
        if isinstance(message, np.ndarray):
            cols = np.nonzero(message)[0]
            check_budget(len(rows) * len(cols))
            r = np.repeat(np.arange(len(rows)), len(cols))
            return csr(r, np.tile(cols, len(rows)), (len(rows), self.index.n))
        return message

    def value_sets(self, bound: Bound, variable: str) -> sp.csr_matrix:
        """Per-row value sets (rows x n, 0/1) of a free variable."""
        message = bound.cache.get(variable)
        if message is None:
            message = bound.cache[variable] = self._message(bound.rows, bound.atoms, variable, None)
        return self._as_rows(bound.rows, message)

    def per_group(self, bound: Bound, variable: str) -> sp.csr_matrix:
        """groups x n: the values ``variable`` takes in each head binding's satisfying rows."""
        rows = bound.rows
        if variable in rows.values:
            return csr(rows.group, rows.values[variable], (rows.groups, self.index.n))
        per_row = self.value_sets(bound, variable)
        if rows.one_per_group:
            return per_row
        agg = csr(rows.group, np.arange(len(rows)), (rows.groups, len(rows)))
        return binarise(agg @ per_row)

    def fix(self, bound: Bound, variable: str) -> Bound:
        """The same bindings with ``variable`` fixed too: one row per consistent value (exact:
        the values come from its marginal, so each new row extends to a full binding)."""
        rows = bound.rows
        coo = self.value_sets(bound, variable).tocoo()
        r = coo.row.astype(np.int64)
        values = {v: a[r] for v, a in rows.values.items()}
        values[variable] = coo.col.astype(np.int64)
        return Bound(Rows(values, rows.group[r], rows.groups, rows.weights), bound.atoms)

    def leaf_atoms(self, rows: Rows, atoms: list[Atom], variable: str) -> list[Atom] | None:
        """The atoms of a free variable whose other terms are all fixed or constants (None when
        it shares an atom with another free variable)."""
        mine = [a for a in atoms if variable in a.variables]
        if any(self.term(rows, other_term(a, variable)) is None for a in mine):
            return None
        return mine

    def independent(self, bound: Bound, u: str, v: str) -> bool:
        """Free variables in different components: given a row, their values are independent."""
        return not any(u in c and v in c for c in self._components(bound.rows, bound.atoms))
