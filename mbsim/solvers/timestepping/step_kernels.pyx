"""The compiled step of method ``timestepping`` (mbsim.solvers.timestepping): free bodies and bodies
held by bilateral joints, with the joint coordinates' stops and friction rows, every shape pair with a
compiled narrow phase, every force in the FlatModel, contact solver ``active_set`` or ``pgs``. One
call does the whole step of the module docstring with the Python path's equations: the midpoint
q_m = q + h/2 v (exponential map), the frames and forces there (mbsim.model.step_kernels), v_free =
v + h M^-1 Q, the reach and the margin, the detection (world poses, the shapes' world boxes, broad
and narrow phase: the compiled cores of mbsim.model.contact), the contact rows in body space
(jacobian_kernels), Newton's targets with the restitution threshold and the stabilisation, the warm
start (by feature key, else the nearest previous contact of the same shape pair within the margin),
the sweeps and the natural residual (cone_kernels), the end state and the work.

Joints (model.nc > 0): their rows J_E at the midpoint (constraints_into) are eliminated exactly, as
the Python path's Schur complement does: S = J_E M^-1 J_E^T factored (envelope Cholesky,
mbsim.solvers.ode.ode_kernels.certified_full_rank), the contact problem reduced to the dense
A = C M^-1 C^T - A_EC^T S^-1 A_EC, b = C v_free - r - A_EC^T S^-1 b_E (A_EC = J_E M^-1 C^T, b_E =
J_E v_free + Phi_t), swept on A assembled and the joint impulses recovered, P_E = -S^-1 (A_EC P_C +
b_E); then the paper's projection of q and v (ode_kernels.project, pseudo-inverse steps), whose
velocity multipliers join P_E (the recorded joint impulse: the module docstring of
mbsim.solvers.timestepping). Where the
factor is not certified of full rank (redundant joints, a singular position: the pseudo-inverse
would cut a singular value) the step is not taken (``step`` returns False) and the caller takes it
in Python, whose SVD decides.

Joint coordinates (mbsim.solvers.numerics.joint_rows): their rows follow the contacts' in the same
problem, assembled (coordinate_values_into at the midpoint): the stops within the margin plus the
step's travel, unilateral with the contacts' targets, then the friction rows, |P| <= F(|c v|) h; a
stop the solved impulses would still close within the step is taken in and the problem solved
again. The forces exclude the compliant stops and the regularised friction (nonsmooth_forces_into).

When the active-set solve is asked for (``active_set``) and the first sweeps leave a residual above
the tolerance, the step runs the loop of mbsim.solvers.numerics.cone._cone_loop compiled: the
active-set solve (cone_kernels.polish_into on A = J M^-1 J^T assembled from the body-space rows),
on failure more sweeps (twice as many each time) and again, until the sweeps run out. The step
allocates nothing once its buffers have grown to the largest contact count seen.
"""

import numpy as np

from libc.math cimport INFINITY, exp, fabs, sqrt
from libc.stdint cimport int64_t

from mbsim.model.contact.broadphase_kernels cimport aabb_half_into, keep_candidates, sweep_axis, sweep_pairs
from mbsim.model.contact.jacobian_kernels cimport rows_into
from mbsim.model.contact.laws.newton_kernels cimport newton_velocity
from mbsim.model.contact.narrowphase_kernels cimport MeshShape, MeshTable, batch_into, batch_rows
from mbsim.model.contact.sorting cimport argsort
from mbsim.model.kernels cimport retract3_into
from mbsim.model.layout cimport FlatData, FlatModel
from mbsim.model.step_kernels cimport (constraints_into, coordinate_values_into, frames_into, inverse_mass_times,
                                       nonsmooth_forces_into, row_body, row_dot, row_nbody)
from mbsim.solvers.numerics.lapack_kernels cimport cholesky_envelope_solve_ptr
from mbsim.solvers.ode.ode_kernels cimport (P_NPARAMS, P_PROJ_ITERATIONS, P_PROJ_POSITION, P_PROJ_TOL,
                                           P_PROJ_VELOCITY, P_RANK_TOL, P_ROBUST, certified_full_rank, project)
from mbsim.solvers.numerics.cone_kernels cimport (Rows, natural_residual, polish_doubles, polish_ints, polish_into,
                                                  polish_w, sweeps_into)


# Newton's law and the stabilisation (the module docstring of mbsim.solvers.timestepping): the target
# normal velocity of a row of gap ``gap`` approached at ``approach`` (J_N v), ``approach_free`` (J_N
# v_free), restitution e; Newton's law r_N = e max(u, 0), e = 0 at or below the threshold
# (mbsim.model.contact.laws.newton_kernels).
# m: a gap or penetration at most this far from zero is resting contact, whose target is Newton's law
# alone (no stabilisation, no landing): the stabilisation's -gap/(h/2) on one side of zero and
# beta (-gap)/h on the other would otherwise keep a face's redundant corners asking for slightly
# different velocities at the 1e-13 m its fixed point wanders by, and the contact problem changing
# every step (a ten-box tower needs the active-set solve on one step in seven with it, none without)
cdef double RESTING_GAP = 1e-12


cdef inline double target_velocity(double approach, double approach_free, double gap, double e, double threshold,
                                   double beta, double h) noexcept nogil:
    cdef double speed = -approach
    cdef double bounce = newton_velocity(speed, e, threshold)
    if fabs(gap) <= RESTING_GAP:
        return bounce
    if gap <= 0.0:  # closed: restitution, or the penetration correction if larger
        return max(bounce, beta * max(-gap, 0.0) / h)
    # open, closing within the step: an impact now, or (e = 0) a landing on the surface
    if gap <= 0.5 * h * max(speed, -approach_free) and bounce > 0.0:
        return bounce
    return -gap / (0.5 * h)


