"""Compiled narrow phase of rigid contact: one kernel per pair of primitive shape types, each over
one candidate pair (pointers to its pose and parameters); ``pair_points``, which runs a kernel
over the candidate rows of numpy arrays (the rows of narrowphase.PAIR_FUNCTIONS); and
``contact_batch``, the narrow phase and the ContactBatch of a whole detection in one pass. Conventions (normal from a to b, gap, feature numbers,
shape parameters) and the methods (Ericson's separating axes, face clipping, Bullet's manifold
reduction) are those of mbsim.model.contact.narrowphase's docstring, which keeps the table.

Rotations are row-major (d, d) blocks, column j the shape's axis j in world coordinates.
"""

import numpy as np

from cpython.mem cimport PyMem_Calloc, PyMem_Free
from libc.math cimport INFINITY, fabs, sqrt
from libc.stdint cimport int64_t

from mbsim.model.contact.sdf_kernels cimport interpolate_grid

cdef double TINY = 1e-12  # m: below this two centres coincide and a normal is picked by convention
cdef double PARALLEL = 1e-6  # sin of the angle below which two box edges count as parallel
cdef double EPS_REL = 1e-6  # manifold points closer than this (relative to the face size) are one point
cdef double LEVEL = 1e-3  # manifold points within this depth (relative to the face size) are equally deep
# mesh features below this number shape a's sample points, above it shape b's (narrowphase.MAX_FEATURE / 2)
HALF_FEATURE = 2048
cdef int64_t _HALF = HALF_FEATURE



# ----------------------------------------------------------------------------- helpers


cdef inline double _sign(double x) noexcept nogil:
    # +1 at zero, so that a tie picks a side instead of none
    return 1.0 if x >= 0.0 else -1.0


cdef inline double _clip(double x, double lo, double hi) noexcept nogil:
    # numpy's clip: min(max(x, lo), hi)
    if x < lo:
        x = lo
    if x > hi:
        x = hi
    return x


cdef inline double _dot(const double* a, const double* b, int d) noexcept nogil:
    cdef double s = 0.0
    cdef int i
    for i in range(d):
        s += a[i] * b[i]
    return s


cdef inline double _cross2(double ax, double ay, double bx, double by) noexcept nogil:
    return ax * by - ay * bx


cdef inline void _column(const double* R, int d, int j, double* out) noexcept nogil:
    cdef int i
    for i in range(d):
        out[i] = R[i * d + j]


cdef inline void _rotate(const double* R, int d, const double* v, double* out) noexcept nogil:
    # out = R v
    cdef int i, j
    for i in range(d):
        out[i] = 0.0
        for j in range(d):
            out[i] += R[i * d + j] * v[j]


cdef inline void _unrotate(const double* R, int d, const double* v, double* out) noexcept nogil:
    # out = R^T v
    cdef int i, j
    for i in range(d):
        out[i] = 0.0
        for j in range(d):
            out[i] += R[j * d + i] * v[j]


cdef inline void _put(Out* out, Py_ssize_t k, int d, const double* pa, const double* pb, const double* n,
                      double gap, int64_t feature) noexcept nogil:
    cdef int i
    for i in range(d):
        out.point_a[k * d + i] = pa[i]
        out.point_b[k * d + i] = pb[i]
        out.normal[k * d + i] = n[i]
    out.gap[k] = gap
    out.feature[k] = feature


# Closest points of spheres (ca, ra) and (cb, rb): point_a, point_b, normal a -> b; returns the gap.
cdef inline double _spheres(const double* ca, double ra, const double* cb, double rb, int d,
                            double* pa, double* pb, double* n) noexcept nogil:
    cdef double dist = 0.0
    cdef int i
    for i in range(d):
        n[i] = cb[i] - ca[i]
        dist += n[i] * n[i]
    dist = sqrt(dist)
    for i in range(d):
        if dist > TINY:
            n[i] /= dist
        else:  # coincident centres: push along +z (+y in 2D) by convention
            n[i] = 1.0 if i == d - 1 else 0.0
        pa[i] = ca[i] + n[i] * ra
        pb[i] = cb[i] - n[i] * rb
    return dist - ra - rb


# Parameters (s, t) of the closest points ca + s ua, cb + t ub of two segments, |s| <= ha, |t| <= hb,
# unit directions (Ericson §5.1.9, with centred parameters).
cdef inline void _segments(const double* ca, const double* ua, double ha, const double* cb, const double* ub,
                           double hb, double* s_out, double* t_out) noexcept nogil:
    cdef double r[3]
    cdef int i
    for i in range(3):
        r[i] = ca[i] - cb[i]
    cdef double b = _dot(ua, ub, 3)
    cdef double c = _dot(ua, r, 3)
    cdef double f = _dot(ub, r, 3)
    cdef double denom = 1.0 - b * b
    cdef double s = _clip((b * f - c) / denom, -ha, ha) if denom > 1e-12 else 0.0
    cdef double t = f + s * b
    cdef double t_clamped = _clip(t, -hb, hb)
    if t != t_clamped:
        s = _clip(t_clamped * b - c, -ha, ha)
    s_out[0] = s
    t_out[0] = t_clamped


# ----------------------------------------------------------------------------- half-spaces


# Plane (line) a against sphere, circle or point b: one point below the centre.
cdef Py_ssize_t halfspace_sphere(const double* pos_a, const double* rot_a, const double* param_a,
                                 const double* pos_b, const double* rot_b, const double* param_b,
                                 int d, double margin, Out* out, const MeshShape* mesh_a,
                                 const MeshShape* mesh_b) noexcept nogil:
    cdef double n[3]
    cdef double rel[3]
    cdef double pa[3]
    cdef double pb[3]
    cdef double r = param_b[0]
    cdef int i
    _column(rot_a, d, d - 1, n)
    for i in range(d):
        rel[i] = pos_b[i] - pos_a[i]
    cdef double height = _dot(n, rel, d)
    if not (height - r < margin):
        return 0
    for i in range(d):
        pb[i] = pos_b[i] - n[i] * r
        pa[i] = pos_b[i] - n[i] * height
    _put(out, 0, d, pa, pb, n, height - r, 0)
    return 1


# Plane (line) a against box (rectangle) b: the lowest 4 (2) corners with gap < margin, corner k
# (signs of the half extents, first axis most significant: -1 for a 0 bit) as the feature.
cdef Py_ssize_t halfspace_box(const double* pos_a, const double* rot_a, const double* param_a,
                              const double* pos_b, const double* rot_b, const double* param_b,
                              int d, double margin, Out* out, const MeshShape* mesh_a,
                              const MeshShape* mesh_b) noexcept nogil:
    cdef double n[3]
    cdef double local[3]
    cdef double corner[8][3]
    cdef double height[8]
    cdef bint low[8]
    cdef double pa[3]
    cdef int ncorner = 1 << d
    cdef int cap = 4 if d == 3 else 2
    cdef int k, i, j, best
    cdef Py_ssize_t count = 0
    _column(rot_a, d, d - 1, n)
    # corners and their heights over the plane
    for k in range(ncorner):
        for i in range(d):
            local[i] = param_b[i] if (k >> (d - 1 - i)) & 1 else -param_b[i]
        _rotate(rot_b, d, local, corner[k])
        height[k] = 0.0
        for i in range(d):
            corner[k][i] += pos_b[i]
            height[k] += (corner[k][i] - pos_a[i]) * n[i]
        low[k] = False
    # the cap lowest corners (ties to the lower corner number)
    for j in range(cap):
        best = -1
        for k in range(ncorner):
            if not low[k] and (best < 0 or height[k] < height[best]):
                best = k
        low[best] = True
    for k in range(ncorner):
        if low[k] and height[k] < margin:
            for i in range(d):
                pa[i] = corner[k][i] - n[i] * height[k]
            _put(out, count, d, pa, corner[k], n, height[k], k)
            count += 1
    return count


# Plane a against capsule b: both end spheres (features 0 and 1), so that a lying capsule rests on two.
cdef Py_ssize_t halfspace_capsule(const double* pos_a, const double* rot_a, const double* param_a,
                                  const double* pos_b, const double* rot_b, const double* param_b,
                                  int d, double margin, Out* out, const MeshShape* mesh_a,
                                  const MeshShape* mesh_b) noexcept nogil:
    cdef double end[3]
    cdef Out sub
    cdef Py_ssize_t count = 0
    cdef int feature, i
    cdef double sign
    for feature in range(2):
        sign = 1.0 if feature == 0 else -1.0
        for i in range(3):
            end[i] = pos_b[i] + sign * rot_b[i * 3 + 2] * param_b[1]
        sub.point_a = out.point_a + 3 * count
        sub.point_b = out.point_b + 3 * count
        sub.normal = out.normal + 3 * count
        sub.gap = out.gap + count
        sub.feature = out.feature + count
        if halfspace_sphere(pos_a, rot_a, param_a, end, NULL, param_b, 3, margin, &sub, NULL, NULL):
            sub.feature[0] = feature
            count += 1
    return count


