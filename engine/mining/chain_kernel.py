"""The compiled kernel of ``kgengine.mining.chains`` (numba; imported on first use, so that
runs which never count such a rule do not pay numba's start-up). numba caches the compiled
code on disk. The functions take the index's flat arrays as they are (no type hints: numba
types them from the call)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def find(indices, lo, hi, value):
    """Position of ``value`` in the sorted ``indices[lo:hi]``; -1 when absent (a loop: numba's
    np.searchsorted boxes a scalar needle, ~10x slower)."""
    end = hi
    while lo < hi:
        mid = (lo + hi) >> 1
        if indices[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < end and indices[lo] == value else -1


@njit(cache=True, nogil=True)
def neighbours(domain, domain_off, indptr, indices, fact_off, rel, entity):
    """(start, stop) into ``indices`` of the entity's neighbours under ``rel`` (the index's
    flat per-relation CSR arrays of one direction); (0, 0) outside the relation's domain."""
    at = find(domain, domain_off[rel], domain_off[rel + 1], entity)
    if at < 0:
        return 0, 0
    row = at + 2 * rel  # each relation's indptr has its domain's size + 2 entries
    base = fact_off[rel]
    return base + indptr[row], base + indptr[row + 1]


@njit(cache=True, nogil=True)
def step_values(values, lo, hi, rel, arrays, mark, tag, out):
    """The distinct neighbours under ``rel`` (one direction's ``arrays``) of ``values[lo:hi]``
    into ``out``, marked in ``mark`` with ``tag``; their count."""
    domain, domain_off, indptr, indices, fact_off = arrays
    found = 0
    for k in range(lo, hi):
        start, stop = neighbours(domain, domain_off, indptr, indices, fact_off, rel, values[k])
        for j in range(start, stop):
            z = indices[j]
            if mark[z] != tag:
                mark[z] = tag
                out[found] = z
                found += 1
    return found


@njit(cache=True, nogil=True)
def chain_values(start, rels, fwd, fwd_arrays, bwd_arrays, stamps, tag, out, spare):
    """The distinct values at the end of the chain from ``start`` into ``out``; their count.
    ``stamps[level]`` marks what level ``level`` holds already (value == ``tag``)."""
    out[0] = start
    size = 1
    for level in range(len(rels)):
        if size == 0:
            return 0
        arrays = fwd_arrays if fwd[level] else bwd_arrays
        size = step_values(out, 0, size, rels[level], arrays, stamps[level], tag, spare)
        out[:size] = spare[:size]
    return size


@njit(cache=True, nogil=True)
def degree(fwd_indptr, bwd_indptr, e):
    """Linked pairs ``e`` is in, either way (the cost of walking it)."""
    return fwd_indptr[e + 1] - fwd_indptr[e] + bwd_indptr[e + 1] - bwd_indptr[e]


@njit(cache=True, nogil=True)
def linked_pairs(values, size, fwd_indptr, bwd_indptr):
    """Linked pairs the first ``size`` values are in, either way (the cost of walking them)."""
    total = 0
    for k in range(size):
        total += degree(fwd_indptr, bwd_indptr, values[k])
    return total