def targets(const double[::1] approach, const double[::1] approach_free, const double[::1] gap,
            const double[::1] restitution, double threshold, double beta, double h):
    """Target normal velocities r_N (n,) of n unilateral rows (contacts, joint stops): target_velocity."""
    cdef Py_ssize_t n = gap.shape[0], i
    out = np.empty(n)
    cdef double[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = target_velocity(approach[i], approach_free[i], gap[i], restitution[i], threshold, beta, h)
    return out


# First index of sorted keys[0:n] not below key (numpy's searchsorted, side "left").
cdef inline Py_ssize_t _lower(const int64_t* keys, Py_ssize_t n, int64_t key) noexcept nogil:
    cdef Py_ssize_t a = 0, b = n, m
    while a < b:
        m = (a + b) // 2
        if keys[m] < key:
            a = m + 1
        else:
            b = m
    return a


# The warm start of contact r (key, its point on body j: d) from the previous step's sorted keys,
# impulses (n, d) and points (n, d): the same feature key, else the previous contact of the same shape
# pair (key // max_feature) nearest to the point, within ``margin``; into start (d); False: none.
cdef bint warm_value(int64_t key, const double* point, const int64_t* keys, const double* values,
                     const double* points, Py_ssize_t n, int d, int64_t max_feature, double margin,
                     double* start) noexcept nogil:
    cdef Py_ssize_t where, lo, hi, i, best = -1
    cdef int a
    cdef int64_t pair
    cdef double dist, nearest = 0.0, s
    if n == 0:
        return False
    where = min(_lower(keys, n, key), n - 1)
    if keys[where] != key:
        # the pair is the key's high part: its contacts are one run of the sorted keys
        pair = key // max_feature
        lo = _lower(keys, n, pair * max_feature)
        hi = _lower(keys, n, (pair + 1) * max_feature)
        for i in range(lo, hi):
            dist = 0.0
            for a in range(d):
                s = points[i * d + a] - point[a]
                dist += s * s
            dist = sqrt(dist)
            if best < 0 or dist < nearest:
                best, nearest = i, dist
        if best < 0 or nearest > margin:
            return False
        where = best
    for a in range(d):
        start[a] = values[where * d + a]
    return True


def warm_start(const int64_t[::1] key, const double[:, ::1] point, const int64_t[::1] keys,
               const double[:, ::1] values, const double[:, ::1] points, int64_t max_feature, double margin,
               double[:, ::1] start):
    """start[r] (k, d) from the previous step's contacts (sorted keys (n,), impulses, points (n, d)):
    warm_value of each contact r (rows without one are left as they are)."""
    cdef Py_ssize_t k = key.shape[0], n = keys.shape[0], r
    cdef int d = start.shape[1]
    if n == 0 or k == 0:
        return
    with nogil:
        for r in range(k):
            warm_value(key[r], &point[r, 0], &keys[0], &values[0, 0], &points[0, 0], n, d, max_feature, margin,
                       &start[r, 0])


cdef class FreeStep:
    """The compiled step of one run (module docstring): the detector's tables, the options, the
    warm-start memory and every buffer. ``step`` then ``finish`` when it returned True."""

    cdef FlatModel F
    cdef FlatData D
    cdef dict buf
    cdef readonly Py_ssize_t nbody, d, w, nv, nq, nshape, nbounded, ntype, nhalf, nkeys, nsets
    cdef readonly Py_ssize_t k, n, iterations, chunk, nc, solves
    cdef readonly double residual, normal_total, work, tight, violation
    cdef double margin, beta, threshold, tol, omega, h, t, work0, reach_margin
    cdef Py_ssize_t max_iterations, polish_max, first_sweeps, nwarm
    cdef bint polish, warm
    cdef int64_t max_feature
    # the detector's tables (mbsim.model.contact.detect.ContactDetector)
    cdef const int64_t[::1] shape_body, shape_type, aabb, pair_kernel, keys, key_entry, set_index
    cdef const int64_t[::1] half_plane, half_shape, half_entry
    cdef const unsigned char[::1] oriented, has_pos, has_rot, pair_swap
    cdef const unsigned char[:, ::1] set_in1, set_in2
    cdef const double[:, ::1] pos_local, param
    cdef const double[:, :, ::1] rot_local
    cdef const double[::1] restitution, friction, radius
    cdef MeshTable meshes  # the detector's mesh shapes (mesh_table)
    cdef const MeshShape* mesh  # its table, NULL without meshes
    # per step
    cdef double[::1] q_mid, v_start, v_free, v_new, q_new, impulse, dx, vb
    cdef double[:, ::1] pos, lo, hi, half
    cdef double[:, :, ::1] rot
    cdef int64_t[::1] order, ends, tmp
    cdef double[::1] box
    cdef int64_t[::1] sa, sb, ca, cb, ce
    cdef int64_t[::1] body_i, body_j, entry, feature, sorted_idx, sort_tmp
    cdef double[:, ::1] point_i, point_j, normal
    cdef double[::1] gap
    cdef long long[::1] indptr, indices
    cdef double[::1] data, u, b, x, wv, diag, diag_used, block, mu, xlo, xhi
    cdef int64_t[::1] warm_keys
    cdef double[:, ::1] warm_values, warm_points
    # the active-set solve: A (n, n), its answer, its work; the rows of each body (body_start (nbody + 1,),
    # body_row and body_entry: a row and the start of its block on that body)
    cdef double[::1] dense, answer, polish_work
    cdef int[::1] polish_iwork
    cdef int64_t[::1] body_start, body_row, body_entry
    cdef Py_ssize_t polish_room
    # the joints: A_EC^T (n, nc) and S^-1 A_EC (as its transpose, (n, nc)), b_E and S^-1 b_E, P_E (nc),
    # the velocity projection's multipliers (nc); the projection's parameters (ode_kernels' P); A's rows
    # as CSR over the dense (n, n) (the sweeps)
    cdef double[::1] aec, sec, b_e, s_b_e, p_e, lam_v, P
    cdef long long[::1] dense_indptr, dense_indices
    cdef double rank_tol
    # the joint coordinates' rows (mbsim.solvers.numerics.joint_rows.JointRows): the stops (coordinate
    # row, sign, bound, restitution), the friction rows (coordinate row, Coulomb, static, Stribeck
    # velocity; the stops of each: fs_start, fs_stop), each coordinate row's item (jc_bi, jc_bj); per
    # step the stops' gaps, which are in the problem (taken, the nu of them in ``chosen``), the friction
    # bounds; dense: A is assembled (joints or coordinate rows), its sweeps over A's rows
    cdef readonly Py_ssize_t nstop, nfriction, nu
    cdef Py_ssize_t nx
    cdef bint dense_rows
    cdef const int64_t[::1] stop_row, friction_row, row_item, fs_start, fs_stop
    cdef const double[::1] stop_sign, stop_bound, stop_e, f_coulomb, f_static, f_stribeck
    cdef double[::1] stop_gap, f_bound
    cdef int64_t[::1] taken, chosen

    def __init__(self, FlatModel F, FlatData D, detector, restitution, friction, radius, options: dict,
                 int64_t max_feature, Py_ssize_t polish_max, Py_ssize_t first_sweeps, projection=None,
                 coordinates=None):
        """``projection`` (mbsim.solvers.ode.ProjectionOptions) of a model with joints; D made with
        ``robust`` and ``dense`` then (the factor of S, the projection's pseudo-inverse).
        ``coordinates``: the joint coordinates' stops and friction rows (JointRows), if any."""
        cdef Py_ssize_t d = F.dim, s
        self.F, self.D = F, D
        self.buf = {}
        self.nc = F.nc
        self._coordinates(F, coordinates)
        self.dense_rows = self.nc > 0 or self.nx > 0
        self.rank_tol = options["rank_tol"]
        P = np.zeros(P_NPARAMS)
        if projection is not None:
            P[P_PROJ_POSITION], P[P_PROJ_VELOCITY] = float(projection.position), float(projection.velocity)
            P[P_PROJ_ITERATIONS], P[P_PROJ_TOL] = projection.iterations, projection.tol
        P[P_ROBUST], P[P_RANK_TOL] = 1.0, self.rank_tol  # the Python path's pseudo-inverse steps
        self.P = self._keep("P", P)
        self.violation = -1.0
        nce = max(F.nc, 1)
        self.b_e, self.s_b_e = self._keep("b_e", np.zeros(nce)), self._keep("s_b_e", np.zeros(nce))
        self.p_e = self._keep("p_e", np.zeros(nce))
        self.lam_v = self._keep("lam_v", np.zeros(nce))
        self.nbody, self.d, self.nv, self.nq = F.nbody, d, F.nv, F.nq
        self.w = 6 if d == 3 else 3
        self.max_feature = max_feature
        self.margin = options["margin"]
        self.beta = options["stabilization"]
        self.threshold = options["restitution_threshold"]
        self.polish = options["lcp"] == "active_set"
        self.max_iterations = int(options["pgs"]["iterations"])
        self.tol = options["pgs"]["tol"]
        self.omega = options["pgs"]["omega"]
        self.warm = bool(options["pgs"]["warm_start"])
        self.polish_max, self.first_sweeps = polish_max, first_sweeps
        self.restitution = self._keep("restitution", np.asarray(restitution, dtype=float))
        self.friction = self._keep("friction", np.asarray(friction, dtype=float))
        self.radius = self._keep("radius", np.asarray(radius, dtype=float))
        # the shapes in the detector's order: body, type, local pose, world box kind
        det = detector
        n = self.nshape = det.nshape
        self.nbounded = det.nbounded
        self.ntype = len(det.tables)
        pos_local, rot_local = np.zeros((max(n, 1), d)), np.tile(np.eye(d), (max(n, 1), 1, 1))
        oriented, has_pos, has_rot = (np.zeros(max(n, 1), dtype=np.uint8) for _ in range(3))
        aabb = np.full(max(n, 1), -1, dtype=np.int64)
        for t in det.tables:
            sl = slice(t.start, t.stop)
            oriented[sl] = t.oriented
            aabb[sl] = -1 if t.kind.unbounded else t.kind.aabb_kernel
            if t.pos_local is not None:
                pos_local[sl], has_pos[sl] = t.pos_local, 1
            if t.oriented and t.rot_local is not None:
                rot_local[sl], has_rot[sl] = t.rot_local, 1
        self.pos_local = self._keep("pos_local", pos_local)
        self.rot_local = self._keep("rot_local", rot_local)
        self.oriented = self._keep("oriented", oriented)
        self.has_pos = self._keep("has_pos", has_pos)
        self.has_rot = self._keep("has_rot", has_rot)
        self.aabb = self._keep("aabb", aabb)
        self.shape_body = self._keep("shape_body", _int(det.shape_body, 1))
        self.shape_type = self._keep("shape_type", _int(det.shape_type, 1))
        self.param = self._keep("param", np.ascontiguousarray(det.shape_param, dtype=float).reshape(-1, 3)
                                if n else np.zeros((1, 3)))
        self.pair_kernel = self._keep("pair_kernel", _int(det._pair_kernel, 1))
        self.meshes = det.mesh_table
        self.mesh = self.meshes.shapes if self.meshes.n == n and n else NULL
        self.pair_swap = self._keep("pair_swap", np.ascontiguousarray(det._pair_swap, dtype=np.uint8)
                                    if len(det._pair_swap) else np.zeros(1, dtype=np.uint8))
        keys, key_entry, set_index, in1, in2 = det.pairs.lookup
        self.nkeys, self.nsets = len(keys), len(set_index)
        self.keys = self._keep("keys", _int(keys, 1))
        self.key_entry = self._keep("key_entry", _int(key_entry, 1))
        self.set_index = self._keep("set_index", _int(set_index, 1))
        self.set_in1 = self._keep("set_in1", np.ascontiguousarray(in1, dtype=np.uint8).reshape(-1, F.nbody + 1)
                                  if len(set_index) else np.zeros((1, 1), dtype=np.uint8))
        self.set_in2 = self._keep("set_in2", np.ascontiguousarray(in2, dtype=np.uint8).reshape(-1, F.nbody + 1)
                                  if len(set_index) else np.zeros((1, 1), dtype=np.uint8))
        self.nhalf = len(det._half_plane)
        self.half_plane = self._keep("half_plane", _int(det._half_plane, 1))
        self.half_shape = self._keep("half_shape", _int(det._half_shape, 1))
        self.half_entry = self._keep("half_entry", _int(det._half_entry, 1))
        # buffers of fixed size
        nv, nq, nbd = F.nv, F.nq, max(self.nbounded, 1)
        self.q_mid, self.q_new = self._keep("q_mid", np.zeros(nq)), self._keep("q_new", np.zeros(nq))
        self.v_start, self.v_free = self._keep("v_start", np.zeros(nv)), self._keep("v_free", np.zeros(nv))
        self.v_new, self.impulse = self._keep("v_new", np.zeros(nv)), self._keep("impulse", np.zeros(nv))
        self.dx, self.vb = self._keep("dx", np.zeros(nv)), self._keep("vb", np.zeros(nv))
        self.pos = self._keep("pos", np.zeros((max(n, 1), d)))
        self.rot = self._keep("rot", np.zeros((max(n, 1), d, d)))
        self.half = self._keep("half", np.zeros((nbd, d)))
        self.lo, self.hi = self._keep("lo", np.zeros((nbd, d))), self._keep("hi", np.zeros((nbd, d)))
        self.order, self.ends = self._keep("order", np.zeros(d * nbd, np.int64)), self._keep("ends", np.zeros(d * nbd, np.int64))
        self.tmp, self.box = self._keep("tmp", np.zeros(nbd, np.int64)), self._keep("box", np.zeros(4 * nbd))
        self._pairs(16)
        self._contacts(16)
        self.nwarm = 0
        self.warm_keys = self._keep("warm_keys", np.zeros(16, np.int64))
        self.warm_values = self._keep("warm_values", np.zeros((16, d)))
        self.warm_points = self._keep("warm_points", np.zeros((16, d)))
        self.body_start = self._keep("body_start", np.zeros(self.nbody + 1, np.int64))
        self._polish_room(0)

    cdef _coordinates(self, FlatModel F, rows):
        """The tables of the joint coordinates' rows (JointRows ``rows`` or None)."""
        empty_i, empty_d = np.zeros(1, np.int64), np.zeros(1)
        self.nstop = rows.nstop if rows else 0
        self.nfriction = rows.nfriction if rows else 0
        self.nx = self.nstop + self.nfriction
        item = np.zeros(max(F.njc, 1), np.int64)
        fs_start, fs_stop = np.zeros(self.nfriction + 1, np.int64), []
        if rows:
            for p in range(F.jc_row.shape[0]):
                item[F.jc_row[p] : F.jc_row[p] + F.jc_nrow[p]] = p
            for f, own in enumerate(rows.friction_stops):
                fs_stop.extend(sorted(own))
                fs_start[f + 1] = len(fs_stop)
        keep_i = lambda name, a: self._keep(name, np.ascontiguousarray(a, np.int64) if len(a) else empty_i)
        keep_d = lambda name, a: self._keep(name, np.ascontiguousarray(a, float) if len(a) else empty_d)
        self.stop_row = keep_i("stop_row", rows.stop_row if rows else [])
        self.stop_sign = keep_d("stop_sign", rows.stop_sign if rows else [])
        self.stop_bound = keep_d("stop_bound", rows.stop_bound if rows else [])
        self.stop_e = keep_d("stop_e", rows.stop_restitution if rows else [])
        self.friction_row = keep_i("friction_row", rows.friction_row if rows else [])
        self.f_coulomb = keep_d("f_coulomb", rows.coulomb if rows else [])
        self.f_static = keep_d("f_static", rows.static if rows else [])
        self.f_stribeck = keep_d("f_stribeck", rows.stribeck if rows else [])
        self.row_item = self._keep("row_item", item)
        self.fs_start = self._keep("fs_start", fs_start)
        self.fs_stop = keep_i("fs_stop", fs_stop)
        self.stop_gap = self._keep("stop_gap", np.zeros(max(self.nstop, 1)))
        self.f_bound = self._keep("f_bound", np.zeros(max(self.nfriction, 1)))
        self.taken = self._keep("taken", np.zeros(max(self.nstop, 1), np.int64))
        self.chosen = self._keep("chosen", np.zeros(max(self.nstop, 1), np.int64))
        self.nu = 0

    cdef _polish_room(self, Py_ssize_t n):
        """Room for the active-set solve of n rows."""
        n = max(n, 1)
        self.polish_room = n
        self.dense = self._keep("dense", np.zeros(n * n))
        self.answer = self._keep("answer", np.zeros(n))
        self.polish_work = self._keep("polish_work", np.zeros(polish_doubles(n)))
        self.polish_iwork = self._keep("polish_iwork", np.zeros(polish_ints(n), dtype=np.intc))
        self.body_row = self._keep("body_row", np.zeros(2 * n, np.int64))
        self.body_entry = self._keep("body_entry", np.zeros(2 * n, np.int64))
        if self.dense_rows:
            self.dense_indptr = self._keep("dense_indptr", np.zeros(n + 1, np.int64))
            self.dense_indices = self._keep("dense_indices", np.zeros(n * n, np.int64))

    cdef _keep(self, str name, array):
        """The array kept alive by this object (buf) and returned for a memoryview."""
        self.buf[name] = array
        return array

    cdef _pairs(self, Py_ssize_t m):
        """Room for m sweep pairs and m candidates."""
        m = max(m, 16)
        self.sa, self.sb = self._keep("sa", np.zeros(m, np.int64)), self._keep("sb", np.zeros(m, np.int64))
        self.ca, self.cb = self._keep("ca", np.zeros(m, np.int64)), self._keep("cb", np.zeros(m, np.int64))
        self.ce = self._keep("ce", np.zeros(m, np.int64))

    cdef _contacts(self, Py_ssize_t m):
        """Room for m contacts (their batch rows, their problem's m d rows)."""
        cdef Py_ssize_t d = self.d, n
        m = max(m, 16)
        n = m * d + self.nx  # (and the joint coordinates' rows after the contacts')
        self.body_i, self.body_j = self._keep("body_i", np.zeros(m, np.int64)), self._keep("body_j", np.zeros(m, np.int64))
        self.entry, self.feature = self._keep("entry", np.zeros(m, np.int64)), self._keep("feature", np.zeros(m, np.int64))
        self.sorted_idx, self.sort_tmp = self._keep("sorted_idx", np.zeros(m, np.int64)), self._keep("sort_tmp", np.zeros(m, np.int64))
        self.point_i, self.point_j = self._keep("point_i", np.zeros((m, d))), self._keep("point_j", np.zeros((m, d)))
        self.normal, self.gap = self._keep("normal", np.zeros((m, d))), self._keep("gap", np.zeros(m))
        self.indptr = self._keep("indptr", np.zeros(n + 1, np.int64))
        self.indices = self._keep("indices", np.zeros(2 * self.w * n, np.int64))
        self.data, self.u = self._keep("data", np.zeros(2 * self.w * n)), self._keep("u", np.zeros(2 * self.w * n))
        self.b, self.x, self.wv = self._keep("b", np.zeros(n)), self._keep("x", np.zeros(n)), self._keep("wv", np.zeros(n))
        self.diag, self.diag_used = self._keep("diag", np.zeros(n)), self._keep("diag_used", np.zeros(n))
        self.xlo, self.xhi = self._keep("xlo", np.zeros(n)), self._keep("xhi", np.full(n, np.inf))
        self.block, self.mu = self._keep("block", np.zeros(3 * m)), self._keep("mu", np.zeros(m))
        if self.nc:
            self.aec, self.sec = self._keep("aec", np.zeros(n * self.nc)), self._keep("sec", np.zeros(n * self.nc))

    # ------------------------------------------------------------------ the step

    def step(self, const double[::1] q, const double[::1] v, double t, double h, double work):
        """One step from (q, v) at t (module docstring): q_new, v_new, work, ... of its end. Returns
        False, the step not taken, when the joint rows' factor is not certified of full rank or the
        projection's SVD failed (the caller takes it in Python)."""
        cdef FlatModel F = self.F
        cdef FlatData D = self.D
        cdef Py_ssize_t nv = self.nv, i, k, used = 0
        cdef double reach
        cdef bint full = True, projected = True, more
        self.t, self.h, self.work0 = t, h, work
        with nogil:
            for i in range(nv):
                self.v_start[i] = v[i]
                self.dx[i] = 0.5 * h * v[i]
            self._retract(q, self.q_mid)
            frames_into(F, D, self.q_mid, v)
            nonsmooth_forces_into(F, D, t + 0.5 * h, v)  # (applied_forces(nonsmooth=True))
            inverse_mass_times(F, D.Q, self.vb)
            for i in range(nv):
                self.v_free[i] = v[i] + h * self.vb[i]
            # the joint rows at the midpoint, S = J_E M^-1 J_E^T factored (D.S, D.minv_jt)
            if self.nc:
                constraints_into(F, D, t + 0.5 * h)
                full = certified_full_rank(F, D, self.rank_tol, False)
                if full:
                    self._joint_rhs(F, D)
        if not full:
            return False
        with nogil:
            # contacts that can close by the end of the step: the margin grows with how far the bodies
            # can move, (|v| + |omega| R) h, at the larger of the start and the forces' velocity
            reach = max(self._reach(v), self._reach(self.v_free))
            self.reach_margin = self.margin + h * reach
        k = self._detect()
        with nogil:
            self.k = k
            if self.nx:
                self._coordinate_state(F, D, t + 0.5 * h)
        self.solves = 0
        # the stops left out that the solved impulses would still close within the step are taken in
        # and the problem solved again (the Python path's loop)
        while True:
            with nogil:
                self.n = k * self.d + self.nu + self.nfriction
                self.iterations, self.residual = 0, 0.0
                if self.n:
                    self._problem(F, D)
                    self.chunk = self.max_iterations
                    if self.polish and self.n <= self.polish_max:
                        self.chunk = min(self.first_sweeps, self.max_iterations)
                    self._solve()
            if self.n and self.polish and self.n <= self.polish_max and self.residual > self.tight:
                if self.n > self.polish_room:
                    self._polish_room(2 * self.n)
                with nogil:
                    self._polish_loop()
            with nogil:
                if self.n:
                    self._memory()
                self._velocities(F, D)
                more = self.nstop > 0 and self._missed(F, D)
            if not more:
                break
        with nogil:
            # §3: the joints' drift projected out, positions then velocities (pseudo-inverse steps)
            self.violation = -1.0
            if self.nc:
                projected = project(F, D, self.P, t + h, self.q_new, self.v_new, &used, &self.violation,
                                    &self.lam_v[0])
            if projected:
                # the velocity projection's impulse -J^T lam_v is the joints' too: the recorded P_E is
                # the whole momentum they gave, M (v_end - v) - h Q = J_mid^T P_E - J_end^T lam_v
                for i in range(self.nc):
                    self.p_e[i] -= self.lam_v[i]
                self._end(F, D)
        # the projection's SVD failed (a non-finite state): the caller takes the step, which reports it
        return projected

    # The detection at the frames in D with margin reach_margin (world poses and boxes, broad and narrow
    # phase) into the contact buffers (body_i, ..., gap, feature); returns the contact count.
    cdef Py_ssize_t _detect(self) except -1:
        cdef Py_ssize_t npair = 0, total = 0, rows, m, k
        cdef int axis = 0
        with nogil:
            self._world(self.D)
            if self.nbounded >= 2:
                axis = sweep_axis(&self.lo[0, 0], &self.hi[0, 0], self.nbounded, <int>self.d, &self.order[0],
                                  &self.ends[0], &self.tmp[0], &total)
        if total + 1 + self.nhalf > self.sa.shape[0]:
            self._pairs(2 * (total + 1 + self.nhalf))
        with nogil:
            if self.nbounded >= 2:
                npair = sweep_pairs(&self.lo[0, 0], &self.hi[0, 0], self.nbounded, <int>self.d, axis,
                                    &self.order[0], &self.ends[0], &self.box[0], &self.sa[0], &self.sb[0])
            m = keep_candidates(&self.sa[0], &self.sb[0], npair, &self.shape_body[0], &self.keys[0],
                                &self.key_entry[0], self.nkeys, &self.set_index[0], &self.set_in1[0, 0],
                                &self.set_in2[0, 0], self.nsets, self.nbody, &self.half_plane[0],
                                &self.half_shape[0], &self.half_entry[0], self.nhalf, &self.pos[0, 0],
                                &self.rot[0, 0, 0], &self.half[0, 0], <int>self.d, self.reach_margin, &self.ca[0],
                                &self.cb[0], &self.ce[0])
            rows = batch_rows(&self.ca[0], &self.cb[0], m, &self.shape_type[0], &self.pair_kernel[0],
                              <int>self.ntype, self.mesh)
        if rows < 0:  # compile refuses such pairs; reaching this is an internal error
            raise RuntimeError("a candidate pair of shapes has no rigid contact rule")
        if rows > self.gap.shape[0]:
            self._contacts(2 * rows)
        if self.dense_rows and rows * self.d + self.nx > self.polish_room:  # A is assembled
            self._polish_room(2 * (rows * self.d + self.nx))
        with nogil:
            k = batch_into(&self.ca[0], &self.cb[0], &self.ce[0], m, &self.shape_type[0], &self.shape_body[0],
                           &self.pair_kernel[0], &self.pair_swap[0], <int>self.ntype, self.nshape, <int>self.d,
                           &self.pos[0, 0], &self.rot[0, 0, 0], &self.param[0, 0], self.mesh, self.reach_margin,
                           self.nbody, self.max_feature, &self.body_i[0], &self.body_j[0], &self.entry[0],
                           &self.point_i[0, 0], &self.point_j[0, 0], &self.normal[0, 0], &self.gap[0],
                           &self.feature[0])
        return k

    def contacts(self, const double[::1] q, const double[::1] v, double touch):
        """(touching, penetration) at (q, v): the contacts without margin (Solver.evaluate's record: those
        of gap <= touch, and the deepest penetration, 0 without any), by the step's detection. Leaves the
        warm-start memory and the last step's problem as they were."""
        cdef Py_ssize_t k, c, touching = 0
        cdef double deepest = 0.0, saved = self.reach_margin
        with nogil:
            frames_into(self.F, self.D, q, v)
        self.reach_margin = 0.0
        k = self._detect()
        self.reach_margin = saved
        for c in range(k):
            touching += self.gap[c] <= touch
            deepest = max(deepest, -self.gap[c])
        return int(touching), float(deepest)

    def set_warm(self, const int64_t[::1] keys, const double[:, ::1] values, const double[:, ::1] points):
        """The warm-start memory from a step the caller took (sorted keys (n,), impulses, points (n, d))."""
        cdef Py_ssize_t n = keys.shape[0], c, a
        if n > self.warm_keys.shape[0]:
            self.warm_keys = self._keep("warm_keys", np.zeros(2 * n, np.int64))
            self.warm_values = self._keep("warm_values", np.zeros((2 * n, self.d)))
            self.warm_points = self._keep("warm_points", np.zeros((2 * n, self.d)))
        for c in range(n):
            self.warm_keys[c] = keys[c]
            for a in range(self.d):
                self.warm_values[c, a] = values[c, a]
                self.warm_points[c, a] = points[c, a]
        self.nwarm = n

    @property
    def coordinate_impulses(self):
        """(the taken stops (nu,), the stops' then the friction rows' impulses (nu + nfriction,)) of the
        last step (copies)."""
        first = self.k * self.d
        return self.buf["chosen"][: self.nu].copy(), self.buf["x"][first : first + self.nu + self.nfriction].copy()

    @property
    def joint_impulse(self):
        """P_E (nc,) of the last step with the velocity projection's impulse (a copy): the joints'
        whole impulse over the step (the module docstring of mbsim.solvers.timestepping)."""
        return self.buf["p_e"][: self.nc].copy()

    @property
    def problem(self):
        """(indptr, indices, data, b, mu, x, sweeps done, their last chunk) of the last step's contact
        problem in body space (views of the buffers: copy what is kept)."""
        n, k, e = self.n, self.k, self.indptr[self.n]
        buf = self.buf
        return (buf["indptr"][: n + 1], buf["indices"][:e], buf["data"][:e], buf["b"][:n], buf["mu"][:k],
                buf["x"][:n], self.iterations, self.chunk)  # fmt: skip

    @property
    def warm(self):
        """(keys (n,), impulses (n, d), points on body j (n, d)) of the last step with contacts, sorted
        by key: the warm-start memory (copies)."""
        n = self.nwarm
        return self.buf["warm_keys"][:n].copy(), self.buf["warm_values"][:n].copy(), self.buf["warm_points"][:n].copy()

    @property
    def q_end(self):
        return self.buf["q_new"].copy()

    @property
    def v_end(self):
        return self.buf["v_new"].copy()

    # ------------------------------------------------------------------ stages

    # q moved by dx (exponential map in 3D, quaternions unit) into out
    cdef void _retract(self, const double[::1] q, double[::1] out) noexcept nogil:
        cdef Py_ssize_t b, i
        cdef double s
        if self.d == 2:
            for i in range(self.nq):
                out[i] = q[i] + self.dx[i]
            return
        retract3_into(q, self.dx, self.nbody, out)
        # the Python path normalises the retraction's unit quaternions once more (Model.normalize)
        for b in range(self.nbody):
            s = 0.0
            for i in range(3, 7):
                s += out[7 * b + i] * out[7 * b + i]
            s = sqrt(s)
            for i in range(3, 7):
                out[7 * b + i] = out[7 * b + i] / s

    # the largest speed of any point of any body: max |v_com| + |omega| R (mbsim.model.contact.jacobian.reach)
    cdef double _reach(self, const double[::1] v) noexcept nogil:
        cdef Py_ssize_t b, a, d = self.d, w = self.w
        cdef double lin, ang, out = 0.0
        for b in range(self.nbody):
            lin = 0.0
            ang = 0.0
            for a in range(d):
                lin += v[w * b + a] * v[w * b + a]
            for a in range(d, w):
                ang += v[w * b + a] * v[w * b + a]
            out = max(out, sqrt(lin) + sqrt(ang) * self.radius[b])
        return out

    # world poses of the shapes (ContactDetector._world) and the bounded ones' boxes, grown by half
    # the margin each (its _bounds, _candidates)
    cdef void _world(self, FlatData D) noexcept nogil:
        cdef Py_ssize_t s, i, j, l, body, d = self.d
        cdef double grow = 0.5 * max(self.reach_margin, 0.0), acc
        for s in range(self.nshape):
            body = self.shape_body[s]
            for i in range(d):
                acc = 0.0
                if self.has_pos[s]:
                    for j in range(d):
                        acc += D.rot[body, i, j] * self.pos_local[s, j]
                    self.pos[s, i] = D.pos[body, i] + acc
                else:
                    self.pos[s, i] = D.pos[body, i]
                if not self.oriented[s]:
                    continue
                for j in range(d):
                    if self.has_rot[s]:
                        acc = 0.0
                        for l in range(d):
                            acc += D.rot[body, i, l] * self.rot_local[s, l, j]
                        self.rot[s, i, j] = acc
                    else:
                        self.rot[s, i, j] = D.rot[body, i, j]
            if s < self.nbounded:
                aabb_half_into(<int>self.aabb[s], &self.rot[s, 0, 0], &self.param[s, 0], <int>d, &self.half[s, 0])
                for i in range(d):
                    self.lo[s, i] = self.pos[s, i] - (self.half[s, i] + grow)
                    self.hi[s, i] = self.pos[s, i] + (self.half[s, i] + grow)

    # the contact problem in body space: rows J (CSR), U = J M^-1, A's diagonal and tangent blocks, b =
    # J v_free - targets (with joints: A and b reduced by them, _reduce), the warm start made feasible
    # (ContactProblem, BodySpace, Solver._solve_lcp)
    cdef void _problem(self, FlatModel F, FlatData D) noexcept nogil:
        cdef Py_ssize_t k = self.k, n = self.n, d = self.d, w = self.w, r, e, c, i, j, body, p1, p2, first
        cdef double rate, rate_free, acc, acc_diag, scale = 0.0, radius, norm, f
        cdef const double* inv_mass
        cdef const double* row
        rows_into(<const long long*>&self.body_i[0], <const long long*>&self.body_j[0], &self.point_i[0, 0],
                  &self.point_j[0, 0], &self.normal[0, 0], k, d, &D.pos[0, 0], 3, &D.rot[0, 0, 0],
                  self.nbody, &self.indptr[0], &self.indices[0], &self.data[0])
        if self.nx:
            self._coordinate_rows()
        first = k * d
        for r in range(n):
            # U's blocks J_r,b M_b^-1 and the diagonal J_r . U_r; the rates J v, J v_free
            acc_diag = 0.0
            rate = 0.0
            rate_free = 0.0
            e = self.indptr[r]
            while e < self.indptr[r + 1]:  # whole blocks of w, body by body
                body = self.indices[e] // w
                inv_mass = &F.body_inv_mass[body, 0, 0]
                row = &self.data[e]
                for i in range(w):
                    acc = 0.0
                    for j in range(w):
                        acc += row[j] * inv_mass[j * w + i]
                    self.u[e + i] = acc
                    acc_diag += row[i] * acc
                    rate += row[i] * self.v_start[self.indices[e + i]]
                    rate_free += row[i] * self.v_free[self.indices[e + i]]
                e += w
            self.diag[r] = acc_diag
            self.b[r] = rate_free
            if r < k:
                self.b[r] -= target_velocity(rate, rate_free, self.gap[r], self.restitution[self.entry[r]],
                                             self.threshold, self.beta, self.h)
            elif first <= r < first + self.nu:  # a joint stop: the contacts' target velocity
                i = self.chosen[r - first]
                self.b[r] -= target_velocity(rate, rate_free, self.stop_gap[i], self.stop_e[i], self.threshold,
                                             self.beta, self.h)
            self.x[r] = 0.0
            self.xlo[r] = 0.0
            self.xhi[r] = INFINITY
            if r >= first + self.nu:  # a friction row, |P| <= its bound
                self.xlo[r] = -self.f_bound[r - first - self.nu]
                self.xhi[r] = self.f_bound[r - first - self.nu]
        if self.dense_rows:
            self._reduce(F, D)
        for r in range(n):
            scale = max(scale, self.diag[r])
        # rows x cannot move are left at zero
        scale = 1e-12 * max(scale, 1e-300)
        for r in range(n):
            self.diag_used[r] = self.diag[r] if self.diag[r] > scale else 0.0
        for c in range(k):
            self.mu[c] = self.friction[self.entry[c]]
            self.block[3 * c] = self.diag_used[k + c]
            self.block[3 * c + 1] = 0.0
            self.block[3 * c + 2] = 0.0
            if d == 3 and self.dense_rows:  # A assembled: its entry (k + c, 2k + c)
                self.block[3 * c + 1] = self.dense[(k + c) * n + 2 * k + c]
                self.block[3 * c + 2] = self.diag[2 * k + c]
            elif d == 3:
                # A's entry (k + c, 2k + c): rows of one contact share their pattern
                p1, p2 = self.indptr[k + c], self.indptr[2 * k + c]
                for e in range(self.indptr[k + c + 1] - p1):
                    self.block[3 * c + 1] += self.data[p1 + e] * self.u[p2 + e]
                self.block[3 * c + 2] = self.diag[2 * k + c]
        # the warm start: the previous impulses of the same feature, else of the nearest point
        if self.warm and self.nwarm:
            for c in range(k):
                if warm_value(self.feature[c], &self.point_j[c, 0], &self.warm_keys[0], &self.warm_values[0, 0],
                              &self.warm_points[0, 0], self.nwarm, <int>d, self.max_feature, self.margin,
                              &self.wv[0]):
                    for i in range(d):
                        self.x[i * k + c] = self.wv[i] if self.diag[i * k + c] > scale else 0.0
            # feasible: normals >= 0, tangents in their discs
            for c in range(k):
                self.x[c] = max(self.x[c], 0.0)
                radius = self.mu[c] * self.x[c]
                if d == 2:
                    self.x[k + c] = min(max(self.x[k + c], -radius), radius)
                else:
                    norm = sqrt(self.x[k + c] * self.x[k + c] + self.x[2 * k + c] * self.x[2 * k + c])
                    f = radius / (norm if norm > 0.0 else 1.0) if norm > radius else 1.0
                    self.x[k + c] *= f
                    self.x[2 * k + c] *= f

    # x <- S^-1 x (nc,) with the factor in D.S (certified_full_rank), in its factored order F.s_rows
    cdef void _schur_solve(self, FlatModel F, FlatData D, double* x) noexcept nogil:
        cdef Py_ssize_t i, nc = self.nc
        for i in range(nc):
            D.s_work[i] = x[F.s_rows[i]]
        cholesky_envelope_solve_ptr(nc, &D.S[0, 0], &F.row_first[0], &F.row_last[0], &D.s_work[0])
        for i in range(nc):
            x[F.s_rows[i]] = D.s_work[i]

    # b_E = J_E v_free + Phi_t and S^-1 b_E (Solver._eliminate)
    cdef void _joint_rhs(self, FlatModel F, FlatData D) noexcept nogil:
        cdef Py_ssize_t c
        for c in range(self.nc):
            self.b_e[c] = row_dot(F, D.J, c, self.v_free) + D.phi_t[c]
            self.s_b_e[c] = self.b_e[c]
        self._schur_solve(F, D, &self.s_b_e[0])

    # A assembled (C M^-1 C^T over the contacts' and the joint coordinates' rows); with joints, their rows
    # eliminated (Solver._eliminate): A_EC = J_E M^-1 C^T, A -= A_EC^T S^-1 A_EC, b -= A_EC^T S^-1 b_E;
    # A's diagonal, its rows as CSR over the dense (n x n) for the sweeps
    cdef void _reduce(self, FlatModel F, FlatData D) noexcept nogil:
        cdef Py_ssize_t n = self.n, nc = self.nc, r, s, c, e
        cdef double acc
        self._assemble()
        if nc:
            for r in range(n):
                for c in range(nc):
                    acc = 0.0
                    for e in range(self.indptr[r], self.indptr[r + 1]):
                        acc += self.data[e] * D.minv_jt[self.indices[e], c]
                    self.aec[r * nc + c] = acc
                    self.sec[r * nc + c] = acc
                self._schur_solve(F, D, &self.sec[r * nc])
            for r in range(n):
                for s in range(n):
                    acc = 0.0
                    for c in range(nc):
                        acc += self.aec[r * nc + c] * self.sec[s * nc + c]
                    self.dense[r * n + s] -= acc
                acc = 0.0
                for c in range(nc):
                    acc += self.aec[r * nc + c] * self.s_b_e[c]
                self.b[r] -= acc
        for r in range(n):
            self.diag[r] = self.dense[r * n + r]
            self.dense_indptr[r] = r * n
            for s in range(n):
                self.dense_indices[r * n + s] = s
        self.dense_indptr[n] = n * n

    # C_r . x over the body blocks of joint coordinate row r (D.jc_jac: body i's block, then body j's)
    cdef double _coordinate_dot(self, Py_ssize_t r, const double[::1] x) noexcept nogil:
        cdef Py_ssize_t p = self.row_item[r], w = self.w, side, body, a
        cdef double acc = 0.0
        for side in range(2):
            body = self.F.jc_bi[p] if side == 0 else self.F.jc_bj[p]
            if body < self.nbody:
                for a in range(w):
                    acc += self.D.jc_jac[r, side * w + a] * x[w * body + a]
        return acc

    # the joint coordinates at the midpoint (coordinate_values_into): the stops' gaps, those taken into
    # the problem (within margin plus the step's travel: Solver.step)
    cdef void _coordinate_state(self, FlatModel F, FlatData D, double t) noexcept nogil:
        cdef Py_ssize_t i, r
        cdef double rate, rate_free
        coordinate_values_into(F, D, t)
        for i in range(self.nstop):
            r = self.stop_row[i]
            self.stop_gap[i] = self.stop_sign[i] * (D.jc_value[r] - self.stop_bound[i])
            rate = self.stop_sign[i] * self._coordinate_dot(r, self.v_start)
            rate_free = self.stop_sign[i] * self._coordinate_dot(r, self.v_free)
            self.taken[i] = self.stop_gap[i] <= self.margin + self.h * max(fabs(rate), fabs(rate_free))
        self._choose()

    # the taken stops in order into chosen[:nu]
    cdef void _choose(self) noexcept nogil:
        cdef Py_ssize_t i
        self.nu = 0
        for i in range(self.nstop):
            if self.taken[i]:
                self.chosen[self.nu] = i
                self.nu += 1

    # the stops not taken that v+ would close within the step (gap + h/2 G v+ < 0) are taken; any?
    cdef bint _missed(self, FlatModel F, FlatData D) noexcept nogil:
        cdef Py_ssize_t i
        cdef bint missed = False
        for i in range(self.nstop):
            if not self.taken[i] and (self.stop_gap[i] + 0.5 * self.h * self.stop_sign[i]
                                      * self._coordinate_dot(self.stop_row[i], self.v_new)) < 0.0:
                self.taken[i] = 1
                missed = True
        if missed:
            self._choose()
        return missed

    # the rows of the taken stops (+-c) and of the friction (c) after the contacts' in the CSR, and the
    # friction bounds F(|c v|) h (the Stribeck curve at the step's start rate; 0 for a coordinate resting
    # on a taken, closed stop: Solver._coordinate_rows)
    cdef void _coordinate_rows(self) noexcept nogil:
        cdef Py_ssize_t first = self.k * self.d, r, i, f, j, row, p, side, body, a, e
        cdef Py_ssize_t w = self.w
        cdef double sign, rate, bound
        for r in range(first, first + self.nu + self.nfriction):
            i = r - first
            if i < self.nu:
                row, sign = self.stop_row[self.chosen[i]], self.stop_sign[self.chosen[i]]
            else:
                row, sign = self.friction_row[i - self.nu], 1.0
            p = self.row_item[row]
            e = self.indptr[r]
            for side in range(2):
                body = self.F.jc_bi[p] if side == 0 else self.F.jc_bj[p]
                if body < self.nbody:
                    for a in range(w):
                        self.indices[e] = w * body + a
                        self.data[e] = sign * self.D.jc_jac[row, side * w + a]
                        e += 1
            self.indptr[r + 1] = e
        for f in range(self.nfriction):
            bound = self.f_coulomb[f]
            if self.f_stribeck[f] > 0.0:
                rate = fabs(self._coordinate_dot(self.friction_row[f], self.v_start)) / self.f_stribeck[f]
                bound += (self.f_static[f] - self.f_coulomb[f]) * exp(-(rate * rate))
            bound *= self.h
            for j in range(self.fs_start[f], self.fs_start[f + 1]):
                i = self.fs_stop[j]
                if self.taken[i] and self.stop_gap[i] <= 0.0:
                    bound = 0.0
            self.f_bound[f] = bound

    # sweeps (the first chunk with the active-set solve, else all) and the natural residual
    cdef void _solve(self) noexcept nogil:
        self.iterations = self._sweeps(self.chunk)

    # ``chunk`` sweeps from x (returned: the sweeps done), then the natural residual and the tolerance
    cdef Py_ssize_t _sweeps(self, Py_ssize_t chunk) noexcept nogil:
        cdef Rows R
        cdef bint converged = False
        cdef Py_ssize_t i, e, nv = self.nv, n = self.n, r, done
        cdef double size = 0.0, zero = 0.0
        cdef bint polish = self.polish and n <= self.polish_max
        if self.dense_rows:  # A assembled (reduced by the joints): the sweeps over its rows
            return self._dense_sweeps(chunk, polish)
        for i in range(nv):  # v = M^-1 J^T x of the start
            self.vb[i] = 0.0
        for r in range(n):
            for e in range(self.indptr[r], self.indptr[r + 1]):
                self.vb[self.indices[e]] += self.u[e] * self.x[r]
        R.indptr = &self.indptr[0]
        R.indices = &self.indices[0]
        R.data = &self.data[0]
        R.u = &self.u[0]
        R.b = &self.b[0]
        R.x = &self.x[0]
        R.v = &self.vb[0]
        done = sweeps_into(&R, n, self.k, <int>self.d, &self.mu[0], &self.xlo[0], &self.xhi[0],
                           &self.diag_used[0], &self.block[0], chunk, self.tol * (1e-3 if polish else 1.0),
                           self.omega, &converged)
        # the residual of w = J M^-1 J^T x + b, M^-1 J^T x afresh (ContactProblem.w)
        for i in range(nv):
            self.vb[i] = 0.0
        for r in range(n):
            for e in range(self.indptr[r], self.indptr[r + 1]):
                self.vb[self.indices[e]] += self.u[e] * self.x[r]
        for r in range(n):
            self.wv[r] = self.b[r]
            for e in range(self.indptr[r], self.indptr[r + 1]):
                self.wv[r] += self.data[e] * self.vb[self.indices[e]]
            size = max(size, fabs(self.x[r]))
        self.residual = natural_residual(&self.x[0], &self.wv[0], n, self.k, <int>self.d, &self.mu[0], &self.xlo[0],
                                         &self.xhi[0], &self.diag[0])
        self.tight = self.tol * max(1.0, size)
        return done

    # _sweeps over the assembled A (u NULL: data is A's rows), then the residual of w = A x + b
    cdef Py_ssize_t _dense_sweeps(self, Py_ssize_t chunk, bint polish) noexcept nogil:
        cdef Rows R
        cdef bint converged = False
        cdef Py_ssize_t n = self.n, r, done
        cdef double size = 0.0
        R.indptr = &self.dense_indptr[0]
        R.indices = &self.dense_indices[0]
        R.data = &self.dense[0]
        R.u = NULL
        R.v = NULL
        R.b = &self.b[0]
        R.x = &self.x[0]
        done = sweeps_into(&R, n, self.k, <int>self.d, &self.mu[0], &self.xlo[0], &self.xhi[0],
                           &self.diag_used[0], &self.block[0], chunk, self.tol * (1e-3 if polish else 1.0),
                           self.omega, &converged)
        self._dense_residual()
        for r in range(n):
            size = max(size, fabs(self.x[r]))
        self.tight = self.tol * max(1.0, size)
        return done

    # The loop of mbsim.solvers.numerics.cone._cone_loop after the first chunk of sweeps left a residual
    # above the tolerance: the active-set solve from x, else more sweeps (the chunk doubled) and again;
    # the answer (or the last sweeps' x) into x, the sweeps done and its residual.
    cdef void _polish_loop(self) noexcept nogil:
        cdef Py_ssize_t n = self.n, i
        if not self.dense_rows:  # (with joints or coordinate rows A is assembled already)
            self._assemble()
        while True:
            if self.residual <= self.tight:
                return
            self.solves += 1
            if polish_into(&self.dense[0], &self.b[0], n, self.k, <int>self.d, self.nu, &self.mu[0], &self.xlo[0],
                           &self.xhi[0], &self.diag[0], &self.x[0], self.tight, &self.answer[0],
                           &self.polish_work[0], &self.polish_iwork[0]):
                # the answer's residual with w = A x + b (as ContactProblem.residual after a polish),
                # w as the active-set solve left it
                for i in range(n):
                    self.x[i] = self.answer[i]
                self.residual = natural_residual(&self.x[0], polish_w(&self.polish_work[0], n), n, self.k,
                                                 <int>self.d, &self.mu[0], &self.xlo[0], &self.xhi[0], &self.diag[0])
                return
            if self.iterations >= self.max_iterations:
                return
            self.chunk = min(max(2 * self.chunk, self.first_sweeps), self.max_iterations - self.iterations)
            self.iterations += self._sweeps(self.chunk)

    # the residual of x with w = A x + b over the assembled A (dense)
    cdef void _dense_residual(self) noexcept nogil:
        cdef Py_ssize_t n = self.n, r, j
        cdef double s
        for r in range(n):
            s = self.b[r]
            for j in range(n):
                s += self.dense[r * n + j] * self.x[j]
            self.wv[r] = s
        self.residual = natural_residual(&self.x[0], &self.wv[0], n, self.k, <int>self.d, &self.mu[0], &self.xlo[0],
                                         &self.xhi[0], &self.diag[0])

    # A = J M^-1 J^T (n, n) from the body-space rows: A_rs = sum over the bodies b of both rows of
    # J_r,b . U_s,b (rows come in whole blocks of w per body; the blocks of each body listed first)
    cdef void _assemble(self) noexcept nogil:
        cdef Py_ssize_t n = self.n, w = self.w, nbody = self.nbody, r, s, e, f, p, q, a, body
        cdef double acc
        for body in range(nbody + 1):
            self.body_start[body] = 0
        for r in range(n):
            for a in range((self.indptr[r + 1] - self.indptr[r]) // w):
                e = self.indptr[r] + a * w
                self.body_start[self.indices[e] // w + 1] += 1
        for body in range(nbody):
            self.body_start[body + 1] += self.body_start[body]
        for r in range(n):
            for a in range((self.indptr[r + 1] - self.indptr[r]) // w):
                e = self.indptr[r] + a * w
                body = self.indices[e] // w
                p = self.body_start[body]
                self.body_row[p] = r
                self.body_entry[p] = e
                self.body_start[body] = p + 1
        # (the fill moved each start to the next body's: shift back)
        for body in range(nbody, 0, -1):
            self.body_start[body] = self.body_start[body - 1]
        self.body_start[0] = 0
        for r in range(n * n):
            self.dense[r] = 0.0
        for body in range(nbody):
            for p in range(self.body_start[body], self.body_start[body + 1]):
                r = self.body_row[p]
                e = self.body_entry[p]
                for q in range(self.body_start[body], self.body_start[body + 1]):
                    s = self.body_row[q]
                    f = self.body_entry[q]
                    acc = 0.0
                    for a in range(w):
                        acc += self.data[e + a] * self.u[f + a]
                    self.dense[r * n + s] += acc

    # the end of the step's velocities: the impulse C^T x (+ J_E^T P_E, P_E = -(S^-1 A_EC x + S^-1 b_E)),
    # v+ = v_free + M^-1 impulse, q+ from the midpoint
    cdef void _velocities(self, FlatModel F, FlatData D) noexcept nogil:
        cdef Py_ssize_t i, r, e, c, side, b, a, k = self.k, nv = self.nv, nc = self.nc
        cdef Py_ssize_t w = self.w
        for i in range(nv):
            self.impulse[i] = 0.0
        for r in range(self.n):
            for e in range(self.indptr[r], self.indptr[r + 1]):
                self.impulse[self.indices[e]] += self.data[e] * self.x[r]
        for c in range(nc):
            self.p_e[c] = 0.0
            for r in range(self.n):
                self.p_e[c] += self.sec[r * nc + c] * self.x[r]
            self.p_e[c] = -(self.p_e[c] + self.s_b_e[c])
            for side in range(row_nbody(F, c)):
                b = row_body(F, c, side)
                if b < F.nbody:
                    for a in range(w):
                        self.impulse[w * b + a] += D.J[c, w * b + a] * self.p_e[c]
        inverse_mass_times(F, self.impulse, self.vb)
        for i in range(nv):
            self.v_new[i] = self.v_free[i] + self.vb[i] if self.n or nc else self.v_free[i]
            self.dx[i] = 0.5 * self.h * self.v_new[i]
        self._retract(self.q_mid, self.q_new)

    # the end of the step: the work, the warm-start memory (keys sorted), the normal impulses' sum
    cdef void _end(self, FlatModel F, FlatData D) noexcept nogil:
        cdef Py_ssize_t i, c, a, k = self.k, d = self.d, nv = self.nv
        cdef double work = 0.0, mean
        for i in range(nv):
            mean = 0.5 * (self.v_start[i] + self.v_new[i])
            work += self.h * D.Qn[i] * mean + self.impulse[i] * mean
        self.work = self.work0 + work
        self.normal_total = 0.0
        for c in range(k):
            self.normal_total += self.x[c]

    # the warm-start memory after a solve (keys sorted; Solver._solve_lcp): the contacts' impulses (none
    # when only joint coordinates' rows were solved)
    cdef void _memory(self) noexcept nogil:
        cdef Py_ssize_t i, c, a, k = self.k, d = self.d
        self.nwarm = 0
        if k == 0:
            return
        for c in range(k):
            self.sorted_idx[c] = c
        argsort(&self.feature[0], 1, &self.sorted_idx[0], &self.sort_tmp[0], k)
        with gil:
            if k > self.warm_keys.shape[0]:
                self.warm_keys = self._keep("warm_keys", np.zeros(2 * k, np.int64))
                self.warm_values = self._keep("warm_values", np.zeros((2 * k, d)))
                self.warm_points = self._keep("warm_points", np.zeros((2 * k, d)))
        for c in range(k):
            i = self.sorted_idx[c]
            self.warm_keys[c] = self.feature[i]
            for a in range(d):
                self.warm_values[c, a] = self.x[a * k + i]
                self.warm_points[c, a] = self.point_j[i, a]
        self.nwarm = k


def _int(array, Py_ssize_t least):
    """int64 contiguous, at least ``least`` entries (a dummy zero for empty tables)."""
    out = np.ascontiguousarray(array, dtype=np.int64).reshape(-1)
    return out if len(out) >= least else np.zeros(least, dtype=np.int64)