# Plane a against cylinder b, per cap: four rim points (at the cap's local +-x, +-y) when the cap
# lies flat within the margin (r sin(tilt) <= margin/2: all its rim points are within the margin of
# each other), so that a standing cylinder rests on a polygon; otherwise the lowest rim point.
# Features: cap * 5 + (0..3 the fixed rim points, 4 the lowest one).
cdef Py_ssize_t halfspace_cylinder(const double* pos_a, const double* rot_a, const double* param_a,
                                   const double* pos_b, const double* rot_b, const double* param_b,
                                   int d, double margin, Out* out, const MeshShape* mesh_a,
                                   const MeshShape* mesh_b) noexcept nogil:
    cdef double n[3]
    cdef double u[3]
    cdef double tilt[3]
    cdef double direction[5][3]
    cdef double centre[3]
    cdef double pa[3]
    cdef double pb[3]
    cdef double r = param_b[0]
    cdef double half = param_b[1]
    cdef double nu, sin_tilt, sign, height
    cdef int i, k, cap
    cdef Py_ssize_t count = 0
    _column(rot_a, 3, 2, n)
    _column(rot_b, 3, 2, u)
    # n's part in the cap plane: |tilt| = sin(tilt angle); the lowest rim direction is against it
    nu = _dot(n, u, 3)
    for i in range(3):
        tilt[i] = n[i] - u[i] * nu
    sin_tilt = sqrt(_dot(tilt, tilt, 3))
    cdef bint flat = r * sin_tilt <= 0.5 * margin + 1e-12 * r
    for i in range(3):
        direction[0][i] = rot_b[i * 3]
        direction[1][i] = rot_b[i * 3 + 1]
        direction[2][i] = -rot_b[i * 3]
        direction[3][i] = -rot_b[i * 3 + 1]
        direction[4][i] = -tilt[i] / (sin_tilt if sin_tilt > TINY else TINY)
    for cap in range(2):
        sign = 1.0 if cap == 0 else -1.0
        for i in range(3):
            centre[i] = pos_b[i] + sign * u[i] * half
        for k in range(5):
            if (k < 4) != flat:
                continue
            height = 0.0
            for i in range(3):
                pb[i] = centre[i] + direction[k][i] * r
                height += n[i] * (pb[i] - pos_a[i])
            if not (height < margin):
                continue
            for i in range(3):
                pa[i] = pb[i] - n[i] * height
            _put(out, count, 3, pa, pb, n, height, 5 * cap + k)
            count += 1
    return count


# ----------------------------------------------------------------------------- spheres and points


# Two spheres (circles), either of which may be a point (radius zero).
cdef Py_ssize_t sphere_sphere(const double* pos_a, const double* rot_a, const double* param_a,
                              const double* pos_b, const double* rot_b, const double* param_b,
                              int d, double margin, Out* out, const MeshShape* mesh_a,
                              const MeshShape* mesh_b) noexcept nogil:
    cdef double pa[3]
    cdef double pb[3]
    cdef double n[3]
    cdef double gap = _spheres(pos_a, param_a[0], pos_b, param_b[0], d, pa, pb, n)
    if not (gap < margin):
        return 0
    _put(out, 0, d, pa, pb, n, gap, 0)
    return 1


# Box (rectangle) a against sphere, circle or point b. Outside the box: the closest point of the box
# (clamped centre); the feature is the region (below, within or above the box along each axis: 3^d
# codes). Centre inside: pushed out through the nearest face (feature 27 + 2 axis + side).
cdef Py_ssize_t box_sphere(const double* pos_a, const double* rot_a, const double* param_a,
                           const double* pos_b, const double* rot_b, const double* param_b,
                           int d, double margin, Out* out, const MeshShape* mesh_a,
                           const MeshShape* mesh_b) noexcept nogil:
    cdef double rel[3]
    cdef double local[3]
    cdef double clamped[3]
    cdef double diff[3]
    cdef double n_local[3]
    cdef double p_local[3]
    cdef double normal[3]
    cdef double pa[3]
    cdef double pb[3]
    cdef double r = param_b[0]
    cdef double dist = 0.0
    cdef double depth, best_depth = INFINITY, side, gap
    cdef int i, k = 0
    cdef int64_t code = 0, power = 1, feature
    for i in range(d):
        rel[i] = pos_b[i] - pos_a[i]
    _unrotate(rot_a, d, rel, local)
    for i in range(d):
        clamped[i] = _clip(local[i], -param_a[i], param_a[i])
        diff[i] = local[i] - clamped[i]
        dist += diff[i] * diff[i]
        # the nearest face (first of equals, as numpy's argmin)
        depth = param_a[i] - fabs(local[i])
        if i == 0 or depth < best_depth:
            best_depth = depth
            k = i
        code += power * ((local[i] >= -param_a[i]) + (local[i] > param_a[i]))
        power *= 3
    dist = sqrt(dist)
    if dist > TINY:
        for i in range(d):
            n_local[i] = diff[i] / dist
            p_local[i] = clamped[i]
        gap = dist - r
        feature = code
    else:
        side = _sign(local[k])
        for i in range(d):
            n_local[i] = 0.0
            p_local[i] = local[i]
        n_local[k] = side
        p_local[k] = side * param_a[k]
        gap = -best_depth - r
        feature = 27 + 2 * k + (side > 0)
    if not (gap < margin):
        return 0
    _rotate(rot_a, d, n_local, normal)
    _rotate(rot_a, d, p_local, pa)
    for i in range(d):
        pa[i] += pos_a[i]
        pb[i] = pos_b[i] - normal[i] * r
    _put(out, 0, d, pa, pb, normal, gap, feature)
    return 1


# Capsule a against sphere or point b: the closest point of the axis segment as a sphere.
cdef Py_ssize_t capsule_sphere(const double* pos_a, const double* rot_a, const double* param_a,
                               const double* pos_b, const double* rot_b, const double* param_b,
                               int d, double margin, Out* out, const MeshShape* mesh_a,
                               const MeshShape* mesh_b) noexcept nogil:
    cdef double u[3]
    cdef double rel[3]
    cdef double c[3]
    cdef double pa[3]
    cdef double pb[3]
    cdef double n[3]
    cdef int i
    _column(rot_a, 3, 2, u)
    for i in range(3):
        rel[i] = pos_b[i] - pos_a[i]
    cdef double t = _clip(_dot(rel, u, 3), -param_a[1], param_a[1])
    for i in range(3):
        c[i] = pos_a[i] + u[i] * t
    cdef double gap = _spheres(c, param_a[0], pos_b, param_b[0], 3, pa, pb, n)
    if not (gap < margin):
        return 0
    _put(out, 0, 3, pa, pb, n, gap, 0)
    return 1


# Two capsules: the closest points of the axis segments (feature 0); when the axes are so nearly
# parallel that the ends of their overlap are within the margin of each other (sin(angle) * overlap
# <= margin), the two ends of the overlap instead (features 1, 2), so that a capsule lying along
# another does not rock on one point.
cdef Py_ssize_t capsule_capsule(const double* pos_a, const double* rot_a, const double* param_a,
                                const double* pos_b, const double* rot_b, const double* param_b,
                                int d, double margin, Out* out, const MeshShape* mesh_a,
                                const MeshShape* mesh_b) noexcept nogil:
    cdef double ua[3]
    cdef double ub[3]
    cdef double rel[3]
    cdef double ca[3]
    cdef double cb[3]
    cdef double pa[3]
    cdef double pb[3]
    cdef double n[3]
    cdef double ha = param_a[1], hb = param_b[1], ra = param_a[0], rb = param_b[0]
    cdef double s, t, gap, s_end
    cdef int i, feature
    cdef Py_ssize_t count = 0
    _column(rot_a, 3, 2, ua)
    _column(rot_b, 3, 2, ub)
    for i in range(3):
        rel[i] = pos_b[i] - pos_a[i]
    # overlap [lo, hi] of b's axis projected on a's axis
    cdef double cos = _dot(ua, ub, 3)
    cdef double sin = sqrt(max(0.0, 1.0 - cos * cos))
    cdef double centre = _dot(rel, ua, 3)
    cdef double reach = hb * fabs(cos)
    cdef double lo = max(centre - reach, -ha)
    cdef double hi = min(centre + reach, ha)
    cdef bint two = (hi - lo > TINY) and (sin * (hi - lo) <= max(margin, 0.0) + 1e-12 * ha)
    if not two:
        _segments(pos_a, ua, ha, pos_b, ub, hb, &s, &t)
        for i in range(3):
            ca[i] = pos_a[i] + ua[i] * s
            cb[i] = pos_b[i] + ub[i] * t
        gap = _spheres(ca, ra, cb, rb, 3, pa, pb, n)
        if not (gap < margin):
            return 0
        _put(out, 0, 3, pa, pb, n, gap, 0)
        return 1
    for feature in range(1, 3):
        s_end = lo if feature == 1 else hi
        for i in range(3):
            ca[i] = pos_a[i] + ua[i] * s_end
            rel[i] = ca[i] - pos_b[i]
        t = _clip(_dot(rel, ub, 3), -hb, hb)
        for i in range(3):
            cb[i] = pos_b[i] + ub[i] * t
        gap = _spheres(ca, ra, cb, rb, 3, pa, pb, n)
        if gap < margin:
            _put(out, count, 3, pa, pb, n, gap, feature)
            count += 1
    return count


