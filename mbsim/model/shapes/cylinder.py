"""Cylinder: solid, axis along its local z, centred; ``radius`` and ``length``."""

from __future__ import annotations

from typing import Any

import numpy as np

from mbsim.model.shapes.base import AABB_CYLINDER, POSE, MassProps, ShapeType, type_field
from mbsim.scene.fields import Field, Number


class Cylinder(ShapeType):
    name = "cylinder"
    dimensions = (3,)
    fields = {
        "type": type_field("cylinder"),
        "radius": Field(Number(positive=True), "m"),
        "length": Field(Number(positive=True), "along local z, m"),
        "pose": POSE,
    }
    doc = "solid cylinder, axis local z, centred"
    aabb_kernel = AABB_CYLINDER
    solid = True

    def mass(self, values: dict[str, Any]) -> MassProps:
        r, h = values["radius"], values["length"]
        vol = np.pi * r * r * h
        side = vol * (3 * r * r + h * h) / 12.0
        return vol, np.zeros(3), np.diag([side, side, 0.5 * vol * r * r])

    def param(self, values: dict[str, Any]) -> np.ndarray:
        # radius, half length
        return np.array([values["radius"], 0.5 * values["length"], 0.0])

    def rbound(self, values: dict[str, Any]) -> float:
        return float(np.hypot(values["radius"], 0.5 * values["length"]))

    def surface(self, values: dict[str, Any], fine: bool = True):
        import trimesh

        return trimesh.creation.cylinder(radius=values["radius"], height=values["length"], sections=64 if fine else 40)


CYLINDER = Cylinder()
