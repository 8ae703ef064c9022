"""Compiled broad phase of rigid contact (mbsim.model.contact.broadphase): Baraff's sort and sweep
over axis-aligned boxes, on the axis along which the sorted intervals overlap least
(``sweep_and_prune``), and the candidate pairs of one detection (``candidates``: the sweep's
pairs of bodies that may touch, then the half-spaces' within the margin)."""

import numpy as np

from libc.math cimport fabs, sqrt
from libc.stdint cimport int64_t

from mbsim.model.contact.pairs_kernels cimport entry_of
from mbsim.model.contact.sorting cimport argsort


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


# Each axis sorted by lower bound (order, end: (d, n), tmp n entries of scratch; _run_ends); returns
# the axis along which the fewest intervals overlap, their count in total[0].
cdef int sweep_axis(const double* lo, const double* hi, Py_ssize_t n, int d, int64_t* order, int64_t* end,
                    int64_t* tmp, Py_ssize_t* total) noexcept nogil:
    cdef Py_ssize_t p, count, best_total = -1
    cdef int axis, best_axis = 0
    for axis in range(d):
        for p in range(n):
            order[axis * n + p] = p
        argsort(&lo[axis], d, &order[axis * n], tmp, n)
        count = _run_ends(&lo[axis], &hi[axis], d, &order[axis * n], n, &end[axis * n])
        if best_total < 0 or count < best_total:
            best_total = count
            best_axis = axis
    total[0] = best_total
    return best_axis


# The runs of the sweep axis kept where the boxes overlap on the other axes too, into a, b (room for
# the axis' total + 1 pairs); box (n, 4) scratch; returns the count. The other axes' bounds are
# packed in sweep order (a run reads contiguous memory), every pair written and the count advanced
# only when it overlaps (no branch to mispredict); in 2D o2 is o1.
cdef Py_ssize_t sweep_pairs(const double* lo, const double* hi, Py_ssize_t n, int d, int axis, const int64_t* order,
                            const int64_t* end, double* box, int64_t* a, int64_t* b) noexcept nogil:
    cdef int o1 = (axis + 1) % d, o2 = (axis + 2) % d if d == 3 else o1
    cdef const int64_t* od = &order[axis * n]
    cdef const int64_t* ed = &end[axis * n]
    cdef const double* bp
    cdef const double* bq
    cdef Py_ssize_t p, q, count = 0
    for p in range(n):
        box[4 * p] = lo[od[p] * d + o1]
        box[4 * p + 1] = hi[od[p] * d + o1]
        box[4 * p + 2] = lo[od[p] * d + o2]
        box[4 * p + 3] = hi[od[p] * d + o2]
    for p in range(n):
        bp = &box[4 * p]
        for q in range(p + 1, ed[p]):
            bq = &box[4 * q]
            a[count] = od[p]
            b[count] = od[q]
            count += (bp[0] <= bq[1]) & (bq[0] <= bp[1]) & (bp[2] <= bq[3]) & (bq[2] <= bp[3])
    return count


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
    cdef Py_ssize_t n = lo.shape[0], d = lo.shape[1], total = 0, count = 0
    cdef int best_axis = 0
    if n < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    orders = np.empty((d, n), dtype=np.int64)
    ends = np.empty((d, n), dtype=np.int64)
    tmps = np.empty(n, dtype=np.int64)
    packed = np.empty((n, 4))
    cdef int64_t[:, ::1] order = orders
    cdef int64_t[:, ::1] end = ends
    cdef int64_t[::1] tmp = tmps
    cdef double[:, ::1] box = packed
    with nogil:
        best_axis = sweep_axis(&lo[0, 0], &hi[0, 0], n, <int>d, &order[0, 0], &end[0, 0], &tmp[0], &total)
    a_out = np.empty(total + 1, dtype=np.int64)
    b_out = np.empty(total + 1, dtype=np.int64)
    cdef int64_t[::1] a_v = a_out, b_v = b_out
    with nogil:
        count = sweep_pairs(&lo[0, 0], &hi[0, 0], n, <int>d, best_axis, &order[0, 0], &end[0, 0], &box[0, 0],
                            &a_v[0], &b_v[0])
    return a_out[:count], b_out[:count]


# The broad phase's pairs (sa, sb: npair) of bodies that may touch (pairs_kernels.entry_of with the
# arrays of ContactPairs.lookup), then the static half-space candidates (plane, shape, entry) whose box
# reaches within ``margin`` of the plane: its lowest corner along the plane's outward normal (the last
# column of the plane's rotation); pos (nshape, d), rot (nshape, d, d), half (nbounded, d). Into a, b,
# e (room for npair + nhalf); returns the count.
cdef Py_ssize_t keep_candidates(const int64_t* sa, const int64_t* sb, Py_ssize_t npair, const int64_t* shape_body,
                                const int64_t* keys, const int64_t* key_entry, Py_ssize_t nkeys,
                                const int64_t* set_index, const unsigned char* set_in1,
                                const unsigned char* set_in2, Py_ssize_t nsets, int64_t nbody,
                                const int64_t* half_plane, const int64_t* half_shape, const int64_t* half_entry,
                                Py_ssize_t nhalf, const double* pos, const double* rot, const double* half, int d,
                                double margin, int64_t* a, int64_t* b, int64_t* e) noexcept nogil:
    cdef Py_ssize_t r, count = 0
    cdef int c
    cdef int64_t entry, p, s
    cdef double lowest
    # the sweep's pairs of bodies that may touch
    for r in range(npair):
        entry = entry_of(shape_body[sa[r]], shape_body[sb[r]], keys, key_entry, nkeys, set_index, set_in1, set_in2,
                         nsets, nbody)
        if entry >= 0:
            a[count] = sa[r]
            b[count] = sb[r]
            e[count] = entry
            count += 1
    # half-spaces: the box's lowest corner along the outward normal within the margin
    for r in range(nhalf):
        p = half_plane[r]
        s = half_shape[r]
        lowest = 0.0
        for c in range(d):
            lowest += rot[(p * d + c) * d + d - 1] * (pos[s * d + c] - pos[p * d + c]) - fabs(
                rot[(p * d + c) * d + d - 1]) * half[s * d + c]
        if lowest < margin:
            a[count] = p
            b[count] = s
            e[count] = half_entry[r]
            count += 1
    return count