# Cylinder a against sphere or point b: the closest point of the solid cylinder to the centre, or,
# for a centre inside, the exit through the nearer of side and cap.
# Features: 0 side, 1 top cap, 2 bottom cap, 3 top rim, 4 bottom rim (by region).
cdef Py_ssize_t cylinder_sphere(const double* pos_a, const double* rot_a, const double* param_a,
                                const double* pos_b, const double* rot_b, const double* param_b,
                                int d, double margin, Out* out, const MeshShape* mesh_a,
                                const MeshShape* mesh_b) noexcept nogil:
    cdef double rel[3]
    cdef double local[3]
    cdef double closest[3]
    cdef double n_local[3]
    cdef double p_local[3]
    cdef double normal[3]
    cdef double pa[3]
    cdef double pb[3]
    cdef double r = param_a[0], half = param_a[1], rs = param_b[0]
    cdef double dx, dy, dist, gap
    cdef int i
    cdef int64_t feature
    for i in range(3):
        rel[i] = pos_b[i] - pos_a[i]
    _unrotate(rot_a, 3, rel, local)
    cdef double rho = sqrt(local[0] * local[0] + local[1] * local[1])
    cdef double z = local[2]
    # unit radial direction (local x when on the axis)
    dx = local[0] / rho if rho > TINY else 1.0
    dy = local[1] / rho if rho > TINY else 0.0
    closest[0] = dx * min(rho, r)
    closest[1] = dy * min(rho, r)
    closest[2] = _clip(z, -half, half)
    dist = 0.0
    for i in range(3):
        dist += (local[i] - closest[i]) * (local[i] - closest[i])
    dist = sqrt(dist)
    cdef double side_depth = r - rho, cap_depth = half - fabs(z)
    cdef bint through_side = side_depth < cap_depth
    cdef double zs = _sign(z)
    cdef int64_t cap_id = 1 if zs > 0 else 2
    if dist > TINY:
        for i in range(3):
            n_local[i] = (local[i] - closest[i]) / dist
            p_local[i] = closest[i]
        gap = dist - rs
        if fabs(z) > half:
            feature = cap_id + 2 if rho > r else cap_id
        else:
            feature = 0
    elif through_side:
        n_local[0] = dx
        n_local[1] = dy
        n_local[2] = 0.0
        p_local[0] = dx * r
        p_local[1] = dy * r
        p_local[2] = z
        gap = -side_depth - rs
        feature = 0
    else:
        n_local[0] = 0.0
        n_local[1] = 0.0
        n_local[2] = zs
        p_local[0] = local[0]
        p_local[1] = local[1]
        p_local[2] = zs * half
        gap = -cap_depth - rs
        feature = cap_id
    if not (gap < margin):
        return 0
    _rotate(rot_a, 3, n_local, normal)
    _rotate(rot_a, 3, p_local, pa)
    for i in range(3):
        pa[i] += pos_a[i]
        pb[i] = pos_b[i] - normal[i] * rs
    _put(out, 0, 3, pa, pb, normal, gap, feature)
    return 1


# ----------------------------------------------------------------------------- boxes and rectangles


cdef inline bint _prefer_second(double first, double second, double scale) noexcept nogil:
    # take the second axis only when it separates clearly more (stable choice, Box2D's k_tol)
    return second > first + 0.05 * fabs(first) + 1e-5 * scale


# At most ``keep`` (2 or 4) of the K candidate points (u, v) in the contact plane, spanning the
# largest area (Bullet's reduceContacts): the deepest, then the farthest from it, then the farthest
# from that line on either side, then the farthest on the other side. Points adding less than
# EPS_REL * scale are dropped; points within LEVEL * scale of the deepest count as equally deep, the
# first then being the farthest along a fixed direction of the face (a stable choice under the
# jitter of resting contact). Sets chosen[c]; ties go to the lower candidate, as numpy's argmax.
cdef void _reduce(const double* u, const double* v, const double* gap, const bint* valid, int K,
                  double scale, int keep, bint* chosen) noexcept nogil:
    cdef double eps = EPS_REL * scale
    cdef double deepest = INFINITY
    cdef double key, best, x, length, side, eu, ev
    cdef int c, first = 0, second = 0, third = 0, fourth = 0
    cdef bint any_valid = False
    cdef double far2[24]
    cdef double cross[24]
    for c in range(K):
        chosen[c] = False
        if valid[c]:
            any_valid = True
            if gap[c] < deepest:
                deepest = gap[c]
    if not any_valid:
        return
    # the first: among the (equally) deepest, the farthest along (0.8, 0.6)
    best = -INFINITY
    for c in range(K):
        key = u[c] * 0.8 + v[c] * 0.6 if valid[c] and gap[c] <= deepest + LEVEL * scale else -INFINITY
        if c == 0 or key > best:
            best = key
            first = c
    chosen[first] = True
    # the second: the farthest from the first
    for c in range(K):
        far2[c] = (u[c] - u[first]) ** 2 + (v[c] - v[first]) ** 2 if valid[c] else -1.0
        if far2[c] > far2[second]:
            second = c
    if not (far2[second] > eps * eps):
        return
    chosen[second] = True
    if keep <= 2:
        return
    # the third: the farthest from the line first-second, on either side
    eu = u[second] - u[first]
    ev = v[second] - v[first]
    length = sqrt(eu * eu + ev * ev)
    for c in range(K):
        cross[c] = _cross2(eu, ev, u[c] - u[first], v[c] - v[first])
        x = fabs(cross[c]) if valid[c] else -1.0
        if c == 0 or x > best:
            best = x
            third = c
    if not (fabs(cross[third]) > eps * length):
        return
    chosen[third] = True
    # the fourth: the farthest on the other side
    side = _sign(cross[third])
    for c in range(K):
        x = -side * cross[c] if valid[c] else -1.0
        if c == 0 or x > best:
            best = x
            fourth = c
    if best > eps * length:
        chosen[fourth] = True


# face corners in cyclic order: (SQUARE_U[c], SQUARE_V[c]) times the half extents
cdef double SQUARE_U[4]
cdef double SQUARE_V[4]
SQUARE_U[:] = [1.0, -1.0, -1.0, 1.0]
SQUARE_V[:] = [1.0, 1.0, -1.0, -1.0]


