"""MuJoCo as a peer: MJCF built from a ``System`` (trees of ball / hinge / slide joints, the elastic
blocks, the sphere pile) and ``MujocoSim``, which times ``mj_step(model, data, nstep=steps)``.
``import mujoco`` below is the library (absolute imports), not this module."""

from __future__ import annotations

import time

import numpy as np

from benchmarks.peers.shared import Body, Joint, System, _fmt, _tree


def _mjcf_geoms(body: Body, attrs: str) -> list[str]:
    from scipy.spatial.transform import Rotation

    out = []
    for s in body.shapes:
        kind = s.get("type")
        pose, at = s.get("pose"), attrs
        if pose is not None and np.shape(pose.get("rotation")) == (3, 3):  # 3D: position, rotation in the body frame
            quat = Rotation.from_matrix(np.asarray(pose["rotation"], dtype=float)).as_quat(scalar_first=True)
            at = f'pos="{_fmt(pose["position"])}" quat="{_fmt(quat)}" {attrs}'
        if kind == "box":
            out.append(f'<geom type="box" size="{_fmt(0.5 * np.asarray(s["size"], dtype=float))}" {at}/>')
        elif kind == "rectangle":
            a, b = (0.5 * np.asarray(s["size"], dtype=float)).tolist()
            out.append(f'<geom type="box" size="{_fmt([a, b, 0.5 * min(a, b)])}" {at}/>')
        elif kind == "sphere":
            out.append(f'<geom type="sphere" size="{float(s["radius"])!r}" {at}/>')
    return out


def _mjcf_inertial(body: Body) -> str:
    inertia = body.inertia
    if np.allclose(inertia, np.diag(np.diag(inertia))):
        return f'<inertial pos="0 0 0" mass="{body.mass!r}" diaginertia="{_fmt(np.diag(inertia))}"/>'
    full = [inertia[0, 0], inertia[1, 1], inertia[2, 2], inertia[0, 1], inertia[0, 2], inertia[1, 2]]
    return f'<inertial pos="0 0 0" mass="{body.mass!r}" fullinertia="{_fmt(full)}"/>'


def mjcf_tree(
    system: System, integrator: str = "RK4", geom_attrs: str = 'contype="0" conaffinity="0"', joint_attrs: str = ""
) -> str:
    """MJCF of a tree system: nested bodies (frame = mbsim's body frame, origin at the centre of
    mass), ball / hinge / slide joints at mbsim's joint points (with ``joint_attrs``, e.g. a
    damping), explicit inertials (``diaginertia`` when the inertia is diagonal in body axes), geoms
    of the shapes at their poses with ``geom_attrs`` (no contacts by default), bodies without a
    joint free."""
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
            if joint_attrs:
                attrs += f" {joint_attrs}"
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


def tower_mjcf(spec, system: System, friction: float) -> str:
    """Free boxes on the ground's planes (scenes/box_stack.yaml), MuJoCo's Newton solver with its
    elliptic cone (Coulomb's round cone, as mbsim's), the scene's step."""
    planes = [
        f'<geom type="plane" size="0 0 1" pos="{_fmt(s["point"])}" zaxis="{_fmt(s["normal"])}"/>'
        for s in spec.ground_shapes
    ]
    bodies = []
    for b in system.bodies:
        half = 0.5 * np.asarray(b.shapes[0]["size"], dtype=float)
        bodies.append(
            f'<body name="{b.name}" pos="{_fmt(b.pos)}"><freejoint/><geom type="box" size="{_fmt(half)}" '
            f'mass="{b.mass!r}"/></body>'
        )
    return "\n".join(
        [
            f'<mujoco model="{system.name}">',
            f'  <option timestep="{system.step!r}" solver="Newton" cone="elliptic" gravity="{_fmt(system.gravity)}"/>',
            f'  <default><geom condim="3" friction="{friction!r} 0.005 0.0001"/></default>',
            "  <worldbody>",
            *[f"    {p}" for p in planes],
            *[f"    {b}" for b in bodies],
            "  </worldbody>",
            "</mujoco>",
        ]
    )


def rolling_mjcf(system: System, floor: str, friction: float, asset: str = "") -> str:
    """The ball of the rolling cases (one free body, its sphere geom) on the ground geom ``floor``
    (MJCF text: a box, or a mesh geom of ``asset``), RK4 at the scene's step, sliding friction
    ``friction`` (condim 3), MuJoCo's default soft contact (solref 0.02 1)."""
    (ball,) = system.bodies
    radius = float(ball.shapes[0]["radius"])
    return "\n".join(
        [
            f'<mujoco model="{system.name}">',
            f'  <option timestep="{system.step!r}" integrator="RK4" gravity="{_fmt(system.gravity)}"/>',
            f"  <asset>{asset}</asset>" if asset else "",
            f'  <default><geom condim="3" friction="{friction!r} 0.005 0.0001"/></default>',
            "  <worldbody>",
            f"    {floor}",
            f'    <body name="{ball.name}" pos="{_fmt(ball.pos)}"><freejoint/>{_mjcf_inertial(ball)}'
            f'<geom type="sphere" size="{radius!r}"/></body>',
            "  </worldbody>",
            "</mujoco>",
        ]
    )


def arm_floor_mjcf(system: System, floor: str, friction: float, damping: float) -> str:
    """The arm of case arm7_floor: ``mjcf_tree`` of the system (hinges with viscous ``damping``,
    N m s/rad; the hand's box geom colliding, the only geom of a body) and the world geom ``floor``
    (MJCF text), RK4 at the scene's step, sliding friction ``friction`` (condim 3), MuJoCo's default
    soft contact (solref 0.02 1): the only contact is the hand's box on the floor."""
    xml = mjcf_tree(system, integrator="RK4", geom_attrs="", joint_attrs=f'damping="{damping!r}"')
    default = f'  <default><geom condim="3" friction="{friction!r} 0.005 0.0001"/></default>'
    xml = xml.replace("  <worldbody>", f"{default}\n  <worldbody>\n    {floor}", 1)
    return xml
