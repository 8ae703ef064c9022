"""mbsim against peer multibody codes (MuJoCo, Pinocchio, Exudyn) in the same session.

    python benchmarks/peers.py            # full: about 2-4 minutes on 2 cores; prints a markdown section
    python benchmarks/peers.py --quick    # smoke run (about 1 minute): fewer steps and repeats

Install the peers with ``pip install -e '.[bench]'``; a peer that does not import is reported as
"not installed" and skipped. ``run_peers(quick)`` returns one row per (case, mbsim method):
``{case, method, mbsim_us, mujoco_us, pinocchio_us, exudyn_us, best_peer, ratio}`` (µs per step of
the stepping loop, median of the repeats; ``ratio`` = mbsim / best peer; a peer that does not take
part is None, its reason in ``notes``), each row carrying the case's physics cross-check in ``checks``.
``markdown(rows)`` renders them.

Every peer model is built from mbsim's own compiled model of the case (``compile_model`` of the
scene: masses, inertias about the centre of mass in body axes, start poses, joint points and
axes, gravity, step), so that the codes integrate the same physics; a cross-check run of each
peer (untimed) compares a body's position with mbsim's at a given time, so that a mismatched
model shows. The timed runs go round robin (mbsim's methods, then each peer, repeated), so that a
change of the machine's load hits all of them alike; one short untimed warm-up run of each goes
first (numba kernels, caches). What is timed:

- mbsim: ``mbsim.simulate.run`` on the scene, ``RunSummary.wall_time_s / steps`` (the stepping
  loop, with its checks and the result file's recording at the scene's ``output.every``);
- MuJoCo: ``mujoco.mj_step(model, data, nstep=steps)`` from a fresh ``MjData``;
- Pinocchio: a Python RK4 loop around ``pinocchio.aba`` (4 evaluations per step), configurations
  advanced with ``pinocchio.integrate`` (Runge-Kutta-Munthe-Kaas: the stage increments of a
  spherical joint go through the inverse right Jacobian of SO(3), so the scheme is 4th order);
- Exudyn: ``mbs.SolveDynamic`` (its default implicit generalized-alpha, spectral radius 0.9,
  index 3), no solution file, wall time divided by the steps it took.

Nothing here asserts on a time. Result files go to a temporary directory. Importable without
side effects (tests/test_benchmarks_peers.py).
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # as the mbsim command: single-threaded BLAS, set before numpy loads
    for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import importlib  # noqa: E402
import importlib.util  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCENES = ROOT / "scenes"
FOUR_BOX_SCENE = SCENES / "four_box_chain.yaml"
SLIDER_SCENE = SCENES / "slider_crank_singular_2d.yaml"
BLOCKS_SCENE = SCENES / "blocks_elastic.yaml"

PEERS = ("mujoco", "pinocchio", "exudyn")  # the row keys <peer>_us, in this order
PEER_LABELS = {"mbsim": "mbsim", "mujoco": "MuJoCo", "pinocchio": "Pinocchio", "exudyn": "Exudyn"}
PEER_MODULES = {"mujoco": "mujoco", "pinocchio": "pinocchio", "exudyn": "exudyn"}
PEER_DISTRIBUTIONS = {"mujoco": "mujoco", "pinocchio": "pin", "exudyn": "exudyn"}

# steps and repeats per case; the timed span is steps * the scene's step from the start
FULL = {
    "repeats": 5,
    "four_box_steps": 5000,  # the scene as shipped: 10 s at 0.002
    "slider_steps": 5000,  # the scene as shipped: 10 s at 0.002
    "chain10_steps": 2000,  # 2 s at 0.001
    "chain100_steps": 1000,  # 1 s at 0.001
    "chain100_repeats": 3,
    "blocks_steps": 2000,  # the scene as shipped: 0.02 s at 1e-5
    "pile_steps": 250,  # 0.5 s at 0.002 from the start
    "pile_repeats": 3,
}
QUICK = {
    "repeats": 2,
    "four_box_steps": 500,
    "slider_steps": 1000,
    "chain10_steps": 500,
    "chain100_steps": 100,
    "chain100_repeats": 2,
    "blocks_steps": 1000,
    "pile_steps": 25,
    "pile_repeats": 1,
}
WARMUP_STEPS = 20  # the untimed first run of every contender
CHECK_T = 1.0  # s: the cross-check compares positions at this time (or the timed span, if shorter)

# the planar chain of case c
CHAIN_LINK_LENGTH = 0.5  # m, each a uniform bar
CHAIN_LINK_MASS = 1.0  # kg
CHAIN_LINK_WIDTH = 0.04  # m, only for the inertia and the shape
CHAIN_TILT = 0.3  # rad: the straight chain starts this far off the downward vertical
CHAIN_STEP = 1e-3  # s


# ----------------------------------------------------------------------------- helpers


def _exudyn_settings(exu, steps: int, step: float):
    """Exudyn simulation settings of a timed run: ``steps`` steps of ``step``, quiet, no solution file."""
    s = exu.SimulationSettings()
    s.timeIntegration.numberOfSteps = int(steps)
    s.timeIntegration.endTime = steps * step
    s.timeIntegration.verboseMode = 0
    s.solution.file.write = False
    s.show.statistics = False
    return s


def _run_module():
    """benchmarks/run.py (``pile_scene``, ``_slider_reference``), imported by path as benchmarks/recursive.py does."""
    name = "mbsim_benchmarks_run"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def peer_module(peer: str):
    """(module, None) or (None, why not): "not installed" when the import fails."""
    try:
        return importlib.import_module(PEER_MODULES[peer]), None
    except ImportError as exc:
        return None, f"not installed ({type(exc).__name__}: {exc})"


def peer_version(peer: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(PEER_DISTRIBUTIONS[peer])
    except metadata.PackageNotFoundError:
        module, _ = peer_module(peer)
        return getattr(module, "__version__", None) if module else None


def _fmt(x) -> str:
    return " ".join(repr(float(v)) for v in np.ravel(x))


def planar_chain_scene(
    n: int,
    steps: int = 1000,
    step: float = CHAIN_STEP,
    method: str = "lagrange",
    tilt: float = CHAIN_TILT,
    mass: float = CHAIN_LINK_MASS,
    length: float = CHAIN_LINK_LENGTH,
    width: float = CHAIN_LINK_WIDTH,
    every: int | None = None,
) -> str:
    """YAML text of a planar (``dimension: 2``) pendulum chain of ``n`` uniform bars on revolute joints.

    Link k (k = 1..n) is a bar of ``mass`` and ``length`` (a ``width`` x ``length`` rectangle,
    inertia m (L^2 + w^2) / 12 about its centre), its body frame with the bar along -y as in
    scenes/double_pendulum_2d.yaml, so the body angle is the bar's angle from the downward
    vertical. Joint k joins the lower end of link k-1 (the ground at the origin for k = 1) to the
    upper end of link k. The chain starts straight, at rest, ``tilt`` rad off the vertical.
    Gravity [0, -9.81]; ``method`` with rk4 and the projection on; ``time.end = steps * step``;
    output every ``every`` steps (default: the first and last states only).
    """
    if n < 1:
        raise ValueError(f"expected n >= 1 links, got {n}")
    inertia = mass * (length * length + width * width) / 12.0
    down = np.array([np.sin(tilt), -np.cos(tilt)])
    every = steps if every is None else every
    lines = [
        "mbsim: 1",
        f"name: {n}-link planar chain",
        f"description: benchmark, {n} uniform bars on revolute joints, started straight {tilt:g} rad off the vertical",
        "dimension: 2",
        "gravity: [0, -9.81]",
        f"time: {{end: {steps * step!r}, step: {step!r}}}",
        "solver:",
        f"  method: {method}",
        "  integrator: rk4",
        "  projection: {position: true, velocity: true, iterations: 2}",
        "output:",
        f"  every: {every}",
        "bodies:",
    ]
    for k in range(1, n + 1):
        x, y = ((k - 0.5) * length * down).tolist()
        lines.append(
            f"  - {{name: link{k}, mass: {mass!r}, inertia: {inertia!r}, position: [{x!r}, {y!r}], "
            f"orientation: {tilt!r}, shapes: [{{type: rectangle, size: [{width!r}, {length!r}]}}]}}"
        )
    lines.append("joints:")
    for k in range(1, n + 1):
        x, y = ((k - 1) * length * down).tolist()
        parent = "ground" if k == 1 else f"link{k - 1}"
        lines.append(f"  - {{name: hinge{k}, type: revolute, body1: {parent}, body2: link{k}, point: [{x!r}, {y!r}]}}")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- the shared physical data


@dataclass
class Body:
    name: str
    mass: float
    inertia: np.ndarray  # (3, 3) about the centre of mass in body axes
    pos: np.ndarray  # (3,) centre of mass, world
    rot: np.ndarray  # (3, 3) body axes in the world
    vel: np.ndarray  # (3,) world
    omega: np.ndarray  # (3,) world
    shapes: list[dict]


@dataclass
class Joint:
    name: str
    type: str  # spherical, revolute, prismatic
    parent: int  # body index, -1 = ground
    child: int
    point: np.ndarray  # (3,) world, at the start
    axis: np.ndarray | None  # (3,) world unit vector (revolute, prismatic)


@dataclass
class System:
    """A compiled mbsim model as 3D bodies and joints (a 2D model lies in the x-y plane, axes along z)."""

    name: str
    dimension: int
    bodies: list[Body]
    joints: list[Joint]
    gravity: np.ndarray  # (3,)
    step: float

    def index(self, name: str) -> int:
        return next(i for i, b in enumerate(self.bodies) if b.name == name)


def _rot_z(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def system_of(spec) -> System:
    """The physical data of a scene as mbsim compiles it (masses, inertias, start state, joints)."""
    from scipy.spatial.transform import Rotation

    from mbsim.model.compile import compile_model

    model = compile_model(spec)
    bodies = []
    for i, name in enumerate(model.body_names):
        if model.dimension == 3:
            q, v = model.q0[7 * i : 7 * i + 7], model.v0[6 * i : 6 * i + 6]
            rot = Rotation.from_quat(q[3:7], scalar_first=True).as_matrix()
            pos, vel, omega = q[:3].copy(), v[:3].copy(), rot @ v[3:6]  # mbsim: body-axes angular velocity
            inertia = model.body_inertia[i].copy()
        else:
            q, v = model.q0[3 * i : 3 * i + 3], model.v0[3 * i : 3 * i + 3]
            rot = _rot_z(q[2])
            pos, vel, omega = np.array([q[0], q[1], 0.0]), np.array([v[0], v[1], 0.0]), np.array([0.0, 0.0, v[2]])
            izz = float(model.body_inertia[i][0, 0])
            inertia = np.diag([izz, izz, izz])  # only izz acts in the plane; the others just have to be valid
        bodies.append(Body(name, float(model.body_mass[i]), inertia, pos, rot, vel, omega, model.shapes.get(name, [])))
    joints = []
    for j in model.joints:
        frame = j.frame
        parent = -1 if j.body1 >= model.nbody else j.body1
        if model.dimension == 3:
            point = np.asarray(frame.point, dtype=float)
            axis = None
            if frame.axis_i is not None:
                r1 = np.eye(3) if parent < 0 else bodies[parent].rot
                axis = r1 @ np.asarray(frame.axis_i, dtype=float)
        else:
            point = np.array([frame.point[0], frame.point[1], 0.0])
            if j.type == "revolute":
                axis = np.array([0.0, 0.0, 1.0])
            else:
                r1 = np.eye(3) if parent < 0 else bodies[parent].rot
                axis = r1 @ np.array([frame.axis_i[0], frame.axis_i[1], 0.0])
        if axis is not None:
            axis = axis / np.linalg.norm(axis)
        joints.append(Joint(j.name, j.type, parent, j.body2, point, axis))
    g = np.zeros(3)
    g[: model.dimension] = model.gravity
    return System(model.name, model.dimension, bodies, joints, g, float(model.step))


def _tree(system: System) -> dict[int, list[Joint]]:
    """Children per parent (-1 = ground); raises unless every body has at most one joint to its parent."""
    seen: set[int] = set()
    children: dict[int, list[Joint]] = {}
    for j in system.joints:
        if j.child in seen:
            raise ValueError(f"{system.name}: body {system.bodies[j.child].name} closes a loop (not a tree)")
        seen.add(j.child)
        children.setdefault(j.parent, []).append(j)
    return children


# ----------------------------------------------------------------------------- MuJoCo


def _mjcf_geoms(body: Body, attrs: str) -> list[str]:
    out = []
    for s in body.shapes:
        kind = s.get("type")
        if kind == "box":
            out.append(f'<geom type="box" size="{_fmt(0.5 * np.asarray(s["size"], dtype=float))}" {attrs}/>')
        elif kind == "rectangle":
            a, b = (0.5 * np.asarray(s["size"], dtype=float)).tolist()
            out.append(f'<geom type="box" size="{_fmt([a, b, 0.5 * min(a, b)])}" {attrs}/>')
        elif kind == "sphere":
            out.append(f'<geom type="sphere" size="{float(s["radius"])!r}" {attrs}/>')
    return out


def _mjcf_inertial(body: Body) -> str:
    inertia = body.inertia
    if np.allclose(inertia, np.diag(np.diag(inertia))):
        return f'<inertial pos="0 0 0" mass="{body.mass!r}" diaginertia="{_fmt(np.diag(inertia))}"/>'
    full = [inertia[0, 0], inertia[1, 1], inertia[2, 2], inertia[0, 1], inertia[0, 2], inertia[1, 2]]
    return f'<inertial pos="0 0 0" mass="{body.mass!r}" fullinertia="{_fmt(full)}"/>'


def mjcf_tree(system: System, integrator: str = "RK4", geom_attrs: str = 'contype="0" conaffinity="0"') -> str:
    """MJCF of a tree system: nested bodies (frame = mbsim's body frame, origin at the centre of
    mass), ball / hinge / slide joints at mbsim's joint points, explicit inertials (``diaginertia``
    when the inertia is diagonal in body axes), geoms of the shapes with ``geom_attrs`` (no
    contacts by default), bodies without a joint free."""
    from scipy.spatial.transform import Rotation

    children = _tree(system)
    kinds = {"spherical": "ball", "revolute": "hinge", "prismatic": "slide"}

    def body_xml(b: int, joint: Joint | None, parent: int, indent: str) -> list[str]:
        body = system.bodies[b]
        up = system.bodies[parent] if parent >= 0 else None
        p_pos, p_rot = (np.zeros(3), np.eye(3)) if up is None else (up.pos, up.rot)
        rel_pos = p_rot.T @ (body.pos - p_pos)
        rel_quat = Rotation.from_matrix(p_rot.T @ body.rot).as_quat(scalar_first=True)
        lines = [f'{indent}<body name="{body.name}" pos="{_fmt(rel_pos)}" quat="{_fmt(rel_quat)}">']
        if joint is None:
            lines.append(f"{indent}  <freejoint/>")
        else:
            if joint.type not in kinds:
                raise ValueError(f"MuJoCo mapping: joint type {joint.type} not mapped")
            attrs = f'type="{kinds[joint.type]}" pos="{_fmt(body.rot.T @ (joint.point - body.pos))}"'
            if joint.axis is not None:
                attrs += f' axis="{_fmt(body.rot.T @ joint.axis)}"'
            lines.append(f'{indent}  <joint name="{joint.name}" {attrs}/>')
        lines.append(f"{indent}  {_mjcf_inertial(body)}")
        lines += [f"{indent}  {g}" for g in _mjcf_geoms(body, geom_attrs)]
        for child in children.get(b, []):
            lines += body_xml(child.child, child, b, indent + "  ")
        return lines + [f"{indent}</body>"]

    jointed = {j.child for j in system.joints}
    world = []
    for j in children.get(-1, []):
        world += body_xml(j.child, j, -1, "    ")
    for b in range(len(system.bodies)):
        if b not in jointed:
            world += body_xml(b, None, -1, "    ")
    return "\n".join(
        [
            f'<mujoco model="{system.name}">',
            f'  <option timestep="{system.step!r}" integrator="{integrator}" gravity="{_fmt(system.gravity)}"/>',
            "  <worldbody>",
            *world,
            "  </worldbody>",
            "</mujoco>",
        ]
    )


def _mujoco_initial_velocities(mujoco, model, data, system: System) -> None:
    """Free bodies' start velocities (world linear, body-axes angular); jointed bodies must start at rest."""
    jointed = {j.child for j in system.joints}
    for i, body in enumerate(system.bodies):
        moving = np.any(body.vel != 0) or np.any(body.omega != 0)
        if i in jointed:
            if moving:
                raise ValueError("MuJoCo mapping: jointed bodies with a start velocity are not mapped")
            continue
        adr = model.jnt_dofadr[model.body_jntadr[model.body(body.name).id]]
        data.qvel[adr : adr + 3] = body.vel
        data.qvel[adr + 3 : adr + 6] = body.rot.T @ body.omega