# Face contact of boxes: reference face normal to axis k of the reference box, incident face of the
# other box clipped to it. The overlap of the two faces (the incident one projected along the
# normal) is the convex polygon whose corners are among: incident corners inside the reference face
# (candidates 0-3), reference corners inside the projected incident face (4-7), and crossings of
# their edges (8 + 4 incident edge + reference edge). Each corner x on the reference face pairs with
# the point x + gap n of the incident face plane; at most four are kept (_reduce). Writes point_a,
# point_b (ref, inc; swapped and the normal negated when ``flip``), feature base + (incident face id
# 0-5) * 24 + candidate.
cdef Py_ssize_t _box_face(const double* c_ref, const double* R_ref, const double* h_ref,
                          const double* c_inc, const double* R_inc, const double* h_inc,
                          int k, double margin, bint flip, int64_t base, Out* out) noexcept nogil:
    cdef double axis[3]
    cdef double normal[3]
    cdef double U[3]
    cdef double V[3]
    cdef double centre[3]
    cdef double along[3]
    cdef double n_inc[3]
    cdef double f_inc[3]
    cdef double P[3]
    cdef double Q[3]
    cdef double rel[3]
    cdef double inc[4][2]
    cdef double ref[4][2]
    cdef double edge[4][2]
    cdef double ref_edge[4][2]
    cdef double u[24]
    cdef double v[24]
    cdef double gap[24]
    cdef bint valid[24]
    cdef bint chosen[24]
    cdef double on_ref[3]
    cdef double p_inc[3]
    cdef double minus[3]
    cdef double diff[3]
    cdef double hu, hv, scale, tol, orient, area, cr, denom, wx, wy, s, t, n_dot, sj, thr
    cdef int i, j, c, q, k1 = (k + 1) % 3, k2 = (k + 2) % 3, j1, j2
    cdef Py_ssize_t count = 0
    # the reference face: normal towards the incident box, its centre and in-plane axes
    _column(R_ref, 3, k, axis)
    for i in range(3):
        rel[i] = c_inc[i] - c_ref[i]
    sj = _sign(_dot(axis, rel, 3))
    for i in range(3):
        normal[i] = axis[i] * sj
        centre[i] = c_ref[i] + normal[i] * h_ref[k]
    _column(R_ref, 3, k1, U)
    _column(R_ref, 3, k2, V)
    hu = h_ref[k1]
    hv = h_ref[k2]
    # incident face: the face of the other box most anti-parallel to the normal
    _unrotate(R_inc, 3, normal, along)
    j = 0
    for i in range(1, 3):
        if fabs(along[i]) > fabs(along[j]):
            j = i
    sj = -_sign(along[j])
    j1 = (j + 1) % 3
    j2 = (j + 2) % 3
    for i in range(3):
        n_inc[i] = R_inc[i * 3 + j] * sj
        f_inc[i] = c_inc[i] + n_inc[i] * h_inc[j]
        P[i] = R_inc[i * 3 + j1] * h_inc[j1]
        Q[i] = R_inc[i * 3 + j2] * h_inc[j2]
    # both faces' corners in the reference face's plane
    for c in range(4):
        for i in range(3):
            rel[i] = f_inc[i] + SQUARE_U[c] * P[i] + SQUARE_V[c] * Q[i] - centre[i]
        inc[c][0] = _dot(rel, U, 3)
        inc[c][1] = _dot(rel, V, 3)
        ref[c][0] = SQUARE_U[c] * hu
        ref[c][1] = SQUARE_V[c] * hv
    scale = max(hu, hv)
    tol = 1e-9 * scale
    area = 0.0
    for c in range(4):
        q = (c + 1) % 4
        edge[c][0] = inc[q][0] - inc[c][0]
        edge[c][1] = inc[q][1] - inc[c][1]
        ref_edge[c][0] = ref[q][0] - ref[c][0]
        ref_edge[c][1] = ref[q][1] - ref[c][1]
        area += _cross2(inc[c][0], inc[c][1], inc[q][0], inc[q][1])
    orient = _sign(area)
    # incident corners inside the reference face
    for c in range(4):
        u[c] = inc[c][0]
        v[c] = inc[c][1]
        valid[c] = fabs(inc[c][0]) <= hu + tol and fabs(inc[c][1]) <= hv + tol
    # reference corners inside the incident quad (convex; its orientation from its signed area)
    for q in range(4):
        u[4 + q] = ref[q][0]
        v[4 + q] = ref[q][1]
        valid[4 + q] = True
        for c in range(4):
            cr = _cross2(edge[c][0], edge[c][1], ref[q][0] - inc[c][0], ref[q][1] - inc[c][1]) * orient
            if not (cr >= -(tol * scale)):
                valid[4 + q] = False
    # crossings of incident edges (p + s e) with reference edges (q + t f)
    thr = TINY * scale * scale
    for c in range(4):
        for q in range(4):
            i = 8 + 4 * c + q
            denom = _cross2(edge[c][0], edge[c][1], ref_edge[q][0], ref_edge[q][1])
            if not (fabs(denom) > thr):
                valid[i] = False
                u[i] = inc[c][0]
                v[i] = inc[c][1]
                continue
            wx = ref[q][0] - inc[c][0]
            wy = ref[q][1] - inc[c][1]
            s = _cross2(wx, wy, ref_edge[q][0], ref_edge[q][1]) / denom
            t = _cross2(wx, wy, edge[c][0], edge[c][1]) / denom
            valid[i] = s >= 0 and s <= 1 and t >= 0 and t <= 1
            u[i] = inc[c][0] + s * edge[c][0]
            v[i] = inc[c][1] + s * edge[c][1]
    # gap of each candidate: from the reference face along the normal to the incident face plane
    n_dot = _dot(n_inc, normal, 3)
    for c in range(24):
        for i in range(3):
            diff[i] = f_inc[i] - (centre[i] + u[c] * U[i] + v[c] * V[i])
        gap[c] = _dot(n_inc, diff, 3) / n_dot
        valid[c] = valid[c] and gap[c] < margin
    _reduce(u, v, gap, valid, 24, scale, 4, chosen)
    for i in range(3):
        minus[i] = -normal[i]
    for c in range(24):
        if not chosen[c]:
            continue
        for i in range(3):
            on_ref[i] = centre[i] + u[c] * U[i] + v[c] * V[i]
            p_inc[i] = on_ref[i] + normal[i] * gap[c]
        if flip:
            _put(out, count, 3, p_inc, on_ref, minus, gap[c], base + (2 * j + (sj > 0)) * 24 + c)
        else:
            _put(out, count, 3, on_ref, p_inc, normal, gap[c], base + (2 * j + (sj > 0)) * 24 + c)
        count += 1
    return count


# Edge-edge contact of boxes on the edge axis A_i x B_j (axis = 3 i + j): the closest points of the
# edge of a farthest along the normal and the edge of b farthest against it.
cdef Py_ssize_t _box_edges(const double* pos_a, const double* A, const double* ha,
                           const double* pos_b, const double* B, const double* hb,
                           int axis, double margin, Out* out) noexcept nogil:
    cdef int i = axis // 3, j = axis % 3, c
    cdef double Ai[3]
    cdef double Bj[3]
    cdef double normal[3]
    cdef double rel[3]
    cdef double sa[3]
    cdef double sb[3]
    cdef double ea[3]
    cdef double eb[3]
    cdef double pa[3]
    cdef double pb[3]
    cdef double local[3]
    cdef double length, sign, s, t, gap
    _column(A, 3, i, Ai)
    _column(B, 3, j, Bj)
    normal[0] = Ai[1] * Bj[2] - Ai[2] * Bj[1]
    normal[1] = Ai[2] * Bj[0] - Ai[0] * Bj[2]
    normal[2] = Ai[0] * Bj[1] - Ai[1] * Bj[0]
    length = sqrt(_dot(normal, normal, 3))
    for c in range(3):
        normal[c] /= length
        rel[c] = pos_b[c] - pos_a[c]
    sign = _sign(_dot(normal, rel, 3))
    for c in range(3):
        normal[c] *= sign
    # the edges: a's corner signs along the normal, b's against it, free along the edge axis
    _unrotate(A, 3, normal, sa)
    _unrotate(B, 3, normal, sb)
    for c in range(3):
        sa[c] = _sign(sa[c])
        sb[c] = -_sign(sb[c])
    sa[i] = 0.0
    sb[j] = 0.0
    for c in range(3):
        local[c] = sa[c] * ha[c]
    _rotate(A, 3, local, ea)
    for c in range(3):
        local[c] = sb[c] * hb[c]
    _rotate(B, 3, local, eb)
    for c in range(3):
        ea[c] += pos_a[c]
        eb[c] += pos_b[c]
    _segments(ea, Ai, ha[i], eb, Bj, hb[j], &s, &t)
    for c in range(3):
        pa[c] = ea[c] + Ai[c] * s
        pb[c] = eb[c] + Bj[c] * t
        rel[c] = pb[c] - pa[c]
    gap = _dot(rel, normal, 3)
    if not (gap < margin):
        return 0
    cdef int64_t edge_a = 2 * (sa[(i + 1) % 3] > 0) + (sa[(i + 2) % 3] > 0)
    cdef int64_t edge_b = 2 * (sb[(j + 1) % 3] > 0) + (sb[(j + 2) % 3] > 0)
    _put(out, 0, 3, pa, pb, normal, gap, 864 + (axis * 4 + edge_a) * 4 + edge_b)
    return 1