@njit(cache=True, nogil=True)
def closing_counts(heads, rels_u, fwd_u, start_u, rels_v, fwd_v, start_v,
                    fwd_arrays, bwd_arrays, any_fwd, any_bwd, pair_rel_indptr, pair_rel_indices,
                    nrel, stamps_u, stamps_v, member_u, member_v, seen, tag0,
                    buf_u, buf_v, spare):
    """counts[0, r]: head facts with some r(u, v), u in U and v in V; counts[1, r]: r(v, u)."""
    counts = np.zeros((2, nrel), dtype=np.int64)
    any_fwd_indptr, any_fwd_indices, any_fwd_data = any_fwd
    any_bwd_indptr, any_bwd_indices, any_bwd_data = any_bwd
    for i in range(heads.shape[0]):
        tag = tag0 + i
        nu = chain_values(heads[i, start_u], rels_u, fwd_u, fwd_arrays, bwd_arrays,
                          stamps_u, tag, buf_u, spare)
        if nu == 0:
            continue
        nv = chain_values(heads[i, start_v], rels_v, fwd_v, fwd_arrays, bwd_arrays,
                          stamps_v, tag, buf_v, spare)
        if nv == 0:
            continue
        # walk the side with fewer linked pairs; the other is tested on its member stamp
        walk_u = (linked_pairs(buf_u, nu, any_fwd_indptr, any_bwd_indptr)
                  <= linked_pairs(buf_v, nv, any_fwd_indptr, any_bwd_indptr))
        walked, size, member = (buf_u, nu, member_v) if walk_u else (buf_v, nv, member_u)
        targets = buf_v if walk_u else buf_u
        for k in range(nv if walk_u else nu):
            member[targets[k]] = tag
        for k in range(size):
            w = walked[k]
            # w -> z pairs: r(u, v) when walking U; z -> w pairs: the other direction
            for direction in range(2):
                if direction == 0:
                    lo, hi = any_fwd_indptr[w], any_fwd_indptr[w + 1]
                    nbrs, data = any_fwd_indices, any_fwd_data
                else:
                    lo, hi = any_bwd_indptr[w], any_bwd_indptr[w + 1]
                    nbrs, data = any_bwd_indices, any_bwd_data
                slot = direction if walk_u else 1 - direction
                for j in range(lo, hi):
                    if member[nbrs[j]] != tag:
                        continue
                    pair = data[j] - 1
                    for p in range(pair_rel_indptr[pair], pair_rel_indptr[pair + 1]):
                        cell = slot * nrel + pair_rel_indices[p]
                        if seen[cell] != tag:
                            seen[cell] = tag
                            counts[slot, pair_rel_indices[p]] += 1
    return counts


@njit(cache=True, nogil=True)
def _mark_cells(table, seen, tag, c, y, pair, direction, near_out, near_in, pair_out, pair_in,
                pair_rel_indptr, pair_rel_indices):
    """Every (m, l) cell of one x-y pair (``pair``, ``direction`` 0: (x, y)) with y-e'."""
    out, into = near_out[y] == tag, near_in[y] == tag
    for p in range(pair_rel_indptr[pair], pair_rel_indptr[pair + 1]):
        row = (2 * pair_rel_indices[p] + direction) * c
        for side in range(2):
            if side == 0 and not into:
                continue
            if side == 1 and not out:
                continue
            last = pair_in[y] if side == 0 else pair_out[y]
            for t in range(pair_rel_indptr[last], pair_rel_indptr[last + 1]):
                cell = row + 2 * pair_rel_indices[t] + side
                if seen[cell] != tag:
                    seen[cell] = tag
                    table[cell] += 1


@njit(cache=True, nogil=True)
def _mark_near(other, any_fwd, any_bwd, near_out, near_in, pair_out, pair_in, near_list, tag):
    """Marks e''s neighbours y (with their pairs' positions) and lists each once; their count."""
    fwd_indptr, fwd_indices, fwd_data = any_fwd
    bwd_indptr, bwd_indices, bwd_data = any_bwd
    listed = 0
    for j in range(fwd_indptr[other], fwd_indptr[other + 1]):  # pairs (e', y): codes 2s + 1
        near_out[fwd_indices[j]] = tag
        pair_out[fwd_indices[j]] = fwd_data[j] - 1
        near_list[listed] = fwd_indices[j]
        listed += 1
    for j in range(bwd_indptr[other], bwd_indptr[other + 1]):  # pairs (y, e'): codes 2s
        y = bwd_indices[j]
        if near_out[y] != tag and near_in[y] != tag:
            near_list[listed] = y
            listed += 1
        near_in[y] = tag
        pair_in[y] = bwd_data[j] - 1
    return listed


