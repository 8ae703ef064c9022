"""Compiled kernels of the compliant contact force (mbsim.model.contact.compliant): one pair's
bounding-box test and its force on both bodies, without numpy's per-call overhead (the docking
scene evaluates 4 pairs 4 times a step; in numpy the small-array calls cost ~1 ms a step); and
every pair of a FlatModel inside the compiled step (compliant_forces_into: detection, forces,
counters, potential; contacts_near: time.contact_step's test), over its cc_* arrays."""

import numpy as np

from libc.math cimport INFINITY, fabs, pow, sqrt
from libc.stdlib cimport free, malloc

from mbsim.model.contact.sdf_kernels cimport distance_grid, interpolate_grid
from mbsim.model.kernels cimport frames3_into


cdef bint obb_overlap_one_c(const double[:] cA, const double[:, :] RA, const double[:] hA,
                            const double[:] cB, const double[:, :] RB, const double[:] hB,
                            double margin, double eps) noexcept nogil:
    cdef double R[3][3]
    cdef double absR[3][3]
    cdef double t[3]
    cdef double d[3]
    cdef double tb, lhs, ra, rb, length
    cdef int i, j, k, i1, i2, j1, j2
    # R = RA^T RB (B's axes in A's frame), t = RA^T (cB - cA)
    for i in range(3):
        d[i] = cB[i] - cA[i]
    for i in range(3):
        t[i] = RA[0, i] * d[0] + RA[1, i] * d[1] + RA[2, i] * d[2]
        for j in range(3):
            R[i][j] = RA[0, i] * RB[0, j] + RA[1, i] * RB[1, j] + RA[2, i] * RB[2, j]
            absR[i][j] = fabs(R[i][j]) + eps
    # A's face axes, then B's, then the nine edge-edge cross products
    for i in range(3):
        if fabs(t[i]) > hA[i] + absR[i][0] * hB[0] + absR[i][1] * hB[1] + absR[i][2] * hB[2] + margin:
            return False
    for j in range(3):
        tb = t[0] * R[0][j] + t[1] * R[1][j] + t[2] * R[2][j]
        if fabs(tb) > hA[0] * absR[0][j] + hA[1] * absR[1][j] + hA[2] * absR[2][j] + hB[j] + margin:
            return False
    for i in range(3):
        i1 = (i + 1) % 3
        i2 = (i + 2) % 3
        for j in range(3):
            j1 = (j + 1) % 3
            j2 = (j + 2) % 3
            lhs = fabs(t[i2] * R[i1][j] - t[i1] * R[i2][j])
            ra = hA[i1] * absR[i2][j] + hA[i2] * absR[i1][j]
            rb = hB[j1] * absR[i][j2] + hB[j2] * absR[i][j1]
            length = sqrt(max(0.0, 1.0 - R[i][j] * R[i][j]))
            if lhs > ra + rb + margin * length:
                return False
    return True


def obb_overlap_one(const double[:] cA, const double[:, :] RA, const double[:] hA, const double[:] cB,
                    const double[:, :] RB, const double[:] hB, double margin, double eps):
    """The 15-axis separating-axis test of one box pair (see mbsim.model.contact.obb.obb_overlap)."""
    return obb_overlap_one_c(cA, RA, hA, cB, RB, hB, margin, eps)


# the margin of the boxes' separating-axis test (mbsim.model.contact.obb.EPS; compliant checks they agree)
cdef double OBB_EPS_C = 1e-6
OBB_EPS = OBB_EPS_C


# the law codes for Python (mbsim.model.contact.laws names them per law)
NORMAL_HERTZ = NORMAL_HERTZ_C
NORMAL_DISSIPATIVE = NORMAL_DISSIPATIVE_C
FRICTION_STRIBECK = FRICTION_STRIBECK_C
FRICTION_COULOMB = FRICTION_COULOMB_C


cdef class LawTable:
    """The compiled view of a force group's law arrays (mbsim.model.contact.laws.CONTACT_LAW,
    C-contiguous): ``array`` holds the named columns, the kernels read the rows through a pointer
    into it taken here, once (the dtype is checked against the C struct on the way)."""

    def __init__(self, laws):
        cdef const ContactLaw[::1] view = laws
        self.array = laws
        self.count = view.shape[0]
        self.rows = &view[0] if self.count else NULL


# eq. (36): Hertz's elastic term with the paper's hysteresis damping, f_N = k g^n + chi g^m dg/dt
cdef inline double _normal_hertz(const ContactLaw* law, double g, double rate, double elastic) noexcept nogil:
    return elastic + law.chi * pow(g, law.m) * rate


# Hunt & Crossley (1975), Lankarani & Nikravesh (1990): f_N = k g^n (1 + alpha dg/dt),
# the damping proportional to the elastic force (alpha from the restitution, mbsim.model.contact.laws)
cdef inline double _normal_dissipative(const ContactLaw* law, double g, double rate, double elastic) noexcept nogil:
    return elastic * (1.0 + law.alpha * rate)


# The slopes of f_N in the penetration g and its rate (the implicit contact step's linearisation):
# eq. (36) and the dissipative laws differentiated; g is kept off zero where n or m < 1
cdef void normal_force_slopes(const ContactLaw* law, double g, double rate, double* by_depth,
                              double* by_rate) noexcept nogil:
    cdef double gs = max(g, 1e-12)
    cdef double elastic = law.k * pow(gs, law.n)
    cdef double stiff = law.n * elastic / gs
    if law.normal == NORMAL_DISSIPATIVE_C:
        by_depth[0] = stiff * (1.0 + law.alpha * rate)
        by_rate[0] = elastic * law.alpha
    else:
        by_depth[0] = stiff + law.m * law.chi * pow(gs, law.m) / gs * rate
        by_rate[0] = law.chi * pow(gs, law.m)


cdef double normal_force(const ContactLaw* law, double g, double rate, double elastic) noexcept nogil:
    """f_N of the contact's law at penetration g, rate dg/dt and elastic part k g^n (may be < 0:
    the caller clamps)."""
    if law.normal == NORMAL_DISSIPATIVE_C:
        return _normal_dissipative(law, g, rate, elastic)
    return _normal_hertz(law, g, rate, elastic)


# eq. (38), v = |v_T| >= 0: a smooth step from 0 at v = 0 to mu_s at v_s, then to mu_d at v_d,
# constant beyond
cdef inline double _mu_stribeck(const ContactLaw* law, double v) noexcept nogil:
    cdef double s, r
    if v <= law.v_s:
        s = min(max((v + law.v_s) / (2.0 * law.v_s), 0.0), 1.0)
        return -law.mu_s + 2.0 * law.mu_s * (3.0 - 2.0 * s) * s * s
    if v < law.v_d:
        r = (v - law.v_s) / (law.v_d - law.v_s)
        return law.mu_s + (law.mu_d - law.mu_s) * (3.0 - 2.0 * r) * r * r
    return law.mu_d


# Coulomb's mu_d, regularised: linear (viscous) below the smoothing speed v_d
cdef inline double _mu_coulomb(const ContactLaw* law, double v) noexcept nogil:
    if v < law.v_d:
        return law.mu_d * v / law.v_d
    return law.mu_d


