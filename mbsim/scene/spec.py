"""The scene as checked data: the generic keys of CONTRACT §1 and the frozen ``SceneSpec``.

Keys common to every item (a body's mass, a joint's bodies) are checked here; the keys that
belong to one joint, shape or force type stay raw (with their key path) and are checked by
that type's own field table when the model is compiled (``mbsim.model.compile``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mbsim.names import CONTACT_DATASETS, check_name
from mbsim.scene.expr import ExpressionError, compile_expression
from mbsim.scene.fields import (
    Boolean,
    Choice,
    Context,
    Custom,
    Field,
    Name,
    Number,
    Raw,
    Sub,
    Text,
    Vector,
    _cut,
    kind_of,
    read_mapping,
)
from mbsim.scene.load import KeyPath, RawScene, load_raw_scene
from mbsim.scene.readers import check_inertia, read_orientation

FORMAT_VERSION = 1
MAX_STEPS = 1_000_000_000  # default of solver.max_steps


# ----------------------------------------------------------------------------- readers


def _read_inertia(ctx: Context, path: KeyPath, value: Any) -> np.ndarray:
    """Inertia about the centre of mass in body axes -> (3, 3) matrix, or (1, 1) in 2D."""
    if ctx.dimension == 2:
        return np.array([[Number(positive=True).read(ctx, path, value)]])
    if isinstance(value, list) and len(value) == 3 and all(not isinstance(v, list) for v in value):
        diag = Vector(3).read(ctx, path, value)
        inertia = np.diag(diag)
    elif isinstance(value, list) and len(value) == 3 and all(isinstance(v, list) for v in value):
        inertia = np.array([Vector(3).read(ctx, (*path, i), row) for i, row in enumerate(value)])
        if not np.allclose(inertia, inertia.T, rtol=1e-9, atol=1e-12):
            raise ctx.error(path, "expected a symmetric 3x3 inertia matrix")
    else:
        raise ctx.error(path, f"expected 3 principal values or a 3x3 matrix, got {kind_of(value)}")
    check_inertia(ctx, path, inertia)
    return inertia


def _read_angular(ctx: Context, path: KeyPath, value: Any) -> np.ndarray:
    if ctx.dimension == 2:
        return np.array([Number().read(ctx, path, value)])
    return Vector(3).read(ctx, path, value)


def _read_body_set(ctx: Context, path: KeyPath, value: Any) -> str | list[str]:
    """A contact's body1/body2: a body name, a list of names or a glob pattern (resolved at compile)."""
    what = "expected a body name, a list of names or a pattern (e.g. 'ball*')"
    if isinstance(value, list) and value:
        for k, item in enumerate(value):
            if not isinstance(item, str) or not item:
                raise ctx.error((*path, k), f"{what}, got {kind_of(item)} in the list")
        return list(value)
    if not isinstance(value, str) or not value:
        raise ctx.error(path, f"{what}, got {kind_of(value)}")
    return value


def _read_description(ctx: Context, path: KeyPath, value: Any) -> str:
    """Free text of any length the loader accepts (not a list, mapping, number or date)."""
    if not isinstance(value, str):
        raise ctx.error(path, f"expected a text, got {kind_of(value)}")
    return value


def _read_list(ctx: Context, path: KeyPath, value: Any) -> list:
    if not isinstance(value, list):
        raise ctx.error(path, f"expected a list, got {kind_of(value)}")
    return value


def _read_thresholds(ctx: Context, path: KeyPath, value: Any) -> np.ndarray:
    if not isinstance(value, list) or not value:
        raise ctx.error(path, f"expected a list of penetrations in m, got {kind_of(value)}")
    got = np.array([Number(positive=True).read(ctx, (*path, k), v) for k, v in enumerate(value)])
    if np.any(np.diff(got) <= 0):
        more = f" ... ({len(got)} values)" if len(got) > 10 else ""
        raise ctx.error(path, f"expected ascending penetrations, got {got[:10].tolist()}{more}")
    return got


# ----------------------------------------------------------------------------- tables

TIME_FIELDS = {
    "end": Field(Number(positive=True), "end time of the run, s"),
    "step": Field(Number(positive=True), "the fixed step, or the first step of an adaptive integrator, s"),
    "contact_step": Field(
        Number(positive=True),
        "step while the bounding boxes of a compliant pair overlap (or will within one step); "
        "time.step elsewhere (the paper's step control); default: time.step throughout",
        None,
    ),
}

