"""The sparse-matrix operations the matrix engine is built of: 0/1 CSR matrices, path counts
made 0/1, rows gathered, weighted column counts.

This is the one module that touches scipy's private API (nothing else imports a private
scipy name), for speed alone: the miner builds and gathers tens of thousands of small
matrices, and scipy's public entry points spend more time checking their arguments than
computing. Each private use has a public equivalent that gives the same matrix
(``tests/test_mining_sparse_kernels.py`` checks both against it), should a scipy release drop it:

- ``gather_rows`` calls ``scipy.sparse._sparsetools.csr_row_index``, the C kernel behind CSR
  fancy indexing; public fallback: ``m[rows]``.
- ``wrap_csr`` sets the private ``_shape`` of a matrix made without ``__init__``, skipping
  the format checks; public fallback: ``sp.csr_matrix((data, indices, indptr), shape=shape)``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse import _sparsetools


def csr(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """The 0/1 matrix with ones at (rows[i], cols[i]) (a pair given twice is one entry)."""
    data = np.ones(len(rows), dtype=np.int32)
    m = sp.csr_matrix((data, (rows, cols)), shape=shape)
    m.sum_duplicates()
    m.data[:] = 1
    return m


def binarise(m: sp.csr_matrix) -> sp.csr_matrix:
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
    return wrap_csr(data, indices, indptr, (len(rows), m.shape[1]))


def wrap_csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
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


def weighted_column_counts(m: sp.csc_matrix, entry_weights: np.ndarray) -> np.ndarray:
    """Per column of a CSC matrix, the sum of its entries' weights (their count, weighted)."""
    columns = np.repeat(np.arange(m.shape[1]), np.diff(m.indptr))
    return np.bincount(columns, weights=entry_weights, minlength=m.shape[1]).astype(np.int64)
