"""Capsule: a cylinder with hemispherical caps, axis along its local z; ``length`` between the
hemisphere centres."""

from __future__ import annotations

from typing import Any

import numpy as np

from mbsim.model.shapes.base import AABB_CAPSULE, POSE, MassProps, ShapeType, type_field
from mbsim.scene.fields import Field, Number


class Capsule(ShapeType):
    name = "capsule"
    dimensions = (3,)
    fields = {
        "type": type_field("capsule"),
        "radius": Field(Number(positive=True), "m"),
        "length": Field(Number(positive=True), "between hemisphere centres, m"),
        "pose": POSE,
    }
    doc = "cylinder with hemispherical caps, axis local z"
    aabb_kernel = AABB_CAPSULE
    rounded = True
    solid = True

    def mass(self, values: dict[str, Any]) -> MassProps:
        r, h = values["radius"], values["length"]  # length: between the hemisphere centres, axis z
        m_cyl = np.pi * r * r * h
        m_hemi = 2.0 / 3.0 * np.pi * r**3
        axial = 0.5 * m_cyl * r * r + 2.0 * m_hemi * 0.4 * r * r
        side = m_cyl * (h * h / 12.0 + r * r / 4.0) + 2.0 * m_hemi * (0.4 * r * r + h * h / 4.0 + 3.0 * h * r / 8.0)
        return m_cyl + 2 * m_hemi, np.zeros(3), np.diag([side, side, axial])

    def param(self, values: dict[str, Any]) -> np.ndarray:
        # radius, half length of the segment
        return np.array([values["radius"], 0.5 * values["length"], 0.0])

    def rbound(self, values: dict[str, Any]) -> float:
        return float(values["radius"] + 0.5 * values["length"])

    def surface(self, values: dict[str, Any], fine: bool = True):
        import trimesh

        count = [32, 32] if fine else [32, 16]
        return trimesh.creation.capsule(radius=values["radius"], height=values["length"], count=count)


CAPSULE = Capsule()
