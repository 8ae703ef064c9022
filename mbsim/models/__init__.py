"""Models from robot description files: the scene's ``models:`` key (CONTRACT §5).

Each entry names a URDF (mbsim.models.urdf) or MJCF (mbsim.models.mjcf) file; its links and
joints become the scene's bodies and joints (mbsim.models.tree.scene_parts) before the scene is
checked, as if they had been written in the scene by hand (``mbsim import`` writes exactly that
scene); an MJCF file's actuators become entries of ``actuators:``, each driven by its control
from the entry's ``ctrl`` (CONTRACT §8). An entry of ``joints:`` without a ``type`` that names an
imported joint (prefix included) amends it: its keys (``drive``, ``spring``, ``limits`` ...) are
added to the imported joint, in the amending entry's place.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mbsim.errors import SceneError
from mbsim.names import check_model_names
from mbsim.scene.fields import (
    Boolean,
    Choice,
    Context,
    Custom,
    Field,
    Number,
    Raw,
    Text,
    Vector,
    kind_of,
    read_mapping,
)
from mbsim.scene.load import KeyPath, RawScene
from mbsim.scene.readers import read_orientation

FORMATS = {".urdf": "urdf", ".xml": "mjcf", ".mjcf": "mjcf"}


def _read_names(ctx: Context, path: KeyPath, value: Any) -> dict[str, float | list[float]]:
    """Joint name -> a number, or a list of numbers (a ball joint: quaternion w, x, y, z; rates:
    its angular velocity in the child's frame, as MuJoCo's qvel)."""
    if not isinstance(value, dict):
        raise ctx.error(path, "expected a mapping of the file's joint names to numbers")
    out: dict[str, float | list[float]] = {}
    for k, v in value.items():
        if isinstance(v, list):
            out[str(k)] = [Number().read(ctx, (*path, k, i), x) for i, x in enumerate(v)]
        else:
            out[str(k)] = Number().read(ctx, (*path, k), v)
    return out


def _read_paths(ctx: Context, path: KeyPath, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) and v for v in value.values()):
        raise ctx.error(path, "expected a mapping of package names to folders")
    return {str(k): v for k, v in value.items()}


def _read_ctrl(ctx: Context, path: KeyPath, value: Any) -> dict[str, str] | list[str]:
    """Each actuator's control: a number or an expression (text), by the file's actuator names
    (a mapping) or in the file's actuator order (a list); checked against the file by :func:`_controls`."""

    def text(at: KeyPath, v: Any) -> str:
        if isinstance(v, str):
            if not v.strip():
                raise ctx.error(at, "expected a number or an expression, got an empty text")
            return v
        return repr(float(Number().read(ctx, at, v)))

    if isinstance(value, dict):
        return {str(k): text((*path, k), v) for k, v in value.items()}
    if isinstance(value, list):
        return [text((*path, i), v) for i, v in enumerate(value)]
    raise ctx.error(path, f"expected a mapping of the file's actuator names to expressions, or a list of "
                    f"expressions in the file's actuator order, got {kind_of(value)}")  # fmt: skip


def _controls(ctx: Context, path: KeyPath, given, names: list[str], file: str) -> dict[str, tuple[str, KeyPath]]:
    """Actuator name in the file -> (its control expression, the key path that gave it)."""
    if given is None:
        return {}
    at = (*path, "ctrl")
    if isinstance(given, list):
        if len(given) != len(names):
            listed = f" ({', '.join(names)})" if names else ""
            raise ctx.error(at, f"expected {len(names)} control{'s' * (len(names) != 1)}, one per actuator of {file} "
                            f"in its order{listed}, got {len(given)}")  # fmt: skip
        return {name: (v, (*at, k)) for k, (name, v) in enumerate(zip(names, given, strict=True))}
    for name in given:
        if name not in names:
            from mbsim.errors import did_you_mean

            what = f"no actuator '{name}' in {file}" + ("" if names else " (it has no actuators)")
            raise ctx.error((*at, name), what, did_you_mean(name, names))
    return {name: (v, (*at, name)) for name, v in given.items()}


def _orientation(ctx: Context, path: KeyPath, value: Any) -> np.ndarray:
    return read_orientation(ctx, path, value)


