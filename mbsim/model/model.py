"""Model (static, compiled once), State and the per-state body frames.

Coordinates, per body b (in the order of the scene's bodies):
- 3D: q[7b:7b+7] = (x, y, z, qw, qx, qy, qz): centre of mass in the world and the unit
  quaternion of body-to-world rotation; v[6b:6b+6] = (vx, vy, vz, wx, wy, wz): centre-of-mass
  velocity in the world and angular velocity in *body* axes, so that the mass matrix
  diag(m I3, I_body) is constant.
- 2D: q[3b:3b+3] = (x, y, angle); v[3b:3b+3] = (vx, vy, w).

The ground is the extra body index ``nbody`` in every "extended" array (``*_ext``), fixed at
the origin with identity rotation, so that joint kernels need no special case for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from mbsim.model.kernels import frames2, frames3, retract3
from mbsim.model.shapes import compile_shapes
from mbsim.model.sparse import block_diagonal
from mbsim.model.spatial import omega_to_quat_rate


@dataclass
class State:
    """Time, generalized positions and velocities, and the work done so far by
    non-conservative forces, drives and projections' opposite (see diagnostics)."""

    t: float
    q: np.ndarray
    v: np.ndarray
    work: float = 0.0

    def copy(self) -> State:
        return State(self.t, self.q.copy(), self.v.copy(), self.work)


@dataclass
class StepInfo:
    """What a step reports: iterations (Newton/projection/multiplier/LCP), and how it went."""

    iterations: int = 0
    h: float = 0.0
    position_violation: float | None = None  # max |Phi| at the new state, when the solver knows it
    extra: dict[str, float] = field(default_factory=dict)  # method-specific, /diagnostics/solver/<key>
    event: bool = False  # the step ended at an event (event_driven): output.interval records its end


@dataclass
class Evaluation:
    """Quantities at one recorded state.

    Attributes:
        multipliers: (nc,) Lagrange multipliers lambda of M v_dot = Q - J^T lambda.
        phi: (nc,) constraint residual; phi_dot: (nc,) J v + Phi_t.
        jacobian: J at the state (dense or sparse).
        kinetic, potential: energies, J.
    """

    multipliers: np.ndarray
    phi: np.ndarray
    phi_dot: np.ndarray
    jacobian: Any
    kinetic: float
    potential: float
    frames: Frames | None = None
    contacts: tuple[int, float] | None = None  # touching contact points, largest penetration (m)
    # methods whose own q, v are not the body coordinates (joint coordinates: ``recursive``) give
    # the model's body coordinates of the state, their own quaternion norm error, and the joint
    # reactions and drive forces (as mbsim.diagnostics.reactions returns them) directly
    body_q: np.ndarray | None = None
    quaternion_norm_error: float | None = None
    reactions: tuple[np.ndarray, np.ndarray] | None = None
    datasets: dict[str, Any] | None = None  # more rows of the method's own: path -> value (as record_row's)
    q_recorded: np.ndarray | None = None  # /q when it is not the state's q (joint coordinates from `initial`)
    # the LCP methods (timestepping, event_driven): the forces of their joint-limit and joint-friction
    # rows per joint coordinate, (limit (ncoord,), friction (ncoord,)); their force evaluations
    # leave out the smooth methods' compliant stops and regularised friction (nonsmooth=True)
    coordinate_forces: tuple[np.ndarray, np.ndarray] | None = None


@dataclass
class Frames:
    """Body frames of one state, extended with the ground at index ``nbody``.

    Attributes:
        pos: (nbody+1, d) centre of mass, world, m.
        rot: (nbody+1, d, d) rotation body -> world.
        vel: (nbody+1, d) centre-of-mass velocity, world, m/s.
        omega: (nbody+1, 3) angular velocity in world axes (3D) or (nbody+1,) rad/s (2D).
        omega_body: (nbody+1, 3) angular velocity in body axes (3D only; None in 2D).
        angle: (nbody+1,) body angle (2D only).
    """

    pos: np.ndarray
    rot: np.ndarray
    vel: np.ndarray
    omega: np.ndarray
    omega_body: np.ndarray | None = None
    angle: np.ndarray | None = None


@dataclass
class JointInfo:
    """Per-joint bookkeeping for results: rows of the joint and its drive, point in body2."""

    name: str
    type: str
    body1: int  # extended index (nbody = ground)
    body2: int
    rows: np.ndarray  # constraint rows of this joint (drive row included)
    drive_row: int | None
    point2_local: np.ndarray  # joint point in body2's frame
    # for joint-coordinate methods (mbsim.solvers.recursive): the joint's geometry at t = 0
    # (mbsim.model.joints.JointFrame) and its drive c(t)
    frame: Any = None
    drive: Any = None
    initial: float = 0.0  # the joint coordinate at t = 0 (the scene's `initial`)
    armature: float = 0.0  # inertia on the joint coordinate (the scene's `armature`; method recursive)
    # a joint with a coordinate: its row of the joint-coordinate table (Model.joint_coordinates[0]), and the
    # forces on it (mbsim.model.joint_forces: Limits, Friction, the actuators' effort limit)
    coordinate_row: int | None = None
    limits: Any = None
    friction: Any = None
    effort: float | None = None


