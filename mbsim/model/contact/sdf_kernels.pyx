"""Compiled kernels of the signed distance fields (mbsim.model.contact.sdf): the trilinear query
(``interpolate``, inline in sdf_kernels.pxd) and the exact signed distance at every grid node
(Ericson's closest point on a triangle, the tree search and the pseudo-normal sign described in
sdf's module docstring)."""

import threading

import numpy as np

from libc.math cimport INFINITY, sqrt

# grid nodes from which _signed_distance_grid shares the rows with a second thread (below, the
# thread's start costs more than it saves)
THREADED_NODES = 1 << 15


cdef void _query_c(const double[:, :, ::1] values, const double[::1] origin, double cell,
                   const double[:, ::1] points, double[::1] out_d, double[:, ::1] out_g,
                   bint want_gradient) noexcept nogil:
    cdef double inv = 1.0 / cell
    cdef double gx, gy, gz, ext
    cdef Py_ssize_t q
    for q in range(points.shape[0]):
        out_d[q] = interpolate(values, origin, inv, cell, points[q, 0], points[q, 1], points[q, 2],
                               &gx, &gy, &gz, &ext)
        if want_gradient:
            out_g[q, 0] = gx
            out_g[q, 1] = gy
            out_g[q, 2] = gz


def _query(const double[:, :, ::1] values, const double[::1] origin, double cell, const double[:, ::1] points,
           double[::1] out_d, double[:, ::1] out_g, bint want_gradient):
    """Trilinear interpolation (eq. 5) and its exact gradient at each point (``interpolate``)."""
    with nogil:
        _query_c(values, origin, cell, points, out_d, out_g, want_gradient)


# ------------------------------------------------------------------- point-to-triangle (Ericson 5.1.5)


# Closest point (q[0..2]) on the triangle with corners v[0:3], v[3:6], v[6:9] (a row of tri) to p,
# returned with its feature: 0 face, 1-3 vertex a/b/c, 4-6 edge ab/bc/ca.
cdef inline int _closest_on_triangle(double px, double py, double pz, const double* v,
                                     double* q) noexcept nogil:
    cdef double ax = v[0], ay = v[1], az = v[2]
    cdef double bx = v[3], by = v[4], bz = v[5]
    cdef double cx = v[6], cy = v[7], cz = v[8]
    cdef double abx = bx - ax, aby = by - ay, abz = bz - az
    cdef double acx = cx - ax, acy = cy - ay, acz = cz - az
    cdef double apx = px - ax, apy = py - ay, apz = pz - az
    cdef double d1 = abx * apx + aby * apy + abz * apz
    cdef double d2 = acx * apx + acy * apy + acz * apz
    cdef double bpx, bpy, bpz, cpx, cpy, cpz, d3, d4, d5, d6, va, vb, vc, s, w, denom
    if d1 <= 0.0 and d2 <= 0.0:
        q[0] = ax; q[1] = ay; q[2] = az
        return 1
    bpx = px - bx; bpy = py - by; bpz = pz - bz
    d3 = abx * bpx + aby * bpy + abz * bpz
    d4 = acx * bpx + acy * bpy + acz * bpz
    if d3 >= 0.0 and d4 <= d3:
        q[0] = bx; q[1] = by; q[2] = bz
        return 2
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        s = d1 / (d1 - d3)
        q[0] = ax + s * abx; q[1] = ay + s * aby; q[2] = az + s * abz
        return 4
    cpx = px - cx; cpy = py - cy; cpz = pz - cz
    d5 = abx * cpx + aby * cpy + abz * cpz
    d6 = acx * cpx + acy * cpy + acz * cpz
    if d6 >= 0.0 and d5 <= d6:
        q[0] = cx; q[1] = cy; q[2] = cz
        return 3
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        w = d2 / (d2 - d6)
        q[0] = ax + w * acx; q[1] = ay + w * acy; q[2] = az + w * acz
        return 6
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:
        w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        q[0] = bx + w * (cx - bx); q[1] = by + w * (cy - by); q[2] = bz + w * (cz - bz)
        return 5
    denom = 1.0 / (va + vb + vc)
    s = vb * denom
    w = vc * denom
    q[0] = ax + abx * s + acx * w; q[1] = ay + aby * s + acy * w; q[2] = az + abz * s + acz * w
    return 0


cdef inline double _dist2_triangle(double px, double py, double pz, const double* v) noexcept nogil:
    cdef double q[3]
    _closest_on_triangle(px, py, pz, v, q)
    return (px - q[0]) * (px - q[0]) + (py - q[1]) * (py - q[1]) + (pz - q[2]) * (pz - q[2])


# ------------------------------------------------------------------- bounding volume tree over the triangles