# Two boxes: separating-axis test over the 15 axes (3 + 3 face normals, 9 edge crossings; Ericson
# §4.4.1), then, on the axis of least penetration (faces preferred unless an edge axis separates
# clearly more): a face axis gives the clipped face manifold (at most 4 points), an edge axis the
# closest points of the two edges. Features: face axis (0-5) * 144 + face contact feature; edge
# axes 864 + ((i*3 + j)*4 + edge of a)*4 + edge of b.
cdef Py_ssize_t box_box(const double* pos_a, const double* rot_a, const double* param_a,
                        const double* pos_b, const double* rot_b, const double* param_b,
                        int d, double margin, Out* out, const MeshShape* mesh_a,
                        const MeshShape* mesh_b) noexcept nogil:
    cdef double t[3]
    cdef double ta[3]
    cdef double tb[3]
    cdef double C[3][3]
    cdef double sep_a[3]
    cdef double sep_b[3]
    cdef double L[3]
    cdef double e[3]
    cdef double LC, norm, r_a, r_b, t_l, sep, edge_sep = -INFINITY, face_sep, best_a, best_b, scale
    cdef int i, j, c, axis_a = 0, axis_b = 0, face_axis, edge_axis = 0
    cdef const double* ha = param_a
    cdef const double* hb = param_b
    for c in range(3):
        t[c] = pos_b[c] - pos_a[c]
    _unrotate(rot_a, 3, t, ta)
    # C[i][j] = A_i . B_j: b's axes in a's frame
    for i in range(3):
        for j in range(3):
            C[i][j] = rot_a[i] * rot_b[j] + rot_a[3 + i] * rot_b[3 + j] + rot_a[6 + i] * rot_b[6 + j]
    for j in range(3):
        tb[j] = C[0][j] * ta[0] + C[1][j] * ta[1] + C[2][j] * ta[2]
    # face axes of a, then of b: separation along each
    for i in range(3):
        sep_a[i] = fabs(ta[i]) - ha[i] - (fabs(C[i][0]) * hb[0] + fabs(C[i][1]) * hb[1] + fabs(C[i][2]) * hb[2])
        sep_b[i] = fabs(tb[i]) - hb[i] - (fabs(C[0][i]) * ha[0] + fabs(C[1][i]) * ha[1] + fabs(C[2][i]) * ha[2])
        if sep_a[i] > sep_a[axis_a]:
            axis_a = i
        if sep_b[i] > sep_b[axis_b]:
            axis_b = i
    # edge axes L = A_i x B_j in a's frame (row 3 i + j); near-parallel edges give no axis
    for i in range(3):
        for j in range(3):
            e[0] = C[0][j]
            e[1] = C[1][j]
            e[2] = C[2][j]
            L[0] = e[2] if i == 1 else (-e[1] if i == 2 else 0.0)
            L[1] = -e[2] if i == 0 else (e[0] if i == 2 else 0.0)
            L[2] = e[1] if i == 0 else (-e[0] if i == 1 else 0.0)
            norm = sqrt(_dot(L, L, 3))
            if not (norm > PARALLEL):
                continue
            r_a = fabs(L[0]) * ha[0] + fabs(L[1]) * ha[1] + fabs(L[2]) * ha[2]
            r_b = 0.0
            for c in range(3):
                LC = L[0] * C[0][c] + L[1] * C[1][c] + L[2] * C[2][c]
                r_b += fabs(LC) * hb[c]
            t_l = _dot(L, ta, 3)
            sep = (fabs(t_l) - r_a - r_b) / norm
            if sep > edge_sep:
                edge_sep = sep
                edge_axis = 3 * i + j
    scale = (ha[0] + ha[1] + ha[2] + hb[0] + hb[1] + hb[2]) / 6.0
    best_a = sep_a[axis_a]
    best_b = sep_b[axis_b]
    if _prefer_second(best_a, best_b, scale):
        face_sep = best_b
        face_axis = 3 + axis_b
    else:
        face_sep = best_a
        face_axis = axis_a
    if _prefer_second(face_sep, edge_sep, scale):
        if not (edge_sep < margin):
            return 0
        return _box_edges(pos_a, rot_a, ha, pos_b, rot_b, hb, edge_axis, margin, out)
    if not (face_sep < margin):
        return 0
    if face_axis < 3:
        return _box_face(pos_a, rot_a, ha, pos_b, rot_b, hb, face_axis, margin, False, face_axis * 144, out)
    return _box_face(pos_b, rot_b, hb, pos_a, rot_a, ha, face_axis - 3, margin, True, face_axis * 144, out)


# Face contact of rectangles: reference edge normal to axis k, incident edge clipped to it
# (candidates: the incident corners 0, 1 inside it, the reference corners 2, 3 over the incident
# edge); at most two points are kept. Feature base + (incident edge id 0-3) * 4 + candidate.
cdef Py_ssize_t _rect_face(const double* c_ref, const double* R_ref, const double* h_ref,
                           const double* c_inc, const double* R_inc, const double* h_inc,
                           int k, double margin, bint flip, int64_t base, Out* out) noexcept nogil:
    cdef double axis[2]
    cdef double normal[2]
    cdef double minus[2]
    cdef double T[2]
    cdef double centre[2]
    cdef double along[2]
    cdef double n_inc[2]
    cdef double f_inc[2]
    cdef double P[2]
    cdef double rel[2]
    cdef double on_ref[2]
    cdef double p_inc[2]
    cdef double s[4]
    cdef double zero[4]
    cdef double gap[4]
    cdef bint valid[4]
    cdef bint chosen[4]
    cdef double ht, sj, tol, lo, hi, n_dot
    cdef int i, j, c
    cdef Py_ssize_t count = 0
    _column(R_ref, 2, k, axis)
    for i in range(2):
        rel[i] = c_inc[i] - c_ref[i]
    sj = _sign(_dot(axis, rel, 2))
    _column(R_ref, 2, 1 - k, T)
    ht = h_ref[1 - k]
    for i in range(2):
        normal[i] = axis[i] * sj
        minus[i] = -normal[i]
        centre[i] = c_ref[i] + normal[i] * h_ref[k]
    # incident edge: the other rectangle's edge most anti-parallel to the normal
    _unrotate(R_inc, 2, normal, along)
    j = 1 if fabs(along[1]) > fabs(along[0]) else 0
    sj = -_sign(along[j])
    for i in range(2):
        n_inc[i] = R_inc[i * 2 + j] * sj
        f_inc[i] = c_inc[i] + n_inc[i] * h_inc[j]
        P[i] = R_inc[i * 2 + 1 - j] * h_inc[1 - j]
    # candidates along the reference edge: incident ends, then reference ends
    for c in range(2):
        for i in range(2):
            rel[i] = f_inc[i] + (P[i] if c == 0 else -P[i]) - centre[i]
        s[c] = _dot(rel, T, 2)
    s[2] = ht
    s[3] = -ht
    tol = 1e-9 * ht
    lo = min(s[0], s[1])
    hi = max(s[0], s[1])
    valid[0] = fabs(s[0]) <= ht + tol
    valid[1] = fabs(s[1]) <= ht + tol
    valid[2] = s[2] >= lo - tol and s[2] <= hi + tol
    valid[3] = s[3] >= lo - tol and s[3] <= hi + tol
    n_dot = _dot(n_inc, normal, 2)
    for c in range(4):
        zero[c] = 0.0
        for i in range(2):
            rel[i] = f_inc[i] - (centre[i] + s[c] * T[i])
        gap[c] = _dot(n_inc, rel, 2) / n_dot
        valid[c] = valid[c] and gap[c] < margin
    _reduce(s, zero, gap, valid, 4, ht, 2, chosen)
    for c in range(4):
        if not chosen[c]:
            continue
        for i in range(2):
            on_ref[i] = centre[i] + s[c] * T[i]
            p_inc[i] = on_ref[i] + normal[i] * gap[c]
        if flip:
            _put(out, count, 2, p_inc, on_ref, minus, gap[c], base + (2 * j + (sj > 0)) * 4 + c)
        else:
            _put(out, count, 2, on_ref, p_inc, normal, gap[c], base + (2 * j + (sj > 0)) * 4 + c)
        count += 1
    return count


