"""Linear spring-damper between two body points: f = k (L - L0) + c dL/dt along the line."""

from __future__ import annotations

import numpy as np

from mbsim.model.forces.base import BuildSetup, ForceType, generalized_from_point_forces, register_force
from mbsim.model.model import Frames
from mbsim.model.spatial import cross
from mbsim.scene.fields import Field, Name, Number, Text, Vector


@register_force
class SpringDamper(ForceType):
    name = "spring_damper"
    doc = "linear spring and damper between two points; the spring is conservative (potential energy)"
    FIELDS = {
        "type": Field(Text(), "spring_damper"),
        "name": Field(Name(), "optional name", None),
        "body1": Field(Text(), "first body (or ground)"),
        "body2": Field(Text(), "second body (or ground)"),
        "point1": Field(Vector("dim"), "attachment on body1, world position at t = 0"),
        "point2": Field(Vector("dim"), "attachment on body2, world position at t = 0"),
        "stiffness": Field(Number(minimum=0), "k, N/m"),
        "damping": Field(Number(minimum=0), "c, N s/m", 0.0),
        "rest_length": Field(Number(minimum=0), "L0, m; default the initial distance", None),
    }

    @classmethod
    def build(cls, items, setup: BuildSetup):
        b1, b2, s1, s2, k, c, rest = [], [], [], [], [], [], []
        for item, v in items:
            i = setup.body(item.path + ("body1",), v["body1"])
            j = setup.body(item.path + ("body2",), v["body2"])
            if i == j:
                raise setup.ctx.error(item.path + ("body2",), "body1 and body2 must differ")
            b1.append(i)
            b2.append(j)
            s1.append(setup.local_point(i, v["point1"]))
            s2.append(setup.local_point(j, v["point2"]))
            k.append(v["stiffness"])
            c.append(v["damping"])
            length = float(np.linalg.norm(v["point2"] - v["point1"]))
            rest.append(length if v["rest_length"] is None else v["rest_length"])
        return SpringDamperGroup(
            np.array(b1),
            np.array(b2),
            np.array(s1),
            np.array(s2),
            np.array(k),
            np.array(c),
            np.array(rest),
            setup.nbody,
            setup.dimension,
        )


class SpringDamperGroup:
    def __init__(self, b1, b2, s1, s2, k, c, rest, nbody, dimension):
        self.b1, self.b2, self.s1, self.s2 = b1, b2, s1, s2
        self.k, self.c, self.rest = k, c, rest
        self.nbody, self.dimension = nbody, dimension

    def evaluate(self, f: Frames, t: float, data=None):
        r1 = np.einsum("nij,nj->ni", f.rot[self.b1], self.s1)
        r2 = np.einsum("nij,nj->ni", f.rot[self.b2], self.s2)
        d = f.pos[self.b2] + r2 - f.pos[self.b1] - r1
        length = np.linalg.norm(d, axis=1)
        unit = d / np.where(length > 1e-12, length, 1.0)[:, None]
        if self.dimension == 3:
            v1 = f.vel[self.b1] + cross(f.omega[self.b1], r1)
            v2 = f.vel[self.b2] + cross(f.omega[self.b2], r2)
        else:
            v1 = f.vel[self.b1] + f.omega[self.b1][:, None] * np.stack((-r1[:, 1], r1[:, 0]), axis=1)
            v2 = f.vel[self.b2] + f.omega[self.b2][:, None] * np.stack((-r2[:, 1], r2[:, 0]), axis=1)
        rate = np.einsum("ni,ni->n", unit, v2 - v1)
        stretch = length - self.rest
        bodies = np.concatenate((self.b1, self.b2))
        offsets = np.concatenate((r1, r2))

        def on_bodies(magnitude):
            force2 = -magnitude[:, None] * unit  # on body2; body1 gets the opposite
            forces = np.concatenate((-force2, force2))
            return generalized_from_point_forces(f, bodies, offsets, forces, self.nbody, self.dimension)

        q_cons = on_bodies(self.k * stretch)
        q_nc = on_bodies(self.c * rate) if np.any(self.c) else None
        potential = float(0.5 * np.sum(self.k * stretch**2))
        return q_cons, q_nc, potential