# per node: an oriented box, its frame's three unit axes (9) then its lower (3) and upper (3) bounds
# along them; the node's int pair is (right child, 0) for an inner node (its left child is the
# next node) or (first triangle, count) for a leaf
cdef enum:
    _ND = 15
    _LEAF_SIZE = 4
    _STACK = 64  # a median split's depth is log2(triangles) + 1 < 64


# Wirth's selection (nth_element): perm[lo:hi] reordered so that the nth entry holds the triangle
# of the nth smallest centroid coordinate on axis, smaller ones before it and larger ones after.
cdef void _select(long long* perm, const double* cent, int axis, Py_ssize_t lo, Py_ssize_t hi,
                  Py_ssize_t nth) noexcept nogil:
    cdef Py_ssize_t l = lo, r = hi - 1, i, j
    cdef double pivot
    cdef long long swap
    while r > l:
        pivot = cent[3 * perm[(l + r) // 2] + axis]
        i = l
        j = r
        while i <= j:
            while cent[3 * perm[i] + axis] < pivot:
                i += 1
            while cent[3 * perm[j] + axis] > pivot:
                j -= 1
            if i <= j:
                swap = perm[i]
                perm[i] = perm[j]
                perm[j] = swap
                i += 1
                j -= 1
        if nth <= j:
            r = j
        elif nth >= i:
            l = i
        else:
            break


# Bounds along axes f[0:3], f[3:6], f[6:9] of the vertices of triangles perm[s:e]: lo[0:3], hi[0:3].
cdef void _extents(Py_ssize_t s, Py_ssize_t e, const long long* perm, const double* tri, const double* f,
                   double* lo, double* hi) noexcept nogil:
    cdef Py_ssize_t t
    cdef const double* v
    cdef double h
    cdef int a, c
    for a in range(3):
        lo[a] = INFINITY
        hi[a] = -INFINITY
    for t in range(s, e):
        v = tri + 9 * perm[t]
        for c in range(3):
            for a in range(3):
                h = f[3 * a] * v[3 * c] + f[3 * a + 1] * v[3 * c + 1] + f[3 * a + 2] * v[3 * c + 2]
                lo[a] = min(lo[a], h)
                hi[a] = max(hi[a], h)


# Node over triangles perm[s:e] and, below it, its subtree (median split on the longest axis of the
# centroids' box); returns the node's index. count holds the next free node.
cdef Py_ssize_t _build_node(Py_ssize_t s, Py_ssize_t e, long long* perm, const double* tri, const double* cent,
                            double* nd, long long* ni, Py_ssize_t* count) noexcept nogil:
    cdef Py_ssize_t node = count[0], t, m, right
    cdef const double* v
    cdef double* b = nd + node * _ND
    cdef double clo[3]
    cdef double chi[3]
    cdef double n[3]
    cdef double f[9]
    cdef double lo[3]
    cdef double hi[3]
    cdef double ux, uy, uz, wx, wy, wz, length, volume
    cdef int a, axis
    count[0] += 1
    for a in range(3):
        clo[a] = INFINITY
        chi[a] = -INFINITY
        n[a] = 0.0
    # the centroids' box; the summed area normal of the triangles
    for t in range(s, e):
        v = tri + 9 * perm[t]
        for a in range(3):
            clo[a] = min(clo[a], cent[3 * perm[t] + a])
            chi[a] = max(chi[a], cent[3 * perm[t] + a])
        ux = v[3] - v[0]; uy = v[4] - v[1]; uz = v[5] - v[2]
        wx = v[6] - v[0]; wy = v[7] - v[1]; wz = v[8] - v[2]
        n[0] += uy * wz - uz * wy
        n[1] += uz * wx - ux * wz
        n[2] += ux * wy - uy * wx
    # the axis-aligned box first
    for a in range(9):
        b[a] = 1.0 if a % 4 == 0 else 0.0
    _extents(s, e, perm, tri, b, b + 9, b + 12)
    volume = (b[12] - b[9]) * (b[13] - b[10]) * (b[14] - b[11])
    # a box along the patch's mean normal (a nearly flat patch: thin along it) when it is smaller
    length = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2])
    if length > 0.0:
        for a in range(3):
            f[a] = n[a] / length
        # second axis: the normal crossed with the coordinate axis least along it
        axis = 0
        for a in range(1, 3):
            if abs(f[a]) < abs(f[axis]):
                axis = a
        f[3] = 0.0; f[4] = 0.0; f[5] = 0.0
        f[3 + axis] = 1.0
        ux = f[1] * f[5] - f[2] * f[4]
        uy = f[2] * f[3] - f[0] * f[5]
        uz = f[0] * f[4] - f[1] * f[3]
        length = sqrt(ux * ux + uy * uy + uz * uz)
        f[3] = ux / length; f[4] = uy / length; f[5] = uz / length
        f[6] = f[1] * f[5] - f[2] * f[4]
        f[7] = f[2] * f[3] - f[0] * f[5]
        f[8] = f[0] * f[4] - f[1] * f[3]
        _extents(s, e, perm, tri, f, lo, hi)
        if (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]) < volume:
            for a in range(9):
                b[a] = f[a]
            for a in range(3):
                b[9 + a] = lo[a]
                b[12 + a] = hi[a]
    if e - s <= _LEAF_SIZE:
        ni[2 * node] = s
        ni[2 * node + 1] = e - s
        return node
    axis = 0
    for a in range(1, 3):
        if chi[a] - clo[a] > chi[axis] - clo[axis]:
            axis = a
    m = (s + e) // 2
    _select(perm, cent, axis, s, e, m)
    _build_node(s, m, perm, tri, cent, nd, ni, count)  # the left child is node + 1
    right = _build_node(m, e, perm, tri, cent, nd, ni, count)
    ni[2 * node] = right
    ni[2 * node + 1] = 0
    return node


