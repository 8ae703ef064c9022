"""Applied forces and torques whose components are expressions of time and the body's state.

Inside these expressions the state of the body the load acts on is available:
3D ``x y z vx vy vz wx wy wz`` (centre of mass, world; angular velocity in world axes),
2D ``x y angle vx vy w``. Applied loads are non-conservative: their power goes to the work.
"""

from __future__ import annotations

import numpy as np

from mbsim.model.force_kernels import VARIABLES, load_forces
from mbsim.model.forces.base import BuildSetup, ForceType, register_force
from mbsim.model.model import Frames
from mbsim.scene.expr import compile_programs
from mbsim.scene.fields import Choice, ExprVector, Field, Name, Text, Vector


class Loads:
    """Applied point forces or torques, batched: bodies, local points (n, d), component
    expressions, frame ("world" / "body") per element; evaluated by the compiled kernel the
    compiled step runs (mbsim.model.force_kernels.loads_at) on the expressions' programs,
    compiled here once."""

    def __init__(self, bodies, points, values, frames_, torque: bool, nbody: int, dimension: int) -> None:
        self.bodies = np.ascontiguousarray(bodies, dtype=np.int64)
        self.points = np.ascontiguousarray(points, dtype=float)
        self.values = values
        self.body_frame = np.array([fr == "body" for fr in frames_])
        self.torque = torque
        self.nbody, self.dimension = nbody, dimension
        # the kernel's tables: program index of each component (-1: none), flags as int64
        n = len(values)
        flat = [x for exprs in values for x in exprs]
        self._expr = np.full((n, 3), -1, dtype=np.int64)
        first = 0
        for e, exprs in enumerate(values):
            self._expr[e, : len(exprs)] = np.arange(first, first + len(exprs))
            first += len(exprs)
        # programs of their own for evaluate (the recursive method's Python path); the compiled
        # step and Python's single evaluations run the model's (mbsim.model.flat), with the signals
        own = all(v in VARIABLES[dimension] for e in flat for v in e.variables)
        self._programs = compile_programs(flat, VARIABLES[dimension]) if own else None
        self._body_frame = self.body_frame.astype(np.int64)
        self._torque = np.full(n, int(torque), dtype=np.int64)

    def evaluate(self, f: Frames, t: float, data=None) -> tuple[None, np.ndarray, float]:
        """(None, Q of the loads (non-conservative), 0.0) at the state of ``f`` and time t."""
        if self._programs is None:
            raise ValueError("loads whose expressions read signals are evaluated by the model's compiled form")
        q_nc = load_forces(
            f, t, self.dimension, self.nbody, self.bodies, self.points, self._body_frame, self._torque,
            self._expr, self._programs,
        )  # fmt: skip
        return None, q_nc, 0.0


def _read_common(items, setup: BuildSetup, with_point: bool):
    bodies, points, values, frames_ = [], [], [], []
    for item, v in items:
        b = setup.body(item.path + ("body",), v["body"], allow_ground=False)
        bodies.append(b)
        if with_point:
            p = v["point"] if v["point"] is not None else setup.pos0[b]
            points.append(setup.local_point(b, p))
        else:
            points.append(np.zeros(setup.dimension))
        values.append(v["value"])
        frames_.append(v["frame"])
    return bodies, points, values, frames_


@register_force
class PointForce(ForceType):
    name = "force"
    doc = "a force at a body point; components are expressions of t and the body's state"
    FIELDS = {
        "type": Field(Text(), "force"),
        "name": Field(Name(), "optional name", None),
        "body": Field(Text(), "the body it acts on"),
        "point": Field(
            Vector("dim"), "point of application, world position at t = 0; default the centre of mass", None
        ),
        "value": Field(ExprVector("dim"), "force components, N"),
        "frame": Field(Choice(("world", "body")), "axes of the components", "world"),
    }

    @classmethod
    def build(cls, items, setup: BuildSetup):
        b, p, v, fr = _read_common(items, setup, with_point=True)
        return Loads(b, p, v, fr, False, setup.nbody, setup.dimension)


@register_force
class Torque(ForceType):
    name = "torque"
    doc = "a torque on a body; expressions of t and the body's state"
    FIELDS = {
        "type": Field(Text(), "torque"),
        "name": Field(Name(), "optional name", None),
        "body": Field(Text(), "the body it acts on"),
        "value": Field(ExprVector("rot"), "torque components, N m (one in 2D)"),
        "frame": Field(Choice(("world", "body")), "axes of the components (3D)", "world"),
    }

    @classmethod
    def build(cls, items, setup: BuildSetup):
        b, p, v, fr = _read_common(items, setup, with_point=False)
        return Loads(b, p, v, fr, True, setup.nbody, setup.dimension)
