"""The typed structures of the compiled core: Record, their base, FlatModel, everything a
compiled right-hand side reads, and FlatData, every buffer one run writes (see mbsim.model.flat
for their fields).

Each is a ``cdef class`` whose arrays are typed memoryviews (layout.pxd), so the kernels index
them as C arrays; read from Python, an array attribute is the numpy array it views, shared, not
copied. Model arrays may be read-only (const); a Data buffer must be given with its exact dtype
and C order, since the kernels write into the array the caller keeps.
"""

import numpy as np


def _as_field(value, str dtype, bint const):
    """``value`` as the C-ordered array of ``dtype`` a field views. A buffer the kernels write
    (``const`` False) must already be one: a converted copy would leave the caller's array stale."""
    if const:
        return np.ascontiguousarray(value, dtype=dtype)
    if not (isinstance(value, np.ndarray) and value.dtype == np.dtype(dtype) and value.flags.c_contiguous):
        raise TypeError(f"a buffer must be a C-ordered {dtype} array, not {type(value).__name__}")
    return value


def _rebuild(cls, fields):
    """Unpickle a structure (its __reduce__): the same fields, the same class."""
    return cls(**fields)


cdef class Record:
    """The base of every typed structure (FlatModel, FlatData; recursive's Tree, TreeData;
    variational's VarModel, VarData): a subclass declares its typed fields in its .pxd and binds
    each in ``__init__(**fields)`` through ``constant``, ``buffer`` or ``value``; Record keeps
    every field by name in that order, so that Python reads an array field as the numpy array the
    kernels' view shares (``__getattr__``), ``_asdict`` lists them and a structure pickles (a
    sweep's Dask worker) as its fields."""

    def __cinit__(self, *args, **kwargs):
        self._fields = {}

    cdef object constant(self, dict fields, str name, str dtype):
        """Field ``name`` as a read-only C-ordered array of ``dtype`` (converted if need be)."""
        value = self._fields[name] = _as_field(fields[name], dtype, True)
        return value

    cdef object buffer(self, dict fields, str name, str dtype):
        """Field ``name``: a buffer the kernels write, given with its exact dtype and C order."""
        value = self._fields[name] = _as_field(fields[name], dtype, False)
        return value

    cdef object value(self, dict fields, str name):
        """Field ``name`` as given (a size, a flag, a scratch object)."""
        value = self._fields[name] = fields[name]
        return value

    def __getattr__(self, name):
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(name) from None

    def _asdict(self):
        """Every field by name, in the order ``__init__`` binds them."""
        return dict(self._fields)

    def __reduce__(self):
        return _rebuild, (type(self), self._asdict())