@dataclass
class Model:
    """Compiled scene: structure-of-arrays data that every solver shares.

    Attributes:
        name: scene name.
        dimension: 2 or 3.
        nbody, nq, nv, nc: numbers of bodies, position and velocity coordinates, constraint rows.
        body_names: (nbody,) names.
        body_mass: (nbody,) kg.
        body_inertia: (nbody, 3, 3) about the centre of mass in body axes (2D: (nbody, 1, 1)), kg m^2.
        body_width: 6 (3D) or 3 (2D): velocity coordinates per body.
        gravity: (d,) m/s^2.
        q0, v0: initial state after assembly.
        mass_diag_blocks: (nbody, w, w) mass matrix blocks (constant in these coordinates).
        inv_mass_blocks: (nbody, w, w) their inverses.
        groups: batched constraint primitives (mbsim.model.constraints.PrimitiveGroup).
        row_labels: (nc,) "joint: equation" per constraint row.
        joints: per-joint info.
        joint_coordinates: the joint-coordinate table (mbsim.model.dynamics.JointCoordinates; at most one), with
            every joint coordinate and the forces on it (mbsim.model.joint_forces).
        actuators, outputs, signals: CONTRACT §8 (mbsim.model.actuators, mbsim.model.signals).
        forces: force element groups (mbsim.model.forces).
        sparse: use sparse linear algebra (large systems).
        scene_text: YAML of the scene as loaded (after overrides).
        shapes: owner (ground, body names) -> the checked values of its shapes (mbsim.model.shapes).
        nshape, shape_type, shape_body, shape_param, shape_pos, shape_rot, shape_rbound,
            shape_isotropic, shape_rounded, shape_solid, shape_values: the shapes compiled into
            arrays, set from ``shapes`` (mbsim.model.shapes.compile_shapes says what each holds).
    """

    name: str
    dimension: int
    nbody: int
    nq: int
    nv: int
    nc: int
    body_names: tuple[str, ...]
    body_mass: np.ndarray
    body_inertia: np.ndarray
    gravity: np.ndarray
    q0: np.ndarray
    v0: np.ndarray
    groups: list[Any]
    couplings: tuple[str, ...]  # names of the joint couplings (their rows follow the joints')
    row_labels: list[str]
    joints: list[JointInfo]
    joint_coordinates: list[Any]
    forces: list[Any]
    sparse: bool
    t_end: float
    step: float
    output_every: int
    output_interval: float | None = None  # record at multiples of this time, s (output.interval)
    scene_text: str = ""
    shapes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    assembly_report: list[dict[str, Any]] = field(default_factory=list)
    # the static equilibrium the start was set to (the scene's initial: equilibrium), or None:
    # mbsim.analysis.equilibrium.Equilibrium (mbsim.simulate.prepare)
    equilibrium: Any = None
    contacts: list[Any] = field(default_factory=list)
    contact_step: float | None = None  # step while compliant bounding boxes overlap (time.contact_step)
    contact_implicit: bool = False  # Rosenbrock-W steps while they do (solver.contact_integration: implicit)
    actuators: list[Any] = field(default_factory=list)  # mbsim.model.actuators.Actuator
    outputs: list[Any] = field(default_factory=list)  # (name, Expression) of the scene's outputs
    signals: Any = None  # the namespace its expressions were checked in (mbsim.model.signals.Signals)

    _frozen: ClassVar[bool] = False  # set per instance by freeze()

    def freeze(self) -> None:
        """Nothing sets the model's attributes after compile and assembly (mbsim.simulate.prepare):
        what a run changes lives in its Data (mbsim.model.data), so one model serves many runs."""
        object.__setattr__(self, "_frozen", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if self._frozen:
            raise AttributeError(
                f"the Model is frozen after compile: '{name}' cannot be set (a run's state belongs in its Data)"
            )
        object.__setattr__(self, name, value)
        self.__dict__.pop("_cache", None)  # built from the model as it was: build it again

    def drop_cached(self) -> None:
        """Forget what :meth:`cached` kept (compile, before freeze: a part it was built from changed)."""
        if self._frozen:
            raise AttributeError("the Model is frozen after compile: what it keeps stays valid")
        self.__dict__.pop("_cache", None)

    def cached(self, key: str, build: Callable[[Model], Any]) -> Any:
        """``build(self)``, built on first use and kept (for what is a pure function of the model,
        e.g. the compiled constraint rows' FlatModel, mbsim.model.flat.rows_form): nothing changes
        the model after compile and assembly, and setting an attribute before freeze drops what was
        kept."""
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            cache[key] = build(self)
        return cache[key]

    def __post_init__(self) -> None:
        w = self.body_width
        nb = self.nbody
        blocks = np.zeros((nb, w, w))
        d = self.dimension
        idx = np.arange(d)
        blocks[:, idx, idx] = self.body_mass[:, None]
        blocks[:, d:, d:] = self.body_inertia
        self.mass_diag_blocks = blocks
        self.inv_mass_blocks = np.linalg.inv(blocks)
        self.mass_matrix = block_diagonal(blocks, self.sparse)
        self.inv_mass_matrix = block_diagonal(self.inv_mass_blocks, self.sparse)
        self.weight = self.body_mass[:, None] * self.gravity  # (nbody, d) gravity forces
        # per constraint row: owning joint and the body whose reaction is reported (body2, or
        # body1 when body2 is the ground); per joint: that body and the joint point in its frame
        self.row_joint = np.zeros(self.nc, dtype=int)
        self.row_body = np.full(self.nc, nb, dtype=int)
        self.joint_body = np.zeros(len(self.joints), dtype=int)
        self.joint_point = np.zeros((len(self.joints), d))
        for k, joint in enumerate(self.joints):
            body = joint.body2 if joint.body2 < nb else joint.body1
            self.row_joint[joint.rows] = k
            self.row_body[joint.rows] = body
            self.joint_body[k] = body
            self.joint_point[k] = joint.point2_local
        self.driven_rows = np.array([j.drive_row for j in self.joints if j.drive_row is not None], dtype=int)
        # the shapes as arrays, once (MuJoCo's geom_*)
        for key, value in compile_shapes(self.shapes, self.body_names, d).items():
            setattr(self, key, value)

    @property
    def compliant(self):
        """The compliant contact force group (mbsim.model.contact.compliant), or None."""
        return next((g for g in self.forces if hasattr(g, "pair_diagnostics")), None)

    @property
    def body_width(self) -> int:
        return 6 if self.dimension == 3 else 3

    @property
    def body_qwidth(self) -> int:
        return 7 if self.dimension == 3 else 3

    # ---------------------------------------------------------------- kinematics

    def frames(self, q: np.ndarray, v: np.ndarray) -> Frames:
        """Body frames of the state (q, v), ground appended."""
        nb = self.nbody
        if self.dimension == 3:
            pos, rot, vel, omega_body, omega = frames3(q, v, nb)
            return Frames(pos, rot, vel, omega, omega_body=omega_body)
        pos, rot, vel, omega, angle = frames2(q, v, nb)
        return Frames(pos, rot, vel, omega, angle=angle)

    def q_rate(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """dq/dt for generalized velocities v (quaternion rate from body angular velocity)."""
        if self.dimension == 2:
            return v.copy()
        nb = self.nbody
        qb = q.reshape(nb, 7)
        vb = v.reshape(nb, 6)
        out = np.empty((nb, 7))
        out[:, :3] = vb[:, :3]
        out[:, 3:] = omega_to_quat_rate(qb[:, 3:], vb[:, 3:])
        return out.reshape(-1)

    def retract(self, q: np.ndarray, dx: np.ndarray) -> np.ndarray:
        """Move q by a velocity-space increment dx (translation plus body-frame rotation vector,
        through the exponential map); quaternions come out unit."""
        if self.dimension == 2:
            return q + dx
        return retract3(q, dx, self.nbody)

    def normalize(self, q: np.ndarray) -> np.ndarray:
        """Quaternions scaled to unit norm (3D); returns q unchanged in 2D."""
        if self.dimension == 2:
            return q
        qb = q.reshape(self.nbody, 7).copy()
        qb[:, 3:] /= np.linalg.norm(qb[:, 3:], axis=1, keepdims=True)
        return qb.reshape(-1)

    def quaternion_norm_error(self, q: np.ndarray) -> float:
        if self.dimension == 2:
            return 0.0
        return float(np.max(np.abs(np.linalg.norm(q.reshape(self.nbody, 7)[:, 3:], axis=1) - 1.0)))

    def coordinate_names(self) -> tuple[list[str], list[str]]:
        """Names of the columns of q and v."""
        if self.dimension == 3:
            qn = ["x", "y", "z", "qw", "qx", "qy", "qz"]
            vn = ["vx", "vy", "vz", "wx_body", "wy_body", "wz_body"]
        else:
            qn = ["x", "y", "angle"]
            vn = ["vx", "vy", "w"]
        return (
            [f"{b}.{c}" for b in self.body_names for c in qn],
            [f"{b}.{c}" for b in self.body_names for c in vn],
        )


def inverse_sqrt_mass_blocks(model: Model) -> np.ndarray:
    """(nbody, w, w) the diagonal blocks of M^-1/2 (symmetric square roots by eigh; the
    rank-robust methods' scaling J M^-1/2)."""
    blocks = np.zeros_like(np.asarray(model.mass_diag_blocks, dtype=float))
    for b, block in enumerate(model.mass_diag_blocks):
        values, vectors = np.linalg.eigh(block)
        blocks[b] = (vectors / np.sqrt(values)) @ vectors.T
    return blocks
