"""Signals: what an expression may read of the mechanism's state by name (CONTRACT §8).

Every expression of a force, torque, actuator or output may read ``t``, a one-coordinate joint's
coordinate and rate (``q.JOINT``, ``qd.JOINT``, with the joint's ``initial`` origin; also
written ``q["JOINT"]``), a body's world position, velocity and angular velocity (``BODY.x`` ...
``BODY.wz``; planar ``BODY.angle``, ``BODY.w``), its orientation quaternion (``BODY.qw`` ...
``BODY.qz``, scalar first, taken with qw >= 0: its sign may jump where qw passes 0) and the distance
between two body points (``distance(BODY1, [x, y, z], BODY2, [x, y, z])``, points in body axes;
``ground`` allowed). Outputs may also read an actuator's force (``actuator.NAME``).

:class:`Signals` is the namespace a model's expressions are checked against when the scene
loads (unknown names are exit 2 with did-you-mean); :func:`signal_table` turns the signals the
expressions use into the table the compiled kernels read (mbsim.model.signal_kernels).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mbsim.errors import did_you_mean
from mbsim.scene.expr import Expression
from mbsim.scene.fields import Context, Expr, Field, Name, read_mapping

# the signal kinds of the compiled table (signal_kernels.pxd's enum; checked at its import)
KINDS = ("coordinate", "rate", "position", "velocity", "angular_velocity", "quaternion", "angle", "distance",
         "actuator")  # fmt: skip
BODY_3D = {
    "x": ("position", 0), "y": ("position", 1), "z": ("position", 2),
    "vx": ("velocity", 0), "vy": ("velocity", 1), "vz": ("velocity", 2),
    "wx": ("angular_velocity", 0), "wy": ("angular_velocity", 1), "wz": ("angular_velocity", 2),
    "qw": ("quaternion", 0), "qx": ("quaternion", 1), "qy": ("quaternion", 2), "qz": ("quaternion", 3),
}  # fmt: skip
BODY_2D = {
    "x": ("position", 0), "y": ("position", 1), "angle": ("angle", 0),
    "vx": ("velocity", 0), "vy": ("velocity", 1), "w": ("angular_velocity", 2),
}  # fmt: skip


@dataclass(frozen=True)
class Distance:
    """distance(body1, point1, body2, point2): extended body indices (ground = nbody), body-axes points."""

    body1: int
    point1: tuple[float, ...]
    body2: int
    point2: tuple[float, ...]


class Signals:
    """The signal names of one model (a container of names for the expression checker, which
    also calls :meth:`distance`), plus the free variables ``base`` of the place (``t``; a
    force's own body state). ``actuators``: the names an output may read as ``actuator.NAME``
    (empty for forces and actuators, which run before the actuators' forces exist)."""

    def __init__(
        self,
        dimension: int,
        bodies: Sequence[str],
        coordinates: Mapping[str, int],
        base: Iterable[str] = ("t",),
        actuators: Sequence[str] = (),
        distances: dict[str, Distance] | None = None,
    ) -> None:
        self.dimension = dimension
        self.bodies = {name: b for b, name in enumerate(bodies)}
        self.coordinates = dict(coordinates)  # joint name -> row of the joint-coordinate table
        self.base = frozenset(base)
        self.actuators = {name: a for a, name in enumerate(actuators)}
        self.components = BODY_3D if dimension == 3 else BODY_2D
        # shared between the namespaces of one model: every distance() any expression registered
        self.distances: dict[str, Distance] = {} if distances is None else distances

    def where(self, base: Iterable[str] = ("t",), actuators: Sequence[str] = ()) -> Signals:
        """The same model's namespace with other free variables (and actuator forces for outputs)."""
        out = Signals(self.dimension, (), {}, base, actuators, self.distances)
        out.bodies, out.coordinates = self.bodies, self.coordinates
        return out

    def resolve(self, name: str) -> tuple[str, int, int] | None:
        """(kind, index, component) of a signal name, None for a name that is not one."""
        if name in self.distances:
            return ("distance", list(self.distances).index(name), 0)
        head, dot, tail = name.partition(".")
        if not dot:
            return None
        if head in ("q", "qd") and tail in self.coordinates:
            return ("coordinate" if head == "q" else "rate", self.coordinates[tail], 0)
        if head == "actuator" and tail in self.actuators:
            return ("actuator", self.actuators[tail], 0)
        # a body's name may hold dots itself: the component is what follows the last one
        body, _, comp = name.rpartition(".")
        if body in self.bodies and comp in self.components:
            kind, axis = self.components[comp]
            return (kind, self.bodies[body], axis)
        return None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self.base or self.resolve(name) is not None)

    def __iter__(self) -> Iterator[str]:
        yield from self.base
        for joint in self.coordinates:
            yield f"q.{joint}"
            yield f"qd.{joint}"
        for body in self.bodies:
            for comp in self.components:
                yield f"{body}.{comp}"
        for actuator in self.actuators:
            yield f"actuator.{actuator}"

    def distance(self, body1: str, point1: tuple, body2: str, point2: tuple) -> str:
        """Register distance(body1, point1, body2, point2); its signal name."""
        index = []
        for body, point in ((body1, point1), (body2, point2)):
            if body != "ground" and body not in self.bodies:
                hint = did_you_mean(body, [*self.bodies, "ground"])
                raise ValueError(f"unknown body '{body}' in distance()" + (f"; {hint}" if hint else ""))
            if len(point) != self.dimension:
                raise ValueError(f"a point of distance() has {self.dimension} coordinates, got {len(point)}")
            index.append(len(self.bodies) if body == "ground" else self.bodies[body])
        key = Distance(index[0], tuple(map(float, point1)), index[1], tuple(map(float, point2)))
        name = f"distance({body1}, {list(key.point1)}, {body2}, {list(key.point2)})"
        self.distances.setdefault(name, key)
        return name


@dataclass
class SignalTable:
    """The signals the compiled expressions read, in register order after the free variables:
    kind (KINDS index), index (joint-coordinate row, body, distance or actuator) and component;
    the distances' bodies and points."""

    names: list[str]
    kind: np.ndarray
    index: np.ndarray
    component: np.ndarray
    distance_body: np.ndarray  # (ndistance, 2)
    distance_point: np.ndarray  # (ndistance, 2, 3)


def signal_table(signals: Signals | None, names: Iterable[str]) -> SignalTable:
    """The table of the signals among ``names`` (the variables the model's expressions use), in
    a fixed order; the distances are all the model registered (their index is the kind's)."""
    chosen = sorted({n for n in names if signals is not None and n not in signals.base and signals.resolve(n)})
    rows = [signals.resolve(n) for n in chosen] if signals is not None else []
    distances = list(signals.distances.values()) if signals is not None else []
    point = np.zeros((len(distances), 2, 3))
    for k, dist in enumerate(distances):
        point[k, 0, : len(dist.point1)] = dist.point1
        point[k, 1, : len(dist.point2)] = dist.point2
    return SignalTable(
        names=chosen,
        kind=np.array([KINDS.index(r[0]) for r in rows], dtype=np.int64).reshape(len(rows)),
        index=np.array([r[1] for r in rows], dtype=np.int64).reshape(len(rows)),
        component=np.array([r[2] for r in rows], dtype=np.int64).reshape(len(rows)),
        distance_body=np.array([[d.body1, d.body2] for d in distances], dtype=np.int64).reshape(len(distances), 2),
        distance_point=point,
    )


OUTPUT_FIELDS = {
    "name": Field(Name(), "unique output name: /outputs/NAME, and max_NAME, min_NAME, final_NAME in the summary"),
    "value": Field(Expr(frozenset({"t"}), signals=True), "an expression of t and the signals (actuator.NAME too)"),
}


# output names whose summaries would be a run summary's own (mbsim.simulate.RunSummary:
# max_position_violation, ...)
RESERVED_OUTPUTS = frozenset({"position_violation", "velocity_violation", "quaternion_norm_error"})


def read_outputs(ctx: Context, items: list) -> list[tuple[str, Expression]]:
    """The scene's ``outputs:`` list: (name, expression) each, names unique."""
    out: list[tuple[str, Expression]] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        got = read_mapping(ctx, ("outputs", i), item, OUTPUT_FIELDS)
        if got["name"] in RESERVED_OUTPUTS:
            raise ctx.error(
                ("outputs", i, "name"), f"'{got['name']}' is taken: max_{got['name']} is a run summary's own"
            )
        if got["name"] in seen:
            raise ctx.error(
                ("outputs", i, "name"), f"duplicate output name '{got['name']}' (also outputs[{seen[got['name']]}])"
            )
        seen[got["name"]] = i
        out.append((got["name"], got["value"]))
    return out