class MujocoSim:
    """A MuJoCo model and fresh data per run; ``run(steps)`` times ``mj_step(..., nstep=steps)``."""

    def __init__(self, xml: str, system: System | None = None):
        import mujoco

        self.mujoco = mujoco
        self.xml = xml
        self.system = system
        self.model = mujoco.MjModel.from_xml_string(xml)

    def fresh(self):
        data = self.mujoco.MjData(self.model)
        if self.system is not None:
            _mujoco_initial_velocities(self.mujoco, self.model, data, self.system)
        self.mujoco.mj_forward(self.model, data)
        return data

    def run(self, steps: int) -> tuple[float, int]:
        data = self.fresh()
        start = time.perf_counter()
        self.mujoco.mj_step(self.model, data, nstep=steps)
        return time.perf_counter() - start, steps

    def simulate(self, steps: int):
        data = self.fresh()
        self.mujoco.mj_step(self.model, data, nstep=steps)
        return data

    def com(self, data, name: str) -> np.ndarray:
        return data.xipos[self.model.body(name).id].copy()


# ----------------------------------------------------------------------------- Pinocchio


_CYCLE1, _CYCLE2 = np.array([1, 2, 0]), np.array([2, 0, 1])


def _cross_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise a x b of (k, 3) arrays (np.cross costs more at this size)."""
    return a[:, _CYCLE1] * b[:, _CYCLE2] - a[:, _CYCLE2] * b[:, _CYCLE1]


def _dexpinv_so3(theta: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Rows of J_r(theta)^-1 w for SO(3) (theta, w: (k, 3)): the rate of theta for q = q0 exp(theta)."""
    a2 = np.einsum("ij,ij->i", theta, theta)
    a = np.sqrt(a2)
    with np.errstate(all="ignore"):
        coef = 1.0 / a2 - (1.0 + np.cos(a)) / (2.0 * a * np.sin(a))
    small = a < 1e-4
    if small.any():  # the series 1/12 + a^2/720 where the formula cancels
        coef[small] = 1.0 / 12.0 + a2[small] / 720.0
    c = _cross_rows(theta, w)
    return w + 0.5 * c + coef[:, None] * _cross_rows(theta, c)