# Two rectangles: separating-axis test over the 4 edge normals; the edge of least penetration is the
# reference, the other rectangle's most anti-parallel edge is clipped to it (at most two points).
# Features: axis (0-3) * 16 + face contact feature.
cdef Py_ssize_t rectangle_rectangle(const double* pos_a, const double* rot_a, const double* param_a,
                                    const double* pos_b, const double* rot_b, const double* param_b,
                                    int d, double margin, Out* out, const MeshShape* mesh_a,
                                    const MeshShape* mesh_b) noexcept nogil:
    cdef double t[2]
    cdef double ta[2]
    cdef double tb[2]
    cdef double C[2][2]
    cdef double sep_a[2]
    cdef double sep_b[2]
    cdef double scale, face_sep
    cdef int i, j, axis_a, axis_b, face_axis
    for i in range(2):
        t[i] = pos_b[i] - pos_a[i]
    _unrotate(rot_a, 2, t, ta)
    for i in range(2):
        for j in range(2):
            C[i][j] = rot_a[i] * rot_b[j] + rot_a[2 + i] * rot_b[2 + j]
    for j in range(2):
        tb[j] = C[0][j] * ta[0] + C[1][j] * ta[1]
    for i in range(2):
        sep_a[i] = fabs(ta[i]) - param_a[i] - (fabs(C[i][0]) * param_b[0] + fabs(C[i][1]) * param_b[1])
        sep_b[i] = fabs(tb[i]) - param_b[i] - (fabs(C[0][i]) * param_a[0] + fabs(C[1][i]) * param_a[1])
    axis_a = 1 if sep_a[1] > sep_a[0] else 0
    axis_b = 1 if sep_b[1] > sep_b[0] else 0
    scale = (param_a[0] + param_a[1] + param_b[0] + param_b[1]) / 4.0
    if _prefer_second(sep_a[axis_a], sep_b[axis_b], scale):
        face_sep = sep_b[axis_b]
        face_axis = 2 + axis_b
    else:
        face_sep = sep_a[axis_a]
        face_axis = axis_a
    if not (face_sep < margin):
        return 0
    if face_axis < 2:
        return _rect_face(pos_a, rot_a, param_a, pos_b, rot_b, param_b, face_axis, margin, False, face_axis * 16, out)
    return _rect_face(pos_b, rot_b, param_b, pos_a, rot_a, param_a, face_axis - 2, margin, True, face_axis * 16, out)


# ----------------------------------------------------------------------------- meshes


# Mesh points are looked up in the other shape's signed distance field or exact distance
# (mbsim.model.contact.mesh_rigid's docstring; papers/sdf-octree-contact-dynamics.txt eqs. 5-6):
# every sample point within the margin is one row. Features below HALF_FEATURE number the sample
# points of shape a, those above the ones of shape b (vertex i: i mod HALF_FEATURE; box corner k).


# World position of vertex i of a mesh at (pos, rot).
cdef inline void _vertex(const MeshShape* mesh, Py_ssize_t i, const double* pos, const double* rot,
                         double* out) noexcept nogil:
    _rotate(rot, 3, &mesh.vertices[3 * i], out)
    out[0] += pos[0]
    out[1] += pos[1]
    out[2] += pos[2]


# A world point p in the field of the mesh at (pos, rot), less radius: returns the gap; n the unit
# outward normal (world) of the field's gradient (eq. 6), on the mesh's surface point p - d n.
cdef inline double _in_field(const MeshShape* mesh, const double* pos, const double* rot, const double* p,
                             double radius, double* n, double* on) noexcept nogil:
    cdef double rel[3]
    cdef double local[3]
    cdef double grad[3]
    cdef double ext, norm, dist
    cdef int i
    for i in range(3):
        rel[i] = p[i] - pos[i]
    _unrotate(rot, 3, rel, local)
    dist = interpolate_grid(mesh.values, mesh.n0, mesh.n1, mesh.n2, mesh.origin, 1.0 / mesh.cell, mesh.cell,
                            local[0], local[1], local[2], &grad[0], &grad[1], &grad[2], &ext)
    _rotate(rot, 3, grad, n)
    norm = max(sqrt(_dot(n, n, 3)), 1e-300)
    for i in range(3):
        n[i] /= norm
        on[i] = p[i] - dist * n[i]
    return dist - radius


# Exact signed distance of world point p to the box (pos, rot, half extents h): returned, with the
# unit outward normal n (world) and the closest surface point on. Inside: through the nearest face
# (the first of equals; +1 at a zero coordinate); outside: from the clamped point.
cdef inline double _box_distance(const double* pos, const double* rot, const double* h, const double* p,
                                 double* n, double* on) noexcept nogil:
    cdef double rel[3]
    cdef double local[3]
    cdef double q[3]
    cdef double n_local[3]
    cdef double out_len = 0.0, qmax, dist
    cdef int i, axis = 0
    for i in range(3):
        rel[i] = p[i] - pos[i]
    _unrotate(rot, 3, rel, local)
    for i in range(3):
        q[i] = fabs(local[i]) - h[i]
        if q[i] > 0.0:
            out_len += q[i] * q[i]
        if i == 0 or q[i] > q[axis]:
            axis = i
    out_len = sqrt(out_len)
    if out_len == 0.0:
        for i in range(3):
            n_local[i] = 0.0
        n_local[axis] = _sign(local[axis])
        dist = q[axis]
    else:
        for i in range(3):
            n_local[i] = (local[i] - _clip(local[i], -h[i], h[i])) / out_len
        dist = out_len
    _rotate(rot, 3, n_local, n)
    for i in range(3):
        on[i] = p[i] - dist * n[i]
    return dist


# Plane a against mesh b: every vertex within the margin of the plane (feature: the vertex).
cdef Py_ssize_t plane_mesh(const double* pos_a, const double* rot_a, const double* param_a,
                           const double* pos_b, const double* rot_b, const double* param_b,
                           int d, double margin, Out* out, const MeshShape* mesh_a,
                           const MeshShape* mesh_b) noexcept nogil:
    cdef double n[3]
    cdef double v[3]
    cdef double pa[3]
    cdef double gap
    cdef Py_ssize_t i, count = 0
    cdef int c
    _column(rot_a, 3, 2, n)
    for i in range(mesh_b.nvert):
        _vertex(mesh_b, i, pos_b, rot_b, v)
        gap = _dot(v, n, 3) - _dot(pos_a, n, 3)
        if gap < margin:
            for c in range(3):
                pa[c] = v[c] - gap * n[c]
            _put(out, count, 3, pa, v, n, gap, i % _HALF)
            count += 1
    return count


# Mesh a against sphere (point) b: the centre in a's field (feature 0).
cdef Py_ssize_t mesh_sphere(const double* pos_a, const double* rot_a, const double* param_a,
                            const double* pos_b, const double* rot_b, const double* param_b,
                            int d, double margin, Out* out, const MeshShape* mesh_a,
                            const MeshShape* mesh_b) noexcept nogil:
    cdef double n[3]
    cdef double pa[3]
    cdef double pb[3]
    cdef double radius = param_b[0]
    cdef double gap = _in_field(mesh_a, pos_a, rot_a, pos_b, radius, n, pa)
    cdef int c
    if not (gap < margin):
        return 0
    for c in range(3):
        pb[c] = pos_b[c] - radius * n[c]
    _put(out, 0, 3, pa, pb, n, gap, 0)
    return 1


# Box a against mesh b: b's vertices against the box's exact distance (features: the vertex), then
# the box's corners in b's field (features HALF_FEATURE + corner k, halfspace_box's numbering).
cdef Py_ssize_t box_mesh(const double* pos_a, const double* rot_a, const double* param_a,
                         const double* pos_b, const double* rot_b, const double* param_b,
                         int d, double margin, Out* out, const MeshShape* mesh_a,
                         const MeshShape* mesh_b) noexcept nogil:
    cdef double v[3]
    cdef double n[3]
    cdef double on[3]
    cdef double local[3]
    cdef double gap
    cdef Py_ssize_t i, count = 0
    cdef int k, c
    for i in range(mesh_b.nvert):
        _vertex(mesh_b, i, pos_b, rot_b, v)
        gap = _box_distance(pos_a, rot_a, param_a, v, n, on)
        if gap < margin:
            _put(out, count, 3, on, v, n, gap, i % _HALF)
            count += 1
    for k in range(8):
        for c in range(3):
            local[c] = param_a[c] if (k >> (2 - c)) & 1 else -param_a[c]
        _rotate(rot_a, 3, local, v)
        for c in range(3):
            v[c] += pos_a[c]
        gap = _in_field(mesh_b, pos_b, rot_b, v, 0.0, n, on)
        if gap < margin:
            for c in range(3):
                n[c] = -n[c]
            _put(out, count, 3, v, on, n, gap, _HALF + k)
            count += 1
    return count