SOLVER_FIELDS = {
    "method": Field(Text(), "solver method (see the table of methods)", "lagrange"),
    "integrator": Field(
        Text(), "euler, semi_implicit_euler, rk4, scipy:RK45, scipy:DOP853, scipy:Radau, scipy:BDF", "rk4"
    ),
    "contact_integration": Field(
        Choice(("explicit", "implicit")),
        "implicit: while a compliant pair's bounding boxes overlap (or will within a step), the fixed steps are "
        "linearly implicit in the contact forces (a Rosenbrock-W step, ROS34PW2, with the contacts' stiffness and "
        "damping as its Jacobian), so a stiff contact runs at time.step; explicit: the integrator's steps "
        "throughout (with time.contact_step where given). Methods lagrange, null_space, gauss, "
        "augmented_lagrangian and recursive with a fixed-step integrator",
        "explicit",
    ),
    "rtol": Field(Number(positive=True), "relative tolerance of the adaptive integrators", 1e-8),
    "atol": Field(Number(positive=True), "absolute tolerance of the adaptive integrators", 1e-10),
    "max_violation": Field(Number(positive=True), "a run whose position violation passes this fails (exit 3)", 1e-3),
    "divergence": Field(
        Number(positive=True),
        "a run whose energy error or kinetic energy passes this many times the energy its initial state "
        "and inputs can supply has diverged and fails (exit 3)",
        1e6,
    ),
    "max_steps": Field(
        Number(minimum=1),
        "most steps a run may take: a scene whose time.end / time.step (or time.end / time.contact_step) "
        "passes this, or whose output.every does, is refused before it runs (exit 2) instead of running "
        "for days; raise it for a long run",
        MAX_STEPS,
    ),
}

OUTPUT_FIELDS = {
    "file": Field(Text(), "result file; relative to the current directory", None),
    "every": Field(Number(minimum=1, integer=True), "record every n-th step", 1),
    "interval": Field(
        Number(positive=True),
        "record at exact multiples of this time, s (dense output of the adaptive integrators; a multiple "
        "of time.step for the fixed-step ones), plus the last step and, under event_driven, the events; "
        "instead of output.every",
        None,
    ),
}

SHAPE_COMMON = ("type", "pose")

GROUND_FIELDS = {
    "shapes": Field(Custom(_read_list, "a list of shapes"), "shapes fixed to the world", []),
}

BODY_FIELDS = {
    "name": Field(Name(), "unique name; 'ground' is reserved"),
    "mass": Field(Number(positive=True), "mass, kg (or give density and shapes)", None),
    "density": Field(Number(positive=True), "density, kg/m^3 (kg/m^2 in 2D); mass and inertia from the shapes", None),
    "inertia": Field(
        Custom(_read_inertia, "3 principal values or a 3x3 matrix; one number in 2D"),
        "inertia about the centre of mass in body axes, kg m^2",
        None,
    ),
    "position": Field(Vector("dim"), "centre of mass at t = 0, world frame, m"),
    "orientation": Field(
        Custom(
            read_orientation,
            "{euler: {sequence, angles}}, {quaternion: [w,x,y,z]} or {axis_angle: {axis, angle}}; one angle in 2D",
        ),
        "orientation at t = 0",
        None,
    ),
    "velocity": Field(Vector("dim"), "centre-of-mass velocity at t = 0, world frame, m/s", None),
    "angular_velocity": Field(
        Custom(_read_angular, "3 numbers; one in 2D"), "angular velocity at t = 0, world frame, rad/s", None
    ),
    "shapes": Field(Custom(_read_list, "a list of shapes"), "geometry (mass derivation, contact, pictures)", []),
}

JOINT_FIELDS = {
    "name": Field(Name(), "unique joint name"),
    "type": Field(Text(), "joint type"),
    "body1": Field(Text(), "first body (or ground)"),
    "body2": Field(Text(), "second body"),
    "point": Field(Vector("dim"), "world position of the joint at t = 0", None),
    "point1": Field(Vector("dim"), "joint point in body1's frame (with point2; the start is assembled)", None),
    "point2": Field(Vector("dim"), "joint point in body2's frame", None),
    "axis": Field(Vector("dim", nonzero=True), "joint axis, world direction at t = 0", None),
    "axes": Field(Raw("two axes"), "universal: first axis fixed in body1, second in body2 (world, t = 0)", None),
    "drive": Field(Raw("{position: expression of t}"), "prescribed joint coordinate", None),
    "spring": Field(Raw("{stiffness, damping, rest}"), "spring on the joint coordinate", None),
    "armature": Field(
        Number(minimum=0),
        "inertia on the joint coordinate, kg m^2 or kg (MuJoCo's armature: a rotor's reflected inertia); "
        "method recursive only",
        0.0,
    ),
    # the forces on a joint coordinate, checked by mbsim.model.joint_forces (revolute, prismatic)
    "limits": Field(Raw("{lower, upper, restitution, stiffness, damping}"), "limits of the coordinate, enforced", None),
    "friction": Field(
        Raw("a number or {coulomb, static, stribeck_velocity, viscous, smoothing}"), "friction on the coordinate", None
    ),
    "effort": Field(Number(positive=True), "the most force the actuators on the joint apply together, N m or N", None),
    "initial": Field(
        Number(),
        "the joint coordinate at t = 0 (rad or m): its drive, spring rest, couplings and /q (recursive) "
        "count from the origin this puts it at; joints with one coordinate",
        0.0,
    ),
}