def _triangle_tree(const double[:, :, ::1] tri):
    """Bounding volume tree over (nt, 3, 3) triangles: (perm, nodes, links).

    Leaf triangles are ``tri[perm[first:first + count]]``; ``nodes`` (nn, 15) holds each node's
    oriented box, ``links`` (nn, 2) its (right child, 0) or (first, count) (see ``_ND``)."""
    cdef Py_ssize_t nt = tri.shape[0], count = 0
    cent_a = np.ascontiguousarray(np.asarray(tri).mean(axis=1))
    perm_a = np.arange(nt, dtype=np.int64)
    nodes_a = np.empty((2 * nt, _ND))
    links_a = np.empty((2 * nt, 2), dtype=np.int64)
    cdef const double[:, ::1] cent = cent_a
    cdef long long[::1] perm = perm_a
    cdef double[:, ::1] nodes = nodes_a
    cdef long long[:, ::1] links = links_a
    with nogil:
        _build_node(0, nt, &perm[0], &tri[0, 0, 0], &cent[0, 0], &nodes[0, 0], &links[0, 0], &count)
    return perm_a, nodes_a[:count].copy(), links_a[:count].copy()


# ------------------------------------------------------------------- nearest triangle and the grid


# Squared distance from p to node b's oriented box: a lower bound for anything inside it.
cdef inline double _lower2(const double* b, double px, double py, double pz) noexcept nogil:
    cdef double d2 = 0.0, h
    cdef int a
    for a in range(3):
        h = b[3 * a] * px + b[3 * a + 1] * py + b[3 * a + 2] * pz
        if h < b[9 + a]:
            d2 += (b[9 + a] - h) * (b[9 + a] - h)
        elif h > b[12 + a]:
            d2 += (h - b[12 + a]) * (h - b[12 + a])
    return d2


# Nearest triangle to p: nearest-first descent of the tree bounded by the best squared distance so
# far (best2, in: an upper bound from a known triangle best_t or INFINITY, out: the minimum);
# returns its triangle.
cdef Py_ssize_t _nearest(double px, double py, double pz, const double* tri, const double* nd,
                         const long long* ni, double* best2, Py_ssize_t best_t) noexcept nogil:
    cdef Py_ssize_t stack_n[_STACK]
    cdef double stack_d[_STACK]
    cdef Py_ssize_t sp = 0, node = 0, left, right, swap_n, t, end
    cdef double b2 = best2[0], dl, dr, swap_d, d2
    if _lower2(nd, px, py, pz) >= b2:
        return best_t
    while node >= 0:
        # down to a leaf, nearer child first; the farther one waits on the stack while it may be nearer
        while ni[2 * node + 1] == 0:
            left = node + 1
            right = ni[2 * node]
            dl = _lower2(nd + left * _ND, px, py, pz)
            dr = _lower2(nd + right * _ND, px, py, pz)
            if dr < dl:
                swap_n = left; left = right; right = swap_n
                swap_d = dl; dl = dr; dr = swap_d
            if dr < b2:
                stack_n[sp] = right
                stack_d[sp] = dr
                sp += 1
            if dl >= b2:
                node = -1
                break
            node = left
        if node >= 0:
            t = ni[2 * node]
            end = t + ni[2 * node + 1]
            while t < end:
                d2 = _dist2_triangle(px, py, pz, tri + 9 * t)
                if d2 < b2:
                    b2 = d2
                    best_t = t
                t += 1
        # the most recently deferred node still within reach
        node = -1
        while sp > 0:
            sp -= 1
            if stack_d[sp] < b2:
                node = stack_n[sp]
                break
    best2[0] = b2
    return best_t