@njit(cache=True, nogil=True)
def chain_table(heads, order, start, rel, forward, fwd_arrays, bwd_arrays, any_fwd, any_bwd,
                pair_rel_indptr, pair_rel_indices, nrel, near_out, near_in, pair_out, pair_in, seen,
                near_list, reach_tag, reach_first, tag0, search_ratio, reach_max):
    """table[m, l]: head facts (e, e') with some path e -rel- x -m- y -l- e' (e in column
    ``start``); m = 2q for q(x, y), 2q + 1 for q(y, x); l = 2s for s(y, e'), 2s + 1 for s(e', y).

    The facts are taken in ``order``, which groups them by e. Per fact, the neighbours y of e'
    are marked once (with their pairs' positions). Then either the neighbours of every x are
    tested on the marks — for an x with far more neighbours than e' (``search_ratio`` times
    more), each y is looked up among x's instead — or, when e has several facts and that is
    cheaper, the x–y pairs of e are listed once per e (by y: ``reach_*``, at most
    ``reach_max`` of them) and each fact looks its y up there. The same pairs either way."""
    c = 2 * nrel
    table = np.zeros(c * c, dtype=np.int64)
    domain, domain_off, indptr, indices, fact_off = fwd_arrays if forward else bwd_arrays
    fwd_indptr, fwd_indices, fwd_data = any_fwd
    bwd_indptr, bwd_indices, bwd_data = any_bwd
    size = 1024
    reach_next = np.empty(size, dtype=np.int64)  # per listed x-y pair: the next one of its y,
    reach_pair = np.empty(size, dtype=np.int64)  # its pair and direction (0: (x, y))
    reach_dir = np.empty(size, dtype=np.int8)
    count = heads.shape[0]
    i = 0
    while i < count:
        e = heads[order[i], start]
        g = i + 1
        while g < count and heads[order[g], start] == e:
            g += 1
        lo, hi = neighbours(domain, domain_off, indptr, indices, fact_off, rel, e)
        if lo == hi:
            i = g
            continue
        # the walk's cost once for e against fact by fact (each x walked or searched); the
        # latter summed only until it passes the former
        once = linked_pairs(indices[lo:], hi - lo, fwd_indptr, bwd_indptr)
        shared = False
        if g - i > 1 and once <= reach_max:
            each = 0
            for f in range(i, g):
                near = degree(fwd_indptr, bwd_indptr, heads[order[f], 1 - start])
                for k in range(lo, hi):
                    each += min(degree(fwd_indptr, bwd_indptr, indices[k]), search_ratio * near)
                if each > once:
                    shared = True
                    break
        group_tag = tag0 + i
        if shared:
            if once > size:
                size = max(once, 2 * size)
                reach_next = np.empty(size, dtype=np.int64)
                reach_pair = np.empty(size, dtype=np.int64)
                reach_dir = np.empty(size, dtype=np.int8)
            n = 0
            for k in range(lo, hi):
                x = indices[k]
                for direction in range(2):
                    ys, data, j0, j1 = (fwd_indices, fwd_data, fwd_indptr[x], fwd_indptr[x + 1]) \
                        if direction == 0 else (bwd_indices, bwd_data, bwd_indptr[x], bwd_indptr[x + 1])
                    for j in range(j0, j1):
                        y = ys[j]
                        if reach_tag[y] != group_tag:
                            reach_tag[y] = group_tag
                            reach_first[y] = -1
                        reach_pair[n] = data[j] - 1
                        reach_dir[n] = direction
                        reach_next[n] = reach_first[y]
                        reach_first[y] = n
                        n += 1
        for f in range(i, g):
            tag = tag0 + f
            other = heads[order[f], 1 - start]
            listed = _mark_near(other, any_fwd, any_bwd, near_out, near_in, pair_out, pair_in,
                                near_list, tag)
            if shared:
                for t in range(listed):
                    y = near_list[t]
                    if reach_tag[y] != group_tag:
                        continue
                    p = reach_first[y]
                    while p >= 0:
                        _mark_cells(table, seen, tag, c, y, reach_pair[p], reach_dir[p], near_out,
                                    near_in, pair_out, pair_in, pair_rel_indptr, pair_rel_indices)
                        p = reach_next[p]
                continue
            for k in range(lo, hi):
                x = indices[k]
                f0, f1, b0, b1 = fwd_indptr[x], fwd_indptr[x + 1], bwd_indptr[x], bwd_indptr[x + 1]
                if (f1 - f0) + (b1 - b0) > search_ratio * listed:
                    for t in range(listed):
                        y = near_list[t]
                        j = find(fwd_indices, f0, f1, y)
                        if j >= 0:  # pairs (x, y): codes 2q
                            _mark_cells(table, seen, tag, c, y, fwd_data[j] - 1, 0, near_out, near_in,
                                        pair_out, pair_in, pair_rel_indptr, pair_rel_indices)
                        j = find(bwd_indices, b0, b1, y)
                        if j >= 0:  # pairs (y, x): codes 2q + 1
                            _mark_cells(table, seen, tag, c, y, bwd_data[j] - 1, 1, near_out, near_in,
                                        pair_out, pair_in, pair_rel_indptr, pair_rel_indices)
                    continue
                for direction in range(2):  # pairs (x, y): codes 2q; pairs (y, x): codes 2q + 1
                    ys, data, j0, j1 = (fwd_indices, fwd_data, f0, f1) if direction == 0 else (
                        bwd_indices, bwd_data, b0, b1)
                    for j in range(j0, j1):
                        y = ys[j]
                        if near_out[y] == tag or near_in[y] == tag:
                            _mark_cells(table, seen, tag, c, y, data[j] - 1, direction, near_out, near_in,
                                        pair_out, pair_in, pair_rel_indptr, pair_rel_indices)
        i = g
    return table.reshape(c, c)


