"""Compiled sort and sweep of the broad phase (mbsim.model.contact.broadphase.sweep_and_prune):
Baraff's sort and sweep over axis-aligned boxes, on the axis along which the sorted intervals
overlap least, without numpy's index expansion (repeat, arange, fancy indexing per axis)."""

import numpy as np

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc


# Stable merge sort of idx[0:n] by key[idx] (ties keep their order, as numpy's kind="stable"), tmp
# n entries of scratch.
cdef void _argsort(const double* key, Py_ssize_t stride, int64_t* idx, int64_t* tmp, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t width = 1, lo, mid, hi, i, j, k
    cdef int64_t* src = idx
    cdef int64_t* dst = tmp
    cdef int64_t* swap
    # bottom-up: merge runs of width 1, 2, 4, ... alternating between the two buffers
    while width < n:
        lo = 0
        while lo < n:
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            k = lo
            while i < mid and j < hi:
                if key[src[j] * stride] < key[src[i] * stride]:
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
            lo += 2 * width
        swap = src
        src = dst
        dst = swap
        width *= 2
    if src != idx:
        for i in range(n):
            idx[i] = src[i]


# Per box p of the sorted order, the index one past the last later box that starts at or before p's
# end (binary search: starts are sorted); end[p] - p - 1 boxes overlap p along the axis.
cdef Py_ssize_t _run_ends(const double* lo, const double* hi, Py_ssize_t stride, const int64_t* order,
                          Py_ssize_t n, int64_t* end) noexcept nogil:
    cdef Py_ssize_t p, a, b, m, total = 0
    cdef double top
    for p in range(n):
        top = hi[order[p] * stride]
        # first sorted position whose start exceeds top (searchsorted side="right")
        a = p + 1
        b = n
        while a < b:
            m = (a + b) // 2
            if lo[order[m] * stride] <= top:
                a = m + 1
            else:
                b = m
        end[p] = a
        total += a - p - 1
    return total


def sweep_and_prune(const double[:, ::1] lo, const double[:, ::1] hi):
    """All pairs of overlapping boxes (closed intervals: touching boxes overlap).

    The sweep axis is the one along which the sorted intervals overlap least (fewest pairs to
    test on the other axes).

    Args:
        lo, hi: (n, d) lower and upper corners.
    Returns:
        (a, b): (k,) int64 indices with a != b, each unordered pair once, ordered by a's start
        on the sweep axis, then b's.
    """
    cdef Py_ssize_t n = lo.shape[0], d = lo.shape[1], p, q, total, best_total = -1, count = 0
    cdef int axis, best_axis = 0
    if n < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    orders = np.empty((d, n), dtype=np.int64)
    ends = np.empty((d, n), dtype=np.int64)
    cdef int64_t[:, ::1] order = orders
    cdef int64_t[:, ::1] end = ends
    cdef int64_t* tmp = <int64_t*>malloc(n * sizeof(int64_t))
    if tmp == NULL:
        raise MemoryError()
    # each axis: sort by lower bound, count the overlapping runs; keep the axis with fewest
    with nogil:
        for axis in range(d):
            for p in range(n):
                order[axis, p] = p
            _argsort(&lo[0, axis], d, &order[axis, 0], tmp, n)
            total = _run_ends(&lo[0, axis], &hi[0, axis], d, &order[axis, 0], n, &end[axis, 0])
            if best_total < 0 or total < best_total:
                best_total = total
                best_axis = axis
    free(tmp)
    a_out = np.empty(best_total + 1, dtype=np.int64)
    b_out = np.empty(best_total + 1, dtype=np.int64)
    packed = np.empty((n, 4))
    cdef int64_t[::1] a_v = a_out, b_v = b_out
    cdef double[:, ::1] box = packed
    cdef int o1 = (best_axis + 1) % d, o2 = (best_axis + 2) % d if d == 3 else o1
    cdef const double* bp
    cdef const double* bq
    # the runs of the sweep axis, kept where the boxes overlap on the other axes too: the other
    # axes' bounds packed in sweep order (a run reads contiguous memory), every pair written and
    # the count advanced only when it overlaps (no branch to mispredict); in 2D o2 is o1
    with nogil:
        for p in range(n):
            box[p, 0] = lo[order[best_axis, p], o1]
            box[p, 1] = hi[order[best_axis, p], o1]
            box[p, 2] = lo[order[best_axis, p], o2]
            box[p, 3] = hi[order[best_axis, p], o2]
        for p in range(n):
            bp = &box[p, 0]
            for q in range(p + 1, end[best_axis, p]):
                bq = &box[q, 0]
                a_v[count] = order[best_axis, p]
                b_v[count] = order[best_axis, q]
                count += (bp[0] <= bq[1]) & (bq[0] <= bp[1]) & (bp[2] <= bq[3]) & (bq[2] <= bp[3])
    return a_out[:count], b_out[:count]