cdef double friction_coefficient(const ContactLaw* law, double v) noexcept nogil:
    """mu(v) of the contact's friction law at sliding speed v >= 0."""
    if law.friction == FRICTION_COULOMB_C:
        return _mu_coulomb(law, v)
    return _mu_stribeck(law, v)


def friction_coefficients(const ContactLaw[::1] laws, Py_ssize_t row, const double[:] v):
    """mu of contact ``row``'s friction law at each sliding speed of ``v`` (what ``pair_forces`` applies)."""
    out = np.empty(v.shape[0])
    cdef double[::1] out_v = out
    cdef Py_ssize_t i
    if row < 0 or row >= laws.shape[0]:
        raise IndexError(f"law row {row} out of {laws.shape[0]}")
    for i in range(v.shape[0]):
        out_v[i] = friction_coefficient(&laws[row], v[i])
    return out


def normal_forces(const ContactLaw[::1] laws, Py_ssize_t row, const double[:] g, const double[:] rate):
    """f_N of contact ``row``'s normal law at penetrations ``g`` and rates ``rate`` (before the
    clamp at zero that ``pair_forces`` applies)."""
    out = np.empty(g.shape[0])
    cdef double[::1] out_v = out
    cdef Py_ssize_t i
    if row < 0 or row >= laws.shape[0]:
        raise IndexError(f"law row {row} out of {laws.shape[0]}")
    for i in range(g.shape[0]):
        out_v[i] = normal_force(&laws[row], g[i], rate[i], laws[row].k * pow(g[i], laws[row].n))
    return out


# Adds the force f at ``offset`` from the body origin (world) to out[row]: force world, torque body axes.
cdef inline void _add_wrench(double[:, ::1] out, Py_ssize_t row, const double[:, :] rot, const double* offset,
                             double fx, double fy, double fz) noexcept nogil:
    cdef double tx, ty, tz
    cdef int a
    out[row, 0] += fx
    out[row, 1] += fy
    out[row, 2] += fz
    tx = offset[1] * fz - offset[2] * fy
    ty = offset[2] * fx - offset[0] * fz
    tz = offset[0] * fy - offset[1] * fx
    for a in range(3):  # torque in body axes
        out[row, 3 + a] += rot[0, a] * tx + rot[1, a] * ty + rot[2, a] * tz


cdef double pair_forces_c(const double[:, :] p, const double[:] g, const double[:, :] grad, const double[:] pos_s,
                          const double[:, :] rot_s, const double[:] vel_s, const double[:] om_s,
                          const double[:] pos_m, const double[:, :] rot_m, const double[:] vel_m,
                          const double[:] om_m, const ContactLaw* law, double[:, ::1] out, double* K,
                          double* C) noexcept nogil:
    cdef double k = law.k, nexp = law.n
    cdef double h_stick = law.stick_step
    cdef Py_ssize_t npts = p.shape[0], i
    cdef int a
    cdef double potential = 0.0
    cdef double off_s[3]
    cdef double off_m[3]
    cdef double n[3]
    cdef double rel[3]
    cdef double gl, inv, vsx, vsy, vsz, vmx, vmy, vmz, g_rate, gn, elastic, total, vt0, vt1, vt2, speed
    cdef double friction, r2s, r2m, inv_meff, cap, ft, fe0, fe1, fe2, fn0, fn1, fn2, dmp
    for i in range(npts):
        gl = sqrt(grad[i, 0] * grad[i, 0] + grad[i, 1] * grad[i, 1] + grad[i, 2] * grad[i, 2])
        inv = 1.0 / max(gl, 1e-300)
        for a in range(3):
            n[a] = grad[i, a] * inv
            off_s[a] = p[i, a] - pos_s[a]
            off_m[a] = p[i, a] + g[i] * n[a] - pos_m[a]
        # relative velocity of the slave point against the master's material point at q
        vsx = vel_s[0] + om_s[1] * off_s[2] - om_s[2] * off_s[1]
        vsy = vel_s[1] + om_s[2] * off_s[0] - om_s[0] * off_s[2]
        vsz = vel_s[2] + om_s[0] * off_s[1] - om_s[1] * off_s[0]
        vmx = vel_m[0] + om_m[1] * off_m[2] - om_m[2] * off_m[1]
        vmy = vel_m[1] + om_m[2] * off_m[0] - om_m[0] * off_m[2]
        vmz = vel_m[2] + om_m[0] * off_m[1] - om_m[1] * off_m[0]
        rel[0] = vsx - vmx
        rel[1] = vsy - vmy
        rel[2] = vsz - vmz
        g_rate = -(rel[0] * n[0] + rel[1] * n[1] + rel[2] * n[2])
        gn = pow(g[i], nexp)
        elastic = k * gn
        total = normal_force(law, g[i], g_rate, elastic)
        if total < 0.0:
            total = 0.0
        vt0 = rel[0] + g_rate * n[0]
        vt1 = rel[1] + g_rate * n[1]
        vt2 = rel[2] + g_rate * n[2]
        speed = sqrt(vt0 * vt0 + vt1 * vt1 + vt2 * vt2)
        friction = friction_coefficient(law, speed) * total
        if h_stick > 0.0:
            r2s = off_s[0] * off_s[0] + off_s[1] * off_s[1] + off_s[2] * off_s[2]
            r2m = off_m[0] * off_m[0] + off_m[1] * off_m[1] + off_m[2] * off_m[2]
            inv_meff = law.inv_mass_slave + law.inv_mass_master + r2s * law.inv_inertia_slave + r2m * law.inv_inertia_master
            cap = speed / (h_stick * npts * max(inv_meff, 1e-300))
            if friction > cap:
                friction = cap
        ft = -friction / max(speed, 1e-300)
        fe0 = elastic * grad[i, 0]
        fe1 = elastic * grad[i, 1]
        fe2 = elastic * grad[i, 2]
        if total > 0.0:
            dmp = total - elastic
            fn0 = dmp * n[0] + ft * vt0
            fn1 = dmp * n[1] + ft * vt1
            fn2 = dmp * n[2] + ft * vt2
        else:  # damping cancels the push entirely: no normal force remains
            fn0 = -fe0 + ft * vt0
            fn1 = -fe1 + ft * vt1
            fn2 = -fe2 + ft * vt2
        _add_wrench(out, 0, rot_s, off_s, fe0, fe1, fe2)
        _add_wrench(out, 1, rot_m, off_m, -fe0, -fe1, -fe2)
        _add_wrench(out, 2, rot_s, off_s, fn0, fn1, fn2)
        _add_wrench(out, 3, rot_m, off_m, -fn0, -fn1, -fn2)
        potential += k * g[i] * gn / (nexp + 1.0)
        if K != NULL and total > 0.0:
            _point_slopes(law, g[i], g_rate, total, n, vt0, vt1, vt2, speed, off_s, rot_s, off_m, rot_m, K, C)
    return potential