COUPLING_FIELDS = {
    "name": Field(Name(), "unique coupling name"),
    "joint": Field(Text(), "the coupled joint (revolute or prismatic): its coordinate = ratio * leader's + offset"),
    "leader": Field(Text(), "the joint whose coordinate it follows"),
    "ratio": Field(Number(), "the coordinates' ratio (URDF mimic multiplier)", 1.0),
    "offset": Field(Number(), "rad or m (URDF mimic offset); coordinates count from each joint's initial", 0.0),
}

FORCE_FIELDS_COMMON = ("type",)

BODY_SET = Custom(_read_body_set, "a body name, a list of names or a glob pattern ('ball*', '*')")

CONTACT_FIELDS = {
    "name": Field(
        Name(tuple(sorted(CONTACT_DATASETS))),
        "contact name (a compliant contact's series are /diagnostics/contacts/NAME/...)",
        None,
    ),
    "type": Field(Choice(("rigid", "compliant")), "rigid (timestepping) or compliant (force)"),
    "body1": Field(BODY_SET, "first body (master for compliant contacts); rigid: a list or pattern allowed"),
    "body2": Field(BODY_SET, "second body (slave); rigid: every pair between the two sets, the later entry wins"),
    "restitution": Field(
        Number(minimum=0, maximum=1),
        "coefficient of restitution e: rigid, Newton's; compliant hunt_crossley, lankarani_nikravesh: at impact_speed",
        0.0,
    ),
    "friction": Field(
        Raw("a number or a mapping"),
        "rigid: Coulomb's mu; compliant: a number (law coulomb) or the keys of a friction law (contact laws below)",
        0.0,
    ),
    "law": Field(Text(), "compliant: the normal force law (contact laws below); default: hertz", None),
    "stiffness": Field(Number(positive=True), "compliant: k in f_N = k g^n + ...", None),
    "exponent": Field(Number(positive=True), "compliant: n", 1.0),
    "damping": Field(Number(minimum=0), "compliant hertz: chi in f_N = k g^n + chi g^m dg/dt", 0.0),
    "damping_exponent": Field(Number(minimum=0), "compliant hertz: m", 0.0),
    "impact_speed": Field(
        Number(positive=True),
        "compliant hunt_crossley, lankarani_nikravesh: the approach speed v0 at which the contact restitutes e, m/s",
        None,
    ),
    "shape1": Field(Text(), "compliant: the master's shape by name (when body1 has several solid shapes)", None),
    "shape2": Field(Text(), "compliant: the slave's shape by name (when body2 has several solid shapes)", None),
    "sdf": Field(Raw("{cell, padding}"), "signed distance field grid of the master shape", None),
    "detection": Field(
        Choice(("sdf_octree", "sdf", "brute_force")),
        "compliant: OBB test then octree-culled SDF queries (sdf_octree), SDF queries of every sample point (sdf), "
        "or exact point-to-mesh distances every evaluation (brute_force, trimesh; for comparison only)",
        "sdf_octree",
    ),
    "samples": Field(
        Number(minimum=0, integer=True),
        "compliant: sample points spread evenly over the slave's surface, besides its mesh vertices (seeded)",
        0,
    ),
    "penetration_classes": Field(
        Custom(_read_thresholds, "ascending penetrations, m"),
        "compliant: split the contact-point count at these penetrations "
        "(recorded as /diagnostics/contacts/NAME/class_counts)",
        None,
    ),
    "enabled": Field(Boolean(), "switch the contact off without deleting it", True),
}