def candidates(const double[:, ::1] lo, const double[:, ::1] hi, const int64_t[::1] shape_body,
               const int64_t[::1] keys, const int64_t[::1] key_entry, const int64_t[::1] set_index,
               const unsigned char[:, ::1] set_in1, const unsigned char[:, ::1] set_in2, int64_t nbody,
               const int64_t[::1] half_plane, const int64_t[::1] half_shape, const int64_t[::1] half_entry,
               const double[:, ::1] pos, const double[:, :, ::1] rot, const double[:, ::1] half, double margin):
    """The broad phase of one detection: shape pairs that may touch and the contact entry of each.

    The pairs of overlapping boxes (``sweep_and_prune`` of lo, hi: the bounded shapes' boxes,
    grown by the margin) whose bodies may touch (pairs_kernels.entry_of with the arrays of
    ``ContactPairs.lookup``), then the static half-space candidates (plane, shape, entry) whose
    box reaches within ``margin`` of the plane: its lowest corner along the plane's outward
    normal (the last column of the plane's rotation).

    Returns:
        (a, b, entry): (k,) int64 shape ids and entries, the sweep's pairs first.
    """
    a_sweep, b_sweep = sweep_and_prune(lo, hi)
    cdef int64_t[::1] sa = a_sweep, sb = b_sweep
    cdef Py_ssize_t npair = sa.shape[0], nhalf = half_plane.shape[0], count = 0
    cdef int d = pos.shape[1]
    a = np.empty(npair + nhalf + 1, dtype=np.int64)
    b = np.empty(npair + nhalf + 1, dtype=np.int64)
    entry = np.empty(npair + nhalf + 1, dtype=np.int64)
    cdef int64_t[::1] a_v = a, b_v = b, e_v = entry
    cdef int64_t zero = 0
    cdef const int64_t* kp = &keys[0] if keys.shape[0] else &zero
    cdef const int64_t* ep = &key_entry[0] if key_entry.shape[0] else &zero
    cdef const int64_t* sp = &set_index[0] if set_index.shape[0] else &zero
    cdef const unsigned char* in1 = &set_in1[0, 0] if set_in1.shape[0] else NULL
    cdef const unsigned char* in2 = &set_in2[0, 0] if set_in2.shape[0] else NULL
    cdef const int64_t* hp = &half_plane[0] if nhalf else &zero
    cdef const int64_t* hs = &half_shape[0] if nhalf else &zero
    cdef const int64_t* he = &half_entry[0] if nhalf else &zero
    cdef const double* hf = &half[0, 0] if half.shape[0] else NULL
    with nogil:
        count = keep_candidates(&sa[0] if npair else &zero, &sb[0] if npair else &zero, npair, &shape_body[0], kp, ep, keys.shape[0], sp, in1, in2,
                                set_index.shape[0], nbody, hp, hs, he, nhalf, &pos[0, 0], &rot[0, 0, 0], hf, d,
                                margin, &a_v[0], &b_v[0], &e_v[0])
    return a[:count], b[:count], entry[:count]


# World box half extents (d) of one bounded shape of kind ``code`` (AABB_BALL ...: the shape types'
# ``aabb_kernel``) from its world rotation R (d, d row-major; unread for balls) and parameters
# (mbsim.model.contact.narrowphase's conventions): a ball its radius along every axis; a box
# sum_j |R_ij| h_j; a capsule |u_i| l + r and a cylinder |u_i| l + r sqrt(1 - u_i^2) (a disc of
# radius r normal to u reaches that far along i), u = R's third column, l the half length.
cdef void aabb_half_into(int code, const double* R, const double* param, int d, double* out) noexcept nogil:
    cdef int i, j
    cdef double u
    for i in range(d):
        if code == AABB_BALL:
            out[i] = param[0]
        elif code == AABB_BOX:
            out[i] = 0.0
            for j in range(d):
                out[i] += fabs(R[i * d + j]) * param[j]
        elif code == AABB_CAPSULE:
            u = R[i * d + 2]
            out[i] = fabs(u) * param[1] + param[0]
        else:
            u = R[i * d + 2]
            out[i] = fabs(u) * param[1] + param[0] * sqrt(max(0.0, 1.0 - u * u))


def aabb_half(int code, const double[:, :, ::1] rot, const double[:, ::1] param, Py_ssize_t d):
    """World box half extents (m, d) of m shapes of kind ``code`` (aabb_half_into) from their world
    rotations (m, d, d; None or anything for balls) and parameters (m, 3)."""
    cdef Py_ssize_t m = param.shape[0], r
    out = np.empty((m, d))
    cdef double[:, ::1] o = out
    cdef double eye[9]
    for r in range(9):
        eye[r] = 0.0
    with nogil:
        for r in range(m):
            aabb_half_into(code, &rot[r, 0, 0] if rot is not None else eye, &param[r, 0], <int>d, &o[r, 0])
    return out
