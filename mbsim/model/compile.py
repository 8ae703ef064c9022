"""SceneSpec -> Model: mass properties, frames, joints, forces; every check that can fail
before a run fails here, before any output file exists.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from mbsim.errors import did_you_mean
from mbsim.model.actuators import read_actuators
from mbsim.model.constraints import Primitive, batch
from mbsim.model.contact.compliant import build_compliant
from mbsim.model.contact.pairs import resolve_contact_pairs
from mbsim.model.dynamics import JointCoordinates
from mbsim.model.forces import FORCE_TYPES, BuildSetup
from mbsim.model.joint_forces import SPRING_FIELDS, read_friction, read_limits, resolve_stops
from mbsim.model.joints import JOINT_TYPES, JointFrame
from mbsim.model.model import JointInfo, Model
from mbsim.model.shapes import SHAPE_TYPES, composite_mass_properties, read_shape
from mbsim.model.signals import Signals, read_outputs
from mbsim.model.spatial import planar_rotation, quat_to_matrix
from mbsim.scene.fields import Context, Expr, Field, Vector, read_mapping
from mbsim.scene.load import KeyPath
from mbsim.scene.readers import check_inertia
from mbsim.scene.spec import SceneSpec

SPARSE_ABOVE_NV = 150  # velocity coordinates above which linear algebra goes sparse (benchmarks/)

DRIVE_FIELDS = {
    "position": Field(Expr(frozenset({"t"})), "prescribed joint coordinate as a function of t (rad or m)"),
}


def _read_bodies(spec: SceneSpec, ctx: Context):
    nb = len(spec.bodies)
    d = spec.dimension
    masses = np.zeros(nb)
    inertias = np.zeros((nb, 3, 3)) if d == 3 else np.zeros((nb, 1, 1))
    shapes: dict[str, list[dict[str, Any]]] = {}
    base = spec.raw.base_dir
    ground_shapes = [read_shape(ctx, ("ground", "shapes", k), s, base, True) for k, s in enumerate(spec.ground_shapes)]
    shapes["ground"] = ground_shapes
    for b, body in enumerate(spec.bodies):
        body_shapes = [read_shape(ctx, (*body.path, "shapes", k), s, base, False) for k, s in enumerate(body.shapes)]
        seen: set[str] = set()
        for k, s in enumerate(body_shapes):
            if s.get("name") is not None:
                if s["name"] in seen:
                    where = (*body.path, "shapes", k, "name")
                    raise ctx.error(where, f"duplicate shape name '{s['name']}' on this body")
                seen.add(s["name"])
        if body.density is not None:
            mass, com, inertia = composite_mass_properties(ctx, body.path, body_shapes, body.density, d)
            # the body frame sits at the centre of mass: shapes are re-expressed about it
            for s in body_shapes:
                SHAPE_TYPES[s["type"]].move(s, -com)
            if d == 3:
                check_inertia(ctx, (*body.path, "shapes"), inertia)
        else:
            mass, inertia = body.mass, body.inertia
        masses[b] = mass
        inertias[b] = inertia
        shapes[body.name] = body_shapes
    return masses, inertias, shapes


def _initial_state(spec: SceneSpec):
    d = spec.dimension
    nb = len(spec.bodies)
    if d == 3:
        q0 = np.concatenate([np.concatenate((b.position, b.orientation)) for b in spec.bodies])
        v0 = []
        for b in spec.bodies:
            rot = quat_to_matrix(b.orientation)
            v0.append(np.concatenate((b.velocity, rot.T @ b.angular_velocity)))
        v0 = np.concatenate(v0)
        pos0 = np.vstack([q0.reshape(nb, 7)[:, :3], np.zeros((1, 3))])
        rot0 = np.concatenate((quat_to_matrix(q0.reshape(nb, 7)[:, 3:]), np.eye(3)[None]))
    else:
        q0 = np.concatenate([np.concatenate((b.position, b.orientation)) for b in spec.bodies])
        v0 = np.concatenate([np.concatenate((b.velocity, b.angular_velocity)) for b in spec.bodies])
        pos0 = np.vstack([q0.reshape(nb, 3)[:, :2], np.zeros((1, 2))])
        rot0 = planar_rotation(np.append(q0.reshape(nb, 3)[:, 2], 0.0))
    return q0, v0, pos0, rot0


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _joint_frame(ctx: Context, item, values, kind, body_index, pos0, rot0, d) -> JointFrame:
    path = item.path
    i = _body(ctx, (*path, "body1"), values["body1"], body_index)
    j = _body(ctx, (*path, "body2"), values["body2"], body_index)
    if i == j:
        raise ctx.error((*path, "body2"), f"body1 and body2 must differ, got '{values['body2']}' twice")
    has_point = values["point"] is not None
    has_pair = values["point1"] is not None or values["point2"] is not None
    if has_point and has_pair:
        raise ctx.error(path, "give either point or point1 + point2, not both")
    if has_pair and (values["point1"] is None or values["point2"] is None):
        raise ctx.error(path, "point1 and point2 go together; one of them is missing")
    if has_point:
        world = values["point"]
        s_i = rot0[i].T @ (world - pos0[i])
        s_j = rot0[j].T @ (world - pos0[j])
    elif has_pair:
        s_i, s_j = values["point1"], values["point2"]
        world = pos0[j] + rot0[j] @ s_j
    else:
        raise ctx.error(
            path, f"missing the joint location: give point (world, t = 0) or point1 + point2 for a {kind.name} joint"
        )
    axis_i = axis_j = None
    if values["axis"] is not None:
        axis = _unit(values["axis"])
        axis_i, axis_j = rot0[i].T @ axis, rot0[j].T @ axis
    elif d == 2:
        axis_i = axis_j = np.array([1.0, 0.0])  # unused by planar revolute and fixed
    axes = None
    if values["axes"] is not None:
        raw = values["axes"]
        if not isinstance(raw, list) or len(raw) != 2:
            raise ctx.error((*path, "axes"), f"expected two axes [[..], [..]], got {raw!r}")
        a1, a2 = (_unit(Vector(3, nonzero=True).read(ctx, (*path, "axes", k), raw[k])) for k in range(2))
        if abs(a1 @ a2) > 1e-6:
            raise ctx.error(
                (*path, "axes"),
                f"the two axes of a universal joint must be perpendicular, "
                f"got an angle of {np.degrees(np.arccos(np.clip(a1 @ a2, -1, 1))):.4g} deg",
            )
        axes = (rot0[i].T @ a1, rot0[j].T @ a2)
    return JointFrame(i, j, s_i, s_j, world, axis_i, axis_j, rot0[i], rot0[j], axes, d)


def _body(ctx: Context, path: KeyPath, name: str, body_index: dict[str, int]) -> int:
    if name not in body_index:
        raise ctx.error(
            path, f"unknown body '{name}'; expected one of {', '.join(body_index)}", did_you_mean(name, body_index)
        )
    return body_index[name]


class _JointPart(NamedTuple):
    """A scene joint as compile_model assembles it (JointInfo's makings; couplings read it)."""

    name: str
    type: str
    body_i: int
    body_j: int
    prims: list
    drive: Primitive | None
    point2: np.ndarray
    frame: JointFrame
    initial: float
    armature: float


def _couplings(spec: SceneSpec, ctx: Context, joint_parts: list[_JointPart]) -> list[Primitive]:
    """One ``coupling`` primitive per couplings: entry: joint = ratio * leader + offset in the
    coordinates that count from each joint's ``initial`` (mbsim.model.constraints)."""
    by_name = {part.name: part for part in joint_parts}
    out = []
    for item in spec.couplings:
        v = item.values
        coords = []
        for key in ("joint", "leader"):
            part = by_name.get(v[key])
            if part is None:
                raise ctx.error((*item.path, key), f"no joint '{v[key]}'", did_you_mean(v[key], by_name))
            kind = JOINT_TYPES[part.type]
            prim = kind.coordinate_primitive(part.frame)
            if prim is None:
                raise ctx.error((*item.path, key), f"joint '{v[key]}' ({kind.name}) has no coordinate to couple")
            coords.append((prim, part.initial))
        (a, init_a), (b, init_b) = coords
        if v["joint"] == v["leader"]:
            raise ctx.error((*item.path, "leader"), "a joint cannot follow itself")
        offset = v["ratio"] * init_b + v["offset"] - init_a  # (value_a - off_a) - ratio (value_b - off_b)
        out.append(
            Primitive(
                "coupling", a.body_i, a.body_j, {}, [f"{item.name}: coupling"], offset=offset, parts=(a, b, v["ratio"])
            )  # fmt: skip
        )
    return out


def compile_model(spec: SceneSpec) -> Model:
    """Build the Model of a checked scene (initial state as given; see solvers.numerics.projection.assemble)."""
    ctx = spec.ctx
    d = spec.dimension
    nb = len(spec.bodies)
    masses, inertias, shapes = _read_bodies(spec, ctx)
    q0, v0, pos0, rot0 = _initial_state(spec)
    body_index = {b.name: k for k, b in enumerate(spec.bodies)}
    body_index["ground"] = nb

    # joints -> primitives
    constraint_prims: list[Primitive] = []
    # the joint-coordinate table (mbsim.model.joint_forces): every joint with a coordinate, one
    # primitive measuring it from the joint's `initial` origin, and its forces' parameters
    coordinate_prims: list[tuple[Primitive, dict[str, Any]]] = []
    coordinate_row: dict[str, int] = {}
    joint_parts: list[_JointPart] = []
    for item in spec.joints:
        path = item.path
        kind = JOINT_TYPES.get(item.type)
        names = [n for n, jt in JOINT_TYPES.items() if d in jt.dimensions]
        if kind is None or d not in kind.dimensions:
            where = "" if kind is None else f" in a {d}D scene"
            raise ctx.error(
                (*path, "type"),
                f"unknown joint type '{item.type}'{where}; expected one of {', '.join(names)}",
                did_you_mean(item.type, names),
            )
        allowed = {"name", "type", "body1", "body2"} | kind.allowed_keys(d)
        for key in item.raw:
            if key not in allowed:
                raise ctx.error(
                    (*path, key),
                    f"a {d}D {kind.name} joint has no key '{key}'; expected one of {', '.join(sorted(allowed))}",
                    did_you_mean(key, allowed),
                )
        for key in kind.required_keys(d):
            if item.values.get(key) is None:
                raise ctx.error(path, f"missing required key '{key}' for a {kind.name} joint")
        frame = _joint_frame(ctx, item, item.values, kind, body_index, pos0, rot0, d)
        prims = kind.primitives(frame)
        for p in prims:
            p.labels = [f"{item.name}: {label}" for label in p.labels]
        drive_prim = None
        initial = item.values.get("initial") or 0.0  # only the types with one coordinate take the key
        if item.values["drive"] is not None:
            drive = read_mapping(ctx, (*path, "drive"), item.values["drive"], DRIVE_FIELDS)
            drive_prim = kind.coordinate_primitive(frame)
            drive_prim.offset -= initial  # the primitive measures from t = 0; the drive from `initial`
            drive_prim.drive = drive["position"]
            drive_prim.labels = [f"{item.name}: drive {kind.coordinate}"]
            prims = [*prims, drive_prim]
        spring = None
        if item.values["spring"] is not None:
            spring = read_mapping(ctx, (*path, "spring"), item.values["spring"], SPRING_FIELDS)
        limits = read_limits(ctx, (*path, "limits"), item.values.get("limits"))
        friction = read_friction(ctx, (*path, "friction"), item.values.get("friction"))
        if drive_prim is not None:
            for key in ("limits", "friction", "effort"):
                if item.values.get(key) is not None:
                    raise ctx.error((*path, key), f"a driven joint (drive: prescribed motion) takes no {key}")
        coordinate_prim = kind.coordinate_primitive(frame) if kind.coordinate is not None else None
        if coordinate_prim is not None:
            coordinate_prim.offset -= initial  # measured from the joint's `initial` origin
            coordinate_prim.labels = [f"{item.name}: {kind.coordinate}"]
            forces_on = {"spring": spring, "limits": limits, "friction": friction, "initial": initial,
                         "effort": item.values.get("effort")}  # fmt: skip
            coordinate_prims.append((coordinate_prim, forces_on, item.name))
        constraint_prims.extend(prims)
        point2 = frame.s_j if frame.body_j < nb else frame.s_i
        joint_parts.append(
            _JointPart(
                item.name,
                kind.name,
                frame.body_i,
                frame.body_j,
                prims,
                drive_prim,
                point2,
                frame,
                initial,
                item.values.get("armature") or 0.0,
            )  # fmt: skip
        )

    constraint_prims += _couplings(spec, ctx, joint_parts)
    groups, nc = batch(constraint_prims, 0, d)
    row_labels = [""] * nc
    for p in constraint_prims:
        for r, label in zip(p.rows, p.labels, strict=True):
            row_labels[r] = label
    joints = [
        JointInfo(
            name,
            jtype,
            bi,
            bj,
            np.concatenate([p.rows for p in prims]) if prims else np.zeros(0, int),
            int(drive.rows[0]) if drive is not None else None,
            point2,
            frame=frame,
            drive=drive.drive if drive is not None else None,
            initial=initial,
            armature=armature,
        )
        for name, jtype, bi, bj, prims, drive, point2, frame, initial, armature in joint_parts
    ]
    coordinate_tables = []
    forces_of: dict[str, dict[str, Any]] = {}
    if coordinate_prims:
        # batched by primitive kind: a joint's row is where its kind's group put it
        sgroups, ncoord = batch([p for p, _, _ in coordinate_prims], 0, d)
        coordinate_tables = [
            JointCoordinates(sgroups, ncoord, [(p.rows, forces_on) for p, forces_on, _ in coordinate_prims])
        ]
        for p, forces_on, name in coordinate_prims:
            coordinate_row[name], forces_of[name] = int(p.rows[0]), forces_on
    for info in joints:
        info.coordinate_row = coordinate_row.get(info.name)
        if info.coordinate_row is not None:
            forces_on = forces_of[info.name]
            info.limits, info.friction, info.effort = forces_on["limits"], forces_on["friction"], forces_on["effort"]

    # what expressions may read from here on (forces, actuators, outputs): the signals
    ctx.signals = Signals(d, [b.name for b in spec.bodies], coordinate_row)

    # forces, batched per type
    setup = BuildSetup(ctx, body_index, pos0, rot0, nb)
    by_type: dict[str, list] = {}
    for item in spec.forces:
        ftype = FORCE_TYPES.get(item.type)
        if ftype is None:
            raise ctx.error(
                (*item.path, "type"),
                f"unknown force type '{item.type}'; expected one of {', '.join(FORCE_TYPES)}",
                did_you_mean(item.type, FORCE_TYPES),
            )
        values = read_mapping(ctx, item.path, item.raw, ftype.FIELDS)
        by_type.setdefault(item.type, []).append((item, values))
    forces = [FORCE_TYPES[name].build(items, setup) for name, items in by_type.items()]
    driven = {info.name: (info.type, info.drive_row is not None) for info in joints}
    actuators = read_actuators(ctx, spec.actuators, coordinate_row, driven)
    ctx.signals = ctx.signals.where(("t",), [a.name for a in actuators])
    outputs = read_outputs(ctx, spec.outputs)
    # compliant contacts are force elements too (every method takes them)
    # the step taken in contact (fixed-step integrators) for the stick limiter; none under implicit steps,
    # whose Jacobian holds friction's slope (the limiter exists only for the explicit step's stability)
    implicit = spec.solver.contact_integration == "implicit"
    stick_step = 0.0 if implicit else spec.contact_step or spec.step
    compliant = build_compliant(ctx, spec.contacts, body_index, shapes, nb, d, masses, inertias, stick_step)
    if compliant is not None:
        forces.append(compliant)

    # contacts: body sets resolved and checked here; which methods take them is the solver's business
    contact_pairs = resolve_contact_pairs(ctx, spec.contacts, body_index, shapes)
    # shapes in rigid contacts must suit it (meshes are looked up in their signed distance fields: closed ones only)
    for name, body_shapes in shapes.items():
        if not contact_pairs.body_active[body_index[name]]:
            continue
        for shape in body_shapes:
            SHAPE_TYPES[shape["type"]].check_contact(ctx, shape)

    nv = nb * (6 if d == 3 else 3)
    model = Model(
        name=spec.name,
        dimension=d,
        nbody=nb,
        nq=nb * (7 if d == 3 else 3),
        nv=nv,
        nc=nc,
        body_names=tuple(b.name for b in spec.bodies),
        body_mass=masses,
        body_inertia=inertias,
        gravity=np.asarray(spec.gravity, dtype=float),
        q0=q0,
        v0=v0,
        groups=groups,
        couplings=tuple(c.name for c in spec.couplings),
        row_labels=row_labels,
        joints=joints,
        joint_coordinates=coordinate_tables,
        forces=forces,
        actuators=actuators,
        outputs=outputs,
        signals=ctx.signals,
        sparse=nv > SPARSE_ABOVE_NV,
        t_end=spec.t_end,
        step=spec.step,
        contact_step=spec.contact_step,
        contact_implicit=implicit,
        output_every=spec.output_every,
        output_interval=spec.output_interval,
        scene_text=spec.raw.to_yaml(),
        shapes=shapes,
        contacts=list(spec.contacts),
    )
    model.contact_pairs = contact_pairs  # which bodies may touch (mbsim.model.contact.pairs)
    resolve_stops(model, ctx)
    return model