class PinocchioSim:
    """A Pinocchio model of a tree system and a Python RK4 (Munthe-Kaas) loop around ``aba``.

    Joint frames: at mbsim's joint point, with the child body's start orientation, so that the
    neutral configuration is the start; each body's inertia is appended to its joint at its centre
    of mass. Spherical joints: ``JointModelSpherical`` (quaternion, body-axes angular velocity);
    revolute joints about the joint frame's z: ``JointModelRZ``, else ``JointModelRevoluteUnaligned``.
    """

    def __init__(self, system: System):
        import pinocchio as pin

        self.pin = pin
        self.system = system
        model = pin.Model()
        model.gravity = pin.Motion(np.asarray(system.gravity, dtype=float), np.zeros(3))
        children = _tree(system)
        self.joint_of: dict[int, int] = {}
        frames: dict[int, pin.SE3] = {}  # world placement of each body's joint frame
        order = list(children.get(-1, []))
        spherical_v: list[int] = []
        while order:
            j = order.pop(0)
            body = system.bodies[j.child]
            world = pin.SE3(body.rot, np.asarray(j.point, dtype=float))
            parent_id = 0 if j.parent < 0 else self.joint_of[j.parent]
            parent_frame = pin.SE3.Identity() if j.parent < 0 else frames[j.parent]
            if j.type == "spherical":
                jm = pin.JointModelSpherical()
            elif j.type == "revolute":
                local = body.rot.T @ j.axis
                jm = pin.JointModelRZ() if np.allclose(local, [0, 0, 1]) else pin.JointModelRevoluteUnaligned(local)
            else:
                raise ValueError(f"Pinocchio mapping: joint type {j.type} not mapped")
            if np.any(body.vel != 0) or np.any(body.omega != 0):
                raise ValueError("Pinocchio mapping: bodies with a start velocity are not mapped")
            jid = model.addJoint(parent_id, jm, parent_frame.inverse() * world, j.name)
            if j.type == "spherical":
                spherical_v += list(range(model.idx_vs[jid], model.idx_vs[jid] + 3))
            lever = body.rot.T @ (body.pos - j.point)
            model.appendBodyToJoint(jid, pin.Inertia(body.mass, lever, body.inertia), pin.SE3.Identity())
            self.joint_of[j.child] = jid
            frames[j.child] = world
            order += children.get(j.child, [])
        if len(self.joint_of) != len(system.bodies):
            raise ValueError("Pinocchio mapping: every body needs a joint path to the ground")
        self.model = model
        self.data = model.createData()
        self.spherical = np.array(spherical_v, dtype=int)
        self.q0 = pin.neutral(model)
        self.v0 = np.zeros(model.nv)
        self.tau = np.zeros(model.nv)

    def _rate(self, theta: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Tangent rate at q0 exp(theta) for velocity v: identity but for spherical joints."""
        if self.spherical.size == 0:
            return v
        out = v.copy()
        idx = self.spherical
        out[idx] = _dexpinv_so3(theta[idx].reshape(-1, 3), v[idx].reshape(-1, 3)).ravel()
        return out

    def step(self, q: np.ndarray, v: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray]:
        pin, model, data, tau = self.pin, self.model, self.data, self.tau
        a1 = pin.aba(model, data, q, v, tau).copy()
        k1 = v
        t2 = 0.5 * h * k1
        v2 = v + 0.5 * h * a1
        a2 = pin.aba(model, data, pin.integrate(model, q, t2), v2, tau).copy()
        k2 = self._rate(t2, v2)
        t3 = 0.5 * h * k2
        v3 = v + 0.5 * h * a2
        a3 = pin.aba(model, data, pin.integrate(model, q, t3), v3, tau).copy()
        k3 = self._rate(t3, v3)
        t4 = h * k3
        v4 = v + h * a3
        a4 = pin.aba(model, data, pin.integrate(model, q, t4), v4, tau).copy()
        k4 = self._rate(t4, v4)
        q_new = pin.integrate(model, q, (h / 6.0) * (k1 + 2 * k2 + 2 * k3 + k4))
        return q_new, v + (h / 6.0) * (a1 + 2 * a2 + 2 * a3 + a4)

    def run(self, steps: int) -> tuple[float, int]:
        q, v, h = self.q0.copy(), self.v0.copy(), self.system.step
        step = self.step
        start = time.perf_counter()
        for _ in range(steps):
            q, v = step(q, v, h)
        return time.perf_counter() - start, steps

    def simulate(self, steps: int) -> tuple[np.ndarray, np.ndarray]:
        q, v = self.q0.copy(), self.v0.copy()
        for _ in range(steps):
            q, v = self.step(q, v, self.system.step)
        return q, v

    def com(self, q: np.ndarray, name: str) -> np.ndarray:
        self.pin.forwardKinematics(self.model, self.data, q)
        jid = self.joint_of[self.system.index(name)]
        return np.array(self.data.oMi[jid].act(self.model.inertias[jid].lever))

    def aba_us(self, calls: int = 2000) -> float:
        """µs per bare ``aba`` call at the start state (the C++ part of a Pinocchio RK4 stage)."""
        pin, model, data = self.pin, self.model, self.data
        q, v = self.q0, self.v0 + 0.1
        start = time.perf_counter()
        for _ in range(calls):
            pin.aba(model, data, q, v, self.tau)
        return 1e6 * (time.perf_counter() - start) / calls


# ----------------------------------------------------------------------------- Exudyn


class ExudynSim:
    """An Exudyn system built anew for every run: rigid bodies in maximal coordinates (3D: Euler
    parameters, ``CreateRigidBody``; 2D: ``NodeRigidBody2D``), joints as constraints (3D:
    ``CreateSphericalJoint`` / ``CreateRevoluteJoint``; 2D: ``ObjectJointRevolute2D`` between
    position markers and ``ObjectJointPrismatic2D`` with the rotation constrained), gravity as each
    body's load; solved by ``SolveDynamic`` (generalized-alpha, Exudyn's defaults) at the scene's
    step, no solution file."""

    def __init__(self, system: System, sparse: bool = False):
        import exudyn

        self.exu = exudyn
        self.system = system
        self.sparse = sparse

    def build(self, steps: int, sensor: str | None = None):
        import exudyn as exu
        from exudyn.utilities import (
            MarkerBodyPosition,
            MarkerBodyRigid,
            ObjectGround,
            ObjectJointPrismatic2D,
            ObjectJointRevolute2D,
            RigidBodyInertia,
            SensorBody,
            VObjectJointPrismatic2D,
            VObjectJointRevolute2D,
        )

        system = self.system
        sc = exu.SystemContainer()
        mbs = sc.AddSystem()
        ground = mbs.AddObject(ObjectGround())
        flat = system.dimension == 2
        items = []
        for b in system.bodies:
            items.append(
                mbs.CreateRigidBody(
                    inertia=RigidBodyInertia(mass=b.mass, inertiaTensor=b.inertia, com=[0.0, 0.0, 0.0]),
                    referencePosition=b.pos.tolist(),
                    referenceRotationMatrix=b.rot,
                    initialVelocity=b.vel.tolist(),
                    initialAngularVelocity=b.omega.tolist(),
                    gravity=system.gravity.tolist(),
                    create2D=flat,
                    show=False,
                )
            )
        for j in system.joints:
            item0 = ground if j.parent < 0 else items[j.parent]
            item1 = items[j.child]
            if not flat:
                if j.type == "spherical":
                    mbs.CreateSphericalJoint(itemNumbers=[item0, item1], position=j.point.tolist(), show=False)
                elif j.type == "revolute":
                    mbs.CreateRevoluteJoint(
                        itemNumbers=[item0, item1], position=j.point.tolist(), axis=j.axis.tolist(), show=False
                    )
                else:
                    raise ValueError(f"Exudyn mapping: 3D joint type {j.type} not mapped")
                continue
            p0 = j.point if j.parent < 0 else system.bodies[j.parent].rot.T @ (j.point - system.bodies[j.parent].pos)
            child = system.bodies[j.child]
            p1 = child.rot.T @ (j.point - child.pos)
            if j.type == "revolute":
                m0 = mbs.AddMarker(MarkerBodyPosition(bodyNumber=item0, localPosition=p0.tolist()))
                m1 = mbs.AddMarker(MarkerBodyPosition(bodyNumber=item1, localPosition=p1.tolist()))
                mbs.AddObject(
                    ObjectJointRevolute2D(markerNumbers=[m0, m1], visualization=VObjectJointRevolute2D(show=False))
                )
            elif j.type == "prismatic":
                r0 = np.eye(3) if j.parent < 0 else system.bodies[j.parent].rot
                m0 = mbs.AddMarker(MarkerBodyRigid(bodyNumber=item0, localPosition=p0.tolist()))
                m1 = mbs.AddMarker(MarkerBodyRigid(bodyNumber=item1, localPosition=p1.tolist()))
                normal = np.cross([0.0, 0.0, 1.0], j.axis)
                mbs.AddObject(
                    ObjectJointPrismatic2D(
                        markerNumbers=[m0, m1],
                        axisMarker0=(r0.T @ j.axis).tolist(),
                        normalMarker1=(child.rot.T @ normal).tolist(),
                        constrainRotation=True,
                        visualization=VObjectJointPrismatic2D(show=False),
                    )
                )
            else:
                raise ValueError(f"Exudyn mapping: 2D joint type {j.type} not mapped")
        sensor_id = None
        if sensor is not None:
            sensor_id = mbs.AddSensor(
                SensorBody(
                    bodyNumber=items[system.index(sensor)],
                    outputVariableType=exu.OutputVariableType.Position,
                    storeInternal=True,
                    writeToFile=False,
                )
            )
        mbs.Assemble()
        s = _exudyn_settings(exu, steps, system.step)
        if self.sparse:
            s.linearSolver.solverType = exu.LinearSolverType.EigenSparse
        return sc, mbs, s, items, sensor_id

    def _solve(self, mbs, settings) -> int:
        ok = mbs.SolveDynamic(settings)
        if not ok:
            raise RuntimeError("Exudyn SolveDynamic returned False (the solver did not converge)")
        it = mbs.sys["dynamicSolver"].it
        return max(int(it.currentStepIndex) - 1, 1)  # steps taken (more than asked if it cut the step)

    def run(self, steps: int) -> tuple[float, int]:
        _sc, mbs, s, _items, _ = self.build(steps)
        start = time.perf_counter()
        taken = self._solve(mbs, s)
        return time.perf_counter() - start, taken

    def simulate(self, steps: int, body: str, history: bool = False):
        """(position of ``body``'s centre of mass at the end, [t, x, y, z] rows if ``history``)."""
        _sc, mbs, s, items, sensor = self.build(steps, sensor=body if history else None)
        self._solve(mbs, s)
        pos = np.array(mbs.GetObjectOutputBody(items[self.system.index(body)], self.exu.OutputVariableType.Position))
        rows = np.asarray(mbs.GetSensorStoredData(sensor)) if history else None
        return pos, rows


KINEMATIC_TREE_SOLVERS = {10: ("ExplicitEuler", "RK44"), 100: ("RK44",)}  # per chain size (N = 100: RK44 only)
KINEMATIC_TREE_LABELS = {"ExplicitEuler": "explicit Euler", "RK44": "explicit RK4 (RK44)"}


class ExudynTreeSim:
    """A tree system as one Exudyn ``ObjectKinematicTree`` (joint coordinates, ``CreateKinematicTree``)
    solved by an explicit solver (``ExplicitEuler``, ``RK44``) at the scene's step. Link frames as
    Pinocchio's joint frames (at the joint point, the child's start orientation), revolute joints
    about their z axis (the 2D scenes' joints); inertia at the centre of mass."""

    def __init__(self, system: System, solver: str):
        import exudyn

        self.exu = exudyn
        self.system = system
        self.solver = getattr(exudyn.DynamicSolverType, solver)
        children = _tree(system)
        order, self.links = list(children.get(-1, [])), []
        while order:
            j = order.pop(0)
            body = system.bodies[j.child]
            if j.type != "revolute" or not np.allclose(body.rot.T @ j.axis, [0.0, 0.0, 1.0]):
                raise ValueError("KinematicTree mapping: only revolute joints about the joint frame's z axis")
            self.links.append(j)
            order += children.get(j.child, [])
        if len(self.links) != len(system.bodies):
            raise ValueError("KinematicTree mapping: every body needs a joint path to the ground")

    def build(self, steps: int, sensor: str | None = None):
        import exudyn as exu
        from exudyn.utilities import RigidBodyInertia, SensorKinematicTree, TreeLink

        system = self.system
        frames: dict[int, np.ndarray] = {}
        index: dict[int, int] = {}
        links = []
        for k, j in enumerate(self.links):
            body = system.bodies[j.child]
            world = np.eye(4)
            world[:3, :3], world[:3, 3] = body.rot, j.point
            parent = np.eye(4) if j.parent < 0 else frames[j.parent]
            frames[j.child], index[j.child] = world, k
            com = body.rot.T @ (body.pos - j.point)
            inertia = RigidBodyInertia(mass=body.mass, inertiaTensor=body.inertia, com=com, inertiaTensorAtCOM=True)
            links.append(
                TreeLink(
                    linkInertia=inertia,
                    jointType=exu.JointType.RevoluteZ,
                    jointHT=np.linalg.inv(parent) @ world,
                    parent=-1 if j.parent < 0 else index[j.parent],
                    graphicsDataList=[],
                )
            )
        sc = exu.SystemContainer()
        mbs = sc.AddSystem()
        tree = mbs.CreateKinematicTree(listOfTreeLinks=links, gravity=system.gravity.tolist(), show=False)
        sensor_id = None
        if sensor is not None:
            b = system.index(sensor)
            j = self.links[index[b]]
            sensor_id = mbs.AddSensor(
                SensorKinematicTree(
                    objectNumber=tree,
                    linkNumber=index[b],
                    localPosition=(system.bodies[b].rot.T @ (system.bodies[b].pos - j.point)).tolist(),
                    outputVariableType=exu.OutputVariableType.Position,
                    storeInternal=True,
                    writeToFile=False,
                )
            )
        mbs.Assemble()
        s = _exudyn_settings(exu, steps, system.step)
        return sc, mbs, s, sensor_id

    def _solve(self, mbs, settings) -> int:
        if not mbs.SolveDynamic(settings, solverType=self.solver):
            raise RuntimeError("Exudyn SolveDynamic returned False")
        return max(int(mbs.sys["dynamicSolver"].it.currentStepIndex) - 1, 1)

    def run(self, steps: int) -> tuple[float, int]:
        _sc, mbs, s, _ = self.build(steps)
        start = time.perf_counter()
        taken = self._solve(mbs, s)
        return time.perf_counter() - start, taken

    def simulate(self, steps: int, body: str):
        _sc, mbs, s, sensor = self.build(steps, sensor=body)
        self._solve(mbs, s)
        return np.asarray(mbs.GetSensorValues(sensor), dtype=float), None


# ----------------------------------------------------------------------------- mbsim


class MbsimRun:
    """mbsim on one scene with overrides: ``run(steps)`` loads it (untimed) and times ``run``'s loop."""

    def __init__(self, scene: Path, overrides: tuple[str, ...], workdir: Path, tag: str):
        self.scene, self.overrides, self.workdir, self.tag = scene, tuple(overrides), workdir, tag
        self.count = 0
        self.last_file: Path | None = None
        self.last_status = ""

    def _spec(self, steps: int, extra: tuple[str, ...] = ()):
        from mbsim.scene.spec import load_scene

        step = load_scene(str(self.scene), self.overrides).step
        return load_scene(str(self.scene), [*self.overrides, f"time.end={steps * step!r}", *extra])

    def run(self, steps: int) -> tuple[float, int]:
        from mbsim.simulate import run

        spec = self._spec(steps)
        self.count += 1
        out = self.workdir / f"{self.tag}_{self.count}.h5"
        summary = run(spec, out)
        if self.last_file is not None and self.last_file.exists():
            self.last_file.unlink()
        self.last_file = out
        self.last_status = summary.status if not summary.message else f"{summary.status}: {summary.message}"
        if summary.status != "completed":
            raise RuntimeError(f"mbsim run {self.last_status}")
        return summary.wall_time_s, summary.steps

    def simulate(self, steps: int) -> Path:
        """An untimed run of ``steps`` steps (for the cross-check); its result file."""
        from mbsim.simulate import run

        out = self.workdir / f"{self.tag}_check.h5"
        summary = run(self._spec(steps), out)
        if summary.status != "completed":
            raise RuntimeError(f"mbsim check run {summary.status}: {summary.message}")
        return out


def _h5_position(path: Path, body: str) -> tuple[float, np.ndarray]:
    """(last recorded time, position of ``body`` there) from an mbsim result file, in 3D."""
    import h5py

    with h5py.File(path, "r") as f:
        t = float(f["time"][-1])
        p = np.asarray(f[f"bodies/{body}/position"][-1], dtype=float)
    return t, np.pad(p, (0, 3 - p.size))


# ----------------------------------------------------------------------------- cases


@dataclass
class Contender:
    """One timed thing of a case: an mbsim method or a peer."""

    column: str  # mbsim, mujoco, pinocchio, exudyn
    label: str  # mbsim: the method; a peer: how it integrates
    run: Callable[[int], tuple[float, int]] | None
    note: str = ""  # why it does not take part, or a remark
    us: list[float] = field(default_factory=list)  # µs per step, per repeat
    steps: int = 0
    extra: bool = False  # a second set-up of a peer: timed and listed in the notes, not in the table

    @property
    def median(self) -> float | None:
        return statistics.median(self.us) if self.us else None


@dataclass
class Case:
    key: str
    title: str
    steps: int
    repeats: int
    contenders: list[Contender]
    check: Callable[[], list[dict]] | None = None
    checks: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _check_row(quantity: str, peer: str, ref: np.ndarray, got: np.ndarray, tol: float) -> dict:
    ref, got = np.asarray(ref, dtype=float), np.asarray(got, dtype=float)
    dist = float(np.linalg.norm(got - ref))
    return {"quantity": quantity, "peer": peer, "mbsim": ref.tolist(), "value": got.tolist(), "distance": dist,
            "tol": tol, "ok": bool(dist <= tol)}  # fmt: skip


def _peer_or_note(peer: str, make: Callable[[], object]) -> tuple[object | None, str]:
    """(built peer model, "") or (None, why not): not installed, or the mapping failed."""
    module, why = peer_module(peer)
    if module is None:
        return None, why
    try:
        return make(), ""
    except Exception as exc:  # reported in the table's notes
        return None, "model not built: " + _one_line(f"{type(exc).__name__}: {exc}")


def _contender(column: str, label: str, sim, note: str) -> Contender:
    return Contender(column, label, sim.run if sim is not None else None, note)


def _absent(column: str, why: str) -> Contender:
    return Contender(column, "", None, why)


def _one_line(text: str, width: int = 160) -> str:
    """An error message as one line of at most ``width`` characters (for a markdown table)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _reference_run(runs: list[tuple[str, MbsimRun]], steps: int) -> tuple[str, Path]:
    """(method, result file) of the first mbsim method whose untimed check run completes."""
    errors = []
    for label, m in runs:
        try:
            return label, m.simulate(steps)
        except Exception as exc:  # a method that fails: the next one is the reference
            errors.append(f"{label}: {_one_line(f'{type(exc).__name__}: {exc}', 100)}")
    raise RuntimeError("no mbsim method completed the check run (" + "; ".join(errors) + ")")


def _checks_tree(system: System, body: str, t_check: float, runs: list[tuple[str, MbsimRun]], sims: list[tuple]):
    """The tree cases' check: ``body``'s centre of mass at ``t_check`` in mbsim and in each built peer.

    ``sims``: (peer column, label for the check, peer model or None, tolerance in m)."""

    def check() -> list[dict]:
        steps = max(1, round(t_check / system.step))
        label, path = _reference_run(runs, steps)
        t, ref = _h5_position(path, body)
        quantity = f"{body} centre of mass at t = {t:g} s (mbsim {label}), m"
        rows = []
        for peer, name, sim, tol in sims:
            if sim is None:
                continue
            try:
                if peer == "mujoco":
                    got = sim.com(sim.simulate(steps), body)
                elif peer == "pinocchio":
                    got = sim.com(sim.simulate(steps)[0], body)
                else:
                    got = sim.simulate(steps, body)[0]
            except Exception as exc:
                rows.append({"quantity": quantity, "peer": name, "error": _one_line(f"{type(exc).__name__}: {exc}")})
                continue
            rows.append(_check_row(quantity, name, ref, got, tol))
        return rows

    return check


def case_four_box(plan: dict, workdir: Path) -> Case:
    from mbsim.scene.spec import load_scene

    spec = load_scene(str(FOUR_BOX_SCENE))
    system = system_of(spec)
    mbsim = [
        MbsimRun(FOUR_BOX_SCENE, (), workdir, "four_box_lagrange"),
        MbsimRun(FOUR_BOX_SCENE, ("solver.method=variational",), workdir, "four_box_variational"),
        MbsimRun(FOUR_BOX_SCENE, ("solver.method=recursive",), workdir, "four_box_recursive"),
    ]
    labels = ("lagrange + rk4 (as shipped)", "variational", "recursive + rk4")
    mj, mj_note = _peer_or_note("mujoco", lambda: MujocoSim(mjcf_tree(system), system))
    pn, pn_note = _peer_or_note("pinocchio", lambda: PinocchioSim(system))
    ex, ex_note = _peer_or_note("exudyn", lambda: ExudynSim(system))
    contenders = [Contender("mbsim", label, m.run) for label, m in zip(labels, mbsim, strict=True)]
    contenders += [
        _contender("mujoco", "RK4, 4 bodies on ball joints", mj, mj_note),
        _contender("pinocchio", "Python RK4 loop around aba, 4 spherical joints", pn, pn_note),
        _contender("exudyn", "generalized-alpha, rigid bodies + spherical joints", ex, ex_note),
    ]
    t_check = min(CHECK_T, plan["four_box_steps"] * system.step)
    runs = list(zip(labels, mbsim, strict=True))
    sims = [("mujoco", "MuJoCo", mj, 1e-3), ("pinocchio", "Pinocchio", pn, 1e-3), ("exudyn", "Exudyn", ex, 1e-3)]
    check = _checks_tree(system, "box4", t_check, runs, sims)
    title = f"four-box chain ({plan['four_box_steps'] * system.step:g} s, h = {system.step:g})"
    case = Case("four_box", title, plan["four_box_steps"], plan["repeats"], contenders, check)
    if pn is not None:
        aba = pn.aba_us()
        case.notes.append(f"four-box: Pinocchio's bare `aba` on the chain: {aba:.1f} µs per call (4 per RK4 step)")
    return case


def case_slider(plan: dict, workdir: Path) -> Case:
    from mbsim.scene.spec import load_scene

    spec = load_scene(str(SLIDER_SCENE))
    system = system_of(spec)
    variants = (
        ("lagrange + rk4", ("solver.method=lagrange",)),
        ("null_space + rk4", ("solver.method=null_space",)),
        ("gauss (kkt) + rk4", ("solver.method=gauss", "solver.optimizer=kkt")),
    )
    mbsim = [MbsimRun(SLIDER_SCENE, ov, workdir, f"slider_{k}") for k, (_, ov) in enumerate(variants)]
    ex, ex_note = _peer_or_note("exudyn", lambda: ExudynSim(system))
    contenders = [Contender("mbsim", label, m.run) for (label, _), m in zip(variants, mbsim, strict=True)]
    contenders += [
        _absent("mujoco", "n/a: closed loop (Exudyn only, as the issue)"),
        _absent("pinocchio", "n/a: closed loop (Exudyn only, as the issue)"),
        _contender("exudyn", "generalized-alpha, 2D rigid bodies, revolute + prismatic joints", ex, ex_note),
    ]
    steps = plan["slider_steps"]
    title = f"slider-crank through the fold ({steps * system.step:g} s, h = {system.step:g})"
    case = Case("slider", title, steps, plan["repeats"], contenders)

    def check() -> list[dict]:
        import h5py

        reference = _run_module()._slider_reference
        t_end = steps * system.step
        t_check = min(CHECK_T, t_end)
        check_steps = max(1, round(t_check / system.step))
        errors = []
        for (label, _), m in zip(variants, mbsim, strict=True):
            if m.last_file is None or not m.last_file.exists():
                continue
            with h5py.File(m.last_file, "r") as f:
                t, x = f["time"][...], f["bodies/slider/position"][:, 0]
            err = float(np.max(np.abs(x - reference(t))))
            errors.append(f"mbsim {label} {err:.2g} m (x({t[-1]:g} s) = {x[-1]:.4f})")
        label, path = _reference_run([(label, m) for (label, _), m in zip(variants, mbsim, strict=True)], check_steps)
        t_ref, ref = _h5_position(path, "slider")
        quantity = f"slider x at t = {t_ref:g} s (mbsim {label}), m"
        rows = []
        if ex is not None:
            try:
                pos, hist = ex.simulate(steps, "slider", history=True)  # the whole span, every step recorded
            except Exception as exc:
                rows.append(
                    {"quantity": quantity, "peer": "exudyn", "error": _one_line(f"{type(exc).__name__}: {exc}")}
                )
            else:
                at = int(np.argmin(np.abs(hist[:, 0] - t_ref)))
                rows.append(_check_row(quantity, "exudyn", ref[:1], hist[at, 1:2], tol=1e-2))
                err = np.abs(hist[:, 1] - reference(hist[:, 0]))
                off = np.nonzero(err > 1e-3)[0]
                first = f", first past 1 mm at t = {hist[off[0], 0]:.3g} s" if off.size else ""
                errors.append(f"Exudyn {float(np.max(err)):.2g} m (x({hist[-1, 0]:g} s) = {pos[0]:.4f}{first})")
                case.notes.append(_slider_equal_error(variants, workdir, steps * system.step, ex, steps, err))
        if errors:
            case.notes.append(
                f"slider: max |x - x_ref| against the one-coordinate reference over the {t_end:g} s "
                "(benchmarks/run.py `_slider_reference`; mbsim: recorded rows of its last timed run, Exudyn: every "
                "step): " + ", ".join(errors)
            )
        return rows

    case.check = check
    return case


# the step sizes tried for the slider's equal-error comparison, largest first
SLIDER_STEPS = (0.05, 0.04, 0.025, 0.02, 0.01, 0.005, 0.002)


def _slider_equal_error(variants, workdir: Path, t_end: float, ex, ex_steps: int, ex_err: np.ndarray) -> str:
    """The issue's slider target: each mbsim method's wall time over the whole span at the largest
    step (of SLIDER_STEPS) whose max slider error is at most Exudyn's at the scene's step, against
    Exudyn's wall time (median of 3 runs each; what the note reports)."""
    import h5py

    reference = _run_module()._slider_reference
    ex_wall = statistics.median(ex.run(ex_steps)[0] for _ in range(3))
    limit = float(np.max(ex_err))
    parts = []
    for label, overrides in variants:
        for h in SLIDER_STEPS:
            steps = round(t_end / h)
            run = MbsimRun(SLIDER_SCENE, (*overrides, f"time.step={h!r}"), workdir, f"slider_h{h:g}")
            walls = []
            try:
                for _ in range(3):
                    walls.append(run.run(steps)[0])
            except RuntimeError:
                continue  # failed at this step (e.g. left the branch at the fold)
            with h5py.File(run.last_file, "r") as f:
                t, x = f["time"][...], f["bodies/slider/position"][:, 0]
            err = float(np.max(np.abs(x - reference(t))))
            if err <= limit:
                wall = statistics.median(walls)
                parts.append(
                    f"{label} at h = {h:g} s: error {err:.2g} m, {wall * 1e3:.1f} ms = {wall / ex_wall:.2f}x Exudyn"
                )
                break
        else:
            parts.append(f"{label}: no step of {SLIDER_STEPS} reaches Exudyn's error")
    return (
        f"slider at equal or better error (the issue's target, <= 0.5x): Exudyn's max error {limit:.2g} m at its "
        f"step, {ex_wall * 1e3:.1f} ms over {t_end:g} s; mbsim, largest step with max error at most that "
        "(recorded rows, every row of the scene's output): " + "; ".join(parts)
    )


def case_planar_chain(n: int, plan: dict, workdir: Path) -> Case:
    from mbsim.scene.spec import load_scene

    steps = plan["chain10_steps"] if n <= 10 else plan["chain100_steps"]
    scene = workdir / f"planar_chain_{n}.yaml"
    scene.write_text(planar_chain_scene(n, steps=steps), encoding="utf-8")
    system = system_of(load_scene(str(scene)))
    main, other = ("recursive", "lagrange") if n <= 10 else ("lagrange", "recursive")
    mbsim = [
        MbsimRun(scene, (f"solver.method={main}",), workdir, f"chain{n}_{main}"),
        MbsimRun(scene, (f"solver.method={other}",), workdir, f"chain{n}_{other}"),
    ]
    mj, mj_note = _peer_or_note("mujoco", lambda: MujocoSim(mjcf_tree(system), system))
    pn, pn_note = _peer_or_note("pinocchio", lambda: PinocchioSim(system))
    ex, ex_note = _peer_or_note("exudyn", lambda: ExudynSim(system, sparse=n > 30))
    solver = "sparse LU (EigenSparse)" if n > 30 else "dense LU (default)"
    # extra: Exudyn's minimal-coordinate KinematicTree with explicit solvers (the run used explicit Euler)
    trees = []
    for name in KINEMATIC_TREE_SOLVERS[10 if n <= 10 else 100]:
        sim, _ = _peer_or_note("exudyn", lambda name=name: ExudynTreeSim(system, name))
        trees.append((name, sim))
    contenders = [
        Contender("mbsim", f"{main} + rk4", mbsim[0].run),
        Contender("mbsim", f"{other} + rk4 (extra)", mbsim[1].run),
        _contender("mujoco", "RK4, hinge joints", mj, mj_note),
        _contender("pinocchio", "Python RK4 loop around aba, revolute joints", pn, pn_note),
        _contender("exudyn", f"generalized-alpha, 2D rigid bodies + revolute joints, {solver}", ex, ex_note),
    ]
    contenders += [
        Contender("exudyn", f"KinematicTree (joint coordinates), {KINEMATIC_TREE_LABELS[name]}", sim.run, extra=True)
        for name, sim in trees
        if sim is not None
    ]
    t_check = min(CHECK_T, steps * system.step)
    runs = [(f"{main} + rk4", mbsim[0]), (f"{other} + rk4", mbsim[1])]
    sims = [("mujoco", "MuJoCo", mj, 1e-3), ("pinocchio", "Pinocchio", pn, 1e-3), ("exudyn", "Exudyn", ex, 1e-3)]
    for solver, sim in trees:
        # explicit Euler is first order: about a millimetre off after 1 s at h = 1e-3, so a looser tolerance
        sims.append(("exudyn", f"Exudyn KinematicTree {solver}", sim, 1e-3 if solver == "RK44" else 0.05))
    check = _checks_tree(system, f"link{n}", t_check, runs, sims)
    title = f"planar chain N = {n} ({steps * system.step:g} s, h = {system.step:g})"
    repeats = plan["repeats"] if n <= 10 else plan["chain100_repeats"]
    case = Case(f"chain{n}", title, steps, repeats, contenders, check)
    if pn is not None:
        case.notes.append(f"chain N = {n}: Pinocchio's bare `aba`: {pn.aba_us():.1f} µs per call (4 per RK4 step)")
    return case


# MuJoCo's impedance for the elastic blocks: as close to 1 as it allows, so the contact is the spring
BLOCKS_SOLIMP = 0.9999


def blocks_mjcf(system: System, stiffness_total: float) -> str:
    """The two blocks as free MuJoCo bodies, frictionless box-box contact whose reference
    acceleration is the linear spring of mbsim's compliant contact: solref = (-k/m_eff, 0), k the
    summed stiffness of the penetrating sample points, m_eff = m1 m2 / (m1 + m2), no damping, RK4."""
    m1, m2 = (b.mass for b in system.bodies)
    k_acc = stiffness_total * (m1 + m2) / (m1 * m2) / BLOCKS_SOLIMP
    d = BLOCKS_SOLIMP
    attrs = f'condim="1" solref="{-k_acc!r} -0.0" solimp="{d!r} {d!r} 0.001" margin="0"'
    return mjcf_tree(system, integrator="RK4", geom_attrs=attrs)


def case_blocks(plan: dict, workdir: Path) -> Case:
    from mbsim.scene.spec import load_scene

    spec = load_scene(str(BLOCKS_SCENE))
    system = system_of(spec)
    contact = spec.contacts[0]
    k = float(contact.raw["stiffness"])
    # mbsim's sample points are the slave's (block1's) mesh vertices: a box mesh has 8, 4 on the face that hits
    points = 4
    steps = plan["blocks_steps"]
    mb = MbsimRun(BLOCKS_SCENE, (), workdir, "blocks")
    mj, mj_note = _peer_or_note("mujoco", lambda: MujocoSim(blocks_mjcf(system, k * points), system))
    contenders = [
        Contender("mbsim", f"{spec.solver.method} + {spec.solver.integrator} (as shipped)", mb.run),
        _contender("mujoco", "RK4, frictionless box-box soft contact, solref = (-k/m_eff, 0)", mj, mj_note),
        _absent("pinocchio", "n/a: no contact dynamics in Pinocchio's aba"),
        _absent("exudyn", "not set up: no SDF / mesh compliant contact mapped"),
    ]
    title = f"two-block elastic impact ({steps * system.step:g} s, h = {system.step:g})"
    case = Case("blocks", title, steps, plan["repeats"], contenders)

    def check() -> list[dict]:
        import h5py

        path = mb.simulate(steps)
        with h5py.File(path, "r") as f:
            t = float(f["time"][-1])
            v_ref = np.array([f["bodies/block1/velocity"][-1][0], f["bodies/block2/velocity"][-1][0]])
            x_ref = f["bodies/block1/position"][-1]
        rows = []
        if mj is not None:
            data = mj.simulate(steps)
            ids = [mj.model.body(n).id for n in ("block1", "block2")]
            v_mj = np.array([data.qvel[mj.model.jnt_dofadr[mj.model.body_jntadr[i]]] for i in ids])  # free joint: x
            rows.append(_check_row(f"block1, block2 x-velocity at t = {t:g} s, m/s (exact: 3, -2)", "mujoco", v_ref,
                                   v_mj, tol=0.02))  # fmt: skip
            rows.append(_check_row(f"block1 centre at t = {t:g} s, m", "mujoco", x_ref, mj.com(data, "block1"), 1e-3))
        return rows

    case.check = check
    case.notes.append(
        f"blocks: mbsim's Hertz contact with exponent 1 and no damping is a linear spring of k = {k:g} N/m at each "
        f"penetrating sample point; the face of block1 that hits has {points} mesh vertices, so MuJoCo gets "
        f"{points} x k as the reference stiffness of its box-box contact (solref = (-{points}k/m_eff, 0), solimp "
        f"{BLOCKS_SOLIMP}); MuJoCo's stiffness acts in constraint space, not per point, so the two agree on the "
        "rebound velocities and the contact time, not on the force distribution"
    )
    return case


# the pile's check: mean centre within this, m (half a sphere diameter: the two contact models differ, see notes)
PILE_TOL = 0.05


def pile_mjcf(spec, system: System, friction: float) -> str:
    """1,000 free spheres in the box of ``pile_scene`` (ground planes), MuJoCo's CG solver."""
    planes = [
        f'<geom type="plane" size="0 0 1" pos="{_fmt(s["point"])}" zaxis="{_fmt(s["normal"])}"/>'
        for s in spec.ground_shapes
    ]
    bodies = []
    for b in system.bodies:
        r = float(b.shapes[0]["radius"])
        bodies.append(
            f'<body name="{b.name}" pos="{_fmt(b.pos)}"><freejoint/><geom type="sphere" size="{r!r}" '
            f'mass="{b.mass!r}"/></body>'
        )
    return "\n".join(
        [
            f'<mujoco model="{system.name}">',
            f'  <option timestep="{system.step!r}" solver="CG" gravity="{_fmt(system.gravity)}"/>',
            f'  <default><geom condim="3" friction="{friction!r} 0.005 0.0001"/></default>',
            "  <worldbody>",
            *[f"    {p}" for p in planes],
            *[f"    {b}" for b in bodies],
            "  </worldbody>",
            "</mujoco>",
        ]
    )


def case_pile(plan: dict, workdir: Path) -> Case:
    from mbsim.scene.spec import load_scene

    run_module = _run_module()
    steps = plan["pile_steps"]
    scene = workdir / "pile_1000.yaml"
    scene.write_text(run_module.pile_scene(10, t_end=steps * 2e-3), encoding="utf-8")
    spec = load_scene(str(scene))
    system = system_of(spec)
    friction = float(spec.contacts[0].raw.get("friction", 0.3))
    mb = MbsimRun(scene, (), workdir, "pile")
    mj, mj_note = _peer_or_note("mujoco", lambda: MujocoSim(pile_mjcf(spec, system, friction), system))
    contenders = [
        Contender("mbsim", "timestepping, PGS (as `pile_scene`)", mb.run),
        _contender("mujoco", "CG solver, default (semi-implicit Euler) integrator", mj, mj_note),
        _absent("pinocchio", "n/a: no contact dynamics in Pinocchio's aba"),
        _absent("exudyn", "not set up"),
    ]
    t = steps * system.step
    case = Case("pile", f"pile of 1,000 spheres ({steps} steps from rest, h = 0.002)", steps, plan["pile_repeats"],
                contenders)  # fmt: skip

    def check() -> list[dict]:
        import h5py

        if mb.last_file is None or not mb.last_file.exists():
            return []
        with h5py.File(mb.last_file, "r") as f:
            centres = np.array([f[f"bodies/{b.name}/position"][-1] for b in system.bodies])
        rows = []
        if mj is not None:
            data = mj.simulate(steps)
            mj_centres = data.xipos[1:].copy()
            quantity = f"mean sphere centre at t = {t:g} s (the last timed run), m"
            rows.append(_check_row(quantity, "mujoco", centres.mean(axis=0), mj_centres.mean(axis=0), tol=PILE_TOL))
            half = 0.5 * 10 * run_module.PILE_SPACING
            out = int(np.sum(np.any(np.abs(mj_centres[:, :2]) > half, axis=1) | (mj_centres[:, 2] < 0)))
            case.notes.append(f"pile: MuJoCo spheres outside the box at the end: {out}; contacts {data.ncon}")
        return rows

    case.check = check
    case.notes.append(
        "pile: mbsim's rigid contacts with restitution 0.2 have no exact MuJoCo counterpart (MuJoCo's default soft "
        "contact, solref 0.02 / 1, is critically damped and lets spheres sink in a little), so the check compares "
        f"the mean sphere centre only to {PILE_TOL:g} m; friction 0.3 (condim 3, MuJoCo's default pyramidal cone); "
        "timed: a fixed number of steps from rest (the pile forms during them), not steps of a formed pile"
    )
    return case


PANDA_URDF = SCENES / "robots" / "panda_description" / "urdf" / "panda.urdf"


def arm7_scene(workdir: Path, steps: int) -> Path:
    """The Panda arm (7 revolute axes) imported from its URDF with its fingers welded to the hand
    (their prismatic joints made fixed and the mimic dropped, in a copy: recursive takes trees
    without couplings) and without its joint dampers (the peers' models, built from mbsim's
    bodies and joints, have none; the arm is chaotic enough that 0.003 N m s/rad moves its wrist
    by 0.2 m in 1 s), released from a bent pose under gravity, recursive + rk4 at 1 ms."""
    from lxml import etree

    tree = etree.parse(str(PANDA_URDF))
    for joint in tree.getroot().iter("joint"):
        for child in list(joint):
            if child.tag == "dynamics":
                joint.remove(child)
        if joint.get("name", "").startswith("panda_finger_joint"):
            joint.set("type", "fixed")
            for child in list(joint):
                if child.tag in ("mimic", "axis", "limit", "dynamics"):
                    joint.remove(child)
    urdf = workdir / "panda_arm.urdf"
    tree.write(str(urdf), xml_declaration=True, encoding="utf-8")
    scene = workdir / "arm7.yaml"
    scene.write_text(
        "mbsim: 1\nname: Panda arm (7 axes, URDF)\ngravity: [0, 0, -9.81]\n"
        f"time: {{end: {steps * 1e-3!r}, step: 0.001}}\nsolver: {{method: recursive, integrator: rk4}}\n"
        "output: {every: 10}\n"
        "models:\n  - file: panda_arm.urdf\n"
        "    joint_positions: {panda_joint2: 0.3, panda_joint4: -1.5, panda_joint6: 1.2}\n",
        encoding="utf-8",
    )
    return scene


def case_arm7(plan: dict, workdir: Path) -> Case:
    """Issue 16's speed case: a 7-axis arm from a URDF, recursive + rk4, per step against
    Pinocchio's RK4 loop and MuJoCo's RK4 on the same compiled model."""
    from mbsim.scene.spec import load_scene

    steps = plan["chain10_steps"]
    scene = arm7_scene(workdir, steps)
    system = system_of(load_scene(str(scene)))
    mbsim = [
        MbsimRun(scene, (), workdir, "arm7_recursive"),
        MbsimRun(scene, ("output.every=1",), workdir, "arm7_recursive_every"),
        MbsimRun(scene, ("solver.method=lagrange",), workdir, "arm7_lagrange"),
    ]
    labels = (
        "recursive + rk4 (imported URDF), recording every 10th step",
        "recursive + rk4, recording every step (extra)",
        "lagrange + rk4, every 10th (extra)",
    )
    mj, mj_note = _peer_or_note("mujoco", lambda: MujocoSim(mjcf_tree(system), system))
    pn, pn_note = _peer_or_note("pinocchio", lambda: PinocchioSim(system))
    contenders = [Contender("mbsim", label, m.run) for label, m in zip(labels, mbsim, strict=True)]
    contenders += [
        _contender("mujoco", "RK4, 7 hinge joints", mj, mj_note),
        _contender("pinocchio", "Python RK4 loop around aba, 7 revolute joints", pn, pn_note),
        _absent("exudyn", "not run for this case (issue 16 compares with MuJoCo and Pinocchio)"),
    ]
    t_check = min(CHECK_T, steps * system.step)
    runs = list(zip(labels, mbsim, strict=True))[::2]
    sims = [("mujoco", "MuJoCo", mj, 1e-3), ("pinocchio", "Pinocchio", pn, 1e-3)]
    check = _checks_tree(system, "panda_link7", t_check, runs, sims)
    title = f"Panda arm, 7 axes from its URDF ({steps * system.step:g} s, h = {system.step:g})"
    case = Case("arm7", title, steps, plan["repeats"], contenders, check)
    case.notes.append(
        "arm7: mbsim records a row of the result file (joint coordinates, body states, joint reactions by "
        "inverse dynamics, energies) every 10th step, as a 100 Hz log; the peers record nothing. The extra row "
        "records every step: the row costs about as much as the RK4 step itself"
    )
    if pn is not None:
        case.notes.append(f"arm7: Pinocchio's bare `aba`: {pn.aba_us():.1f} µs per call (4 per RK4 step)")
    return case


CASES = ("four_box", "slider", "chain10", "chain100", "blocks", "pile", "arm7")


def _build(key: str, plan: dict, workdir: Path) -> Case:
    if key == "four_box":
        return case_four_box(plan, workdir)
    if key == "slider":
        return case_slider(plan, workdir)
    if key == "chain10":
        return case_planar_chain(10, plan, workdir)
    if key == "chain100":
        return case_planar_chain(100, plan, workdir)
    if key == "blocks":
        return case_blocks(plan, workdir)
    if key == "pile":
        return case_pile(plan, workdir)
    if key == "arm7":
        return case_arm7(plan, workdir)
    raise ValueError(f"unknown case {key!r}; expected one of {CASES}")


# ----------------------------------------------------------------------------- running


def time_case(case: Case, log: Callable[[str], None] = print) -> None:
    """Warm every contender up, then time them round robin ``case.repeats`` times."""
    for c in case.contenders:
        if c.run is None:
            continue
        try:
            c.run(min(WARMUP_STEPS, case.steps))
        except Exception as exc:
            c.note = "failed: " + _one_line(f"{type(exc).__name__}: {exc}")
            c.run = None
    for _ in range(case.repeats):
        for c in case.contenders:
            if c.run is None:
                continue
            try:
                wall, taken = c.run(case.steps)
            except Exception as exc:
                c.note = "failed: " + _one_line(f"{type(exc).__name__}: {exc}")
                c.run = None
                c.us.clear()
                continue
            c.steps = taken
            c.us.append(1e6 * wall / max(taken, 1))
    for c in case.contenders:
        shown = f"{c.median:10.1f} µs/step" if c.median is not None else f"{'-':>10}        "
        log(f"  {case.key:9} {PEER_LABELS[c.column]:9} {shown}  {c.label or c.note}")


def check_case(case: Case, log: Callable[[str], None] = print) -> None:
    if case.check is None:
        return
    try:
        case.checks = case.check()
    except Exception as exc:
        case.checks = [{"quantity": "cross-check", "peer": "-", "error": _one_line(f"{type(exc).__name__}: {exc}")}]
    for row in case.checks:
        if "error" in row:
            log(f"  check {case.key}: {row['peer']}: {row['error']}")
        else:
            verdict = "agrees" if row["ok"] else "DIFFERS"
            log(f"  check {case.key}: {row['quantity']}: mbsim {np.round(row['mbsim'], 6).tolist()}, "
                f"{row['peer']} {np.round(row['value'], 6).tolist()}: distance {row['distance']:.2e} "
                f"(tol {row['tol']:g}) {verdict}")  # fmt: skip


def rows_of(case: Case) -> list[dict]:
    """One row per mbsim method of the case, the peers' medians beside it."""
    peers: dict[str, float | None] = {}
    notes: dict[str, str] = {}
    labels: dict[str, str] = {}
    for peer in PEERS:
        c = next((c for c in case.contenders if c.column == peer and not c.extra), None)
        peers[peer] = c.median if c is not None else None
        if c is not None and c.median is None:
            notes[peer] = c.note or "not run"
        if c is not None and c.median is not None:
            labels[peer] = c.label
    timed = {p: v for p, v in peers.items() if v is not None}
    best = min(timed, key=timed.get) if timed else None
    extras = [
        f"{case.title}: extra {PEER_LABELS[c.column]} set-up, {c.label}: "
        + (f"{c.median:.1f} µs/step" if c.median is not None else c.note or "not run")
        for c in case.contenders
        if c.extra
    ]
    rows = []
    for c in case.contenders:
        if c.column != "mbsim":
            continue
        mbsim_us = c.median
        row = {
            "case": case.title,
            "key": case.key,
            "method": c.label,
            "mbsim_us": mbsim_us,
            **{f"{p}_us": peers[p] for p in PEERS},
            "best_peer": best,
            "ratio": (mbsim_us / timed[best]) if (best is not None and mbsim_us is not None) else None,
            "steps": case.steps,
            "repeats": case.repeats,
            "notes": dict(notes, **({"mbsim": c.note} if mbsim_us is None else {})),
            "peer_setups": labels,
            "checks": case.checks,
            "case_notes": [*extras, *case.notes],
        }
        rows.append(row)
    return rows


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every platform
        return None


def run_peers(quick: bool = False, cases: tuple[str, ...] = CASES, log: Callable[[str], None] = print) -> list[dict]:
    """Build, time and cross-check every case; return the rows (see the module docstring)."""
    plan = QUICK if quick else FULL
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="mbsim_peers_") as tmp:
        for key in cases:
            start, load = time.perf_counter(), _loadavg()
            case = _build(key, plan, Path(tmp))
            time_case(case, log)
            check_case(case, log)
            for row in rows_of(case):
                row["loadavg"] = (load, _loadavg())  # the 1-minute load average at the case's start and end
                rows.append(row)
            log(f"  {key}: {time.perf_counter() - start:.1f} s")
    return rows


