"""Sphere: centred on its frame, ``radius``."""

from __future__ import annotations

from typing import Any

import numpy as np

from mbsim.model.shapes.base import AABB_BALL, POSE, MassProps, ShapeType, type_field
from mbsim.scene.fields import Field, Number


class Sphere(ShapeType):
    name = "sphere"
    dimensions = (3,)
    fields = {"type": type_field("sphere"), "radius": Field(Number(positive=True), "m"), "pose": POSE}
    doc = "sphere centred on its frame"
    aabb_kernel = AABB_BALL
    isotropic = True
    rounded = True
    solid = True

    def mass(self, values: dict[str, Any]) -> MassProps:
        r = values["radius"]
        vol = 4.0 / 3.0 * np.pi * r**3
        return vol, np.zeros(3), 0.4 * vol * r * r * np.eye(3)

    def param(self, values: dict[str, Any]) -> np.ndarray:
        return np.array([values["radius"], 0.0, 0.0])

    def rbound(self, values: dict[str, Any]) -> float:
        return float(values["radius"])

    def surface(self, values: dict[str, Any], fine: bool = True):
        import trimesh

        return trimesh.creation.icosphere(subdivisions=4 if fine else 3, radius=values["radius"])


SPHERE = Sphere()