MODEL_FIELDS = {
    "file": Field(Text(), "URDF (.urdf) or MJCF (.xml) file, relative to the scene file"),
    "format": Field(Choice(("urdf", "mjcf")), "urdf or mjcf; from the file's extension when not given", None),
    "prefix": Field(Raw("a text"), "prepended to every body and joint name from this file", ""),
    "base": Field(Choice(("fixed", "free")), "fixed: the root is welded to the ground; free: a floating base", "fixed"),
    "position": Field(Vector(3), "position of the model's root frame in the world at t = 0, m", [0.0, 0.0, 0.0]),
    "orientation": Field(
        Custom(_orientation, "{euler: ...}, {quaternion: [w,x,y,z]} or {axis_angle: ...}"),
        "orientation of the model's root frame at t = 0",
        None,
    ),
    "base_velocity": Field(Vector(3), "free base: velocity of the root link's origin, world frame, m/s", None),
    "base_angular_velocity": Field(Vector(3), "free base: angular velocity of the root link, world frame, rad/s", None),
    "joint_positions": Field(
        Custom(_read_names, "a mapping of joint names to numbers"),
        "initial joint coordinates by the file's joint names (no prefix); default 0 (URDF) or qpos0 (MJCF)",
        None,
    ),
    "joint_velocities": Field(
        Custom(_read_names, "a mapping of joint names to numbers"),
        "initial joint rates by the file's names; default 0",
        None,
    ),
    "collisions": Field(Boolean(), "true: the file's collision geometry becomes the bodies' shapes", False),
    "ctrl": Field(
        Custom(_read_ctrl, "a mapping of actuator names to expressions, or a list in the file's actuator order"),
        "MJCF: each actuator's control, an expression of t and the signals (clamped to its ctrlrange); default 0",
        None,
    ),
    "package_paths": Field(
        Custom(_read_paths, "a mapping of package names to folders"),
        "where package:// URIs resolve (relative to the scene file; then the model file's parent folders)",
        None,
    ),
}


@dataclass
class Imported:
    """One model entry after import: for validate and the result file's notes."""

    file: str
    format: str
    bodies: int
    joints: int
    skipped: list[str]
    gravity: list[float]  # the file's (MJCF <option gravity>; -9.81 m/s^2 along z for URDF)
    constrained: bool  # couplings or closed loops: not a tree for method recursive
    actuators: int = 0


@dataclass
class ImportedScene(RawScene):
    """A scene with its ``models:`` expanded. An error in an imported actuator (found when the
    model compiles: its control expression, its joint) is told at the models entry that made it
    (its ``ctrl`` key where one gave the control), never at a key of the scene the user did not write."""

    origins: dict[KeyPath, tuple[KeyPath, str]] = field(default_factory=dict)  # ("actuators", k) -> (path, label)

    def error(self, path: KeyPath, reason: str, hint: str = "") -> SceneError:
        origin = self.origins.get(tuple(path[:2]))
        if origin is None:
            return super().error(path, reason, hint)
        return super().error(origin[0], f"{origin[1]}: {reason}", hint)


def read_model(file: Path, fmt: str, package_paths: dict[str, Path], collisions: bool):
    """The :class:`~mbsim.models.tree.ModelTree` of a model file."""
    if fmt == "urdf":
        from mbsim.models.urdf import read_urdf

        return read_urdf(file, package_paths, collisions)
    from mbsim.models.mjcf import read_mjcf

    return read_mjcf(file, collisions)


def model_format(file: str | Path, given: str | None = None) -> str | None:
    return given or FORMATS.get(Path(file).suffix.lower())


def _vector(value) -> np.ndarray:
    return np.zeros(3) if value is None else np.asarray(value, float)