# Two meshes: b's vertices in a's field (features: the vertex), then a's vertices in b's field
# (features HALF_FEATURE + the vertex).
cdef Py_ssize_t mesh_mesh(const double* pos_a, const double* rot_a, const double* param_a,
                          const double* pos_b, const double* rot_b, const double* param_b,
                          int d, double margin, Out* out, const MeshShape* mesh_a,
                          const MeshShape* mesh_b) noexcept nogil:
    cdef double v[3]
    cdef double n[3]
    cdef double on[3]
    cdef double gap
    cdef Py_ssize_t i, count = 0
    cdef int c
    for i in range(mesh_b.nvert):
        _vertex(mesh_b, i, pos_b, rot_b, v)
        gap = _in_field(mesh_a, pos_a, rot_a, v, 0.0, n, on)
        if gap < margin:
            _put(out, count, 3, on, v, n, gap, i % _HALF)
            count += 1
    for i in range(mesh_a.nvert):
        _vertex(mesh_a, i, pos_a, rot_a, v)
        gap = _in_field(mesh_b, pos_b, rot_b, v, 0.0, n, on)
        if gap < margin:
            for c in range(3):
                n[c] = -n[c]
            _put(out, count, 3, v, on, n, gap, _HALF + i % _HALF)
            count += 1
    return count


cdef class MeshTable:
    """The compiled form of mesh shapes: one MeshShape per entry of ``meshes`` (mesh_rigid.MeshData,
    or None for a shape that is no mesh), pointing into their arrays, which it keeps."""

    def __cinit__(self, list meshes):
        self.n = len(meshes)
        self._arrays = []
        self.shapes = <MeshShape*>PyMem_Calloc(max(self.n, 1), sizeof(MeshShape))
        if self.shapes == NULL:
            raise MemoryError()
        cdef Py_ssize_t s
        cdef int c
        cdef const double[:, ::1] vertices
        cdef const double[:, :, ::1] values
        for s, mesh in enumerate(meshes):
            if mesh is None:
                continue
            vertices = np.ascontiguousarray(mesh.vertices, dtype=np.float64).reshape(-1, 3)
            values = np.ascontiguousarray(mesh.field.values, dtype=np.float64)
            self._arrays.append((vertices, values))
            self.shapes[s].nvert = vertices.shape[0]
            self.shapes[s].vertices = &vertices[0, 0] if vertices.shape[0] else NULL
            self.shapes[s].values = &values[0, 0, 0]
            self.shapes[s].n0, self.shapes[s].n1, self.shapes[s].n2 = values.shape[0], values.shape[1], values.shape[2]
            for c in range(3):
                self.shapes[s].origin[c] = float(mesh.field.origin[c])
            self.shapes[s].cell = float(mesh.field.cell)

    def __dealloc__(self):
        PyMem_Free(self.shapes)


# ----------------------------------------------------------------------------- the table


cdef PairKernel _KERNELS[NKERNELS]
cdef Py_ssize_t _CAP[NKERNELS]
_KERNELS[<int>HALFSPACE_SPHERE] = halfspace_sphere
_KERNELS[<int>HALFSPACE_BOX] = halfspace_box
_KERNELS[<int>HALFSPACE_CAPSULE] = halfspace_capsule
_KERNELS[<int>HALFSPACE_CYLINDER] = halfspace_cylinder
_KERNELS[<int>SPHERE_SPHERE] = sphere_sphere
_KERNELS[<int>BOX_SPHERE] = box_sphere
_KERNELS[<int>CAPSULE_SPHERE] = capsule_sphere
_KERNELS[<int>CAPSULE_CAPSULE] = capsule_capsule
_KERNELS[<int>CYLINDER_SPHERE] = cylinder_sphere
_KERNELS[<int>BOX_BOX] = box_box
_KERNELS[<int>RECTANGLE_RECTANGLE] = rectangle_rectangle
_KERNELS[<int>PLANE_MESH] = plane_mesh
_KERNELS[<int>MESH_SPHERE] = mesh_sphere
_KERNELS[<int>BOX_MESH] = box_mesh
_KERNELS[<int>MESH_MESH] = mesh_mesh
# the most points of one pair: 4 lowest box corners, 2 capsule ends, 4 rim points per cylinder cap;
# the meshes' kernels: that plus every vertex of mesh a (_VERTS 1), of mesh b (2) or both (3)
_CAP[:] = [1, 4, 2, 8, 1, 1, 1, 2, 1, 4, 2, 0, 1, 8, 0]
cdef int _VERTS[NKERNELS]
_VERTS[:] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2, 3]
# the sides that are meshes (1 a, 2 b): the kernel reads their MeshShape
cdef int _MESHES[NKERNELS]
_MESHES[:] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 2, 3]


cdef PairKernel kernel_function(int kernel) noexcept nogil:
    return _KERNELS[kernel]


cdef Py_ssize_t pair_cap(int kernel, const MeshShape* mesh_a, const MeshShape* mesh_b) noexcept nogil:
    cdef Py_ssize_t cap = _CAP[kernel]
    if _VERTS[kernel] & 1:
        cap += mesh_a.nvert
    if _VERTS[kernel] & 2:
        cap += mesh_b.nvert
    return cap


cdef Py_ssize_t run_pairs_c(int kernel, Py_ssize_t m, int d,
                            const double* pos_a, const double* rot_a, const double* param_a,
                            const MeshShape* mesh_a, const double* pos_b, const double* rot_b,
                            const double* param_b, const MeshShape* mesh_b, double margin, Out out,
                            int64_t* pair) noexcept nogil:
    cdef PairKernel f = _KERNELS[kernel]
    cdef Py_ssize_t r, k, found, count = 0
    cdef Out at
    for r in range(m):
        # the next free rows of the outputs
        at.point_a = out.point_a + count * d
        at.point_b = out.point_b + count * d
        at.normal = out.normal + count * d
        at.gap = out.gap + count
        at.feature = out.feature + count
        found = f(pos_a + r * d, rot_a + r * d * d if rot_a != NULL else NULL, param_a + 3 * r,
                  pos_b + r * d, rot_b + r * d * d if rot_b != NULL else NULL, param_b + 3 * r,
                  d, margin, &at, mesh_a + r if mesh_a != NULL else NULL, mesh_b + r if mesh_b != NULL else NULL)
        for k in range(found):
            pair[count + k] = r
        count += found
    return count


def pair_points(int kernel, const double[:, ::1] pos_a, const double[:, :, ::1] rot_a, const double[:, ::1] param_a,
                const double[:, ::1] pos_b, const double[:, :, ::1] rot_b, const double[:, ::1] param_b,
                double margin, MeshTable mesh_a=None, MeshTable mesh_b=None):
    """Contact points of m candidate pairs (row r of a's and b's arrays) through one kernel.

    Args:
        kernel: a kernel id (HALFSPACE_SPHERE ... MESH_MESH).
        pos_a, pos_b: (m, d); rot_a, rot_b: (m, d, d) or None (round shapes); param_a, param_b: (m, 3).
        margin: points with gap < margin are returned.
        mesh_a, mesh_b: the meshes of the rows (m entries each), for the meshes' kernels.
    Returns:
        (pair, point_a, point_b, normal, gap, feature): (k,) int64, (k, d) x 3, (k,), (k,) int64.
    """
    if not 0 <= kernel < NKERNELS:
        raise ValueError(f"kernel: expected 0..{NKERNELS - 1}, got {kernel}")
    cdef Py_ssize_t m = pos_a.shape[0]
    cdef int d = pos_a.shape[1]
    if pos_b.shape[0] != m or param_a.shape[0] != m or param_b.shape[0] != m or pos_b.shape[1] != d:
        raise ValueError("pair_points: the candidate arrays differ in length or dimension")
    cdef const MeshShape* ma = NULL
    cdef const MeshShape* mb = NULL
    cdef Py_ssize_t r, rows = 0
    if _MESHES[kernel] & 1:
        if mesh_a is None or mesh_a.n != m:
            raise ValueError(f"pair_points: kernel {kernel} needs the {m} meshes of side a")
        ma = mesh_a.shapes
    if _MESHES[kernel] & 2:
        if mesh_b is None or mesh_b.n != m:
            raise ValueError(f"pair_points: kernel {kernel} needs the {m} meshes of side b")
        mb = mesh_b.shapes
    for r in range(m):
        rows += pair_cap(kernel, ma + r if ma != NULL else NULL, mb + r if mb != NULL else NULL)
    point_a = np.empty((rows, d))
    point_b = np.empty((rows, d))
    normal = np.empty((rows, d))
    gap = np.empty(rows)
    feature = np.empty(rows, dtype=np.int64)
    pair = np.empty(rows, dtype=np.int64)
    cdef double[:, ::1] pa_v = point_a, pb_v = point_b, n_v = normal
    cdef double[::1] g_v = gap
    cdef int64_t[::1] f_v = feature, p_v = pair
    cdef Out out
    cdef const double* ra = NULL
    cdef const double* rb = NULL
    cdef Py_ssize_t count = 0
    if m == 0:
        return pair, point_a, point_b, normal, gap, feature
    if rot_a is not None:
        ra = &rot_a[0, 0, 0]
    if rot_b is not None:
        rb = &rot_b[0, 0, 0]
    out.point_a = &pa_v[0, 0]
    out.point_b = &pb_v[0, 0]
    out.normal = &n_v[0, 0]
    out.gap = &g_v[0]
    out.feature = &f_v[0]
    with nogil:
        count = run_pairs_c(kernel, m, d, &pos_a[0, 0], ra, &param_a[0, 0], ma, &pos_b[0, 0], rb, &param_b[0, 0],
                            mb, margin, out, &p_v[0])
    return pair[:count], point_a[:count], point_b[:count], normal[:count], gap[:count], feature[:count]


