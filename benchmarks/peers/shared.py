"""What the peers' modules share: the scenes, the plans of a run, the physical data every peer model is
built from (``system_of``: mbsim's compiled model as bodies and joints), and a case with its contenders."""

from __future__ import annotations

import importlib
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
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
    "tower_steps": 400,  # scenes/box_stack.yaml, 2 s at 0.005
    "rolling_steps": 1000,  # the rolling cases: 1 s at 0.001 (slip until 0.19 s, then rolling)
    "armfloor_steps": 2000,  # 2 s at 0.001: the hand lands at 0.22 s and rests from about 1.4 s
    "armfloor_repeats": 3,  # the explicit baseline takes about 10 s per run
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
    "tower_steps": 40,
    "rolling_steps": 200,
    "armfloor_steps": 300,
    "armfloor_repeats": 1,
}
WARMUP_STEPS = 20  # the untimed first run of every contender
CHECK_T = 1.0  # s: the cross-check compares positions at this time (or the timed span, if shorter)


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
