"""The typed structures of the compiled core: FlatModel, everything a compiled right-hand side
reads, and FlatData, every buffer one run writes (see mbsim.model.flat for their fields).

Each is a ``cdef class`` whose arrays are typed memoryviews (layout.pxd), so the kernels index
them as C arrays; read from Python, an array attribute is the numpy array it views, shared, not
copied. Model arrays may be read-only (const); a Data buffer must be given with its exact dtype
and C order, since the kernels write into the array the caller keeps.
"""

import numpy as np


def as_field(value, str dtype, bint const):
    """``value`` as the C-ordered array of ``dtype`` a field views. A buffer the kernels write
    (``const`` False) must already be one: a converted copy would leave the caller's array stale."""
    if const:
        return np.ascontiguousarray(value, dtype=dtype)
    if not (isinstance(value, np.ndarray) and value.dtype == np.dtype(dtype) and value.flags.c_contiguous):
        raise TypeError(f"a buffer must be a C-ordered {dtype} array, not {type(value).__name__}")
    return value


def field_of(dict arrays, str name):
    """The array field ``name`` (the structures' __getattr__)."""
    try:
        return arrays[name]
    except KeyError:
        raise AttributeError(name) from None


def rebuild(cls, fields):
    """Unpickle a structure (its __reduce__): the same fields, the same class."""
    return cls(**fields)