SCENE_FIELDS = {
    "mbsim": Field(Number(integer=True, minimum=1, maximum=FORMAT_VERSION), "format version (1)"),
    "name": Field(Name(), "scene name"),
    "description": Field(Custom(_read_description, "text"), "free text", ""),
    "dimension": Field(Choice((2, 3)), "3 (default) or 2 (planar: x, y, angle)", 3),
    "parameters": Field(Raw("mapping of names to numbers"), "named numbers usable in every expression", None),
    "gravity": Field(Vector("dim"), "gravitational acceleration, m/s^2", None),
    "initial": Field(
        Choice(("given", "equilibrium")),
        "the start: given (the bodies' positions and velocities, assembled onto the joints) or equilibrium "
        "(the static equilibrium nearest them, at rest: mbsim equilibrium)",
        "given",
    ),
    "time": Field(Sub(TIME_FIELDS, "time"), "end and step"),
    "solver": Field(Raw("mapping"), "method, integrator, tolerances and method options", None),
    "output": Field(Sub(OUTPUT_FIELDS, "output"), "result file and recording", None),
    "ground": Field(Sub(GROUND_FIELDS, "ground"), "the fixed world body", None),
    "bodies": Field(Custom(_read_list, "a list of bodies"), "rigid bodies"),
    "joints": Field(Custom(_read_list, "a list of joints"), "joints between bodies", []),
    "forces": Field(Custom(_read_list, "a list of forces"), "force elements", []),
    "contacts": Field(Custom(_read_list, "a list of contacts"), "contact pairs", []),
    "couplings": Field(
        Custom(_read_list, "a list of couplings"),
        "linear relations between joint coordinates (constraints; URDF mimic, MJCF joint equality)",
        [],
    ),
    "models": Field(
        Raw("a list of models"), "bodies and joints from URDF and MJCF files (see the models reference)", None
    ),
    "actuators": Field(
        Custom(_read_list, "a list of actuators"), "forces on joint coordinates (see the actuators reference)", []
    ),
    "outputs": Field(
        Custom(_read_list, "a list of outputs"), "named expressions recorded per row as /outputs/NAME", []
    ),
}


# ----------------------------------------------------------------------------- specs


@dataclass(frozen=True)
class ItemSpec:
    """A list item whose type-specific keys are checked later; ``path`` locates it."""

    name: str
    type: str
    path: KeyPath
    values: dict[str, Any]  # the generic keys, checked
    raw: dict[str, Any]  # the item as written


@dataclass(frozen=True)
class BodySpec:
    name: str
    path: KeyPath
    mass: float | None
    density: float | None
    inertia: np.ndarray | None
    position: np.ndarray
    orientation: np.ndarray  # quaternion (w, x, y, z) in 3D, [angle] in 2D
    velocity: np.ndarray
    angular_velocity: np.ndarray  # world frame; [w] in 2D
    shapes: list[dict[str, Any]]


@dataclass(frozen=True)
class SolverSpec:
    method: str
    integrator: str
    contact_integration: str
    rtol: float
    atol: float
    max_violation: float
    divergence: float
    max_steps: float
    options: dict[str, Any]  # method-specific keys, checked by the solver's Options
    path: KeyPath = ("solver",)


@dataclass(frozen=True)
class SceneSpec:
    """Everything of the scene file, checked where it can be checked without the model."""

    raw: RawScene
    ctx: Context
    name: str
    description: str
    dimension: int
    parameters: dict[str, float]
    gravity: np.ndarray
    t_end: float
    step: float
    solver: SolverSpec
    contact_step: float | None
    output_file: str | None
    output_every: int
    output_interval: float | None
    ground_shapes: list[dict[str, Any]]
    bodies: list[BodySpec]
    joints: list[ItemSpec]
    forces: list[ItemSpec]
    contacts: list[ItemSpec]
    body_names: tuple[str, ...] = field(default=())
    imported: list = field(default_factory=list)  # mbsim.models.Imported per models: entry
    couplings: list = field(default_factory=list)  # ItemSpec per couplings: entry (type "coupling")
    actuators: list = field(default_factory=list)  # the raw actuators: entries (mbsim.model.actuators)
    outputs: list = field(default_factory=list)  # the raw outputs: entries (mbsim.model.signals)
    initial: str = "given"  # the start: given, or equilibrium (mbsim.analysis.equilibrium)