@njit(cache=True, nogil=True)
def path_sizes(row_ptr, row_x, weights, first_rel, first_fwd, last_rel, last_fwd, caps,
               fwd_arrays, bwd_arrays, stamps_y, stamps_b, tag0, ys, ends):
    """Per path q (``first`` then, where ``last_rel[q] >= 0``, ``last``: relation ids and
    directions), the sum over the rows r of ``weights[r]`` times the distinct ends reached
    from the x values ``row_x[row_ptr[r]:row_ptr[r + 1]]``; the paths sharing a first step
    (adjacent in the arrays) share its values y. A path's count stops once it reaches
    ``caps[q]`` (>= 0). Returns the counts and the next unused stamp tag."""
    m = len(first_rel)
    counts = np.zeros(m, dtype=np.int64)
    done = np.zeros(m, dtype=np.bool_)
    active = m
    tag = tag0
    for r in range(len(weights)):
        if active == 0:
            break
        j = 0
        while j < m:
            g = j + 1
            while g < m and first_rel[g] == first_rel[j] and first_fwd[g] == first_fwd[j]:
                g += 1
            need = False
            for q in range(j, g):
                need = need or not done[q]
            if need:
                arrays = fwd_arrays if first_fwd[j] else bwd_arrays
                k = step_values(row_x, row_ptr[r], row_ptr[r + 1], first_rel[j], arrays, stamps_y, tag, ys)
                tag += 1
                for q in range(j, g):
                    if done[q]:
                        continue
                    if last_rel[q] < 0:
                        counts[q] += k * weights[r]
                    else:
                        arrays = fwd_arrays if last_fwd[q] else bwd_arrays
                        reached = step_values(ys, 0, k, last_rel[q], arrays, stamps_b, tag, ends)
                        counts[q] += reached * weights[r]
                        tag += 1
                    if caps[q] >= 0 and counts[q] >= caps[q]:
                        done[q] = True
                        active -= 1
            j = g
    return counts, tag