cdef class FlatModel:
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
        spr_*: joint springs: the same table over spring coordinates (row = coordinate index),
            stiffness, damping and rest (ncoord,).
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
    """

    _fields = ('dim', 'nbody', 'nq', 'nv', 'nc', 'body_inv_mass', 'body_inertia', 'body_weight', 'prim_kind', 'prim_bi', 'prim_bj', 'prim_vec', 'prim_row', 'prim_nrow', 'prim_offset', 'prim_drive', 'prim_wrap', 'nspr', 'spr_kind', 'spr_bi', 'spr_bj', 'spr_vec', 'spr_row', 'spr_nrow', 'spr_offset', 'spr_drive', 'spr_wrap', 'spr_stiffness', 'spr_damping', 'spr_rest', 'sd_b1', 'sd_b2', 'sd_s1', 'sd_s2', 'sd_k', 'sd_c', 'sd_rest', 'ld_body', 'ld_point', 'ld_body_frame', 'ld_torque', 'ld_expr', 'prog_op', 'prog_dst', 'prog_args', 'prog_imm', 'prog_start', 'prog_stop', 'prog_result', 'nreg', 'row_bi', 'row_bj', 'row_bk', 'row_bl', 'body_mass_block', 'rx_joint', 'rx_body', 'joint_body', 'joint_point', 'driven_rows', 'body_inv_sqrt_mass', 's_rows', 's_ptr', 's_col', 'row_first', 'row_last')

    def __init__(self, **fields):
        cdef dict arrays = {}
        self.dim = fields['dim']
        self.nbody = fields['nbody']
        self.nq = fields['nq']
        self.nv = fields['nv']
        self.nc = fields['nc']
        self.body_inv_mass = arrays['body_inv_mass'] = as_field(fields['body_inv_mass'], 'float64', True)
        self.body_inertia = arrays['body_inertia'] = as_field(fields['body_inertia'], 'float64', True)
        self.body_weight = arrays['body_weight'] = as_field(fields['body_weight'], 'float64', True)
        self.prim_kind = arrays['prim_kind'] = as_field(fields['prim_kind'], 'int64', True)
        self.prim_bi = arrays['prim_bi'] = as_field(fields['prim_bi'], 'int64', True)
        self.prim_bj = arrays['prim_bj'] = as_field(fields['prim_bj'], 'int64', True)
        self.prim_vec = arrays['prim_vec'] = as_field(fields['prim_vec'], 'float64', True)
        self.prim_row = arrays['prim_row'] = as_field(fields['prim_row'], 'int64', True)
        self.prim_nrow = arrays['prim_nrow'] = as_field(fields['prim_nrow'], 'int64', True)
        self.prim_offset = arrays['prim_offset'] = as_field(fields['prim_offset'], 'float64', True)
        self.prim_drive = arrays['prim_drive'] = as_field(fields['prim_drive'], 'int64', True)
        self.prim_wrap = arrays['prim_wrap'] = as_field(fields['prim_wrap'], 'int64', True)
        self.nspr = fields['nspr']
        self.spr_kind = arrays['spr_kind'] = as_field(fields['spr_kind'], 'int64', True)
        self.spr_bi = arrays['spr_bi'] = as_field(fields['spr_bi'], 'int64', True)
        self.spr_bj = arrays['spr_bj'] = as_field(fields['spr_bj'], 'int64', True)
        self.spr_vec = arrays['spr_vec'] = as_field(fields['spr_vec'], 'float64', True)
        self.spr_row = arrays['spr_row'] = as_field(fields['spr_row'], 'int64', True)
        self.spr_nrow = arrays['spr_nrow'] = as_field(fields['spr_nrow'], 'int64', True)
        self.spr_offset = arrays['spr_offset'] = as_field(fields['spr_offset'], 'float64', True)
        self.spr_drive = arrays['spr_drive'] = as_field(fields['spr_drive'], 'int64', True)
        self.spr_wrap = arrays['spr_wrap'] = as_field(fields['spr_wrap'], 'int64', True)
        self.spr_stiffness = arrays['spr_stiffness'] = as_field(fields['spr_stiffness'], 'float64', True)
        self.spr_damping = arrays['spr_damping'] = as_field(fields['spr_damping'], 'float64', True)
        self.spr_rest = arrays['spr_rest'] = as_field(fields['spr_rest'], 'float64', True)
        self.sd_b1 = arrays['sd_b1'] = as_field(fields['sd_b1'], 'int64', True)
        self.sd_b2 = arrays['sd_b2'] = as_field(fields['sd_b2'], 'int64', True)
        self.sd_s1 = arrays['sd_s1'] = as_field(fields['sd_s1'], 'float64', True)
        self.sd_s2 = arrays['sd_s2'] = as_field(fields['sd_s2'], 'float64', True)
        self.sd_k = arrays['sd_k'] = as_field(fields['sd_k'], 'float64', True)
        self.sd_c = arrays['sd_c'] = as_field(fields['sd_c'], 'float64', True)
        self.sd_rest = arrays['sd_rest'] = as_field(fields['sd_rest'], 'float64', True)
        self.ld_body = arrays['ld_body'] = as_field(fields['ld_body'], 'int64', True)
        self.ld_point = arrays['ld_point'] = as_field(fields['ld_point'], 'float64', True)
        self.ld_body_frame = arrays['ld_body_frame'] = as_field(fields['ld_body_frame'], 'int64', True)
        self.ld_torque = arrays['ld_torque'] = as_field(fields['ld_torque'], 'int64', True)
        self.ld_expr = arrays['ld_expr'] = as_field(fields['ld_expr'], 'int64', True)
        self.prog_op = arrays['prog_op'] = as_field(fields['prog_op'], 'int64', True)
        self.prog_dst = arrays['prog_dst'] = as_field(fields['prog_dst'], 'int64', True)
        self.prog_args = arrays['prog_args'] = as_field(fields['prog_args'], 'int64', True)
        self.prog_imm = arrays['prog_imm'] = as_field(fields['prog_imm'], 'float64', True)
        self.prog_start = arrays['prog_start'] = as_field(fields['prog_start'], 'int64', True)
        self.prog_stop = arrays['prog_stop'] = as_field(fields['prog_stop'], 'int64', True)
        self.prog_result = arrays['prog_result'] = as_field(fields['prog_result'], 'int64', True)
        self.nreg = fields['nreg']
        self.row_bi = arrays['row_bi'] = as_field(fields['row_bi'], 'int64', True)
        self.row_bj = arrays['row_bj'] = as_field(fields['row_bj'], 'int64', True)
        self.row_bk = arrays['row_bk'] = as_field(fields['row_bk'], 'int64', True)
        self.row_bl = arrays['row_bl'] = as_field(fields['row_bl'], 'int64', True)
        self.body_mass_block = arrays['body_mass_block'] = as_field(fields['body_mass_block'], 'float64', True)
        self.rx_joint = arrays['rx_joint'] = as_field(fields['rx_joint'], 'int64', True)
        self.rx_body = arrays['rx_body'] = as_field(fields['rx_body'], 'int64', True)
        self.joint_body = arrays['joint_body'] = as_field(fields['joint_body'], 'int64', True)
        self.joint_point = arrays['joint_point'] = as_field(fields['joint_point'], 'float64', True)
        self.driven_rows = arrays['driven_rows'] = as_field(fields['driven_rows'], 'int64', True)
        self.body_inv_sqrt_mass = arrays['body_inv_sqrt_mass'] = as_field(fields['body_inv_sqrt_mass'], 'float64', True)
        self.s_rows = arrays['s_rows'] = as_field(fields['s_rows'], 'int64', True)
        self.s_ptr = arrays['s_ptr'] = as_field(fields['s_ptr'], 'int64', True)
        self.s_col = arrays['s_col'] = as_field(fields['s_col'], 'int64', True)
        self.row_first = arrays['row_first'] = as_field(fields['row_first'], 'int64', True)
        self.row_last = arrays['row_last'] = as_field(fields['row_last'], 'int64', True)
        self._arrays = arrays

    def __getattr__(self, name):
        return field_of(self._arrays, name)

    def _asdict(self):
        return {name: getattr(self, name) for name in self._fields}

    def __reduce__(self):
        return rebuild, (type(self), self._asdict())


cdef class FlatData:
    """The buffers of one run (written by the compiled step; see FlatModel for the shapes' n).

    Attributes:
        pos, rot, vel, omega_body, omega: body frames, ground last ((nbody+1, 3), rot 3x3;
            omega in world axes); omega2, angle: the 2D angular velocity and angle (nbody+1,).
        Q, Qn: (nv,) all generalized forces and their non-conservative part.
        phi, phi_t, gamma: (nc,); J: (nc, nv) dense constraint Jacobian.
        minv_jt: (nv, nc) M^-1 J^T; S: (nc, nc) its Schur complement, factored in place;
            lam, rhs: (nc,); s_work: (nc,) a vector in S's factored order (FlatModel.s_rows); minv_q: (nv,).
        spr_value: (ncoord,) spring deflections; spr_jac: (ncoord, 2 w) their Jacobian in body
            blocks (mbsim.model.spring_kernels); spr_ref: (ncoord,) the unwrapped deflection of
            the last accepted step (state carried between steps: the run's RunData.spring_reference
            when make_data is given it);
            spr_rate, spr_bias: scratch of the coordinates' (unused) rate and bias.
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
    """

    _fields = ('pos', 'rot', 'vel', 'omega_body', 'omega', 'omega2', 'angle', 'Q', 'Qn', 'phi', 'phi_t', 'gamma', 'J', 'minv_jt', 'S', 'lam', 'rhs', 's_work', 'minv_q', 'spr_value', 'spr_jac', 'spr_ref', 'spr_rate', 'spr_bias', 'row_val', 'row_jac_i', 'row_jac_j', 'row_bias', 'regs', 'vec3', 'y', 'ynew', 'ytmp', 'k1', 'k2', 'k3', 'k4', 'q_scratch', 'dx', 'k1_valid', 'joint_gen', 'seg', 'solve_stats', 'robust_work', 'kkt_rank')

    def __init__(self, **fields):
        cdef dict arrays = {}
        self.pos = arrays['pos'] = as_field(fields['pos'], 'float64', False)
        self.rot = arrays['rot'] = as_field(fields['rot'], 'float64', False)
        self.vel = arrays['vel'] = as_field(fields['vel'], 'float64', False)
        self.omega_body = arrays['omega_body'] = as_field(fields['omega_body'], 'float64', False)
        self.omega = arrays['omega'] = as_field(fields['omega'], 'float64', False)
        self.omega2 = arrays['omega2'] = as_field(fields['omega2'], 'float64', False)
        self.angle = arrays['angle'] = as_field(fields['angle'], 'float64', False)
        self.Q = arrays['Q'] = as_field(fields['Q'], 'float64', False)
        self.Qn = arrays['Qn'] = as_field(fields['Qn'], 'float64', False)
        self.phi = arrays['phi'] = as_field(fields['phi'], 'float64', False)
        self.phi_t = arrays['phi_t'] = as_field(fields['phi_t'], 'float64', False)
        self.gamma = arrays['gamma'] = as_field(fields['gamma'], 'float64', False)
        self.J = arrays['J'] = as_field(fields['J'], 'float64', False)
        self.minv_jt = arrays['minv_jt'] = as_field(fields['minv_jt'], 'float64', False)
        self.S = arrays['S'] = as_field(fields['S'], 'float64', False)
        self.lam = arrays['lam'] = as_field(fields['lam'], 'float64', False)
        self.rhs = arrays['rhs'] = as_field(fields['rhs'], 'float64', False)
        self.s_work = arrays['s_work'] = as_field(fields['s_work'], 'float64', False)
        self.minv_q = arrays['minv_q'] = as_field(fields['minv_q'], 'float64', False)
        self.spr_value = arrays['spr_value'] = as_field(fields['spr_value'], 'float64', False)
        self.spr_jac = arrays['spr_jac'] = as_field(fields['spr_jac'], 'float64', False)
        self.spr_ref = arrays['spr_ref'] = as_field(fields['spr_ref'], 'float64', False)
        self.spr_rate = arrays['spr_rate'] = as_field(fields['spr_rate'], 'float64', False)
        self.spr_bias = arrays['spr_bias'] = as_field(fields['spr_bias'], 'float64', False)
        self.row_val = arrays['row_val'] = as_field(fields['row_val'], 'float64', False)
        self.row_jac_i = arrays['row_jac_i'] = as_field(fields['row_jac_i'], 'float64', False)
        self.row_jac_j = arrays['row_jac_j'] = as_field(fields['row_jac_j'], 'float64', False)
        self.row_bias = arrays['row_bias'] = as_field(fields['row_bias'], 'float64', False)
        self.regs = arrays['regs'] = as_field(fields['regs'], 'float64', False)
        self.vec3 = arrays['vec3'] = as_field(fields['vec3'], 'float64', False)
        self.y = arrays['y'] = as_field(fields['y'], 'float64', False)
        self.ynew = arrays['ynew'] = as_field(fields['ynew'], 'float64', False)
        self.ytmp = arrays['ytmp'] = as_field(fields['ytmp'], 'float64', False)
        self.k1 = arrays['k1'] = as_field(fields['k1'], 'float64', False)
        self.k2 = arrays['k2'] = as_field(fields['k2'], 'float64', False)
        self.k3 = arrays['k3'] = as_field(fields['k3'], 'float64', False)
        self.k4 = arrays['k4'] = as_field(fields['k4'], 'float64', False)
        self.q_scratch = arrays['q_scratch'] = as_field(fields['q_scratch'], 'float64', False)
        self.dx = arrays['dx'] = as_field(fields['dx'], 'float64', False)
        self.k1_valid = arrays['k1_valid'] = as_field(fields['k1_valid'], 'int64', False)
        self.joint_gen = arrays['joint_gen'] = as_field(fields['joint_gen'], 'float64', False)
        self.seg = arrays['seg'] = as_field(fields['seg'], 'float64', False)
        self.solve_stats = arrays['solve_stats'] = as_field(fields['solve_stats'], 'float64', False)
        self.robust_work = arrays['robust_work'] = as_field(fields['robust_work'], 'float64', False)
        self.kkt_rank = arrays['kkt_rank'] = as_field(fields['kkt_rank'], 'int32', False)
        self._arrays = arrays

    def __getattr__(self, name):
        return field_of(self._arrays, name)

    def _asdict(self):
        return {name: getattr(self, name) for name in self._fields}

    def __reduce__(self):
        return rebuild, (type(self), self._asdict())