cdef class FlatModel(Record):
    """Everything a compiled right-hand side reads; shapes with n* the item counts.

    Attributes:
        dim, nbody, nq, nv, nc: dimension and sizes (mbsim.model.model.Model).
        body_inv_mass: (nbody, w, w) inverse mass-matrix blocks; body_inertia: (nbody, 3, 3)
            (2D: the 1x1 inertia in [0, 0]); body_weight: (nbody, 3) m g (2D: 2 columns used).
        prim_*: constraint primitives, one row each: kind (POINT3 ...), bodies i and j
            (extended: nbody = ground), vec (n, 3, 3) up to three local vectors of the kind,
            row (first constraint row), nrow, offset (n, 3) value kept per row, drive (index of
            the drive's c in the expression programs, c' and c'' follow; -1 none), wrap (angle
            rows wrapped to (-pi, pi]).
        jc_*: the joint coordinates (mbsim.model.joint_forces): the same table over every joint
            coordinate (row = coordinate index, measured from the joint's initial), and per row
            (ncoord,) the spring's stiffness, damping and rest, initial (the coordinate at t = 0),
            lower, upper (limits; +-inf none), stop_k, stop_c (the smooth methods' compliant
            stop), coulomb, static, stribeck (velocity; 0 none), viscous, smoothing (friction),
            effort (the actuators' summed force's bound; inf none); jc_forces: 1 when a
            right-hand side needs the coordinates (a force on one, an actuator, a signal reading
            one), else they are evaluated for the recorded rows only.
        act_*: actuators (mbsim.model.actuators), per actuator: row (its coordinate), law (0
            value, 1 position, 2 velocity), expr (program of its value or target), rate (program
            of the target's rate; -1 none), kp, kd, gear, lower, upper (forcerange).
        sig_*: the signals (mbsim.model.signals.signal_table) in registers sig_first + s: kind,
            index, comp; dist_body (n, 2), dist_point (n, 2, 3): the distances' bodies and points.
        out_expr: (nout,) the program of each output.
        sd_*: spring-dampers: bodies b1, b2, local points s1, s2 (n, 3), k, c, rest (n,).
        ld_*: applied forces and torques: body, local point (n, 3), body_frame (components
            in body axes), torque, expr (n, 3) program index per component (-1 none).
        prog_*: the expression programs (mbsim.scene.expr.Programs): op, dst, args, imm,
            start, stop, result; nreg registers, the variables first (VARIABLES).
        row_bi, row_bj: (nc,) the two bodies of each constraint row (nbody: the ground), so that
            sums over J's rows skip the blocks that are zero; row_bk, row_bl: (nc,) a coupling
            row's third and fourth body (nbody: none; mbsim.model.step_kernels.row_body).
        body_mass_block: (nbody, w, w) mass-matrix blocks (the kinetic energy).
        rx_joint, rx_body: (nc,) per constraint row its joint and the body its reaction is
            reported on (nbody: none); joint_body, joint_point: (njoint,), (njoint, 3) that
            body and the joint point in its axes; driven_rows: (ndriven,) the drive rows
            (mbsim.diagnostics.reactions).
        body_inv_sqrt_mass: (nbody, w, w) blocks of M^-1/2 (the rank-robust methods' scaling,
            mbsim.model.model.inverse_sqrt_mass_blocks).
        s_rows (nc,): the order in which S = J M^-1 J^T is factored, position i holding
            constraint row s_rows[i] (_schur_pattern); in those positions: s_ptr (nc + 1,), s_col
            the lower triangle's pattern of S (CSR, columns ascending): positions j <= i whose rows
            share a body with position i's; row_first (nc,): the first of them, where row i of S's
            envelope (and of its Cholesky factor) starts; row_last (nc,): the last position whose
            envelope reaches column i (the back substitution's range).
        ncc, cc_*: the compliant contact pairs (mbsim.model.contact.compliant; compliant_kernels
            .compliant_forces_into), per pair: master, slave (bodies), tree (1: cull by the octree),
            point_start (ncc + 1) into points (n, 3: the slave's sample points in its frame, all
            pairs') and point_order (the octree's point order, pair-local indices), node_start
            (ncc + 1) into the octrees' node_centre, node_radius, node_child_start,
            node_child_count, node_point_start, node_point_count (pair-local indices),
            sdf_start into sdf_values (every master's field, C order), sdf_shape (ncc, 3),
            sdf_origin (ncc, 3), sdf_cell; sdf_bound_start into sdf_bound and sdf_bound_meta (ncc, m)
            the fields' slope pyramids (SignedDistanceField.slope_pyramid, meta rows padded with
            zeros); mesh_lo, mesh_hi (ncc, 3) the master mesh's bounds;
            box_centre (ncc, 2, 3), box_axes (ncc, 2, 3, 3), box_half (ncc, 2, 3) the OBBs of
            master [0] and slave [1] in their body frames; law (ncc, 16) the CONTACT_LAW rows'
            bytes (read as compliant_kernels.ContactLaw); class_start (ncc + 1) into classes
            (the penetration thresholds of the pairs that have them).
    """

    def __init__(self, **fields):
        self.dim = self.value(fields, 'dim')
        self.nbody = self.value(fields, 'nbody')
        self.nq = self.value(fields, 'nq')
        self.nv = self.value(fields, 'nv')
        self.nc = self.value(fields, 'nc')
        self.body_inv_mass = self.constant(fields, 'body_inv_mass', 'float64')
        self.body_inertia = self.constant(fields, 'body_inertia', 'float64')
        self.body_weight = self.constant(fields, 'body_weight', 'float64')
        self.prim_kind = self.constant(fields, 'prim_kind', 'int64')
        self.prim_bi = self.constant(fields, 'prim_bi', 'int64')
        self.prim_bj = self.constant(fields, 'prim_bj', 'int64')
        self.prim_vec = self.constant(fields, 'prim_vec', 'float64')
        self.prim_row = self.constant(fields, 'prim_row', 'int64')
        self.prim_nrow = self.constant(fields, 'prim_nrow', 'int64')
        self.prim_offset = self.constant(fields, 'prim_offset', 'float64')
        self.prim_drive = self.constant(fields, 'prim_drive', 'int64')
        self.prim_wrap = self.constant(fields, 'prim_wrap', 'int64')
        self.njc = self.value(fields, 'njc')
        self.jc_forces = self.value(fields, 'jc_forces')
        self.jc_kind = self.constant(fields, 'jc_kind', 'int64')
        self.jc_bi = self.constant(fields, 'jc_bi', 'int64')
        self.jc_bj = self.constant(fields, 'jc_bj', 'int64')
        self.jc_vec = self.constant(fields, 'jc_vec', 'float64')
        self.jc_row = self.constant(fields, 'jc_row', 'int64')
        self.jc_nrow = self.constant(fields, 'jc_nrow', 'int64')
        self.jc_offset = self.constant(fields, 'jc_offset', 'float64')
        self.jc_drive = self.constant(fields, 'jc_drive', 'int64')
        self.jc_wrap = self.constant(fields, 'jc_wrap', 'int64')
        self.jc_stiffness = self.constant(fields, 'jc_stiffness', 'float64')
        self.jc_damping = self.constant(fields, 'jc_damping', 'float64')
        self.jc_rest = self.constant(fields, 'jc_rest', 'float64')
        self.jc_initial = self.constant(fields, 'jc_initial', 'float64')
        self.jc_lower = self.constant(fields, 'jc_lower', 'float64')
        self.jc_upper = self.constant(fields, 'jc_upper', 'float64')
        self.jc_stop_k = self.constant(fields, 'jc_stop_k', 'float64')
        self.jc_stop_c = self.constant(fields, 'jc_stop_c', 'float64')
        self.jc_coulomb = self.constant(fields, 'jc_coulomb', 'float64')
        self.jc_static = self.constant(fields, 'jc_static', 'float64')
        self.jc_stribeck = self.constant(fields, 'jc_stribeck', 'float64')
        self.jc_viscous = self.constant(fields, 'jc_viscous', 'float64')
        self.jc_smoothing = self.constant(fields, 'jc_smoothing', 'float64')
        self.jc_effort = self.constant(fields, 'jc_effort', 'float64')
        self.nact = self.value(fields, 'nact')
        self.act_row = self.constant(fields, 'act_row', 'int64')
        self.act_law = self.constant(fields, 'act_law', 'int64')
        self.act_expr = self.constant(fields, 'act_expr', 'int64')
        self.act_rate = self.constant(fields, 'act_rate', 'int64')
        self.act_kp = self.constant(fields, 'act_kp', 'float64')
        self.act_kd = self.constant(fields, 'act_kd', 'float64')
        self.act_gear = self.constant(fields, 'act_gear', 'float64')
        self.act_lower = self.constant(fields, 'act_lower', 'float64')
        self.act_upper = self.constant(fields, 'act_upper', 'float64')
        self.nsig = self.value(fields, 'nsig')
        self.sig_first = self.value(fields, 'sig_first')
        self.sig_kind = self.constant(fields, 'sig_kind', 'int64')
        self.sig_index = self.constant(fields, 'sig_index', 'int64')
        self.sig_comp = self.constant(fields, 'sig_comp', 'int64')
        self.dist_body = self.constant(fields, 'dist_body', 'int64')
        self.dist_point = self.constant(fields, 'dist_point', 'float64')
        self.nout = self.value(fields, 'nout')
        self.out_expr = self.constant(fields, 'out_expr', 'int64')
        self.sd_b1 = self.constant(fields, 'sd_b1', 'int64')
        self.sd_b2 = self.constant(fields, 'sd_b2', 'int64')
        self.sd_s1 = self.constant(fields, 'sd_s1', 'float64')
        self.sd_s2 = self.constant(fields, 'sd_s2', 'float64')
        self.sd_k = self.constant(fields, 'sd_k', 'float64')
        self.sd_c = self.constant(fields, 'sd_c', 'float64')
        self.sd_rest = self.constant(fields, 'sd_rest', 'float64')
        self.ld_body = self.constant(fields, 'ld_body', 'int64')
        self.ld_point = self.constant(fields, 'ld_point', 'float64')
        self.ld_body_frame = self.constant(fields, 'ld_body_frame', 'int64')
        self.ld_torque = self.constant(fields, 'ld_torque', 'int64')
        self.ld_expr = self.constant(fields, 'ld_expr', 'int64')
        self.prog_op = self.constant(fields, 'prog_op', 'int64')
        self.prog_dst = self.constant(fields, 'prog_dst', 'int64')
        self.prog_args = self.constant(fields, 'prog_args', 'int64')
        self.prog_imm = self.constant(fields, 'prog_imm', 'float64')
        self.prog_start = self.constant(fields, 'prog_start', 'int64')
        self.prog_stop = self.constant(fields, 'prog_stop', 'int64')
        self.prog_result = self.constant(fields, 'prog_result', 'int64')
        self.nreg = self.value(fields, 'nreg')
        self.row_bi = self.constant(fields, 'row_bi', 'int64')
        self.row_bj = self.constant(fields, 'row_bj', 'int64')
        self.row_bk = self.constant(fields, 'row_bk', 'int64')
        self.row_bl = self.constant(fields, 'row_bl', 'int64')
        self.body_mass_block = self.constant(fields, 'body_mass_block', 'float64')
        self.rx_joint = self.constant(fields, 'rx_joint', 'int64')
        self.rx_body = self.constant(fields, 'rx_body', 'int64')
        self.joint_body = self.constant(fields, 'joint_body', 'int64')
        self.joint_point = self.constant(fields, 'joint_point', 'float64')
        self.driven_rows = self.constant(fields, 'driven_rows', 'int64')
        self.body_inv_sqrt_mass = self.constant(fields, 'body_inv_sqrt_mass', 'float64')
        self.s_rows = self.constant(fields, 's_rows', 'int64')
        self.s_ptr = self.constant(fields, 's_ptr', 'int64')
        self.s_col = self.constant(fields, 's_col', 'int64')
        self.row_first = self.constant(fields, 'row_first', 'int64')
        self.row_last = self.constant(fields, 'row_last', 'int64')
        self.ncc = self.value(fields, 'ncc')
        self.cc_master = self.constant(fields, 'cc_master', 'int64')
        self.cc_slave = self.constant(fields, 'cc_slave', 'int64')
        self.cc_tree = self.constant(fields, 'cc_tree', 'int64')
        self.cc_point_start = self.constant(fields, 'cc_point_start', 'int64')
        self.cc_points = self.constant(fields, 'cc_points', 'float64')
        self.cc_point_order = self.constant(fields, 'cc_point_order', 'int64')
        self.cc_node_start = self.constant(fields, 'cc_node_start', 'int64')
        self.cc_node_centre = self.constant(fields, 'cc_node_centre', 'float64')
        self.cc_node_radius = self.constant(fields, 'cc_node_radius', 'float64')
        self.cc_node_child_start = self.constant(fields, 'cc_node_child_start', 'int64')
        self.cc_node_child_count = self.constant(fields, 'cc_node_child_count', 'int64')
        self.cc_node_point_start = self.constant(fields, 'cc_node_point_start', 'int64')
        self.cc_node_point_count = self.constant(fields, 'cc_node_point_count', 'int64')
        self.cc_sdf_start = self.constant(fields, 'cc_sdf_start', 'int64')
        self.cc_sdf_shape = self.constant(fields, 'cc_sdf_shape', 'int64')
        self.cc_sdf_origin = self.constant(fields, 'cc_sdf_origin', 'float64')
        self.cc_sdf_cell = self.constant(fields, 'cc_sdf_cell', 'float64')
        self.cc_sdf_values = self.constant(fields, 'cc_sdf_values', 'float64')
        self.cc_sdf_bound_start = self.constant(fields, 'cc_sdf_bound_start', 'int64')
        self.cc_sdf_bound = self.constant(fields, 'cc_sdf_bound', 'float64')
        self.cc_sdf_bound_meta = self.constant(fields, 'cc_sdf_bound_meta', 'float64')
        self.cc_mesh_lo = self.constant(fields, 'cc_mesh_lo', 'float64')
        self.cc_mesh_hi = self.constant(fields, 'cc_mesh_hi', 'float64')
        self.cc_box_centre = self.constant(fields, 'cc_box_centre', 'float64')
        self.cc_box_axes = self.constant(fields, 'cc_box_axes', 'float64')
        self.cc_box_half = self.constant(fields, 'cc_box_half', 'float64')
        self.cc_law = self.constant(fields, 'cc_law', 'float64')
        self.cc_class_start = self.constant(fields, 'cc_class_start', 'int64')
        self.cc_classes = self.constant(fields, 'cc_classes', 'float64')