# Rows (slabs of constant i) start, start + step, ... of _signed_distance_grid. Each node's search
# starts from the nearest of two known triangles, the previous node's on its line and the one of
# the node before it in the previous line (|d(p) - d(p')| <= |p - p'|: a tight upper bound).
cdef void _grid_rows(Py_ssize_t start, Py_ssize_t step, const double[::1] origin, double cell,
                     const double[:, :, ::1] tri, const double[:, :, ::1] normals, const double[:, ::1] nodes,
                     const long long[:, ::1] links, double[:, :, ::1] out,
                     long long[::1] line_warm, long long[::1] first_warm) noexcept nogil:
    cdef Py_ssize_t nx = out.shape[0], ny = out.shape[1], nz = out.shape[2]
    cdef Py_ssize_t i, j, k, warm, other, best_t
    cdef double p[3]
    cdef double q[3]
    cdef double best2, d2, s_dot, best
    cdef int feat
    for k in range(nz):
        first_warm[k] = -1
    i = start
    while i < nx:
        for j in range(ny):
            warm = -1
            for k in range(nz):
                p[0] = origin[0] + i * cell
                p[1] = origin[1] + j * cell
                p[2] = origin[2] + k * cell
                # upper bound: the nearer of the previous node's triangle and the previous line's
                best2 = INFINITY
                best_t = -1
                if warm >= 0:
                    best2 = _dist2_triangle(p[0], p[1], p[2], &tri[warm, 0, 0])
                    best_t = warm
                other = line_warm[k] if j > 0 else first_warm[k]
                if other >= 0 and other != warm:
                    d2 = _dist2_triangle(p[0], p[1], p[2], &tri[other, 0, 0])
                    if d2 < best2:
                        best2 = d2
                        best_t = other
                best_t = _nearest(p[0], p[1], p[2], &tri[0, 0, 0], &nodes[0, 0], &links[0, 0], &best2, best_t)
                best = sqrt(best2)
                warm = best_t
                line_warm[k] = best_t
                if j == 0:
                    first_warm[k] = best_t
                # sign from the angle-weighted pseudo-normal of the closest feature
                feat = _closest_on_triangle(p[0], p[1], p[2], &tri[best_t, 0, 0], q)
                s_dot = ((p[0] - q[0]) * normals[best_t, feat, 0]
                         + (p[1] - q[1]) * normals[best_t, feat, 1]
                         + (p[2] - q[2]) * normals[best_t, feat, 2])
                out[i, j, k] = -best if s_dot < 0.0 else best
        i += step


def _signed_distance_grid(const double[::1] origin, double cell, const long long[::1] shape,
                          const double[:, :, ::1] tri, const double[:, :, ::1] normals,
                          const double[:, ::1] nodes, const long long[:, ::1] links, int threads):
    """Exact signed distance at every grid node; ``tri`` and ``normals`` in the tree's leaf order
    (``_triangle_tree``'s ``perm``), ``nodes`` and ``links`` the tree.

    ``normals`` (nt, 7, 3) holds each triangle's pseudo-normal per feature code of
    ``_closest_on_triangle``. ``threads`` 2 shares the slabs with a second thread on a large grid.
    """
    out = np.empty((shape[0], shape[1], shape[2]))
    cdef double[:, :, ::1] out_v = out
    # the views checked above, as Python objects for the threads' calls
    cdef tuple args = (<object>origin, cell, <object>tri, <object>normals, <object>nodes, <object>links,
                       <object>out_v)
    if threads < 2 or out.size < THREADED_NODES:
        _grid_part(0, 1, *args)
        return out
    # a large grid: even slabs here, odd slabs in a second thread, both without the GIL (slabs
    # alternate because their cost varies along the grid: halves would not share it evenly)
    helper = threading.Thread(target=_grid_part, args=(1, 2, *args), name="mbsim-sdf", daemon=True)
    helper.start()
    try:
        _grid_part(0, 2, *args)
    finally:
        helper.join()
    return out


def _grid_part(Py_ssize_t start, Py_ssize_t step, const double[::1] origin, double cell,
               const double[:, :, ::1] tri, const double[:, :, ::1] normals, const double[:, ::1] nodes,
               const long long[:, ::1] links, double[:, :, ::1] out):
    """Slabs start, start + step, ... of ``_signed_distance_grid``'s ``out`` (one thread's share)."""
    cdef long long[::1] line_warm = np.empty(out.shape[2], dtype=np.int64)
    cdef long long[::1] first_warm = np.empty(out.shape[2], dtype=np.int64)
    with nogil:
        _grid_rows(start, step, origin, cell, tri, normals, nodes, links, out, line_warm, first_warm)