# One point's share of the pair's linearisation (the implicit contact step): with u the slave
# point's displacement against the master's material point, the force on the slave moves by
# -Kp du - Cp du/dt (Kp: the normal law's slope along n, and friction's through f_N; Cp: the
# normal damping, friction's slopes across (mu / s) and along (mu') the sliding direction);
# u = G x, G = [P_s, -P_m], P = [I, -[off]x R] over each body's (velocity world, rotation body
# axes), so K += G^T Kp G and C += G^T Cp G (12 x 12, row-major: slave's 6, then master's 6).
cdef void _point_slopes(const ContactLaw* law, double g, double g_rate, double total, const double* n,
                        double vt0, double vt1, double vt2, double speed, const double* off_s,
                        const double[:, :] rot_s, const double* off_m, const double[:, :] rot_m, double* K,
                        double* C) noexcept nogil:
    cdef double kn, cn, mu, slope, across, step
    cdef double t[3]
    cdef double Kp[3][3]
    cdef double Cp[3][3]
    cdef double G[3][12]
    cdef double HK[3][12]
    cdef double HC[3][12]
    cdef double arm[3][3]
    cdef int a, b, c, side
    cdef const double* off
    cdef double sign
    normal_force_slopes(law, g, g_rate, &kn, &cn)
    # friction: mu(s) and its slope by a central difference (one-sided at rest)
    step = 1e-6 + 1e-3 * speed
    mu = friction_coefficient(law, speed)
    if speed > step:
        slope = (friction_coefficient(law, speed + step) - friction_coefficient(law, speed - step)) / (2.0 * step)
        across = mu / speed
        t[0], t[1], t[2] = vt0 / speed, vt1 / speed, vt2 / speed
    else:
        slope = (friction_coefficient(law, step) - mu) / step
        across = slope
        t[0], t[1], t[2] = 0.0, 0.0, 0.0
    for a in range(3):
        for b in range(3):
            Kp[a][b] = kn * n[a] * n[b] - mu * kn * t[a] * n[b]
            Cp[a][b] = (cn * n[a] * n[b] - mu * cn * t[a] * n[b]
                        + total * (across * ((1.0 if a == b else 0.0) - n[a] * n[b] - t[a] * t[b])
                                   + slope * t[a] * t[b]))
    # G: the slave's P, the master's -P
    for side in range(2):
        off = off_s if side == 0 else off_m
        sign = 1.0 if side == 0 else -1.0
        # -[off]x R: column c is R's column c crossed into off, negated: (R e_c) x off
        for c in range(3):
            for a in range(3):
                arm[a][c] = 0.0
        for c in range(3):
            if side == 0:
                arm[0][c] = rot_s[1, c] * off[2] - rot_s[2, c] * off[1]
                arm[1][c] = rot_s[2, c] * off[0] - rot_s[0, c] * off[2]
                arm[2][c] = rot_s[0, c] * off[1] - rot_s[1, c] * off[0]
            else:
                arm[0][c] = rot_m[1, c] * off[2] - rot_m[2, c] * off[1]
                arm[1][c] = rot_m[2, c] * off[0] - rot_m[0, c] * off[2]
                arm[2][c] = rot_m[0, c] * off[1] - rot_m[1, c] * off[0]
        for a in range(3):
            for c in range(3):
                G[a][6 * side + c] = sign * (1.0 if a == c else 0.0)
                G[a][6 * side + 3 + c] = sign * arm[a][c]
    for a in range(3):
        for c in range(12):
            HK[a][c] = Kp[a][0] * G[0][c] + Kp[a][1] * G[1][c] + Kp[a][2] * G[2][c]
            HC[a][c] = Cp[a][0] * G[0][c] + Cp[a][1] * G[1][c] + Cp[a][2] * G[2][c]
    for b in range(12):
        for c in range(12):
            K[12 * b + c] += G[0][b] * HK[0][c] + G[1][b] * HK[1][c] + G[2][b] * HK[2][c]
            C[12 * b + c] += G[0][b] * HC[0][c] + G[1][b] * HC[1][c] + G[2][b] * HC[2][c]


def pair_forces(const double[:, :] p, const double[:] g, const double[:, :] grad, const double[:] pos_s,
                const double[:, :] rot_s, const double[:] vel_s, const double[:] om_s, const double[:] pos_m,
                const double[:, :] rot_m, const double[:] vel_m, const double[:] om_m, LawTable laws, Py_ssize_t row,
                double[:, ::1] out):
    """Forces of one pair's penetrating points, added to ``out`` (4, 6): rows slave conservative,
    master conservative, slave non-conservative, master non-conservative (force world, torque
    body axes). Row ``row`` of ``laws``: the pair's law (mbsim.model.contact.laws.CONTACT_LAW: normal and
    friction law codes and parameters, the stick limiter's h, 1/m and 1/I_min of slave and
    master, 0 for the ground). Returns the potential sum k g^(n+1)/(n+1).

    The elastic force k g^n acts along the raw gradient of the interpolated distance (so that it
    is the gradient of the potential), the rest of the normal law's force (its damping) and the
    friction along the unit normal and the sliding direction; the slave's force acts at its point p, the master's
    (opposite) at p's projection q = p + g n on its surface (eq. 43).

    Stick limiter (h > 0): at low sliding speed the friction law is a damper of slope about
    1.5 mu_s f_N / v_s (stribeck; mu f_N / smoothing for coulomb), far too stiff for an explicit
    step on a light body pressed hard; each point's friction is capped at what stops its sliding within one step h when all the
    pair's points act together, m_eff |v_t| / (h n), with 1/m_eff bounded from above by the two
    bodies' 1/m + r^2/I_min. The cap binds only where the law would reverse the sliding within
    the step (sticking), so sliding friction is the law's.
    """
    cdef double potential
    if row < 0 or row >= laws.count:
        raise IndexError(f"law row {row} out of {laws.count}")
    with nogil:
        potential = pair_forces_c(p, g, grad, pos_s, rot_s, vel_s, om_s, pos_m, rot_m, vel_m, om_m, &laws.rows[row], out,
                                  NULL, NULL)
    return potential


# Looks up slave point q mapped into the master's frame; a point with d < keep (0: inside) is appended
# to the outputs at ``count`` (its gradient when inside, else zeros). Returns the new count. A point
# whose lower bound base + sum_a min(lo_a s_a, hi_a s_a), s = p - c (c: the master-frame centre of its
# leaf; lo, hi: bounds of the interpolant's slopes about it, penetrating_points) exceeds
# ``slack + keep`` is skipped without a look-up.
cdef inline Py_ssize_t _test_point(const double[:, ::1] points, Py_ssize_t q, const double[:, ::1] R, const double[::1] t,
                                   const double* values, const Py_ssize_t* shape, const double* origin, double inv,
                                   double cell, long long[::1] out_idx, double[::1] out_d, double[:, ::1] out_g,
                                   Py_ssize_t count, const double* c, double base, const double* lo_slope,
                                   const double* hi_slope, double slack, double keep) noexcept nogil:
    cdef double x = points[q, 0], y = points[q, 1], z = points[q, 2]
    cdef double px = R[0, 0] * x + R[0, 1] * y + R[0, 2] * z + t[0]
    cdef double py = R[1, 0] * x + R[1, 1] * y + R[1, 2] * z + t[1]
    cdef double pz = R[2, 0] * x + R[2, 1] * y + R[2, 2] * z + t[2]
    cdef double gx, gy, gz, ext, sx = px - c[0], sy = py - c[1], sz = pz - c[2]
    if (base + min(lo_slope[0] * sx, hi_slope[0] * sx) + min(lo_slope[1] * sy, hi_slope[1] * sy)
            + min(lo_slope[2] * sz, hi_slope[2] * sz)) > slack + keep:
        return count
    # the value first (most points are outside), the gradient of the few inside
    cdef double d = distance_grid(values, shape[0], shape[1], shape[2], origin, inv, cell, px, py, pz, &ext)
    if d < keep:
        if d < 0.0:
            d = interpolate_grid(values, shape[0], shape[1], shape[2], origin, inv, cell, px, py, pz, &gx, &gy, &gz,
                                 &ext)
        else:
            gx = gy = gz = 0.0
        out_idx[count] = q
        out_d[count] = d
        out_g[count, 0] = gx
        out_g[count, 1] = gy
        out_g[count, 2] = gz
        count += 1
    return count