def expand_models(raw: RawScene, ctx: Context) -> tuple[RawScene, list[Imported]]:
    """The scene with its ``models:`` entries replaced by bodies and joints (a copy; ``raw`` is
    left as it is), and what each entry imported."""
    from mbsim.models.files import not_regular
    from mbsim.models.tree import leaders_first, quaternion_matrix, scene_parts, transform

    entries = raw.data.get("models")
    if entries is None:
        return raw, []
    if not isinstance(entries, list):
        raise ctx.error(("models",), f"expected a list of models, got {kind_of(entries)}")
    if ctx.dimension != 3:
        raise ctx.error(("models",), "models from URDF and MJCF files need a 3D scene (dimension: 3)")
    data = copy.deepcopy({k: v for k, v in raw.data.items() if k != "models"})
    data.setdefault("bodies", [])
    data.setdefault("joints", [])
    if not isinstance(data["bodies"], list) or not isinstance(data["joints"], list):
        return raw, []  # build_spec says what is wrong with them
    imported: list[Imported] = []
    origins: dict[KeyPath, tuple[KeyPath, str]] = {}
    if data.get("actuators") is None:
        data["actuators"] = []
    scene_actuators = data["actuators"] if isinstance(data["actuators"], list) else []  # else build_spec says
    taken_actuators = {a.get("name"): k for k, a in enumerate(scene_actuators) if isinstance(a, dict)}
    made_actuators: list[tuple[dict, KeyPath, str]] = []  # each imported actuator, where it was made, its label
    taken_bodies = {b.get("name") for b in data["bodies"] if isinstance(b, dict)}
    imported_joints: dict[str, dict] = {}
    typed_joints = {j.get("name"): k for k, j in enumerate(data["joints"]) if isinstance(j, dict) and "type" in j}
    for i, entry in enumerate(entries):
        path = ("models", i)
        got = read_mapping(ctx, path, entry, MODEL_FIELDS)
        file = raw.base_dir / got["file"]
        fmt = model_format(file, got["format"])
        if fmt is None:
            raise ctx.error(
                (*path, "file"),
                f"cannot tell the format of '{got['file']}' from its extension; give format: urdf or mjcf",
            )
        problem = not_regular(file)
        if problem == "not found":
            raise ctx.error((*path, "file"), f"model file not found: {file}")
        if problem:
            raise ctx.error((*path, "file"), f"the model file {file} {problem}")
        prefix = got["prefix"]
        if not isinstance(prefix, str):
            raise ctx.error((*path, "prefix"), f"expected a text, got {kind_of(prefix)}")
        packages = {k: raw.base_dir / v for k, v in (got["package_paths"] or {}).items()}
        tree = read_model(file, fmt, packages, got["collisions"])
        check_model_names(tree, prefix, lambda reason, at=path: ctx.error((*at, "prefix"), reason))  # mbsim.names
        sizes = {j.name: (1, 1) for j in tree.joints if j.kind in ("revolute", "prismatic")}
        sizes.update({j.name: (4, 3) for j in tree.joints if j.kind == "spherical"})
        sizes.update({j.name: (7, 6) for j in tree.joints if j.kind == "free" and fmt == "mjcf"})
        for key, which in (("joint_positions", 0), ("joint_velocities", 1)):
            names = set(sizes)
            for name, value in (got[key] or {}).items():
                if name in names:
                    size = sizes[name][which]
                    given = len(value) if isinstance(value, list) else 1
                    if given != size or (size == 1) != (not isinstance(value, list)):
                        what = "a number" if size == 1 else f"a list of {size} numbers"
                        raise ctx.error((*path, key, name), f"joint '{name}' takes {what} here")
                    quat = value[-4:] if isinstance(value, list) and size in (4, 7) else None
                    if which == 0 and quat is not None and not 0.5 < float(np.linalg.norm(quat)) < 2.0:
                        raise ctx.error((*path, key, name), "expected a unit quaternion (w, x, y, z)")
                if name not in names:
                    from mbsim.errors import did_you_mean

                    raise ctx.error(
                        (*path, key, name),
                        f"no joint '{name}' with coordinates in {got['file']}",
                        did_you_mean(name, sorted(names)),
                    )
        R = np.eye(3) if got["orientation"] is None else quaternion_matrix(got["orientation"])
        free = got["base"] == "free"
        if free and fmt == "mjcf":  # the root is MJCF's world: its welded children float instead
            for j in tree.joints:
                if j.parent == tree.root and j.kind == "fixed":
                    j.kind = "free"
        for key in ("base_velocity", "base_angular_velocity"):
            if got[key] is not None and not (free or tree.free_root):
                raise ctx.error((*path, key), "only a free base moves at t = 0; set base: free")
        positions, velocities = dict(got["joint_positions"] or {}), dict(got["joint_velocities"] or {})
        defaults = {j.name: j.default for j in tree.joints}
        for c in leaders_first(tree):  # a follower starts where (and as) its leader puts it unless given
            if c.joint not in positions:
                positions[c.joint] = c.multiplier * positions.get(c.leader, defaults.get(c.leader, 0.0)) + c.offset
            if c.joint not in velocities:
                velocities[c.joint] = c.multiplier * velocities.get(c.leader, 0.0)
        controls = _controls(ctx, path, got["ctrl"], [a.name for a in tree.actuators], got["file"])
        parts = scene_parts(
            tree,
            prefix,
            free and fmt != "mjcf",
            transform(R, np.asarray(got["position"], float)),
            positions,
            velocities,
            _vector(got["base_velocity"]),
            _vector(got["base_angular_velocity"]),
            {name: text for name, (text, _) in controls.items()},
        )
        for c in tree.couplings:
            data.setdefault("couplings", [])
            if not isinstance(data["couplings"], list):
                raise ctx.error(("couplings",), "expected a list of couplings")
            data["couplings"].append(
                {"name": prefix + (c.name or f"{c.joint}_mimic"), "joint": prefix + c.joint,
                 "leader": prefix + c.leader, "ratio": c.multiplier, "offset": c.offset}
            )  # fmt: skip
        for body in parts.bodies:
            if body["name"] in taken_bodies:
                raise ctx.error(
                    (*path, "prefix"),
                    f"body '{body['name']}' from {got['file']} is already in the scene; give the model a prefix",
                )
            taken_bodies.add(body["name"])
        for joint in parts.joints:
            name = joint["name"]
            if name in imported_joints:  # MJCF: a joint and an equality may share a name
                raise ctx.error(
                    (*path, "file"),
                    f"two joints imported from {got['file']} are named '{name}' (a joint and an equality "
                    "constraint, or two models with the same prefix); rename one or give the model a prefix",
                )
            if name in typed_joints:
                raise ctx.error(
                    ("joints", typed_joints[name], "name"),
                    f"joint '{name}' is also imported from {got['file']}; rename it, give the model a prefix, or "
                    "leave out its type to amend the imported joint",
                )
            imported_joints[name] = joint
        for act, source in zip(parts.actuators, tree.actuators, strict=True):
            name = act["name"]
            if name in taken_actuators:
                k = taken_actuators[name]
                if k >= 0:
                    raise ctx.error(("actuators", k, "name"), f"actuator '{name}' is also imported from "
                                    f"{got['file']}; rename it or give the model a prefix")  # fmt: skip
                raise ctx.error((*path, "prefix"), f"actuator '{name}' from {got['file']} is already imported; "
                                "give the model a prefix")  # fmt: skip
            taken_actuators[name] = -1
            given = controls.get(source.name)
            made_actuators.append((act, given[1] if given else path, f"actuator '{name}' imported from {got['file']}"))
        data["bodies"].extend(parts.bodies)
        if parts.ground_shapes:
            if data.get("ground") is None:
                data["ground"] = {}
            ground = data["ground"]
            if isinstance(ground, dict):  # else build_spec says what is wrong with it
                if ground.get("shapes") is None:
                    ground["shapes"] = []
                if isinstance(ground["shapes"], list):
                    ground["shapes"].extend(parts.ground_shapes)
        imported.append(
            Imported(
                str(file),
                fmt,
                len(parts.bodies),
                len(parts.joints),
                parts.skipped,
                [float(g) for g in tree.gravity],
                bool(tree.couplings or tree.loops),
                len(parts.actuators),
            )  # fmt: skip
        )
    # amendments: an entry without a type naming an imported joint takes its place; a drive
    # (prescribed motion) replaces what the file puts on the coordinate: limits, friction, effort
    # and actuators (the scene's own keys beside a drive are refused when the model compiles)
    joints, driven = [], set()
    for item in data["joints"]:
        if isinstance(item, dict) and "type" not in item and item.get("name") in imported_joints:
            joint = imported_joints.pop(item["name"])
            if item.get("drive") is not None:
                driven.add(item["name"])
                joint = {k: v for k, v in joint.items() if k not in ("limits", "friction", "effort")}
            joints.append({**joint, **item})
        else:
            joints.append(item)
    data["joints"] = joints + list(imported_joints.values())
    for act, origin, label in made_actuators:
        if act["joint"] not in driven:
            origins[("actuators", len(scene_actuators))] = (origin, label)
            scene_actuators.append(act)
    if not data["actuators"] and "actuators" not in raw.data:
        del data["actuators"]
    return ImportedScene(data, raw.file, raw.marks, raw.base_dir, raw.overridden, raw.created, origins), imported
