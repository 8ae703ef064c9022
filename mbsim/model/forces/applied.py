"""Applied forces and torques whose components are expressions of time and the body's state.

Inside these expressions the state of the body the load acts on is available:
3D ``x y z vx vy vz wx wy wz`` (centre of mass, world; angular velocity in world axes),
2D ``x y angle vx vy w``. Applied loads are non-conservative: their power goes to the work.
"""

from __future__ import annotations

import numpy as np

from mbsim.model.forces.base import BuildSetup, ForceType, generalized_from_point_forces, register_force
from mbsim.model.model import Frames
from mbsim.scene.fields import Choice, ExprVector, Field, Name, Text, Vector


def _env(f: Frames, body: int, t: float, dimension: int) -> dict[str, float]:
    p, v = f.pos[body], f.vel[body]
    if dimension == 3:
        w = f.omega[body]
        return {
            "t": t,
            "x": p[0],
            "y": p[1],
            "z": p[2],
            "vx": v[0],
            "vy": v[1],
            "vz": v[2],
            "wx": w[0],
            "wy": w[1],
            "wz": w[2],
        }
    return {"t": t, "x": p[0], "y": p[1], "angle": f.angle[body], "vx": v[0], "vy": v[1], "w": f.omega[body]}


class Loads:
    """Applied point forces or torques: one Python evaluation per element (expressions)."""

    def __init__(self, bodies, points, values, frames_, torque, nbody, dimension):
        self.bodies = np.array(bodies)
        self.points = np.array(points)
        self.values = values
        self.body_frame = np.array([fr == "body" for fr in frames_])
        self.torque = torque
        self.nbody, self.dimension = nbody, dimension

    def evaluate(self, f: Frames, t: float, data=None):
        d = self.dimension
        vals = np.array(
            [[float(e(_env(f, b, t, d))) for e in exprs] for b, exprs in zip(self.bodies, self.values, strict=True)]
        )
        w = 6 if d == 3 else 3
        out = np.zeros((self.nbody + 1, w))
        if self.torque:
            if d == 3:
                world = np.where(self.body_frame[:, None], np.einsum("nij,nj->ni", f.rot[self.bodies], vals), vals)
                body = np.einsum("nji,nj->ni", f.rot[self.bodies], world)
                np.add.at(out[:, 3:], self.bodies, body)
            else:
                np.add.at(out[:, 2], self.bodies, vals[:, 0])
            return None, out, 0.0
        rot = f.rot[self.bodies]
        world = np.where(self.body_frame[:, None], np.einsum("nij,nj->ni", rot, vals), vals)
        offsets = np.einsum("nij,nj->ni", rot, self.points)
        return None, generalized_from_point_forces(f, self.bodies, offsets, world, self.nbody, d), 0.0


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