# Bounds lo[a] <= dI/dx_a <= hi[a] of the interpolant I over the grid cells that the box c +- r
# (master frame) meets: on a cell dI/dx_a is a blend of the cell's four edge differences along a
# (over the cell), so their least and greatest over the cells bound it. False (bounds unset) when the
# box leaves the grid or meets more than two cells along an axis (more edges than looking up a
# leaf's points would cost).
cdef bint _slope_bounds(const double* values, const Py_ssize_t* shape, const double* origin, double inv,
                        const double* c, double r, double* lo, double* hi) noexcept nogil:
    cdef Py_ssize_t first[3]
    cdef Py_ssize_t last[3]
    cdef Py_ssize_t s0 = shape[1] * shape[2], s1 = shape[2], i, j, k, at
    cdef double a0, a1, v, e
    cdef int a
    for a in range(3):
        a0 = (c[a] - r - origin[a]) * inv
        a1 = (c[a] + r - origin[a]) * inv
        if not (a0 >= 0.0 and a1 <= shape[a] - 1):
            return False
        first[a] = <Py_ssize_t>a0
        last[a] = min(<Py_ssize_t>a1, shape[a] - 2) + 1  # the far node of the last cell met
        if last[a] - first[a] > 2:
            return False
        lo[a] = INFINITY
        hi[a] = -INFINITY
    # every edge of the cells met, along each axis
    for i in range(first[0], last[0] + 1):
        for j in range(first[1], last[1] + 1):
            for k in range(first[2], last[2] + 1):
                at = i * s0 + j * s1 + k
                v = values[at]
                if i < last[0]:
                    e = values[at + s0] - v
                    lo[0] = min(lo[0], e)
                    hi[0] = max(hi[0], e)
                if j < last[1]:
                    e = values[at + s1] - v
                    lo[1] = min(lo[1], e)
                    hi[1] = max(hi[1], e)
                if k < last[2]:
                    e = values[at + 1] - v
                    lo[2] = min(lo[2], e)
                    hi[2] = max(hi[2], e)
    for a in range(3):
        lo[a] *= inv
        hi[a] *= inv
    return True


# A bound of |grad I| over the box c +- r (master frame) from the field's slope pyramid (bound and
# meta as SignedDistanceField.slope_pyramid gives them): the largest entry of the first level whose
# blocks the box meets at most two of along each axis; sqrt(3) when the box leaves the grid
cdef double _region_slope(const double* bound, const double* meta, const double* origin, double inv,
                          const double* c, double r) noexcept nogil:
    cdef Py_ssize_t lo[3]
    cdef Py_ssize_t hi[3]
    cdef Py_ssize_t i, j, k, base, n1, n2
    cdef int a, level = 0, nlevel = <int>meta[0]
    cdef double a0, a1, n, best = 0.0
    for a in range(3):
        a0 = (c[a] - r - origin[a]) * inv
        a1 = (c[a] + r - origin[a]) * inv
        n = meta[2 + a]  # level 0's blocks are the grid's cells
        if not (a0 >= 0.0 and a1 <= n):
            return SQRT3
        lo[a] = <Py_ssize_t>a0
        hi[a] = min(<Py_ssize_t>a1, <Py_ssize_t>n - 1)
    while level < nlevel - 1 and (hi[0] - lo[0] > 1 or hi[1] - lo[1] > 1 or hi[2] - lo[2] > 1):
        for a in range(3):
            lo[a] >>= 1
            hi[a] >>= 1
        level += 1
    base = <Py_ssize_t>meta[1 + 4 * level]
    n1 = <Py_ssize_t>meta[3 + 4 * level]
    n2 = <Py_ssize_t>meta[4 + 4 * level]
    for i in range(lo[0], hi[0] + 1):
        for j in range(lo[1], hi[1] + 1):
            for k in range(lo[2], hi[2] + 1):
                best = max(best, bound[base + (i * n1 + j) * n2 + k])
    return best


def region_slope(const double[::1] bound, const double[::1] meta, const double[::1] origin, double cell,
                 const double[::1] c, double r):
    """The bound of |grad I| the octree's skip tests take over the box c +- r (master frame) from
    a field's slope pyramid (SignedDistanceField.slope_pyramid): sqrt(3) outside the grid."""
    return _region_slope(&bound[0], &meta[0], &origin[0], 1.0 / cell, &c[0], r)


# sqrt(3): the trilinear interpolant of exact node distances changes by at most |dx| + |dy| + |dz|
# between two points; CULL_SLACK (in cells): the round-off allowance of the octree's skip tests
cdef double SQRT3 = 1.7320508075688772
cdef double CULL_SLACK = 1e-9


