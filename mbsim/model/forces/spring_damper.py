"""Linear spring-damper between two body points: f = k (L - L0) + c dL/dt along the line."""

from __future__ import annotations

import numpy as np

from mbsim.model.force_kernels import spring_damper_forces
from mbsim.model.forces.base import BuildSetup, ForceType, register_force
from mbsim.model.model import Frames
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
    """Spring-dampers, batched: bodies b1, b2 (extended: nbody = ground), local points s1, s2
    (n, d), k, c, rest (n,); evaluated by the compiled kernel the compiled step runs
    (mbsim.model.force_kernels.spring_dampers_at)."""

    def __init__(self, b1, b2, s1, s2, k, c, rest, nbody: int, dimension: int) -> None:
        self.b1 = np.ascontiguousarray(b1, dtype=np.int64)
        self.b2 = np.ascontiguousarray(b2, dtype=np.int64)
        self.s1 = np.ascontiguousarray(s1, dtype=float)
        self.s2 = np.ascontiguousarray(s2, dtype=float)
        self.k = np.ascontiguousarray(k, dtype=float)
        self.c = np.ascontiguousarray(c, dtype=float)
        self.rest = np.ascontiguousarray(rest, dtype=float)
        self.nbody, self.dimension = nbody, dimension

    def evaluate(self, f: Frames, t: float, data=None) -> tuple[np.ndarray, np.ndarray | None, float]:
        """(elastic Q, damping Q or None without damping, potential) at the state of ``f``."""
        q_cons, q_nc, potential = spring_damper_forces(
            f, self.dimension, self.nbody, self.b1, self.b2, self.s1, self.s2, self.k, self.c, self.rest
        )
        return q_cons, (q_nc if np.any(self.c) else None), potential
