"""Compiled kernels of the signed distance fields (mbsim.model.contact.sdf): the trilinear query
(``interpolate``, inline in sdf_kernels.pxd) and the exact signed distance at every grid node
(Ericson's closest point on a triangle, the bucket search and the pseudo-normal sign described in
sdf's module docstring)."""

import threading

import numpy as np

from libc.math cimport INFINITY, floor, sqrt

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


cdef inline double _box_dist(const double* p, const double* lo, const double* hi) noexcept nogil:
    cdef double s = 0.0
    cdef int a
    for a in range(3):
        if p[a] < lo[a]:
            s += (lo[a] - p[a]) * (lo[a] - p[a])
        elif p[a] > hi[a]:
            s += (p[a] - hi[a]) * (p[a] - hi[a])
    return sqrt(s)


# Rows start, start + step, ... of _signed_distance_grid (each row warm-starts on its own, so the
# rows may be shared out in any way).
cdef void _grid_rows(Py_ssize_t start, Py_ssize_t step, const double[::1] origin, double cell,
                     const double[:, :, ::1] tri, const double[:, :, ::1] normals,
                     const long long[::1] bucket_start, const double[::1] b_origin, double b_cell,
                     const long long[::1] b_shape, const long long[:, ::1] offsets,
                     const double[::1] offset_lb, double r_max, double[:, :, ::1] out) noexcept nogil:
    cdef Py_ssize_t nx = out.shape[0], ny = out.shape[1], nz = out.shape[2], n_off = offsets.shape[0]
    cdef Py_ssize_t i, j, k, o, a, t, s, e, flat, warm, best_t
    cdef long long b, bx, by, bz
    cdef long long bidx[3]
    cdef double p[3]
    cdef double lo[3]
    cdef double hi[3]
    cdef double q[3]
    cdef double best2, best, d2, s_dot
    cdef int feat
    i = start
    while i < nx:
        warm = -1
        for j in range(ny):
            for k in range(nz):
                p[0] = origin[0] + i * cell
                p[1] = origin[1] + j * cell
                p[2] = origin[2] + k * cell
                for a in range(3):
                    b = <long long>floor((p[a] - b_origin[a]) / b_cell)
                    bidx[a] = min(max(b, 0), b_shape[a] - 1)
                # warm start: the previous node's triangle gives an upper bound
                best2 = INFINITY
                best_t = -1
                if warm >= 0:
                    best2 = _dist2_triangle(p[0], p[1], p[2], &tri[warm, 0, 0])
                    best_t = warm
                best = sqrt(best2)
                for o in range(n_off):
                    if offset_lb[o] - r_max >= best:
                        break  # every remaining bucket is farther than the best triangle
                    bx = bidx[0] + offsets[o, 0]
                    by = bidx[1] + offsets[o, 1]
                    bz = bidx[2] + offsets[o, 2]
                    if bx < 0 or by < 0 or bz < 0 or bx >= b_shape[0] or by >= b_shape[1] or bz >= b_shape[2]:
                        continue
                    flat = (bx * b_shape[1] + by) * b_shape[2] + bz
                    s = bucket_start[flat]
                    e = bucket_start[flat + 1]
                    if s == e:
                        continue
                    lo[0] = b_origin[0] + bx * b_cell
                    lo[1] = b_origin[1] + by * b_cell
                    lo[2] = b_origin[2] + bz * b_cell
                    for a in range(3):
                        hi[a] = lo[a] + b_cell
                    if _box_dist(p, lo, hi) - r_max >= best:
                        continue
                    for t in range(s, e):
                        d2 = _dist2_triangle(p[0], p[1], p[2], &tri[t, 0, 0])
                        if d2 < best2:
                            best2 = d2
                            best_t = t
                            best = sqrt(best2)
                warm = best_t
                # sign from the angle-weighted pseudo-normal of the closest feature
                feat = _closest_on_triangle(p[0], p[1], p[2], &tri[best_t, 0, 0], q)
                s_dot = ((p[0] - q[0]) * normals[best_t, feat, 0]
                         + (p[1] - q[1]) * normals[best_t, feat, 1]
                         + (p[2] - q[2]) * normals[best_t, feat, 2])
                out[i, j, k] = -best if s_dot < 0.0 else best
        i += step


def _signed_distance_grid(const double[::1] origin, double cell, const long long[::1] shape,
                          const double[:, :, ::1] tri, const double[:, :, ::1] normals,
                          const long long[::1] bucket_start, const double[::1] b_origin, double b_cell,
                          const long long[::1] b_shape, const long long[:, ::1] offsets,
                          const double[::1] offset_lb, double r_max):
    """Exact signed distance at every grid node; the triangles are sorted by bucket (CSR ``bucket_start``).

    ``normals`` (nt, 7, 3) holds each triangle's pseudo-normal per feature code of ``_closest_on_triangle``.
    """
    out = np.empty((shape[0], shape[1], shape[2]))
    cdef double[:, :, ::1] out_v = out
    # the views checked above, as Python objects for the threads' calls
    cdef tuple args = (<object>origin, cell, <object>tri, <object>normals, <object>bucket_start, <object>b_origin,
                       b_cell, <object>b_shape, <object>offsets, <object>offset_lb, r_max, <object>out_v)
    if out.size < THREADED_NODES:
        _grid_part(0, 1, *args)
        return out
    # a large grid: even rows here, odd rows in a second thread, both without the GIL (rows
    # alternate because their cost varies along the grid: halves would not share it evenly)
    helper = threading.Thread(target=_grid_part, args=(1, 2, *args), name="mbsim-sdf", daemon=True)
    helper.start()
    try:
        _grid_part(0, 2, *args)
    finally:
        helper.join()
    return out


def _grid_part(Py_ssize_t start, Py_ssize_t step, const double[::1] origin, double cell,
               const double[:, :, ::1] tri, const double[:, :, ::1] normals, const long long[::1] bucket_start,
               const double[::1] b_origin, double b_cell, const long long[::1] b_shape,
               const long long[:, ::1] offsets, const double[::1] offset_lb, double r_max, double[:, :, ::1] out):
    """Rows start, start + step, ... of ``_signed_distance_grid``'s ``out`` (one thread's share)."""
    with nogil:
        _grid_rows(start, step, origin, cell, tri, normals, bucket_start, b_origin, b_cell, b_shape, offsets,
                   offset_lb, r_max, out)