cdef Py_ssize_t penetrating_points_c(
    const double[:, ::1] points, const long long[::1] point_order, const double[:, ::1] node_centre,
    const double[::1] node_radius, const long long[::1] node_child_start, const long long[::1] node_child_count,
    const long long[::1] node_point_start, const long long[::1] node_point_count, bint use_tree,
    const double[:, ::1] R, const double[::1] t, const double* values, const Py_ssize_t* shape, const double* origin,
    double cell, const double* lo, const double* hi, double margin, double keep, const double* bound,
    const double* meta, long long[::1] out_idx, double[::1] out_d, double[:, ::1] out_g, Py_ssize_t* stack,
) noexcept nogil:
    cdef double inv = 1.0 / cell, slack = CULL_SLACK * cell
    cdef Py_ssize_t count = 0, top, k, c, a, start, q
    cdef long long n_child
    cdef double d, ext, bx, by, bz, r, spread
    cdef double centre[3]
    cdef double slope_lo[3]
    cdef double slope_hi[3]
    cdef int b
    if use_tree:
        # depth first with an explicit stack (each node is pushed at most once: node count deep)
        stack[0] = 0
        top = 1
        while top > 0:
            top -= 1
            k = stack[top]
            r = node_radius[k]
            for b in range(3):
                centre[b] = R[b, 0] * node_centre[k, 0] + R[b, 1] * node_centre[k, 1] + R[b, 2] * node_centre[k, 2] + t[b]
            # the mesh's box first (no look-up), then the interpolant's own bound (penetrating_points)
            bx = max(lo[0] - centre[0], 0.0, centre[0] - hi[0])
            by = max(lo[1] - centre[1], 0.0, centre[1] - hi[1])
            bz = max(lo[2] - centre[2], 0.0, centre[2] - hi[2])
            if bx * bx + by * by + bz * bz > (r + SQRT3 * margin + keep) ** 2:
                continue
            d = distance_grid(values, shape[0], shape[1], shape[2], origin, inv, cell, centre[0], centre[1],
                              centre[2], &ext)
            if d - ext > SQRT3 * r + slack + keep:
                continue
            # the field's own slope bound about the cell (1 on a face, not sqrt(3)), when it may skip it
            if bound != NULL and d - ext > slack + keep:
                if d - ext > _region_slope(bound, meta, origin, inv, centre, r) * r + slack + keep:
                    continue
            n_child = node_child_count[k]
            if n_child > 0:
                for c in range(n_child):
                    stack[top] = node_child_start[k] + c
                    top += 1
                continue
            # a leaf: a second chance with the slopes of the cells it meets (a face: about r, not
            # sqrt(3) r), which also bound its points below (the inner nodes go on to their children:
            # the slopes would cost them more than they save)
            if _slope_bounds(values, shape, origin, inv, centre, r, slope_lo, slope_hi):
                spread = 0.0
                for b in range(3):
                    spread += max(-slope_lo[b], slope_hi[b])
                if d - spread * r > slack + keep:
                    continue
            else:  # |dI/dx_a| <= 1: exact distances at the nodes
                for b in range(3):
                    slope_lo[b] = -1.0
                    slope_hi[b] = 1.0
            # a leaf's points, those whose bound by the same slopes is positive skipped unlooked
            start = node_point_start[k]
            for a in range(start, start + node_point_count[k]):
                q = point_order[a]
                count = _test_point(points, q, R, t, values, shape, origin, inv, cell, out_idx, out_d, out_g, count,
                                    centre, d - ext, slope_lo, slope_hi, slack, keep)
    else:
        for b in range(3):
            centre[b] = 0.0
            slope_lo[b] = 0.0
            slope_hi[b] = 0.0
        for q in range(points.shape[0]):
            count = _test_point(points, q, R, t, values, shape, origin, inv, cell, out_idx, out_d, out_g, count,
                                centre, -1.0, slope_lo, slope_hi, 0.0, keep)
    return count


def penetrating_points(
    const double[:, ::1] points, const long long[::1] point_order, const double[:, ::1] node_centre,
    const double[::1] node_radius, const long long[::1] node_child_start, const long long[::1] node_child_count,
    const long long[::1] node_point_start, const long long[::1] node_point_count, bint use_tree,
    const double[:, ::1] R, const double[::1] t, const double[:, :, ::1] values, const double[::1] origin, double cell,
    const double[::1] lo, const double[::1] hi, double margin, long long[::1] out_idx, double[::1] out_d,
    double[:, ::1] out_g, double keep=0.0, const double[::1] bound=None, const double[::1] meta=None,
):
    """The slave's sample points inside the master, in one pass: the octree walked with a stack
    (a cell is skipped with its subtree when a lower bound of the master's distance at its
    centre exceeds its radius plus ``margin``), then each remaining point mapped into the
    master's frame (x -> R x + t) and looked up in the field. Writes the indices, distances and
    gradients (master frame) of the points with d < 0; returns how many. With ``keep`` > 0, the
    points with d < keep instead (the gradient of those outside left zero): the skip tests then
    drop only points whose value exceeds ``keep`` (compliant_forces_into's cache of candidates).
    With the field's slope pyramid (``bound``, ``meta``: SignedDistanceField.slope_pyramid), a
    cell is also skipped when E(c) - e(c) exceeds G r, G its largest entry over the cell's box
    (|grad I| <= G there; 1 on a face, where the 1-norm bound gives sqrt(3)).

    Skip tests of a cell of radius r about its centre c (they never drop a point the full look-up
    finds, so the forces are the same to the last bit): (1) the looked-up value E(c) less its
    way out of the grid e(c) exceeds sqrt(3) r: the nodes hold exact distances (1-Lipschitz), so
    each partial derivative of the trilinear interpolant is at most 1 in size and
    E(p) >= E(c) - e(c) - |p - c|_1 >= E(c) - e(c) - sqrt(3) r (the clamp onto the grid is
    1-Lipschitz per axis, the way out adds >= 0); (2) c lies farther than r + sqrt(3) ``margin``
    (the cell) from the mesh's bounding box [lo, hi]: the corners of any point's grid cell are
    within sqrt(3) cells of it, so its interpolated value stays positive; (3) at a leaf whose box
    c +- r meets at most two grid cells along each axis, inside the grid: the least and greatest
    edge differences of those cells bound each slope, lo_a <= dI/dx_a <= hi_a, so E(p) >=
    E(c) + sum_a min(lo_a s_a, hi_a s_a), s = p - c (on a face about E(c) - r, not sqrt(3) r).
    In a leaf that is looked into, a point whose bound (3), or else E(c) - e(c) - |p - c|_1, is
    positive is outside without a look-up. Without the tree (``use_tree`` False) every point is
    looked up.
    """
    cdef Py_ssize_t count
    cdef Py_ssize_t* stack = NULL
    cdef Py_ssize_t shape[3]
    cdef const double* bound_p = NULL
    cdef const double* meta_p = NULL
    if bound is not None and meta is not None and bound.shape[0] > 0:
        bound_p, meta_p = &bound[0], &meta[0]
    shape[0], shape[1], shape[2] = values.shape[0], values.shape[1], values.shape[2]
    if use_tree:
        stack = <Py_ssize_t*>malloc(max(node_centre.shape[0], 1) * sizeof(Py_ssize_t))
        if stack == NULL:
            raise MemoryError()
    try:
        with nogil:
            count = penetrating_points_c(
                points, point_order, node_centre, node_radius, node_child_start, node_child_count,
                node_point_start, node_point_count, use_tree, R, t, &values[0, 0, 0], shape, &origin[0], cell,
                &lo[0], &hi[0], margin, keep, bound_p, meta_p, out_idx, out_d, out_g, stack,
            )
    finally:
        free(stack)
    return count