def _read_parameters(ctx: Context, value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ctx.error(("parameters",), f"expected a mapping of names to numbers, got {kind_of(value)}")
    reserved = {"t", "pi", "e", "x", "y", "z", "vx", "vy", "vz", "wx", "wy", "wz", "w", "angle"}
    out: dict[str, float] = {}
    for key, val in value.items():
        path = ("parameters", key)
        if not key.isidentifier() or key in reserved:
            raise ctx.error(path, f"'{key}' cannot be a parameter name (reserved or not a name)")
        if isinstance(val, bool) or not isinstance(val, (int, float, str)):
            raise ctx.error(path, f"expected a number or an expression of earlier parameters, got {kind_of(val)}")
        try:
            expr = compile_expression(val, out)
        except ExpressionError as exc:
            raise ctx.error(path, str(exc)) from None
        number = float(expr())
        if not math.isfinite(number):
            raise ctx.error(path, f"expected a finite number, got {number} (the value of '{_cut(expr.text)}')")
        out[key] = number
    return out


def _read_items(ctx: Context, key: str, items: list, table: dict[str, Field], strict: bool = False) -> list[ItemSpec]:
    """Check the generic keys of list items; with ``strict`` every key must be in ``table``."""
    out = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        path = (key, i)
        if not isinstance(item, dict):
            raise ctx.error(path, f"expected a mapping, got {type(item).__name__}")
        if "type" not in item:
            raise ctx.error(path, "missing required key 'type'")
        generic = item if strict else {k: v for k, v in item.items() if k in table}
        values = read_mapping(ctx, path, generic, table)
        name = f"{key}[{i}]"  # the label of an unnamed item
        if item.get("name") is not None:  # a table without a name field (forces) is checked here
            name = check_name(item["name"], (*path, "name"), ctx)
            if name in seen:
                raise ctx.error((*path, "name"), f"duplicate name '{name}' (also {key}[{seen[name]}])")
            seen[name] = i
        out.append(ItemSpec(name=name, type=str(item["type"]), path=path, values=values, raw=item))
    return out


def _check_step_count(
    ctx: Context, time: dict[str, Any], every: int, max_steps: float, interval: float | None = None
) -> None:
    """Refuse a run that would take more than solver.max_steps steps (time.step: 1e-300 would
    run until killed), an output.every past it (nothing but the first and last step), and an
    output.interval that would record more than solver.max_steps rows."""
    end = time["end"]
    for key in ("step", "contact_step"):
        step = time[key]
        if step is None:
            continue
        steps = end / step  # inf when it overflows: refused too
        if steps > max_steps:
            raise ctx.error(
                ("time", key),
                f"the run would take {steps:.3g} steps (time.end {end:g} s / time.{key} {step:g} s), more than "
                f"solver.max_steps = {max_steps:.3g}",
                "a larger step, an earlier end, or a larger solver.max_steps",
            )
    if every > max_steps:
        raise ctx.error(
            ("output", "every"),
            f"expected a whole number <= solver.max_steps = {max_steps:.3g}, got {every:.3g}",
        )
    if interval is not None and end / interval > max_steps:  # inf when it overflows: refused too
        raise ctx.error(
            ("output", "interval"),
            f"the run would record {end / interval:.3g} rows (time.end {end:g} s / output.interval "
            f"{interval:g} s), more than solver.max_steps = {max_steps:.3g}",
            "a larger interval, an earlier end, or a larger solver.max_steps",
        )


def build_spec(raw: RawScene) -> SceneSpec:
    """Check the generic keys of a raw scene and return the SceneSpec."""
    ctx = Context(scene=raw)
    # dimension and parameters first: the other keys are checked with them
    if raw.data.get("dimension") is not None:
        ctx.dimension = int(SCENE_FIELDS["dimension"].reader.read(ctx, ("dimension",), raw.data["dimension"]))
    ctx.parameters = _read_parameters(ctx, raw.data.get("parameters"))
    if raw.data.get("models") is not None:  # bodies and joints from robot files (mbsim.models)
        from mbsim.models import expand_models

        raw, imported = expand_models(raw, ctx)
        ctx.scene = raw
    else:
        imported = []
    top = read_mapping(ctx, (), raw.data, SCENE_FIELDS)
    dim = ctx.dimension

    solver_raw = top["solver"] or {}
    if not isinstance(solver_raw, dict):
        raise ctx.error(("solver",), f"expected a mapping, got {kind_of(solver_raw)}")
    generic = {k: v for k, v in solver_raw.items() if k in SOLVER_FIELDS}
    solver_values = read_mapping(ctx, ("solver",), generic, SOLVER_FIELDS)
    options = {k: v for k, v in solver_raw.items() if k not in SOLVER_FIELDS}
    solver = SolverSpec(options=options, **solver_values)

    bodies: list[BodySpec] = []
    names: dict[str, int] = {}
    for i, item in enumerate(top["bodies"]):
        path = ("bodies", i)
        values = read_mapping(ctx, path, item, BODY_FIELDS)
        name = values["name"]
        if name == "ground":
            raise ctx.error((*path, "name"), "'ground' is reserved for the fixed world body")
        if name in names:
            raise ctx.error((*path, "name"), f"duplicate body name '{name}' (also bodies[{names[name]}])")
        names[name] = i
        has_mass = values["mass"] is not None
        has_density = values["density"] is not None
        if has_mass == has_density:
            raise ctx.error(path, "give either mass (with inertia) or density (with shapes), not both or neither")
        if has_mass and values["inertia"] is None:
            raise ctx.error(path, "missing required key 'inertia' (mass is given)")
        if has_density and not values["shapes"]:
            raise ctx.error(path, "density needs shapes to derive mass and inertia from")
        if has_density and values["inertia"] is not None:
            raise ctx.error((*path, "inertia"), "inertia is derived from density and shapes; do not give both")
        orientation = values["orientation"]
        if orientation is None:
            orientation = np.zeros(1) if dim == 2 else np.array([1.0, 0.0, 0.0, 0.0])
        bodies.append(
            BodySpec(
                name=name,
                path=path,
                mass=values["mass"],
                density=values["density"],
                inertia=values["inertia"],
                position=values["position"],
                orientation=orientation,
                velocity=values["velocity"] if values["velocity"] is not None else np.zeros(dim),
                angular_velocity=(
                    values["angular_velocity"]
                    if values["angular_velocity"] is not None
                    else np.zeros(3 if dim == 3 else 1)
                ),
                shapes=values["shapes"],
            )
        )
    if not bodies:
        raise ctx.error(("bodies",), "expected at least one body")

    gravity = top["gravity"] if top["gravity"] is not None else np.zeros(dim)
    output = top["output"] or {"file": None, "every": 1, "interval": None}
    given = raw.data.get("output") if isinstance(raw.data.get("output"), dict) else {}
    if output["interval"] is not None and given.get("every") is not None:
        # two recording rules would contradict each other: which rows, and the step numbers of /time
        raise ctx.error(
            ("output", "interval"),
            "output.every and output.interval are both given; give one of them",
            "output.interval records at multiples of a time, output.every every n-th step "
            "(--set output.every=null drops the scene's output.every)",
        )
    _check_step_count(ctx, top["time"], output["every"], solver.max_steps, output["interval"])
    ground = top["ground"] or {"shapes": []}
    return SceneSpec(
        raw=raw,
        ctx=ctx,
        name=top["name"],
        description=str(top["description"] or ""),
        dimension=dim,
        parameters=ctx.parameters,
        gravity=gravity,
        t_end=top["time"]["end"],
        step=top["time"]["step"],
        solver=solver,
        contact_step=top["time"]["contact_step"],
        output_file=output["file"],
        output_every=int(output["every"]),
        output_interval=output["interval"],
        ground_shapes=ground["shapes"],
        bodies=bodies,
        joints=_read_items(ctx, "joints", top["joints"], JOINT_FIELDS),
        forces=_read_items(ctx, "forces", top["forces"], {}),
        contacts=_read_items(ctx, "contacts", top["contacts"], CONTACT_FIELDS, strict=True),
        body_names=tuple(b.name for b in bodies),
        imported=imported,
        couplings=_read_couplings(ctx, top["couplings"]),
        actuators=top["actuators"],
        outputs=top["outputs"],
        initial=top["initial"],
    )


def _read_couplings(ctx: Context, items: list) -> list[ItemSpec]:
    out, seen = [], {}
    for i, item in enumerate(items):
        path = ("couplings", i)
        if not isinstance(item, dict):
            raise ctx.error(path, f"expected a mapping, got {kind_of(item)}")
        values = read_mapping(ctx, path, item, COUPLING_FIELDS)
        if values["name"] in seen:
            raise ctx.error(
                (*path, "name"), f"duplicate name '{values['name']}' (also couplings[{seen[values['name']]}])"
            )
        seen[values["name"]] = i
        out.append(ItemSpec(name=values["name"], type="coupling", path=path, values=values, raw=item))
    return out


def load_scene(path: str, overrides: list[str] | tuple[str, ...] = ()) -> SceneSpec:
    """Read, override and check a scene file."""
    return build_spec(load_raw_scene(path, overrides))