cdef class FlatData(Record):
    """The buffers of one run (written by the compiled step; see FlatModel for the shapes' n).

    Attributes:
        pos, rot, vel, omega_body, omega: body frames, ground last ((nbody+1, 3), rot 3x3;
            omega in world axes); omega2, angle: the 2D angular velocity and angle (nbody+1,).
        Q, Qn: (nv,) all generalized forces and their non-conservative part.
        phi, phi_t, gamma: (nc,); J: (nc, nv) dense constraint Jacobian.
        minv_jt: (nv, nc) M^-1 J^T; S: (nc, nc) its Schur complement, factored in place;
            lam, rhs: (nc,); s_work: (nc,) a vector in S's factored order (FlatModel.s_rows); minv_q: (nv,).
        jc_value: (ncoord,) the joint coordinates; jc_jac: (ncoord, 2 w) their Jacobian in body
            blocks (mbsim.model.joint_force_kernels); jc_ref: (ncoord,) the unwrapped coordinates of
            the last accepted step (state carried between steps: the run's Data.coordinate_reference
            when make_data is given it); jc_qd: their rates J v; jc_tau: the actuators' summed
            force on each; jc_limit_force, jc_friction_force: the smooth methods' stop and
            friction forces on each; act_force: (nact,) each actuator's force;
            jc_rate, jc_bias: scratch of the coordinates' (unused) rate and bias.
        row_val, row_jac_i, row_jac_j, row_bias: one primitive's scratch row.
        regs: (nreg,) expression registers; vec3: (3,) a load's components.
        y, ynew, ytmp, k1..k4: (nq + nv + 1,) integrator state, result and stages; q_scratch, dx: (nq,), (nv,).
        k1_valid: (1,) 1 while k1 holds the derivative at y (a recorded state's evaluation is the
            next step's first stage).
        joint_gen: (njoint, 6) scratch of the joint reactions; seg: (7,) a block's report.
        solve_stats: (9,) what the acceleration solves of a step report (iterations summed, rank
            min, residual max): [0:3] the step being taken, [3:6] k1's solve, [6:9] the last
            step taken (mbsim.solvers.ode.ode_kernels).
        robust_work: the rank-robust methods' buffers in one array (size 0 unless
            ``make_data(flat, robust=True)``; mbsim.solvers.numerics.robust_kernels.ROBUST_BUFFERS:
            one array rather than fifteen, because every compiled call passes all of D's
            arrays); kkt_rank: (1,) LAPACK's rank output.
        cc_*: the compliant contacts' scratch and counters (compliant_kernels.compliant_forces_into):
            idx, d, grad, p (most sample points of a pair): a pair's penetrating points (index,
            penetration, field gradient then world, world point); stack (most octree nodes);
            R (3, 3), t (3,): slave frame -> master frame; box_c (3, 3), box_R (2, 3, 3): the OBBs
            in world (centres, axes; box_c's row 2 the master's half extents grown by the step
            control, compliant_kernels.near); wrench (4, 6): a pair's wrenches; of the last evaluation: pair (ncc, 2)
            each pair's count and deepest penetration, class_counts (classes + ncc) its counts by
            penetration class, total (4,) count, deepest penetration, elastic potential k
            g^(n+1)/(n+1) summed, and the most points of an evaluation since the caller zeroed it;
            linear (1,): nonzero when the evaluation also takes each pair's slopes, stiffness and
            damping (ncc, 12, 12): d(wrenches)/d(displacements, velocities) of slave and master
            (compliant_kernels.pair_forces_c; the implicit contact step, mbsim.solvers.ode.stiff).
    """

    def __init__(self, **fields):
        self.pos = self.buffer(fields, 'pos', 'float64')
        self.rot = self.buffer(fields, 'rot', 'float64')
        self.vel = self.buffer(fields, 'vel', 'float64')
        self.omega_body = self.buffer(fields, 'omega_body', 'float64')
        self.omega = self.buffer(fields, 'omega', 'float64')
        self.omega2 = self.buffer(fields, 'omega2', 'float64')
        self.angle = self.buffer(fields, 'angle', 'float64')
        self.Q = self.buffer(fields, 'Q', 'float64')
        self.Qn = self.buffer(fields, 'Qn', 'float64')
        self.phi = self.buffer(fields, 'phi', 'float64')
        self.phi_t = self.buffer(fields, 'phi_t', 'float64')
        self.gamma = self.buffer(fields, 'gamma', 'float64')
        self.J = self.buffer(fields, 'J', 'float64')
        self.minv_jt = self.buffer(fields, 'minv_jt', 'float64')
        self.S = self.buffer(fields, 'S', 'float64')
        self.lam = self.buffer(fields, 'lam', 'float64')
        self.rhs = self.buffer(fields, 'rhs', 'float64')
        self.s_work = self.buffer(fields, 's_work', 'float64')
        self.minv_q = self.buffer(fields, 'minv_q', 'float64')
        self.jc_value = self.buffer(fields, 'jc_value', 'float64')
        self.jc_jac = self.buffer(fields, 'jc_jac', 'float64')
        self.jc_ref = self.buffer(fields, 'jc_ref', 'float64')
        self.jc_rate = self.buffer(fields, 'jc_rate', 'float64')
        self.jc_bias = self.buffer(fields, 'jc_bias', 'float64')
        self.jc_qd = self.buffer(fields, 'jc_qd', 'float64')
        self.jc_tau = self.buffer(fields, 'jc_tau', 'float64')
        self.jc_limit_force = self.buffer(fields, 'jc_limit_force', 'float64')
        self.jc_friction_force = self.buffer(fields, 'jc_friction_force', 'float64')
        self.act_force = self.buffer(fields, 'act_force', 'float64')
        self.row_val = self.buffer(fields, 'row_val', 'float64')
        self.row_jac_i = self.buffer(fields, 'row_jac_i', 'float64')
        self.row_jac_j = self.buffer(fields, 'row_jac_j', 'float64')
        self.row_bias = self.buffer(fields, 'row_bias', 'float64')
        self.regs = self.buffer(fields, 'regs', 'float64')
        self.vec3 = self.buffer(fields, 'vec3', 'float64')
        self.y = self.buffer(fields, 'y', 'float64')
        self.ynew = self.buffer(fields, 'ynew', 'float64')
        self.ytmp = self.buffer(fields, 'ytmp', 'float64')
        self.k1 = self.buffer(fields, 'k1', 'float64')
        self.k2 = self.buffer(fields, 'k2', 'float64')
        self.k3 = self.buffer(fields, 'k3', 'float64')
        self.k4 = self.buffer(fields, 'k4', 'float64')
        self.q_scratch = self.buffer(fields, 'q_scratch', 'float64')
        self.dx = self.buffer(fields, 'dx', 'float64')
        self.k1_valid = self.buffer(fields, 'k1_valid', 'int64')
        self.joint_gen = self.buffer(fields, 'joint_gen', 'float64')
        self.seg = self.buffer(fields, 'seg', 'float64')
        self.solve_stats = self.buffer(fields, 'solve_stats', 'float64')
        self.robust_work = self.buffer(fields, 'robust_work', 'float64')
        self.kkt_rank = self.buffer(fields, 'kkt_rank', 'int32')
        self.cc_idx = self.buffer(fields, 'cc_idx', 'int64')
        self.cc_d = self.buffer(fields, 'cc_d', 'float64')
        self.cc_grad = self.buffer(fields, 'cc_grad', 'float64')
        self.cc_p = self.buffer(fields, 'cc_p', 'float64')
        self.cc_stack = self.buffer(fields, 'cc_stack', 'int64')
        self.cc_R = self.buffer(fields, 'cc_R', 'float64')
        self.cc_t = self.buffer(fields, 'cc_t', 'float64')
        self.cc_box_c = self.buffer(fields, 'cc_box_c', 'float64')
        self.cc_box_R = self.buffer(fields, 'cc_box_R', 'float64')
        self.cc_wrench = self.buffer(fields, 'cc_wrench', 'float64')
        self.cc_pair = self.buffer(fields, 'cc_pair', 'float64')
        self.cc_class_counts = self.buffer(fields, 'cc_class_counts', 'float64')
        self.cc_total = self.buffer(fields, 'cc_total', 'float64')
        self.cc_linear = self.buffer(fields, 'cc_linear', 'float64')
        self.cc_stiffness = self.buffer(fields, 'cc_stiffness', 'float64')
        self.cc_damping = self.buffer(fields, 'cc_damping', 'float64')
        self.cc_cand_idx = self.buffer(fields, 'cc_cand_idx', 'int64')
        self.cc_cand_d = self.buffer(fields, 'cc_cand_d', 'float64')
        self.cc_cand_d0 = self.buffer(fields, 'cc_cand_d0', 'float64')
        self.cc_cand_x = self.buffer(fields, 'cc_cand_x', 'float64')
        self.cc_cache = self.buffer(fields, 'cc_cache', 'float64')