# Sorts the first n found points by their index (heap sort, in place, with their distances and
# gradients): the octree visits them in its own order, and the forces are summed in point order
# so that culled and unculled evaluations agree to the last bit, as the Python evaluation's did.
cdef void _sort_found(long long[::1] idx, double[::1] d, double[:, ::1] g, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t start, end, root, child
    if n < 2:
        return
    start = n // 2
    end = n
    while end > 1:
        if start > 0:
            start -= 1
        else:
            end -= 1
            _swap_found(idx, d, g, 0, end)
        root = start
        while 2 * root + 1 < end:
            child = 2 * root + 1
            if child + 1 < end and idx[child] < idx[child + 1]:
                child += 1
            if idx[root] < idx[child]:
                _swap_found(idx, d, g, root, child)
                root = child
            else:
                break


cdef inline void _swap_found(long long[::1] idx, double[::1] d, double[:, ::1] g, Py_ssize_t a,
                             Py_ssize_t b) noexcept nogil:
    cdef long long i = idx[a]
    cdef double x = d[a]
    cdef int c
    idx[a], idx[b] = idx[b], i
    d[a], d[b] = d[b], x
    for c in range(3):
        x = g[a, c]
        g[a, c] = g[b, c]
        g[b, c] = x


# A pair's cache of candidate points, D.cc_cache[k] (the indices and values in D.cc_cand_idx,
# D.cc_cand_d at the pair's point offset): how many, the margin w, whether it holds, evaluations
# since it was made, a bound of the slave points' distance from the slave's origin, the pose
# (R0 row-major, t0) of the slave in the master's frame it was made at, and a bound G >= 1 of the
# interpolant's slope where the slave's points can be while it holds
cdef enum:
    CACHE_COUNT = 0
    CACHE_MARGIN = 1
    CACHE_VALID = 2
    CACHE_USES = 3
    CACHE_REACH = 4
    CACHE_R = 5
    CACHE_T = 14
    CACHE_SLOPE = 17
    CACHE_ROW_C = 18
CACHE_ROW = CACHE_ROW_C
# the margin w, in units of the slave's reach: the first one; doubled when a cache held for fewer
# than CACHE_SHORT evaluations, halved when for more than CACHE_LONG (a smaller w: fewer
# candidates and a quicker walk; a larger one: fewer walks); between CACHE_LEAST and one reach.
# A ball rolling on a floor settles at about 10 % of its radius, a cache about every sixth evaluation.
cdef double CACHE_FIRST = 0.1
cdef double CACHE_LEAST = 0.01
cdef double CACHE_SHORT = 2.0
cdef double CACHE_LONG = 16.0


# Makes pair k's cache at the pose in D.cc_R, D.cc_t: the octree walk of penetrating_points_c kept
# to the points whose value is below the margin w, in the octree's order (its skip tests drop only
# points above w, to the same round-off allowance)
cdef void _make_cache(FlatModel F, FlatData D, Py_ssize_t k, const double[:, ::1] points,
                      const Py_ssize_t* shape) noexcept nogil:
    cdef double* row = &D.cc_cache[k, 0]
    cdef double cell = F.cc_sdf_cell[k], w = row[CACHE_MARGIN], reach
    cdef Py_ssize_t p0 = F.cc_point_start[k], p1 = F.cc_point_start[k + 1]
    cdef Py_ssize_t n0 = F.cc_node_start[k], n1 = F.cc_node_start[k + 1], n, i, q
    cdef int a, c
    cdef double centre[3]
    # the root cell holds every point: |p| <= |c_root| + r_root
    reach = sqrt(F.cc_node_centre[n0, 0] ** 2 + F.cc_node_centre[n0, 1] ** 2 + F.cc_node_centre[n0, 2] ** 2)
    reach += F.cc_node_radius[n0]
    if w == 0.0:
        w = CACHE_FIRST * reach
    elif row[CACHE_USES] < CACHE_SHORT:
        w = 2.0 * w
    elif row[CACHE_USES] > CACHE_LONG:
        w = 0.5 * w
    w = max(CACHE_LEAST * reach, min(w, reach))
    n = penetrating_points_c(
        points, F.cc_point_order[p0:p1], F.cc_node_centre[n0:n1], F.cc_node_radius[n0:n1],
        F.cc_node_child_start[n0:n1], F.cc_node_child_count[n0:n1], F.cc_node_point_start[n0:n1],
        F.cc_node_point_count[n0:n1], True, D.cc_R, D.cc_t, &F.cc_sdf_values[F.cc_sdf_start[k]], shape,
        &F.cc_sdf_origin[k, 0], cell, &F.cc_mesh_lo[k, 0], &F.cc_mesh_hi[k, 0], cell, w,
        &F.cc_sdf_bound[F.cc_sdf_bound_start[k]], &F.cc_sdf_bound_meta[k, 0], D.cc_cand_idx[p0:p1],
        D.cc_cand_d[p0:p1], D.cc_grad, <Py_ssize_t*>&D.cc_stack[0],
    )
    # each candidate's value at the cache's pose, and its reference point: where it was looked up
    for i in range(p0, p0 + n):
        D.cc_cand_d0[i] = D.cc_cand_d[i]
        q = D.cc_cand_idx[i]
        for a in range(3):
            D.cc_cand_x[i, a] = (D.cc_R[a, 0] * points[q, 0] + D.cc_R[a, 1] * points[q, 1] + D.cc_R[a, 2] * points[q, 2]
                                 + D.cc_t[a])
    # while the cache holds, every point moves by less than w: the points stay in the root's ball
    # grown by w, where the field's slope is at most G (its pyramid; sqrt(3), the 1-norm bound,
    # where the ball leaves the grid)
    for a in range(3):
        centre[a] = (D.cc_R[a, 0] * F.cc_node_centre[n0, 0] + D.cc_R[a, 1] * F.cc_node_centre[n0, 1]
                     + D.cc_R[a, 2] * F.cc_node_centre[n0, 2] + D.cc_t[a])
    row[CACHE_SLOPE] = max(1.0, _region_slope(&F.cc_sdf_bound[F.cc_sdf_bound_start[k]], &F.cc_sdf_bound_meta[k, 0],
                                              &F.cc_sdf_origin[k, 0], 1.0 / cell, centre, F.cc_node_radius[n0] + w))
    row[CACHE_COUNT] = n
    row[CACHE_MARGIN] = w
    row[CACHE_VALID] = 1.0
    row[CACHE_USES] = 0.0
    row[CACHE_REACH] = reach
    for a in range(3):
        row[CACHE_T + a] = D.cc_t[a]
        for c in range(3):
            row[CACHE_R + 3 * a + c] = D.cc_R[a, c]


# The slave's points inside the master (pair k, pose D.cc_R, D.cc_t) through the pair's cache: at
# the pose (R0, t0) it was made at, every point off the list had a value above the margin w; a point
# has since moved by at most delta = |t - t0| + |R - R0|_F reach in the master's frame, within the
# region where the interpolant's slope is at most G >= 1 (_make_cache), its value by at most G delta,
# so while G delta < w only the listed points can be inside, and only those whose value d0 there
# was within G delta of zero. Such a point is looked up only when
# its last known value d_ref, at x_ref, less |x - x_ref|_1 is not positive; a look-up makes (x, d)
# its new reference. A cache that no longer holds is made again.
# The points found, their values and gradients are those of the full walk, in index order, so the
# forces agree with it to the last bit. Returns how many (into D.cc_idx, D.cc_d, D.cc_grad).
cdef Py_ssize_t _cached_points(FlatModel F, FlatData D, Py_ssize_t k, const double[:, ::1] points,
                               const Py_ssize_t* shape) noexcept nogil:
    cdef double* row = &D.cc_cache[k, 0]
    cdef double cell = F.cc_sdf_cell[k], inv = 1.0 / cell, slack = CULL_SLACK * cell
    cdef double move = 0.0, turn = 0.0, change = 0.0, e, d, ext, gx, gy, gz, px, py, pz, x, y, z
    cdef const double* values = &F.cc_sdf_values[F.cc_sdf_start[k]]
    cdef const double* origin = &F.cc_sdf_origin[k, 0]
    cdef Py_ssize_t p0 = F.cc_point_start[k], i, q, count = 0
    cdef int a, c
    if row[CACHE_VALID] != 0.0:
        for a in range(3):
            e = D.cc_t[a] - row[CACHE_T + a]
            move += e * e
            for c in range(3):
                e = D.cc_R[a, c] - row[CACHE_R + 3 * a + c]
                turn += e * e
        # (1 + 1e-12): the round-off of the bound itself
        change = row[CACHE_SLOPE] * (sqrt(move) + sqrt(turn) * row[CACHE_REACH]) * (1.0 + 1e-12) + slack
        if change >= row[CACHE_MARGIN]:
            row[CACHE_VALID] = 0.0
    if row[CACHE_VALID] == 0.0:
        _make_cache(F, D, k, points, shape)
        change = slack
    row[CACHE_USES] += 1.0
    # the listed points that may be inside now: those within the change of zero where the cache was
    # made (no arithmetic for the others), then by their last look-up, looked up as _test_point does
    for i in range(p0, p0 + <Py_ssize_t>row[CACHE_COUNT]):
        if D.cc_cand_d0[i] > change:
            continue
        q = D.cc_cand_idx[i]
        x, y, z = points[q, 0], points[q, 1], points[q, 2]
        px = D.cc_R[0, 0] * x + D.cc_R[0, 1] * y + D.cc_R[0, 2] * z + D.cc_t[0]
        py = D.cc_R[1, 0] * x + D.cc_R[1, 1] * y + D.cc_R[1, 2] * z + D.cc_t[1]
        pz = D.cc_R[2, 0] * x + D.cc_R[2, 1] * y + D.cc_R[2, 2] * z + D.cc_t[2]
        if (D.cc_cand_d[i] - fabs(px - D.cc_cand_x[i, 0]) - fabs(py - D.cc_cand_x[i, 1])
                - fabs(pz - D.cc_cand_x[i, 2])) > slack:
            continue
        d = distance_grid(values, shape[0], shape[1], shape[2], origin, inv, cell, px, py, pz, &ext)
        D.cc_cand_d[i] = d
        D.cc_cand_x[i, 0] = px
        D.cc_cand_x[i, 1] = py
        D.cc_cand_x[i, 2] = pz
        if d < 0.0:
            d = interpolate_grid(values, shape[0], shape[1], shape[2], origin, inv, cell, px, py, pz, &gx, &gy, &gz,
                                 &ext)
            D.cc_idx[count] = q
            D.cc_d[count] = d
            D.cc_grad[count, 0] = gx
            D.cc_grad[count, 1] = gy
            D.cc_grad[count, 2] = gz
            count += 1
    # in index order (the list is in the octree's)
    _sort_found(D.cc_idx, D.cc_d, D.cc_grad, count)
    return count


def cached_contact_points(FlatModel F not None, FlatData D not None, Py_ssize_t k, const double[:, ::1] R,
                          const double[::1] t):
    """Pair k's slave points inside its master with the slave at (R, t) in the master's frame
    (x_m = R x_s + t), found as compliant_forces_into finds them: through the pair's cache of
    candidates (octree pairs). Returns (indices, distances, gradients in the master's frame) in
    index order, and whether the cache was made again for this call."""
    if not (0 <= k < F.ncc) or not F.cc_tree[k]:
        raise ValueError(f"cached_contact_points: pair {k} is not an octree pair of the model")
    cdef Py_ssize_t shape[3]
    cdef Py_ssize_t p0 = F.cc_point_start[k], p1 = F.cc_point_start[k + 1], n
    cdef int a, c
    cdef bint remade = D.cc_cache[k, CACHE_VALID] == 0.0
    for a in range(3):
        shape[a] = F.cc_sdf_shape[k, a]
        D.cc_t[a] = t[a]
        for c in range(3):
            D.cc_R[a, c] = R[a, c]
    uses = D.cc_cache[k, CACHE_USES]
    n = _cached_points(F, D, k, F.cc_points[p0:p1], shape)
    remade = remade or D.cc_cache[k, CACHE_USES] <= uses
    return (np.asarray(D.cc_idx[:n]).copy(), np.asarray(D.cc_d[:n]).copy(), np.asarray(D.cc_grad[:n]).copy(),
            bool(remade))


# the OBB of pair k's side (0 master, 1 slave) in world: centre pos + R c, axes R A
cdef inline void _world_box(FlatModel F, FlatData D, Py_ssize_t k, int side, Py_ssize_t b) noexcept nogil:
    cdef int a, c
    for a in range(3):
        D.cc_box_c[side, a] = D.pos[b, a] + (D.rot[b, a, 0] * F.cc_box_centre[k, side, 0]
                                             + D.rot[b, a, 1] * F.cc_box_centre[k, side, 1]
                                             + D.rot[b, a, 2] * F.cc_box_centre[k, side, 2])
        for c in range(3):
            D.cc_box_R[side, a, c] = (D.rot[b, a, 0] * F.cc_box_axes[k, side, 0, c]
                                      + D.rot[b, a, 1] * F.cc_box_axes[k, side, 1, c]
                                      + D.rot[b, a, 2] * F.cc_box_axes[k, side, 2, c])


cdef double compliant_forces_into(FlatModel F, FlatData D, double[::1] Qc, double[::1] Qn) noexcept nogil:
    """Every compliant pair (mbsim.model.contact.compliant, the module docstring) at the body frames
    in D: the OBBs' 15-axis test, the octree walk and field lookups (penetrating_points_c), the
    forces of eqs. (36)-(43) (pair_forces_c), added to Qc (elastic) and Qn (damping, friction) of
    both bodies (the ground's left out); each pair's count, deepest penetration and class counts
    into D.cc_pair, D.cc_class_counts, the totals and the elastic potential into D.cc_total.
    Returns the potential."""
    cdef Py_ssize_t nb = F.nbody
    cdef Py_ssize_t k, m, s, n, i, p0, p1, n0, n1, c0, c1, j, b
    cdef int a, c, row
    cdef double potential = 0.0, pair_potential, deepest, total_deepest = 0.0, x, y, z
    cdef long long total_count = 0
    cdef Py_ssize_t shape[3]
    cdef const double[:, ::1] points
    # the implicit contact step asks for each pair's slopes too (D.cc_stiffness, D.cc_damping)
    cdef bint linearize = D.cc_linear[0] != 0.0
    for k in range(F.ncc):
        m = F.cc_master[k]
        s = F.cc_slave[k]
        D.cc_pair[k, 0] = 0.0
        D.cc_pair[k, 1] = 0.0
        if linearize:
            for i in range(12):
                for j in range(12):
                    D.cc_stiffness[k, i, j] = 0.0
                    D.cc_damping[k, i, j] = 0.0
        c0, c1 = F.cc_class_start[k], F.cc_class_start[k + 1]
        for j in range(c0 + k, c1 + k + (1 if c1 > c0 else 0)):
            D.cc_class_counts[j] = 0.0
        # global detection: the oriented bounding boxes, the 15-axis separating-axis test
        _world_box(F, D, k, 0, m)
        _world_box(F, D, k, 1, s)
        if not obb_overlap_one_c(D.cc_box_c[0], D.cc_box_R[0], F.cc_box_half[k, 0], D.cc_box_c[1], D.cc_box_R[1],
                                 F.cc_box_half[k, 1], 0.0, OBB_EPS_C):
            continue
        # slave frame -> master frame: x_m = R x_s + t, R = R_m^T R_s, t = R_m^T (p_s - p_m)
        for a in range(3):
            D.cc_t[a] = (D.rot[m, 0, a] * (D.pos[s, 0] - D.pos[m, 0]) + D.rot[m, 1, a] * (D.pos[s, 1] - D.pos[m, 1])
                         + D.rot[m, 2, a] * (D.pos[s, 2] - D.pos[m, 2]))
            for c in range(3):
                D.cc_R[a, c] = D.rot[m, 0, a] * D.rot[s, 0, c] + D.rot[m, 1, a] * D.rot[s, 1, c] + D.rot[m, 2, a] * D.rot[s, 2, c]
        # local detection: the octree walk through the pair's cache (or every point) and the lookups
        p0, p1 = F.cc_point_start[k], F.cc_point_start[k + 1]
        n0, n1 = F.cc_node_start[k], F.cc_node_start[k + 1]
        points = F.cc_points[p0:p1]
        for a in range(3):
            shape[a] = F.cc_sdf_shape[k, a]
        if F.cc_tree[k]:
            n = _cached_points(F, D, k, points, shape)
        else:
            n = penetrating_points_c(
                points, F.cc_point_order[p0:p1], F.cc_node_centre[n0:n1], F.cc_node_radius[n0:n1],
                F.cc_node_child_start[n0:n1], F.cc_node_child_count[n0:n1], F.cc_node_point_start[n0:n1],
                F.cc_node_point_count[n0:n1], False, D.cc_R, D.cc_t, &F.cc_sdf_values[F.cc_sdf_start[k]],
                shape, &F.cc_sdf_origin[k, 0], F.cc_sdf_cell[k], &F.cc_mesh_lo[k, 0], &F.cc_mesh_hi[k, 0],
                F.cc_sdf_cell[k], 0.0, NULL, NULL, D.cc_idx, D.cc_d, D.cc_grad, <Py_ssize_t*>&D.cc_stack[0],
            )
        if n == 0:
            continue
        # world points, penetrations g = -d, the field's gradient in world axes
        deepest = 0.0
        for i in range(n):
            j = D.cc_idx[i]
            x, y, z = points[j, 0], points[j, 1], points[j, 2]
            for a in range(3):
                D.cc_p[i, a] = D.pos[s, a] + D.rot[s, a, 0] * x + D.rot[s, a, 1] * y + D.rot[s, a, 2] * z
            D.cc_d[i] = -D.cc_d[i]
            deepest = max(deepest, D.cc_d[i])
            x, y, z = D.cc_grad[i, 0], D.cc_grad[i, 1], D.cc_grad[i, 2]
            for a in range(3):
                D.cc_grad[i, a] = D.rot[m, a, 0] * x + D.rot[m, a, 1] * y + D.rot[m, a, 2] * z
            # its penetration class: the number of thresholds at or below g
            if c1 > c0:
                c = 0
                while c0 + c < c1 and F.cc_classes[c0 + c] <= D.cc_d[i]:
                    c += 1
                D.cc_class_counts[c0 + k + c] += 1.0
        D.cc_pair[k, 0] = n
        D.cc_pair[k, 1] = deepest
        total_count += n
        total_deepest = max(total_deepest, deepest)
        # eqs. (36)-(43): the elastic part along the raw gradient of the interpolant (exactly
        # conservative), damping and friction along the unit normal
        for row in range(4):
            for a in range(6):
                D.cc_wrench[row, a] = 0.0
        pair_potential = pair_forces_c(
            D.cc_p[:n], D.cc_d[:n], D.cc_grad[:n], D.pos[s], D.rot[s], D.vel[s], D.omega[s], D.pos[m], D.rot[m],
            D.vel[m], D.omega[m], <const ContactLaw*>&F.cc_law[k, 0], D.cc_wrench,
            &D.cc_stiffness[k, 0, 0] if linearize else NULL, &D.cc_damping[k, 0, 0] if linearize else NULL,
        )
        potential += pair_potential
        # rows: slave and master elastic (Qc), then slave and master damping and friction (Qn)
        for row in range(4):
            b = s if row % 2 == 0 else m
            if b >= nb:
                continue
            for a in range(6):
                if row < 2:
                    Qc[6 * b + a] += D.cc_wrench[row, a]
                else:
                    Qn[6 * b + a] += D.cc_wrench[row, a]
    D.cc_total[0] = total_count
    D.cc_total[1] = total_deepest
    D.cc_total[2] = potential
    D.cc_total[3] = max(D.cc_total[3], <double>total_count)
    return potential


# Whether pair k's boxes overlap now or may within a step h: the master's box grown by how far the
# corners of both boxes can move in h (CompliantContacts.near; box_c row 2 holds the grown half extents).
cdef bint _pair_near(FlatModel F, FlatData D, Py_ssize_t k, double h) noexcept nogil:
    cdef double grow = 0.0, reach, speed, spin
    cdef int side, a
    cdef Py_ssize_t b
    for side in range(2):
        b = F.cc_master[k] if side == 0 else F.cc_slave[k]
        _world_box(F, D, k, side, b)
        # the farthest corner from the body's origin
        reach = (sqrt(F.cc_box_centre[k, side, 0] ** 2 + F.cc_box_centre[k, side, 1] ** 2
                      + F.cc_box_centre[k, side, 2] ** 2)
                 + sqrt(F.cc_box_half[k, side, 0] ** 2 + F.cc_box_half[k, side, 1] ** 2 + F.cc_box_half[k, side, 2] ** 2))
        speed = sqrt(D.vel[b, 0] ** 2 + D.vel[b, 1] ** 2 + D.vel[b, 2] ** 2)
        spin = sqrt(D.omega[b, 0] ** 2 + D.omega[b, 1] ** 2 + D.omega[b, 2] ** 2)
        grow += h * (speed + spin * reach)
    for a in range(3):
        D.cc_box_c[2, a] = F.cc_box_half[k, 0, a] + grow
    return obb_overlap_one_c(D.cc_box_c[0], D.cc_box_R[0], D.cc_box_c[2], D.cc_box_c[1], D.cc_box_R[1],
                             F.cc_box_half[k, 1], 0.0, OBB_EPS_C)


def near(FlatModel F not None, FlatData D not None, const double[::1] q, const double[::1] v, double h):
    """Whether the bounding boxes of some compiled pair overlap at the state (q, v) (body
    coordinates) or may within a step h: CompliantContacts.near over the FlatModel's cc_* arrays
    (the paper's step control, tested once per step; D's frames are overwritten)."""
    if q.shape[0] != F.nq or v.shape[0] != F.nv:
        raise ValueError(f"near: expected q of {F.nq} and v of {F.nv}")
    return contacts_near(F, D, q, v, h)


cdef bint contacts_near(FlatModel F, FlatData D, const double[::1] q, const double[::1] v,
                        double h) noexcept nogil:
    if F.ncc == 0 or F.dim != 3:
        return False
    frames3_into(q, v, F.nbody, D.pos, D.rot, D.vel, D.omega_body, D.omega)
    return frames_near(F, D, h)


cdef bint frames_near(FlatModel F, FlatData D, double h) noexcept nogil:
    cdef Py_ssize_t k
    if F.ncc == 0 or F.dim != 3:
        return False
    for k in range(F.ncc):
        if _pair_near(F, D, k, h):
            return True
    return False

