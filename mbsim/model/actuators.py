"""Actuators: forces on a joint coordinate that a scene commands (CONTRACT §8).

An actuator acts on one joint coordinate q (a joint type with a coordinate: revolute angle,
prismatic or cylindrical position). Its force f, in the actuator's own units, follows its law
on the actuator's length L = gear q and rate Ld = gear qd (MuJoCo's transmission):

- ``torque`` / ``force``: f = value, an expression of t and the signals (mbsim.model.signals);
- ``position`` servo: f = kp (target - L) + kd (rate - Ld), target an expression, its rate the
  symbolic time derivative of the target unless given (a target that reads the state needs it);
- ``velocity`` servo: f = kd (target - Ld).

f is clamped to ``forcerange``; the generalized force on the coordinate is gear f (and, with the
joint's ``effort``, the sum of its actuators' is clamped to +-effort, each actuator's f scaled by
the same factor, so that the recorded force is the one applied). Applied under every
method (joint coordinates: the joint torque; body coordinates: the pair of equal and opposite
wrenches about or along the joint's axis), its power gear f qd enters the work of
/diagnostics/energy/work. Recorded per row: /actuators/NAME/force (f) and /power.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mbsim.errors import did_you_mean
from mbsim.scene.expr import Expression
from mbsim.scene.fields import Choice, Context, Expr, Field, Name, Number, Text, Vector, read_mapping
from mbsim.scene.load import KeyPath

# the laws, by the kernel's code (mbsim.model.joint_force_kernels: actuator_forces_at)
LAWS = {"torque": 0, "force": 0, "position": 1, "velocity": 2}
SIGNAL_EXPR = Expr(frozenset({"t"}), signals=True)

ACTUATOR_FIELDS = {
    "name": Field(Name(), "unique actuator name (its series are /actuators/NAME/...)"),
    "joint": Field(Text(), "the joint whose coordinate it drives (a joint type with a coordinate)"),
    "type": Field(Choice(tuple(LAWS)), "torque / force (value), position or velocity servo"),
    "value": Field(SIGNAL_EXPR, "torque or force: the actuator's force, N m or N", None),
    "target": Field(SIGNAL_EXPR, "position: the target coordinate (rad or m); velocity: the target rate", None),
    "rate": Field(
        SIGNAL_EXPR, "position: the target's rate; default its symbolic time derivative (a target of t alone)", None
    ),
    "kp": Field(Number(minimum=0), "position: stiffness, N m/rad or N/m", None),
    "kd": Field(Number(minimum=0), "position: damping (default 0); velocity: gain, N m s/rad or N s/m", None),
    "gear": Field(Number(), "transmission ratio: length = gear q, generalized force = gear f", 1.0),
    "forcerange": Field(Vector(2), "[lowest, highest] force f, N m or N (clamped)", None),
}
# the keys each law takes besides the common ones
_LAW_KEYS = {"torque": {"value"}, "force": {"value"}, "position": {"target", "rate", "kp", "kd"},
             "velocity": {"target", "kd"}}  # fmt: skip
_REQUIRED = {"torque": ("value",), "force": ("value",), "position": ("target", "kp"), "velocity": ("target", "kd")}
_COMMON = {"name", "joint", "type", "gear", "forcerange"}


@dataclass(frozen=True)
class Actuator:
    """A checked actuator: its coordinate's row in the joint-coordinate table, its law's code
    (LAWS) and expressions (value or target, rate; None where the law has none), gains, gear and
    force range (-inf, inf when none)."""

    name: str
    joint: str
    law: int
    row: int
    value: Expression | None
    rate: Expression | None
    kp: float
    kd: float
    gear: float
    lower: float
    upper: float


def read_actuators(
    ctx: Context, items: list, rows: dict[str, int], joints: dict[str, tuple[str, bool]]
) -> list[Actuator]:
    """The scene's ``actuators:`` list. ``rows``: joint name -> its coordinate's row;
    ``joints``: every joint's name -> (type, whether it is driven)."""
    out: list[Actuator] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        path: KeyPath = ("actuators", i)
        got = read_mapping(ctx, path, item, ACTUATOR_FIELDS)
        law = got["type"]
        for key in item:
            if key not in _COMMON and key not in _LAW_KEYS[law]:
                raise ctx.error((*path, key), f"a {law} actuator has no key '{key}'",
                                f"its keys: {', '.join(sorted(_COMMON | _LAW_KEYS[law]))}")  # fmt: skip
        for key in _REQUIRED[law]:
            if got[key] is None:
                raise ctx.error(path, f"missing required key '{key}' for a {law} actuator")
        name = got["name"]
        if name in seen:
            raise ctx.error((*path, "name"), f"duplicate actuator name '{name}' (also actuators[{seen[name]}])")
        seen[name] = i
        joint = got["joint"]
        if joint not in joints:
            raise ctx.error((*path, "joint"), f"unknown joint '{joint}'", did_you_mean(joint, joints))
        jtype, driven = joints[joint]
        if joint not in rows:
            raise ctx.error((*path, "joint"),
                            f"joint '{joint}' is {jtype}: an actuator needs a joint with one coordinate "
                            "(revolute, prismatic, cylindrical)")  # fmt: skip
        if driven:
            raise ctx.error((*path, "joint"), f"joint '{joint}' has a drive (prescribed motion): an actuator on it "
                            "would do nothing but change the drive's force; remove one of them")  # fmt: skip
        if got["gear"] == 0.0:
            raise ctx.error((*path, "gear"), "expected a non-zero gear")
        lower, upper = (-math.inf, math.inf) if got["forcerange"] is None else map(float, got["forcerange"])
        if lower > upper:
            raise ctx.error((*path, "forcerange"), f"expected [lowest, highest], got [{lower:g}, {upper:g}]")
        value = got["value"] if law in ("torque", "force") else got["target"]
        rate = got["rate"]
        if law == "position" and rate is None:
            state = sorted(v for v in value.variables if v != "t")
            if state:
                raise ctx.error((*path, "rate"), f"the target reads {', '.join(state)}: give its rate (rate: ...)")
            rate = value.derivative("t")
        kd = got["kd"] if got["kd"] is not None else 0.0
        out.append(Actuator(name, joint, LAWS[law], rows[joint], value, rate, got["kp"] or 0.0, kd, got["gear"],
                            lower, upper))  # fmt: skip
    return out
