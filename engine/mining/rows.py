"""The rows a rule is evaluated over (``kgengine.mining.evaluation``): bindings of its fixed
variables, grouped by head binding, and the bodies bound on them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np
import scipy.sparse as sp
from kgengine.mining.rules import Atom

# A message about a free variable: per-row value sets (sparse rows x n), a row-independent value
# set (bool vector), or None (unconstrained).
Message: TypeAlias = sp.csr_matrix | np.ndarray | None


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

