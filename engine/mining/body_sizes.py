"""Confidence denominators: body sizes and PCA body sizes, one rule at a time over blocks of
the counted head variable's values (a capped count stops at its cap: AMIE's lazy counting),
and many path rules at once (``batched``: two- and three-atom paths between the head's
variables share their walks)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from kgengine.mining import budget
from kgengine.mining.chains import ChainCounter
from kgengine.mining.evaluation import RuleEvaluator, other_term
from kgengine.mining.graph_index import Adjacency
from kgengine.mining.rows import Rows
from kgengine.mining.rules import Atom, is_variable
from kgengine.mining.sparse_kernels import binarise, gather_rows, wrap_csr


class BodySizes:
    """Body sizes (``count``, one rule) and path-rule body sizes in batches (``batched``)."""

    def __init__(self, evaluator: RuleEvaluator) -> None:
        self.evaluator = evaluator
        self.index = evaluator.index
        # the compiled chain kernel, once the engine has loaded it: it walks the batched rows
        self.kernel: ChainCounter | None = None

    def count(
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
            bound = self.evaluator.bind(block, body, [other] if other else [])
            if other is None:
                return bound.rows.distinct_groups()
            return int(self.evaluator.per_group(bound, other).nnz) if len(bound.rows) else 0

        rows = Rows({fixed_var: candidates.astype(np.int64)},
                    np.arange(len(candidates), dtype=np.int64), len(candidates))
        total = 0
        for count in budget.in_blocks(rows, evaluate):
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

    def batched(self, rules: Sequence[Sequence[Atom]], pca: bool = False, subject_side: bool = True,
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
        on_subject = subject_side or not pca  # body sizes count per head subject (``count``)
        groups: dict[tuple[str, str, bool], list[tuple[int, list[tuple[Atom, str]], int | None]]] = {}
        for i, atoms in enumerate(rules):
            path = self._path_shape(atoms)
            if path is None:
                continue
            head = atoms[0]
            fixed = head.subject if on_subject else head.object
            if not on_subject:  # walked from b: the same atoms the other way along
                path = [(atom, other_term(atom, start)) for atom, start in reversed(path)]
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
            at = other_term(step[0], at)
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
        if int(degrees.max(initial=0)) > budget.MESSAGE_BUDGET:
            return None
        single = degrees == 1
        shared, weights = np.unique(near.matrix.indices[near.matrix.indptr[positions[single]]],
                                    return_counts=True)
        # the rows walked: the distinct x of the one-neighbour values (a unit row each), then
        # the near rows of the others; each with the number of values it stands for
        walked = ~single  # a near value has one neighbour at least
        many = positions[walked]
        weights = np.concatenate([weights, np.ones(len(many), dtype=weights.dtype)])
        if self.kernel is not None:  # the compiled kernel is loaded: it walks them all
            message = self._near_rows(near, shared, many, 0, len(weights))
            paths = [tuple((idx.relation(relation), along) for relation, along in key) for key in keys]
            return self.kernel.path_sizes(message.indptr, message.indices, weights, paths, caps)
        degrees = np.concatenate([np.ones(len(shared), dtype=degrees.dtype), degrees[walked]])
        ends = np.cumsum(degrees)
        start = 0
        while start < len(weights) and active:
            limit = ends[start] - degrees[start] + budget.MESSAGE_BUDGET
            stop = max(int(np.searchsorted(ends, limit, "right")), start + 1)
            stop = min(stop, start + budget.CHUNK_ROWS)  # blocks as count's: a capped count stops early
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
                    step_nonzeros = int((step.matrix.indptr[pos + 1] - step.matrix.indptr[pos]).sum())
                    if step_nonzeros > budget.MESSAGE_BUDGET and message.shape[0] > 1:
                        return None  # a hub on the path: the one-by-one count blocks it
                    product = step.times(message)
                    if k < last:
                        reached[keys[j][:k]] = binarise(product)
                # the last product's non-zeros per row are the distinct others of its values
                counts[j] += int(np.diff(product.indptr) @ block_weights)
                cap = caps[j]
                if cap is not None and counts[j] >= cap:
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
        return wrap_csr(np.concatenate([np.ones(len(units), dtype=rows.data.dtype), rows.data]),
                        np.concatenate([units, rows.indices]), indptr, (stop - start, near.n))
