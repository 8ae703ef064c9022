"""Method ``recursive``: O(N) forward and inverse dynamics of trees in joint coordinates by
spatial operator algebra (papers/creeping-robot-spatial-operator-algebra.txt §3, after Jain's
unified formulation and Rodriguez-Jain-Kreutz-Delgado; in the books' words, ``aba`` and ``rnea``).

The scene's joints must form a tree rooted at the ground (mbsim.model.topology; a joint that
closes a loop is refused, by name). The method's coordinates are the joint coordinates: per
joint, revolute: angle; prismatic: position; cylindrical: position, angle; universal: two
angles; spherical: a quaternion (velocities: the relative angular velocity in the outboard
body's axes); fixed: none; and a free joint (centre of mass and quaternion, velocities as in
body coordinates; planar: x, y, angle) for every body that no joint path ties to the ground.
Each evaluation runs three compiled sweeps (mbsim.solvers.recursive.soa_kernels): kinematics base to tip
(poses, spatial velocities V_k, joint maps H*, Coriolis terms a_k, eqs. (6)-(9)); the applied
forces of the model (gravity, force elements, compliant contacts: mbsim.model.forces, the same
code every method uses) evaluated at those body states; then the articulated-body recursion
tip to base and base to tip (eqs. (10)-(13) and the innovations factorisation of the operator
form (16)-(19)). Joints with a ``drive`` are prescribed (coordinate, rate and acceleration from
the symbolic derivatives of the drive) and the others are free, solved together exactly (the
hybrid problem); the drive forces are the joint forces T_k = H_k f_k of the driven joints minus
their springs. Joint springs and dampers act on the joint coordinates directly.

Time integration uses the integrators written once (mbsim.solvers.ode.integrate: the fixed steps
and the embedded pairs RK45 / DOP853, in compiled blocks over the compiled right-hand side, or
through mbsim.solvers.ode.integrators over the Python one; Radau and BDF are scipy's); after each
step the quaternions of spherical and free joints are rescaled to unit norm and the driven
coordinates are set to their prescribed values. Recording: body positions, orientations and
velocities come from the recursion; the constraint diagnostics are the scene's joint equations
evaluated at those body states (zero up to round-off, by construction); reactions are the joint
spatial forces f_k (minus springs) moved to the reported joint point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbsim.diagnostics import contact_columns, driven_columns, driven_values_in, row_columns, row_width
from mbsim.model.constraints import constraint_values
from mbsim.model.data import new_data
from mbsim.model.flat import compiled_form, make_data, model_form, python_reason
from mbsim.model.joints import JOINT_TYPES
from mbsim.model.joints.base import TreeMotion, TreePose, embed, unit_quaternion
from mbsim.model.model import Evaluation, Frames, Model, State, StepInfo
from mbsim.model.topology import LoopClosure, spanning_tree
from mbsim.scene.fields import Context, Field, Number, Raw
from mbsim.solvers.base import Block, SolverBase, dense_states, read_options
from mbsim.solvers.ode import BLOCK_STEPS, ROWS_PER_BLOCK, integrate
from mbsim.solvers.ode.integrators import stepper
from mbsim.solvers.recursive import recursive_kernels as rk
from mbsim.solvers.recursive import soa_kernels as soa

NAME = "recursive"
CAPABILITIES = {"rigid_contacts": False, "integrators": True, "armature": True}

OPTION_FIELDS = {
    "projection": Field(
        Raw("mapping"),
        "accepted and ignored: joint coordinates meet the joints by construction (so scenes written for the "
        "projecting methods run unchanged)",
        None,
    ),
    "max_step": Field(Number(positive=True), "largest step of the adaptive (scipy:*) integrators, s", None),
}

# the most bytes of the buffer of a block's recorded rows
ROWS_BYTES = 16 * 2**20

_FREE3 = (("x", "y", "z", "qw", "qx", "qy", "qz"), ("vx", "vy", "vz", "wx_body", "wy_body", "wz_body"))
_FREE2 = (("x", "y", "angle"), ("vx", "vy", "w"))


def _embed_rotation(R: np.ndarray) -> np.ndarray:
    if R.shape == (2, 2):
        out = np.eye(3)
        out[:2, :2] = R
        return out
    return R


class _Shifted:
    """A drive c(t) given from the joint's ``initial``, as the method's coordinate (zero at t = 0)."""

    def __init__(self, c, initial: float) -> None:
        self.c, self.initial = c, initial

    def __call__(self, env: dict) -> float:
        return float(self.c(env)) - self.initial


@dataclass
class JointSpace:
    """The tree in joint coordinates: the kernels' arrays (mbsim.solvers.recursive.soa_kernels), one row per
    body in scene order, and the bookkeeping between joints, coordinates and the scene.

    Attributes:
        order, parent (nbody,): topological order; parent body (nbody = ground).
        jtype, qadr, vadr, nqj, nvj (nbody,): joint code and the joint's slices of q and v.
        rp, rc (nbody, 3): joint point in the parent's and in the body's frame (a root's rp: world).
        qrel0 (nbody, 4): relative rotation parent -> body at the joint's zero.
        ax1, ax2 (nbody, 3): joint axes in the parent's and the body's frame (see the kernels).
        ang0 (nbody,): planar relative angle at the joint's zero (2D scenes).
        joint (nbody,), reversed (nbody,): scene joint carrying the body (-1: free root) and
            whether it is walked from body2 to body1.
        nq, nv: sizes; q_names, v_names: column names of /q and /v.
        quat_q (k, 4), quat_v (k, 3): quaternion slices of q and their angular-velocity slices of v.
        scalar_q, scalar_v (m,): the other coordinates (q_dot = v there).
        driven: [(velocity index, position index, c, c', c'')] per driven joint (scene order).
        motions (nbody,): the inboard joint's motion (mbsim.model.joints.base.TreeMotion; None: a free root).
        coordinates: velocity and position index (ncoord,) of each row of the model's joint-coordinate
            table (the forces on it: mbsim.model.joint_forces; its coordinate = q + the joint's initial).
    """

    order: np.ndarray
    parent: np.ndarray
    jtype: np.ndarray
    qadr: np.ndarray
    vadr: np.ndarray
    nqj: np.ndarray
    nvj: np.ndarray
    rp: np.ndarray
    rc: np.ndarray
    qrel0: np.ndarray
    ax1: np.ndarray
    ax2: np.ndarray
    ang0: np.ndarray
    joint: np.ndarray
    reversed: np.ndarray
    nq: int
    nv: int
    q_names: list[str]
    v_names: list[str]
    quat_q: np.ndarray
    quat_v: np.ndarray
    scalar_q: np.ndarray
    scalar_v: np.ndarray
    driven: list
    coordinates: tuple[np.ndarray, np.ndarray]
    q_initial: np.ndarray  # (nq,) the joints' `initial`: /q = q + q_initial (q is zero at t = 0)
    armature: np.ndarray  # (nv,) the joints' armature: an inertia on the coordinate
    motions: list[TreeMotion | None]


def joint_space(model: Model) -> JointSpace:
    """Derive the tree and the joint coordinates of a model.

    Raises:
        LoopClosure: when the joints do not form a tree.
    """
    nb, dim = model.nbody, model.dimension
    tree = spanning_tree(nb, [(j.body1, j.body2) for j in model.joints])
    angle0 = np.append(model.q0.reshape(nb, 3)[:, 2], 0.0) if dim == 2 else None  # scene angles, unwrapped
    jtype = np.zeros(nb, dtype=np.int64)
    rp, rc, ax1, ax2 = (np.zeros((nb, 3)) for _ in range(4))
    qrel0 = np.zeros((nb, 4))
    ang0 = np.zeros(nb)
    motions: list[TreeMotion | None] = [None] * nb  # per body: its inboard joint's (None: a free root)
    qn: list[list[str]] = [[] for _ in range(nb)]
    vn: list[list[str]] = [[] for _ in range(nb)]
    for k in range(nb):
        j = int(tree.joint[k])
        if j < 0:  # a free root: its own centre of mass and orientation
            jtype[k] = soa.FREE if dim == 3 else soa.PLANAR_FREE
            names = _FREE3 if dim == 3 else _FREE2
            qrel0[k] = (1.0, 0.0, 0.0, 0.0)
            qn[k] = [f"{model.body_names[k]}.{n}" for n in names[0]]
            vn[k] = [f"{model.body_names[k]}.{n}" for n in names[1]]
            continue
        info = model.joints[j]
        fr = info.frame
        rev = bool(tree.reversed[k])
        motion = JOINT_TYPES[info.type].tree_motion(fr, rev)
        motions[k] = motion
        jtype[k] = soa.MOTIONS[motion.motion]
        # parent-side and child-side data of the joint: walked from body1 to body2, or back
        s_p, s_c = (fr.s_j, fr.s_i) if rev else (fr.s_i, fr.s_j)
        rot_p, rot_c = (fr.rot_j, fr.rot_i) if rev else (fr.rot_i, fr.rot_j)
        rp[k], rc[k] = embed(s_p), embed(s_c)
        R0 = _embed_rotation(rot_p).T @ _embed_rotation(rot_c)
        qrel0[k] = unit_quaternion(R0)
        ax1[k], ax2[k] = motion.ax1, motion.ax2
        cq, cv = motion.q_names, motion.v_names
        if dim == 2:
            p_idx = int(tree.parent[k])
            ang0[k] = angle0[k] - angle0[p_idx]
        qn[k] = [f"{info.name}.{n}" for n in cq]
        vn[k] = [f"{info.name}.{n}" for n in cv]
    # coordinates laid out joint by joint from the ground outwards (tree order)
    nqj = np.array([soa.NQ[int(c)] for c in jtype], dtype=np.int64)
    nvj = np.array([soa.NV[int(c)] for c in jtype], dtype=np.int64)
    qadr = np.zeros(nb, dtype=np.int64)
    vadr = np.zeros(nb, dtype=np.int64)
    nq = nv = 0
    q_names: list[str] = []
    v_names: list[str] = []
    for k in tree.order:
        qadr[k], vadr[k] = nq, nv
        nq += nqj[k]
        nv += nvj[k]
        q_names += qn[k]
        v_names += vn[k]
    quat_q, quat_v, scalar_q, scalar_v = [], [], [], []
    for k in tree.order:
        t, qa, va = int(jtype[k]), int(qadr[k]), int(vadr[k])
        if t == soa.SPHERICAL:
            quat_q.append(np.arange(qa, qa + 4))
            quat_v.append(np.arange(va, va + 3))
        elif t == soa.FREE:
            scalar_q += range(qa, qa + 3)
            scalar_v += range(va, va + 3)
            quat_q.append(np.arange(qa + 3, qa + 7))
            quat_v.append(np.arange(va + 3, va + 6))
        else:
            scalar_q += range(qa, qa + nqj[k])
            scalar_v += range(va, va + nvj[k])
    # drives and springs act on the joint's coordinate: its first degree of freedom
    carrier = {int(tree.joint[k]): k for k in range(nb) if tree.joint[k] >= 0}
    driven = []
    q_initial = np.zeros(nq)
    armature = np.zeros(nv)
    # the joint-coordinate table's rows (mbsim.model.joint_forces) as tree coordinates
    ncoord = model.joint_coordinates[0].ncoord if model.joint_coordinates else 0
    coordinate_v, coordinate_q = np.zeros(ncoord, dtype=np.int64), np.zeros(ncoord, dtype=np.int64)
    for j, info in enumerate(model.joints):
        k = carrier[j]
        if info.initial:  # joints with one coordinate (compile_model checks)
            q_initial[qadr[k]] = info.initial
        if info.armature:
            armature[vadr[k]] = info.armature
        if info.drive is not None:
            d1 = info.drive.derivative("t")
            c = info.drive if not info.initial else _Shifted(info.drive, info.initial)
            driven.append((int(vadr[k]), int(qadr[k]), c, d1, d1.derivative("t")))
        if info.coordinate_row is not None:
            coordinate_v[info.coordinate_row], coordinate_q[info.coordinate_row] = vadr[k], qadr[k]
    coordinates = (coordinate_v, coordinate_q)
    return JointSpace(
        order=tree.order,
        parent=tree.parent,
        jtype=jtype,
        qadr=qadr,
        vadr=vadr,
        nqj=nqj,
        nvj=nvj,
        rp=rp,
        rc=rc,
        qrel0=qrel0,
        ax1=ax1,
        ax2=ax2,
        ang0=ang0,
        joint=tree.joint,
        reversed=tree.reversed,
        nq=int(nq),
        nv=int(nv),
        q_names=q_names,
        v_names=v_names,
        quat_q=np.array(quat_q, dtype=np.int64).reshape(-1, 4),
        quat_v=np.array(quat_v, dtype=np.int64).reshape(-1, 3),
        scalar_q=np.array(scalar_q, dtype=np.int64),
        scalar_v=np.array(scalar_v, dtype=np.int64),
        driven=driven,
        coordinates=coordinates,
        q_initial=q_initial,
        armature=armature,
        motions=motions,
    )


@dataclass
class Kinematics:
    """Output of the kinematics sweep (see mbsim.solvers.recursive.soa_kernels.kinematics), ground row last."""

    quat: np.ndarray
    rot: np.ndarray
    o: np.ndarray
    com: np.ndarray
    V: np.ndarray
    vcom: np.ndarray
    angle: np.ndarray
    Hs: np.ndarray
    acor: np.ndarray


@dataclass
class Dynamics:
    """One forward-dynamics evaluation.

    Attributes:
        qdd: (nv,) joint accelerations.
        joint_force: (nbody, 6) spatial force (torque about O_k, force; world) of each body's
            inboard joint on the body, at the joint point O_k on the body.
        drive_force: (ndriven,) generalized force of each driven joint's drive (scene order).
        power: power of the non-conservative applied forces, joint dampers and drives, W.
        potential: potential energy (gravity, force elements, joint springs), J, when asked for.
        spring_force: (nv,) the forces on the joint coordinates (springs, dampers, actuators, stops,
            friction: applied forces, not reactions).
        frames: body frames of the state (mbsim.model.model.Frames), when the force elements needed
            them (else None: :meth:`Solver.frames` of ``kin``); kin: the kinematics sweep.
        q, v: the state used (driven coordinates at their prescribed values).
    """

    qdd: np.ndarray
    joint_force: np.ndarray
    drive_force: np.ndarray
    power: float
    potential: float
    spring_force: np.ndarray
    frames: Frames | None
    kin: Kinematics
    q: np.ndarray
    v: np.ndarray


class Solver(SolverBase):
    """Joint-coordinate recursive dynamics of a tree (see the module docstring)."""

    EXTRA_DIAGNOSTICS: dict[str, str] = {}

    def __init__(
        self, model: Model, space: JointSpace, integrator: str, rtol: float, atol: float, max_step: float | None
    ) -> None:
        self.model = model
        self.data = new_data(model)  # what this run changes (the model is never written)
        # the force kernels' buffers (the compiled step's and the Python path's single evaluations)
        self._flat_data = make_data(model_form(model), dense=False, coordinate_reference=None)
        self.space = space
        self.integrator = self.integrator_label = integrator
        self.nq, self.nv = space.nq, space.nv
        self._fixed, self._adaptive = stepper(integrator, rtol, atol, model.t_end, max_step)
        self._tolerances = (rtol, atol, max_step or np.inf)
        self._h_carried: float | None = None  # an embedded pair's next step when a block hands over to Python
        self._last_compiled = False  # whether the last step was the compiled pair's (its dense output)
        self._gravity = embed(model.gravity)
        self._mass = np.ascontiguousarray(model.body_mass, dtype=float)
        if model.dimension == 3:
            self._inertia = np.ascontiguousarray(model.body_inertia, dtype=float)
        else:  # planar bodies turn about z only; the other two moments never enter (no such motion)
            izz = model.body_inertia[:, 0, 0]
            self._inertia = np.zeros((model.nbody, 3, 3))
            for a in range(3):
                self._inertia[:, a, a] = izz
        # which velocities are prescribed (int8, the kernels' flags)
        self._presc = np.zeros(space.nv, dtype=np.int8)
        for d, *_ in space.driven:
            self._presc[d] = 1
        self._driven_v = np.array([d for d, *_ in space.driven], dtype=np.int64)
        self._driven_q = np.array([qa for _, qa, *_ in space.driven], dtype=np.int64)
        self._cached: tuple[float, np.ndarray, np.ndarray] | None = None
        # per scene joint: the body that carries it (reactions)
        self._carrier = np.full(len(model.joints), -1, dtype=np.int64)
        for k in range(model.nbody):
            if space.joint[k] >= 0:
                self._carrier[space.joint[k]] = k
        self._joint_point = np.array([embed(j.point2_local) for j in model.joints]).reshape(-1, 3)
        # per velocity coordinate: the body whose inboard joint owns it
        self._owner = np.zeros(space.nv, dtype=np.int64)
        for k in range(model.nbody):
            self._owner[space.vadr[k] : space.vadr[k] + space.nvj[k]] = k
        self.compiled_reason = ""
        self._compiled = self._compile()

    def _compile(self):
        """The compiled step's arrays (mbsim.solvers.recursive.recursive_kernels), or None with the reason
        in ``compiled_reason`` (then the Python path steps)."""
        space, m = self.space, self.model
        if self.integrator not in rk.INTEGRATORS:
            self.compiled_reason = f"integrator {self.integrator} has no compiled step"
        elif space.driven:
            self.compiled_reason = "drives step through the Python path"
        else:
            self.compiled_reason = python_reason(m)
        if self.compiled_reason:
            return None
        flat = model_form(m)
        coordinate_v, coordinate_q = space.coordinates
        nj = len(m.joints)
        carrier = self._carrier
        body2 = np.array([info.body2 for info in m.joints], dtype=np.int64)
        tree = rk.Tree(
            order=space.order,
            parent=space.parent,
            jtype=space.jtype,
            qadr=space.qadr,
            vadr=space.vadr,
            rp=space.rp,
            rc=space.rc,
            qrel0=space.qrel0,
            ax1=space.ax1,
            ax2=space.ax2,
            ang0=space.ang0,
            nvj=space.nvj,
            mass=self._mass,
            inertia=self._inertia,
            gravity=self._gravity,
            presc=self._presc,
            qdd_presc=np.zeros(space.nv),
            armature=space.armature,
            quat_q=space.quat_q,
            quat_v=space.quat_v,
            scalar_q=space.scalar_q,
            scalar_v=space.scalar_v,
            jc_v=coordinate_v,
            jc_q=coordinate_q,
            body_inertia=flat.body_inertia,
            owner=self._owner,
            body_joint=np.asarray(space.joint, dtype=np.int64),
            carrier=carrier,
            back=(space.reversed[carrier] & (body2 < m.nbody)) if nj else np.zeros(0, dtype=bool),
            body2=body2,
            joint_point=self._joint_point,
            joint_body=np.asarray(m.joint_body, dtype=np.int64),
            nq=space.nq,
            nv=space.nv,
            elements=int(bool(m.forces)),
            integrator=rk.INTEGRATORS[self.integrator],
        )
        # the run's buffers: the tree's, and the FlatData of the force elements and rows, without the
        # dense constraint Jacobian (the kernels evaluate the joint equations row by row)
        self.data.tree = rk.make_tree_data(m.nbody, space.nq, space.nv, m.nv, nj, m.nc, m.body_width)
        self.data.flat = self._flat_data
        # the integrator's buffers, and an embedded pair's state across blocks
        rtol, atol, max_step = self._tolerances
        steps = integrate.Work(space.nq + space.nv + 1, tree.integrator, rtol, atol, max_step, m.t_end)
        width = row_width(self.row_columns()) + 1  # + the step number
        # at most ROWS_BYTES of rows a block (a 3,000-link chain's row is 650 kB: 25 rows, not 200)
        rows = np.zeros((max(1, min(ROWS_PER_BLOCK, ROWS_BYTES // (8 * width))), width))
        return flat, tree, rows, np.zeros(5), steps

    def row_columns(self) -> list[tuple[str, tuple[int, ...]]]:
        """The result file's row in joint coordinates, then the joints' reactions in body axes."""
        m = self.model
        columns = row_columns(m, self.space.nq, self.space.nv, driven=False)
        if m.joints:
            columns.append(("joints/{joint}/reaction_body", (len(m.joints), 6 if m.dimension == 3 else 3)))
        return columns + driven_columns(m) + contact_columns(m)

    @property
    def adaptive(self) -> bool:
        return self._adaptive is not None

    @property
    def interpolates(self) -> bool:
        return self._adaptive is not None

    def interpolant(self):
        """The last accepted step's dense output (scipy's interpolant of the pair, of Radau, of BDF)
        as states in joint coordinates."""
        if self._last_compiled:  # the compiled pair's step: its Work still holds the stages
            flat, tree, _, _, pair = self._compiled
            dense = integrate.dense(rk.TreeSystem(flat, self.data.flat, tree, self.data.tree), pair)
        else:
            dense = self._adaptive.dense_output()
        at = dense_states(dense, self.nq, self.nv, self.normalize)
        if not self.space.driven:
            return at

        def driven(t: float) -> State:  # the driven coordinates at c(t), c'(t), as every step's end sets them
            s = at(t)
            q, v, _ = self._prescribe(t, s.q, s.v)
            return State(t, q, v, s.work)

        return driven

    @property
    def block_stepping(self) -> bool:
        """Whether :meth:`advance` runs blocks of steps in compiled code (rows recorded by Python)."""
        return self._compiled is not None

    @property
    def implicit_contact(self) -> str:
        """Why solver.contact_integration implicit cannot be taken ("": it is): the Rosenbrock-W
        step exists in the compiled blocks of fixed steps (recursive_kernels.tree_steps)."""
        if self._adaptive is not None:
            return (
                f"integrator {self.integrator_label} is adaptive (the implicit contact step is a fixed step; try rk4)"
            )
        if not self.block_stepping:
            return "the run does not step in compiled blocks"
        if self.model.contact_step is not None:
            return (
                "with time.contact_step it steps one step at a time in Python (drop time.contact_step: the "
                "implicit step needs none)"
            )
        return ""

    def load_compiled(self) -> None:
        """A call of the compiled step that takes no step (compiled ahead of time: it checks the buffers' types)."""
        if self._compiled is None:
            return
        flat, tree, rows, out, steps = self._compiled
        # no step and no row: any q, v of the right sizes (the start's joint coordinates cost 0.3 s at N = 3,000)
        q, v = np.zeros(self.nq), np.zeros(self.nv)
        data = self.data
        rk.advance(flat, data.flat, tree, data.tree, 0.0, q, v, 0.0, 0.0, 0.0, 1, 0, 0, 0, 0, rows, out, steps)

    def advance(
        self, state: State, h: float, done: int, every: int, max_steps: int, t_end: float, max_violation: float
    ) -> Block:
        """Compiled steps and recorded rows (mbsim.solvers.recursive.recursive_kernels.advance); joint
        coordinates meet the joints by construction: no violation to watch. Under scipy:RK45 /
        scipy:DOP853 each step is one accepted step of the compiled pair (h its first step)."""
        flat, tree, rows, out, pair = self._compiled
        q, v = state.q.copy(), state.v.copy()
        data = self.data
        code = rk.advance(
            flat, data.flat, tree, data.tree, state.t, q, v, state.work, h, t_end, every, done, max_steps, len(rows),
            BLOCK_STEPS, rows, out, pair, self.model.contact_implicit and not self.implicit_contact,
        )  # fmt: skip
        if self._adaptive is not None:  # a step handed to Python starts its pair where the compiled one stood
            self._h_carried = pair.h_abs if code != rk.OK and pair.started else None
        steps = int(out[2])
        self._last_compiled = self._last_compiled if not steps else True
        if np.any(self.space.q_initial):  # /q counts each joint coordinate from its `initial`
            rows[: int(out[3]), 1 : 1 + self.space.nq] += self.space.q_initial
        new = State(float(out[0]), q, v, float(out[1])) if steps else state
        info = StepInfo(iterations=0, h=float(out[4]), position_violation=0.0)
        return Block(new, steps, rows[: int(out[3])], info, 0.0, "ok" if code == rk.OK else "python")

    @property
    def extra_diagnostics(self) -> tuple[str, ...]:
        return ()

    def coordinate_names(self) -> tuple[list[str], list[str]]:
        """Names of the columns of /q and /v (joint coordinates)."""
        return list(self.space.q_names), list(self.space.v_names)

    def initial_state(self) -> State:
        """Joint coordinates of the model's (assembled) initial body states."""
        q, v = self.joint_coordinates(self.model.q0, self.model.v0)
        return State(0.0, q, v, 0.0)

    def carried(self) -> dict[str, np.ndarray]:
        """Nothing: the joint coordinates are the state (no unwrapping references), the step
        control of an adaptive pair restarts."""
        return {}

    def state_from_row(self, t: float, q: np.ndarray, v: np.ndarray, work: float) -> State:
        """/q counts each joint coordinate from its `initial` (evaluate's q_recorded): taken off
        again (exact to round-off of the subtraction only when an `initial` is not zero)."""
        return State(t, np.asarray(q, dtype=float) - self.space.q_initial, np.array(v, dtype=float), work)

    def body_coordinates(self, state: State) -> tuple[np.ndarray, np.ndarray]:
        """The model's body coordinates (mbsim.model.model) of a state of this method."""
        kin = self.kinematics(state.q, state.v)
        return self._body_q(kin), self._body_v(kin)

    # ------------------------------------------------------------------ coordinates

    def kinematics(self, q: np.ndarray, v: np.ndarray) -> Kinematics:
        s = self.space
        q = np.ascontiguousarray(q, dtype=float)
        v = np.ascontiguousarray(v, dtype=float)
        out = soa.kinematics(
            s.order, s.parent, s.jtype, s.qadr, s.vadr, s.rp, s.rc, s.qrel0, s.ax1, s.ax2, s.ang0, q, v
        )
        return Kinematics(*out)

    def _body_q(self, kin: Kinematics) -> np.ndarray:
        nb = self.model.nbody
        if self.model.dimension == 3:
            return np.concatenate((kin.com[:nb], kin.quat[:nb]), axis=1).reshape(-1)
        return np.concatenate((kin.com[:nb, :2], kin.angle[:nb, None]), axis=1).reshape(-1)

    def _body_v(self, kin: Kinematics) -> np.ndarray:
        nb = self.model.nbody
        if self.model.dimension == 3:
            omega_body = np.einsum("nji,nj->ni", kin.rot[:nb], kin.V[:nb, :3])
            return np.concatenate((kin.vcom[:nb], omega_body), axis=1).reshape(-1)
        return np.concatenate((kin.vcom[:nb, :2], kin.V[:nb, 2:3]), axis=1).reshape(-1)

    def frames(self, kin: Kinematics) -> Frames:
        """Body frames (world) of a kinematics sweep, ground appended, in the model's convention."""
        if self.model.dimension == 3:
            omega_body = np.einsum("nji,nj->ni", kin.rot, kin.V[:, :3])
            return Frames(kin.com, kin.rot, kin.vcom, kin.V[:, :3].copy(), omega_body=omega_body)
        pos, rot, vel = kin.com[:, :2].copy(), kin.rot[:, :2, :2].copy(), kin.vcom[:, :2].copy()
        return Frames(pos, rot, vel, kin.V[:, 2].copy(), angle=kin.angle.copy())

    def joint_coordinates(
        self, q_body: np.ndarray, v_body: np.ndarray, t: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray]:
        """Joint coordinates (q, v) of body coordinates that satisfy the joints (the inverse of
        :meth:`body_coordinates`); driven coordinates take their prescribed values at ``t``."""
        m, s = self.model, self.space
        nb, dim = m.nbody, m.dimension
        fr = m.frames(q_body, v_body)
        pos = np.vstack([embed(p) for p in fr.pos])
        rot = np.array([_embed_rotation(r) for r in fr.rot])
        vel = np.vstack([embed(p) for p in fr.vel])
        omega = np.zeros((nb + 1, 3))
        if dim == 3:
            omega[:] = fr.omega
        else:
            omega[:, 2] = fr.omega
        from scipy.spatial.transform import Rotation  # here: scipy.spatial costs every command's start-up ~0.1 s

        q = np.zeros(s.nq)
        qb = q_body.reshape(nb, m.body_qwidth)
        vb = v_body.reshape(nb, m.body_width)
        for k in s.order:
            p, qa = int(s.parent[k]), int(s.qadr[k])
            if s.motions[k] is None:  # a free root: its body coordinates
                q[qa : qa + s.nqj[k]] = qb[k]
                continue
            R0 = Rotation.from_quat(np.roll(s.qrel0[k], -1)).as_matrix()
            Rrel = rot[p].T @ rot[k]
            o_k = pos[k] + rot[k] @ s.rc[k]
            pose = TreePose(
                motion=s.motions[k],
                zero=R0,
                turn=Rrel @ R0.T,
                child_turn=R0.T @ Rrel,
                slide=rot[p].T @ (o_k - pos[p]) - s.rp[k],
                planar_angle=(qb[k, 2] - (qb[p, 2] if p < nb else 0.0)) - s.ang0[k] if dim == 2 else None,
            )
            joint_type = JOINT_TYPES[m.joints[s.joint[k]].type]
            q[qa : qa + s.nqj[k]] = joint_type.tree_coordinates(pose)
        for _, qa, c, _, _ in s.driven:
            q[qa] = float(c({"t": t}))
        # velocities: V_k - phi* V_p = H*_k qdot, solved joint by joint (exact for a consistent state)
        kin = self.kinematics(q, np.zeros(s.nv))
        v = np.zeros(s.nv)
        V = np.zeros((nb + 1, 6))
        V[:, :3] = omega
        V[:, 3:] = vel + np.cross(omega, kin.o - pos)
        for k in s.order:
            p, t_, va, n = int(s.parent[k]), int(s.jtype[k]), int(s.vadr[k]), int(s.nvj[k])
            if t_ == soa.FREE or t_ == soa.PLANAR_FREE:
                v[va : va + n] = vb[k]
                continue
            if n == 0:
                continue
            lever = kin.o[k] - kin.o[p]
            rel = V[k] - np.concatenate((V[p, :3], V[p, 3:] + np.cross(V[p, :3], lever)))
            v[va : va + n] = np.linalg.lstsq(kin.Hs[va : va + n].T, rel, rcond=None)[0]
        for d, _, _, c1, _ in s.driven:
            v[d] = float(c1({"t": t}))
        return q, v

    def q_rate(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """dq/dt: v for scalar coordinates, 1/2 p (x) (0, omega) for quaternions."""
        s = self.space
        out = np.empty(s.nq)
        out[s.scalar_q] = v[s.scalar_v]
        if len(s.quat_q):
            p = q[s.quat_q]
            w = v[s.quat_v]
            out[s.quat_q[:, 0]] = -0.5 * np.einsum("ki,ki->k", p[:, 1:], w)
            out[s.quat_q[:, 1:]] = 0.5 * (p[:, :1] * w + np.cross(p[:, 1:], w))
        return out

    def normalize(self, q: np.ndarray) -> np.ndarray:
        s = self.space
        if len(s.quat_q):
            q = q.copy()
            p = q[s.quat_q]
            q[s.quat_q] = p / np.linalg.norm(p, axis=1, keepdims=True)
        return q

    def quaternion_norm_error(self, q: np.ndarray) -> float:
        s = self.space
        if not len(s.quat_q):
            return 0.0
        return float(np.max(np.abs(np.linalg.norm(q[s.quat_q], axis=1) - 1.0)))

    def _prescribe(self, t: float, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, v with the driven coordinates set to c(t), c'(t); and qdd_prescribed (nv,)."""
        qdd = np.zeros(self.nv)
        if not self.space.driven:
            return q, v, qdd
        q, v = q.copy(), v.copy()
        env = {"t": t}
        for d, qa, c, c1, c2 in self.space.driven:
            q[qa] = float(c(env))
            v[d] = float(c1(env))
            qdd[d] = float(c2(env))
        return q, v, qdd

    # ------------------------------------------------------------------ forces

    def _applied(self, t: float, kin: Kinematics, q: np.ndarray, v: np.ndarray, with_potential: bool):
        """Applied forces at a state: ext (nbody, 6) (torque, force) of the force elements at the
        centres of mass, world; the forces on the joint coordinates (nv,) (springs, dampers,
        actuators, stops, friction: mbsim.model.joint_forces); their non-conservative power; the
        potential of gravity, the conservative elements and the springs; the frames used (None when
        nothing needed them). The compiled groups and the coordinates' forces by the compiled kernels
        (recursive_kernels.tree_forces), the others (compliant contacts) by their Python functions."""
        m = self.model
        nb, dim, w = m.nbody, m.dimension, m.body_width
        ext, tau = np.zeros((nb, 6)), np.zeros(self.nv)
        potential = -float(self._mass @ (kin.com[:nb] @ self._gravity)) if with_potential else 0.0
        flat = model_form(m)
        if not (m.forces or flat.njc):
            return ext, tau, 0.0, potential, None
        frames = self.frames(kin)
        Qc, Qn = np.zeros(nb * w), np.zeros(nb * w)
        coordinate_v, coordinate_q = self.space.coordinates
        joint_power, pot = rk.tree_forces(flat, self._flat_data, coordinate_q, coordinate_v, t, frames, q, v, Qc, Qn,
                                          tau)  # fmt: skip
        potential += pot
        if flat.ncc:  # the compiled compliant contacts' counters, for the run's diagnostics
            m.compliant.read_counters(self.data, self._flat_data)
        total, nonc = (Qc + Qn).reshape(nb, w), Qn.reshape(nb, w)
        for group in m.forces:
            if compiled_form(group):
                continue
            q_cons, q_nc, pot = group.evaluate(frames, t, self.data)
            potential += pot
            if q_cons is not None:
                total = total + q_cons[:nb]
            if q_nc is not None:
                total, nonc = total + q_nc[:nb], nonc + q_nc[:nb]
        if dim == 3:
            ext[:, 3:] = total[:, :3]
            ext[:, :3] = np.einsum("nij,nj->ni", kin.rot[:nb], total[:, 3:])
            power = float(np.sum(nonc[:, :3] * frames.vel[:nb]) + np.sum(nonc[:, 3:] * frames.omega_body[:nb]))
        else:
            ext[:, 3:5] = total[:, :2]
            ext[:, 2] = total[:, 2]
            power = float(np.sum(nonc[:, :2] * frames.vel[:nb]) + np.sum(nonc[:, 2] * frames.omega[:nb]))
        return ext, tau, power + joint_power, potential, frames

    # ------------------------------------------------------------------ dynamics

    def forward_dynamics(
        self,
        t: float,
        q: np.ndarray,
        v: np.ndarray,
        tau: np.ndarray | None = None,
        drives: bool = True,
        with_potential: bool = False,
    ) -> Dynamics:
        """Accelerations of the tree at a state (the hybrid problem when the scene has drives).

        Args:
            t: time, s; q (nq,), v (nv,): joint coordinates and velocities (driven ones are
                replaced by their prescribed values when ``drives``).
            tau: (nv,) extra joint forces (actuators) on the free coordinates; default none.
            drives: prescribe the driven joints (False: every joint is free).
            with_potential: also compute the potential energy.
        """
        presc = self._presc if drives else np.zeros(self.nv, dtype=np.int8)
        if drives:
            q, v, qdd_presc = self._prescribe(t, q, v)
        else:
            qdd_presc = np.zeros(self.nv)
        kin = self.kinematics(q, v)
        ext, spring, power, potential, frames = self._applied(t, kin, q, v, with_potential)
        total_tau = spring if tau is None else spring + tau
        s = self.space
        args = (s.order, s.parent, s.vadr, s.nvj, self._mass, self._inertia, self._gravity)
        state = (kin.rot, kin.o, kin.com, kin.V, kin.Hs, kin.acor)
        qdd, f, _ = soa.articulated_body(*args, *state, ext, total_tau, presc, qdd_presc, s.armature)
        drive_force = np.zeros(len(s.driven))
        if drives and len(s.driven):
            d = self._driven_v
            body = self._dof_body(d)
            drive_force = np.einsum("ij,ij->i", kin.Hs[d], f[body]) - spring[d]
            power += float(drive_force @ v[d])
        return Dynamics(qdd, f, drive_force, power, potential, spring, frames, kin, q, v)

    def _dof_body(self, dofs: np.ndarray) -> np.ndarray:
        """Body whose inboard joint owns each velocity index."""
        return self._owner[dofs]

    def inverse_dynamics(self, t: float, q: np.ndarray, v: np.ndarray, qdd: np.ndarray):
        """Joint forces that produce the accelerations ``qdd`` at a state (Newton-Euler, the
        paper's recursions (14)-(15)), beyond the joint springs and dampers: feeding them back as
        ``tau`` to :meth:`forward_dynamics` (with ``drives=False``) gives ``qdd`` again.

        Returns:
            (tau (nv,), joint_force (nbody, 6): spatial force of each inboard joint on its body at O_k).
        """
        kin = self.kinematics(q, v)
        ext, spring, _, _, _ = self._applied(t, kin, q, v, False)
        s = self.space
        args = (s.order, s.parent, s.vadr, s.nvj, self._mass, self._inertia, self._gravity)
        state = (kin.rot, kin.o, kin.com, kin.V, kin.Hs, kin.acor)
        T, f, _ = soa.inverse_dynamics(*args, *state, ext, np.ascontiguousarray(qdd, dtype=float), s.armature)
        return T - spring, f

    # ------------------------------------------------------------------ integration

    def acceleration(self, t: float, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, float]:
        dyn = self.forward_dynamics(t, q, v)
        return dyn.qdd, dyn.power

    def derivative(self, t: float, y: np.ndarray) -> np.ndarray:
        nq, nv = self.nq, self.nv
        dyn = self.forward_dynamics(t, y[:nq], y[nq : nq + nv])
        # (the driven coordinates move at their prescribed rates: dyn.v has them)
        return np.concatenate((self.q_rate(dyn.q, dyn.v), dyn.qdd, (dyn.power,)))

    def step(self, state: State, h: float) -> tuple[State, StepInfo, float]:
        y = np.concatenate((state.q, state.v, (state.work,)))
        if self._adaptive is not None:
            if self._h_carried is not None:  # after a compiled block: its step size
                h, self._h_carried = min(self._h_carried, self.model.t_end - state.t), None
            t_new, y_new, h_next = self._adaptive.step(self, state.t, y, h)
            self._last_compiled = False
        else:
            f0 = None
            if self._cached is not None and self._cached[0] == state.t and np.array_equal(self._cached[1], y):
                f0 = self._cached[2]
            y_new = self._fixed(self, state.t, y, h, f0)
            t_new, h_next = state.t + h, h
        q = self.normalize(y_new[: self.nq])
        v = y_new[self.nq : self.nq + self.nv]
        work = float(y_new[-1])
        if self.space.driven:
            q, v, work = self._drive_velocity_step(t_new, q, v, work)
        # joint coordinates meet the joints by construction: nothing to violate
        info = StepInfo(iterations=0, h=t_new - state.t, position_violation=0.0)
        return State(t_new, q, v, work), info, h_next

    def _drive_velocity_step(self, t: float, q: np.ndarray, v: np.ndarray, work: float):
        """Set the driven coordinates to c(t), c'(t) after a step. Where the integrated rate differs
        from c'(t) -- a kink of c(t) inside the step, such as the turning point of a constant-speed
        stroke -- the drive acted impulsively: the free velocities take the impulse's response
        dv_free = -M_ff^-1 M_fp dv_p (the articulated-body sweep at zero velocity and zero load, the
        mass-weighted projection onto the drive) and the change of kinetic energy goes to the work."""
        q, v_new, _ = self._prescribe(t, q, v)
        jump = v_new[self._driven_v] - v[self._driven_v]
        # a smooth drive leaves only the integrator's error (O(h^5) for rk4): overwritten as is
        if not np.any(np.abs(jump) > 1e-10 * (1.0 + np.abs(v_new[self._driven_v]))):
            return q, v_new, work
        v_before = v_new.copy()
        v_before[self._driven_v] = v[self._driven_v]
        s = self.space
        kin = self.kinematics(q, np.zeros(self.nv))
        qdd_presc = np.zeros(self.nv)
        qdd_presc[self._driven_v] = jump
        args = (s.order, s.parent, s.vadr, s.nvj, self._mass, self._inertia, np.zeros(3))
        state = (kin.rot, kin.o, kin.com, kin.V, kin.Hs, kin.acor)
        zero_load, zero_tau = np.zeros((self.model.nbody, 6)), np.zeros(self.nv)
        dv, _, _ = soa.articulated_body(*args, *state, zero_load, zero_tau, self._presc, qdd_presc, s.armature)
        v_new = v_before + dv
        before = self.kinetic_energy(self.kinematics(q, v_before), v_before)
        after = self.kinetic_energy(self.kinematics(q, v_new), v_new)
        return q, v_new, work + after - before

    def kinetic_energy(self, kin: Kinematics, v: np.ndarray | None = None) -> float:
        """1/2 sum (m |v_com|^2 + omega . J omega) of a kinematics sweep, plus 1/2 sum a v^2 of the
        joints' armatures at the joint rates ``v``, J."""
        m = self.model
        nb = m.nbody
        vb = self._body_v(kin).reshape(nb, m.body_width)
        translation = float(self._mass @ np.einsum("ni,ni->n", vb[:, : m.dimension], vb[:, : m.dimension]))
        if m.dimension == 3:
            rotation = float(np.einsum("ni,nij,nj->", vb[:, 3:], m.body_inertia, vb[:, 3:]))
        else:
            rotation = float(m.body_inertia[:, 0, 0] @ vb[:, 2] ** 2)
        rotor = float(self.space.armature @ (v * v)) if v is not None else 0.0
        return 0.5 * (translation + rotation + rotor)

    # ------------------------------------------------------------------ recording

    def evaluate(self, state: State) -> Evaluation:
        m = self.model
        dyn = self.forward_dynamics(state.t, state.q, state.v, with_potential=True)
        kin = dyn.kin
        frames = dyn.frames if dyn.frames is not None else self.frames(kin)
        y = np.concatenate((state.q, state.v, (state.work,)))
        self._cached = (state.t, y, np.concatenate((self.q_rate(dyn.q, dyn.v), dyn.qdd, (dyn.power,))))
        body_q, body_v = self._body_q(kin), self._body_v(kin)
        kinetic = self.kinetic_energy(kin, state.v)
        reaction, reaction_body = self._reactions(dyn)
        if m.nc:
            cv = constraint_values(m, frames, state.t)
            phi, phi_dot = cv.phi, cv.jacobian @ body_v + cv.phi_t
        else:
            phi = phi_dot = np.zeros(0)
        return Evaluation(
            multipliers=np.zeros(0),
            phi=phi,
            phi_dot=phi_dot,
            jacobian=None,
            kinetic=kinetic,
            potential=dyn.potential,
            frames=frames,
            body_q=body_q,
            quaternion_norm_error=self.quaternion_norm_error(state.q),
            reactions=(reaction, dyn.drive_force),
            # the joint coordinates, actuators and outputs of the forces' evaluation at this state
            datasets={
                **({"joints/{joint}/reaction_body": reaction_body} if m.joints else {}),
                **driven_values_in(m, model_form(m), self._flat_data, state.t),
            },
            q_recorded=state.q + self.space.q_initial if np.any(self.space.q_initial) else None,
        )

    def _reactions(self, dyn: Dynamics) -> tuple[np.ndarray, np.ndarray]:
        """Per scene joint: force and torque (about the joint point) on body2, or on body1 when
        body2 is the ground (the convention of mbsim.diagnostics.reactions), in world axes and in
        the axes of that body. Joint springs are applied forces, not reactions; drives are part of
        the reaction, as for the methods with multipliers."""
        m, s = self.model, self.space
        nb, nj = m.nbody, len(m.joints)
        if nj == 0:
            return np.zeros((0, 6)), np.zeros((0, 6))
        kin = dyn.kin
        carrier = self._carrier
        f = dyn.joint_force[carrier].copy()
        dofs = s.coordinates[0]
        if len(dofs):
            owner = self._dof_body(dofs)
            np.add.at(f, s.joint[owner], -kin.Hs[dofs] * dyn.spring_force[dofs, None])
        torque, force = f[:, :3], f[:, 3:]
        # a joint walked from body2 to body1 reports body2's side: the opposite force, at body2's point
        body2 = np.array([info.body2 for info in m.joints], dtype=np.int64)
        back = s.reversed[carrier] & (body2 < nb)
        if np.any(back):
            p = body2[back]
            point = kin.com[p] + np.einsum("nij,nj->ni", kin.rot[p], self._joint_point[back])
            force[back] = -force[back]
            torque[back] = -torque[back] + np.cross(kin.o[carrier[back]] - point, force[back])
        world = np.concatenate((force, torque), axis=1)
        rot = kin.rot[m.joint_body]
        local = np.concatenate((np.einsum("nji,nj->ni", rot, force), np.einsum("nji,nj->ni", rot, torque)), axis=1)
        if m.dimension == 2:
            return world[:, [0, 1, 5]], local[:, [0, 1, 5]]
        return world, local


def create(model: Model, ctx: Context, solver_spec) -> Solver:
    got = read_options(ctx, ("solver",), solver_spec.options, OPTION_FIELDS)
    if model.couplings:
        raise ctx.error(
            ("couplings", 0),
            f"coupling '{model.couplings[0]}' is a constraint between joint coordinates; method 'recursive' takes "
            "trees without constraints (use a method in body coordinates such as lagrange)",
        )
    try:
        space = joint_space(model)
    except LoopClosure as exc:
        names = (*model.body_names, "ground")
        joint = model.joints[exc.joint]
        raise ctx.error(
            ("joints", exc.joint),
            f"joint '{joint.name}' closes a kinematic loop: '{names[exc.body1]}' and '{names[exc.body2]}' are "
            "already connected through the joints before it; method 'recursive' needs the joints to form a tree "
            "(remove the joint, or use a method in body coordinates such as lagrange)",
        ) from None
    return Solver(model, space, solver_spec.integrator, solver_spec.rtol, solver_spec.atol, got["max_step"])