# ----------------------------------------------------------------------------- the batch of a detection


# The most rows the candidates (a, b: k shape ids) can give (each kernel's cap), or -1 - r when
# candidate r's type pair has no rule (pair_kernel -2).
cdef Py_ssize_t batch_rows(const int64_t* a, const int64_t* b, Py_ssize_t k, const int64_t* shape_type,
                           const int64_t* pair_kernel, int ntype, const MeshShape* meshes) noexcept nogil:
    cdef Py_ssize_t r, rows = 0
    cdef int64_t kernel
    for r in range(k):
        kernel = pair_kernel[shape_type[a[r]] * ntype + shape_type[b[r]]]
        if kernel >= 0 and _VERTS[kernel]:  # a mesh's vertices: the two shapes' sum bounds either order's
            rows += _CAP[kernel] + meshes[a[r]].nvert + meshes[b[r]].nvert
        elif kernel >= 0:
            rows += _CAP[kernel]
        elif kernel == -2:
            return -1 - r
    return rows


# The narrow phase of every candidate into the batch's rows (room for batch_rows): contact_batch's
# docstring; pos (nshape, d), rot (nshape, d, d), param (nshape, 3); returns the count.
cdef Py_ssize_t batch_into(const int64_t* a, const int64_t* b, const int64_t* entry, Py_ssize_t k,
                           const int64_t* shape_type, const int64_t* shape_body, const int64_t* pair_kernel,
                           const unsigned char* pair_swap, int ntype, Py_ssize_t nshape, int d, const double* pos,
                           const double* rot, const double* param, const MeshShape* meshes, double margin,
                           int64_t nbody, int64_t max_feature, int64_t* body_i, int64_t* body_j, int64_t* entries,
                           double* point_i, double* point_j, double* normal, double* gap,
                           int64_t* feature) noexcept nogil:
    cdef Py_ssize_t r, i, found, count = 0
    cdef int64_t sa, sb, ta, tb, kernel, bi, bj
    cdef int c
    cdef double x
    cdef Out out
    for r in range(k):
        ta = shape_type[a[r]]
        tb = shape_type[b[r]]
        kernel = pair_kernel[ta * ntype + tb]
        if kernel < 0:  # pairs that never touch (two points)
            continue
        # the kernel's order of the shapes; one type: by id, whatever order the sweep found them in
        if pair_swap[ta * ntype + tb]:
            sa, sb = b[r], a[r]
        elif ta == tb and b[r] < a[r]:
            sa, sb = b[r], a[r]
        else:
            sa, sb = a[r], b[r]
        out.point_a = &point_i[count * d]
        out.point_b = &point_j[count * d]
        out.normal = &normal[count * d]
        out.gap = &gap[count]
        out.feature = &feature[count]
        found = _KERNELS[kernel](&pos[sa * d], &rot[sa * d * d], &param[sa * 3],
                                 &pos[sb * d], &rot[sb * d * d], &param[sb * 3], d, margin, &out,
                                 meshes + sa if meshes != NULL else NULL, meshes + sb if meshes != NULL else NULL)
        bi = shape_body[sa]
        bj = shape_body[sb]
        for i in range(count, count + found):
            feature[i] = (sa * nshape + sb) * max_feature + feature[i]
            entries[i] = entry[r]
            if bj == nbody:  # the ground is body i: swap the sides, turn the normal
                body_i[i] = bj
                body_j[i] = bi
                for c in range(d):
                    x = point_i[i * d + c]
                    point_i[i * d + c] = point_j[i * d + c]
                    point_j[i * d + c] = x
                    normal[i * d + c] = -normal[i * d + c]
            else:
                body_i[i] = bi
                body_j[i] = bj
        count += found
    return count


def contact_batch(const int64_t[::1] a, const int64_t[::1] b, const int64_t[::1] entry,
                  const int64_t[::1] shape_type, const int64_t[::1] shape_body,
                  const int64_t[::1] pair_kernel, const unsigned char[::1] pair_swap, list type_names,
                  const double[:, ::1] pos, const double[:, :, ::1] rot, const double[:, ::1] param,
                  double margin, int64_t nbody, int64_t max_feature, MeshTable meshes=None):
    """The narrow phase and the batch of one detection, in one pass over the candidate pairs.

    Each candidate (a[r], b[r]) (shape ids) goes to the kernel of its type pair
    (pair_kernel[type_a * ntype + type_b]: a kernel id, -1 for pairs that never touch, -2 for
    pairs without a rule), its shapes in the kernel's order (pair_swap) or, for one type, by id;
    each point becomes a row of mbsim.model.contact.detect.ContactBatch: feature key
    (shape a * nshape + shape b) * max_feature + the kernel's feature, the ground always body i.

    Args:
        a, b, entry: (k,) candidate shape pairs and the contact entry of each.
        shape_type, shape_body: (nshape,) type index (into type_names) and extended body index.
        pair_kernel, pair_swap: (ntype * ntype,) the table of type pairs.
        pos, rot, param: (nshape, d), (nshape, d, d), (nshape, 3) world poses and parameters.
        margin: points with gap < margin are kept. nbody: the ground's body index.
        meshes: the meshes among the shapes (nshape entries; needed when a candidate has a mesh).
    Returns:
        (body_i, body_j, entry, point_i, point_j, normal, gap, feature) of the batch.
    """
    cdef Py_ssize_t k = a.shape[0], nshape = pos.shape[0], rows = 0, count = 0
    cdef int d = pos.shape[1], ntype = len(type_names)
    cdef int64_t zero = 0
    cdef int64_t ta, tb, kernel
    cdef Py_ssize_t r
    cdef const MeshShape* mesh = NULL
    if meshes is not None:
        if meshes.n != nshape:
            raise ValueError(f"contact_batch: {meshes.n} meshes for {nshape} shapes")
        mesh = meshes.shapes
    for r in range(k):  # a mesh's kernel reads its table
        kernel = pair_kernel[shape_type[a[r]] * ntype + shape_type[b[r]]]
        if kernel >= 0 and _MESHES[kernel] and mesh == NULL:
            raise ValueError("contact_batch: a candidate pair has a mesh, but no meshes were given")
    with nogil:
        rows = batch_rows(&a[0] if k else &zero, &b[0] if k else &zero, k, &shape_type[0], &pair_kernel[0], ntype,
                          mesh)
    if rows < 0:  # candidate -1 - rows has no rule
        ta, tb = shape_type[a[-1 - rows]], shape_type[b[-1 - rows]]
        raise RuntimeError(f"no rigid contact rule between '{type_names[ta]}' and '{type_names[tb]}'")
    body_i = np.empty(rows, dtype=np.int64)
    body_j = np.empty(rows, dtype=np.int64)
    entries = np.empty(rows, dtype=np.int64)
    point_i = np.empty((rows, d))
    point_j = np.empty((rows, d))
    normal = np.empty((rows, d))
    gap = np.empty(rows)
    feature = np.empty(rows, dtype=np.int64)
    cdef int64_t[::1] bi_v = body_i, bj_v = body_j, e_v = entries, f_v = feature
    cdef double[:, ::1] pi_v = point_i, pj_v = point_j, n_v = normal
    cdef double[::1] g_v = gap
    if rows == 0:
        return body_i, body_j, entries, point_i, point_j, normal, gap, feature
    with nogil:
        count = batch_into(&a[0], &b[0], &entry[0], k, &shape_type[0], &shape_body[0], &pair_kernel[0],
                           &pair_swap[0], ntype, nshape, d, &pos[0, 0], &rot[0, 0, 0], &param[0, 0], mesh, margin, nbody,
                           max_feature, &bi_v[0], &bj_v[0], &e_v[0], &pi_v[0, 0], &pj_v[0, 0], &n_v[0, 0], &g_v[0],
                           &f_v[0])
    return (body_i[:count], body_j[:count], entries[:count], point_i[:count], point_j[:count], normal[:count],
            gap[:count], feature[:count])