# ----------------------------------------------------------------------------- report


def _us(value: float | None, note: str | None = None) -> str:
    if value is None:
        if note and note.startswith("not installed"):
            return "not installed"
        if note and note.startswith("failed"):
            return "failed"
        return "n/a"
    return f"{value:.1f}" if value < 1000 else f"{value:,.0f}"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "numpy": np.__version__}
    try:
        from importlib import metadata

        out["mbsim"] = metadata.version("mbsim")
    except Exception:  # an uninstalled checkout
        out["mbsim"] = "checkout"
    for peer in PEERS:
        out[peer] = peer_version(peer) or "not installed"
    return out


def markdown(rows: list[dict]) -> str:
    """The section: the table, the cross-checks, and how each peer was set up."""
    v = versions()
    lines = [
        "## Peers: µs per step, same session",
        "",
        "Stepping-loop µs per step (median of the repeats, `time.perf_counter`), every contender of a case timed "
        "round robin in the same process after one untimed warm-up run, single-threaded "
        "(OMP/OPENBLAS/MKL_NUM_THREADS=1). mbsim: `RunSummary.wall_time_s / steps` of `mbsim.simulate.run` "
        "(including its per-step checks and the result file's recording). *best peer* is the fastest peer "
        "that ran the case; *mbsim / best* above 1 means mbsim is slower.",
        "",
        "| case | mbsim method | steps x repeats | mbsim | MuJoCo | Pinocchio | Exudyn | best peer | mbsim / best |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for r in rows:
        notes = r.get("notes", {})
        best = PEER_LABELS.get(r["best_peer"], "-") if r["best_peer"] else "-"
        ratio = f"{r['ratio']:.1f}x" if r["ratio"] is not None else "-"
        lines.append(
            f"| {r['case']} | {r['method']} | {r['steps']} x {r['repeats']} | "
            f"{_us(r['mbsim_us'], notes.get('mbsim'))} | "
            + " | ".join(_us(r[f"{p}_us"], notes.get(p)) for p in PEERS)
            + f" | {best} | {ratio} |"
        )
    # the cross-checks and notes, once per case
    seen: list[str] = []
    checks, case_notes, absent = [], [], []
    for r in rows:
        if r["key"] in seen:
            continue
        seen.append(r["key"])
        for c in r.get("checks", []):
            checks.append((r["case"], c))
        case_notes += r.get("case_notes", [])
        for p, why in r.get("notes", {}).items():
            absent.append(f"{r['case']}: {PEER_LABELS[p]}: {why}")
    lines += [
        "",
        "Physics cross-check (untimed runs from the same start): the peer's value against mbsim's "
        "(the case's first mbsim method), Euclidean distance.",
        "",
        "| case | quantity | peer | mbsim | peer's | distance | tolerance | verdict |",
        "| --- | --- | --- | --- | --- | ---: | ---: | --- |",
    ]
    for case, c in checks:
        if "error" in c:
            lines.append(f"| {case} | {c['quantity']} | {PEER_LABELS.get(c['peer'], c['peer'])} | - | - | - | - | "
                         f"error: {c['error']} |")  # fmt: skip
            continue
        fmt = lambda xs: "(" + ", ".join(f"{x:.5f}" for x in xs) + ")"  # noqa: E731
        lines.append(
            f"| {case} | {c['quantity']} | {PEER_LABELS.get(c['peer'], c['peer'])} | {fmt(c['mbsim'])} | "
            f"{fmt(c['value'])} | "
            f"{c['distance']:.1e} | {c['tol']:g} | {'agrees' if c['ok'] else '**differs**'} |"
        )
    loads = [x for r in rows for x in r.get("loadavg", ()) if x is not None]
    lines += ["", "Notes:", ""]
    if loads:
        lines.append(
            f"- machine: {os.cpu_count()} cores; 1-minute load average {min(loads):.1f} to {max(loads):.1f} at the "
            "cases' starts and ends (other processes share the machine; the round robin spreads their load over "
            "all contenders alike)"
        )
    lines += [f"- {n}" for n in case_notes]
    lines += [f"- {a}" for a in absent]
    lines += [
        "",
        f"Versions: mbsim {v['mbsim']}, MuJoCo {v['mujoco']}, Pinocchio (`pin`) {v['pinocchio']}, Exudyn "
        f"{v['exudyn']}; Python {v['python']}, NumPy {v['numpy']}. Set-up (benchmarks/peers.py): every peer model is "
        "built from mbsim's compiled model of the case (masses, inertias about the centre of mass in body axes, start "
        "poses, e.g. the four-box chain's quaternions from its ZXZ Euler angles, joint points and axes, gravity, "
        "step), 2D scenes in the x-y plane with joint axes along z and gravity along -y. "
        "**MuJoCo**: MJCF of nested bodies (body frame = mbsim's, explicit `inertial` with `diaginertia`), ball / "
        "hinge joints at mbsim's joint points, `integrator=\"RK4\"` at the scene's step, no contacts in the chains "
        "(geoms `contype=0 conaffinity=0`); the blocks as free bodies with a frictionless soft box-box contact; the "
        'pile as 1,000 free spheres and the box\'s five planes with `solver="CG"`; timed as '
        "`mj_step(model, data, nstep=steps)` (its C loop). **Pinocchio**: a `pin.Model` of `JointModelSpherical` / "
        "`JointModelRZ` joints (joint frame at the joint point with the child's start orientation, the body inertia "
        "at its centre of mass), integrated by a Python RK4 loop (Runge-Kutta-Munthe-Kaas, 4th order) around "
        "`pin.aba` with `pin.integrate` for the configurations: most of its time per step is the Python around four "
        "`aba` calls. **Exudyn**: rigid bodies in maximal coordinates (3D: `CreateRigidBody`, Euler parameters, "
        "`CreateSphericalJoint`; 2D: `NodeRigidBody2D` / `ObjectRigidBody2D`, `ObjectJointRevolute2D`, "
        "`ObjectJointPrismatic2D`), gravity as body loads, `SolveDynamic` with its default implicit "
        "generalized-alpha (spectral radius 0.9, index-3 constraints, modified Newton) at the scene's step, no "
        "solution file; wall time of `SolveDynamic` (including its set-up) over the steps it took. The planar "
        "chains' Exudyn column is that generalized-alpha set-up (maximal coordinates, like mbsim's lagrange; "
        "Exudyn's explicit solvers do not take these joint constraints); the issue's explicit-Euler Exudyn run "
        "needs joint coordinates, so it is timed as an extra set-up (notes): one `ObjectKinematicTree` "
        "(`CreateKinematicTree`, revolute-z links) with `ExplicitEuler`, and with `RK44`.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer steps and repeats (about 1 minute)")
    parser.add_argument("--case", action="append", choices=CASES, help="run only this case (repeatable)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    rows = run_peers(quick=args.quick, cases=tuple(args.case) if args.case else CASES, log=log)
    print(markdown(rows))
    log(f"total {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def section(quick: bool = False) -> list[str]:
    """The peers section of BENCHMARKS.md (benchmarks/run.py), or a line saying why it is absent."""
    installed = [p for p in ("mujoco", "pinocchio", "exudyn") if peer_version(p) is not None]
    if not installed:
        return [
            "## Peers: µs per step, same session",
            "",
            "No peer installed (`pip install -e '.[bench]'` adds mujoco, pin and exudyn); section skipped.",
        ]
    return markdown(run_peers(quick)).splitlines()
