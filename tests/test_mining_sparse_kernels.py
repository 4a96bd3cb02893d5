"""The matrix engine's sparse kernels against scipy's public API: the private calls they make
for speed (``kgengine.mining.sparse_kernels``) give the matrices the public ones give, and no
other module imports a private scipy name."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from kgengine.mining.sparse_kernels import gather_rows, wrap_csr

REPO = Path(__file__).resolve().parent.parent


def random_csr(seed: int, shape: tuple[int, int] = (40, 30), density: float = 0.15) -> sp.csr_matrix:
    m = sp.random(*shape, density=density, format="csr", dtype=np.float64, random_state=seed)
    m.data = np.arange(1, m.nnz + 1, dtype=np.int32)  # distinct values: a misplaced entry shows
    m.sort_indices()
    return m


def same(a: sp.csr_matrix, b: sp.csr_matrix) -> bool:
    return a.shape == b.shape and (a != b).nnz == 0 and a.nnz == b.nnz


@pytest.mark.parametrize("seed", range(4))
def test_gather_rows_is_fancy_indexing(seed: int) -> None:
    m = random_csr(seed)
    rng = np.random.default_rng(seed)
    for rows in (rng.integers(0, m.shape[0], 25), np.array([], dtype=np.int64), np.array([3, 3, 0])):
        gathered = gather_rows(m, rows)
        assert same(gathered, m[rows])
        assert gathered.indices.dtype == m.indices.dtype and gathered.data.dtype == m.data.dtype


@pytest.mark.parametrize("seed", range(4))
def test_wrap_csr_is_the_checked_constructor(seed: int) -> None:
    m = random_csr(seed)
    wrapped = wrap_csr(m.data, m.indices, m.indptr, m.shape)
    public = sp.csr_matrix((m.data, m.indices, m.indptr), shape=m.shape)
    assert same(wrapped, public)
    assert same(wrapped @ public.T, public @ public.T)  # products see the same matrix
    assert wrapped.has_canonical_format and wrapped.shape == public.shape


def test_only_the_kernels_module_imports_private_scipy_names() -> None:
    private = re.compile(r"from scipy[\w.]* import _\w|import scipy[\w.]*\._\w|scipy[\w.]*\._\w")
    offenders = [str(path.relative_to(REPO)) for folder in ("engine", "loaders", "bench")
                 for path in (REPO / folder).rglob("*.py")
                 if private.search(path.read_text(encoding="utf-8"))]
    assert offenders == ["engine/mining/sparse_kernels.py"]
