"""What a joint type declares and implements; the registry decorator.

A joint type is one module in this package with one class that declares:
- ``name``: the scene's ``type`` value; ``dimensions``: 2, 3 or both;
- ``keys``: the type-specific scene keys it accepts and ``required`` those it needs;
- ``coordinate``: the name of the joint coordinate a drive or spring acts on (or None);
and implements ``primitives(frame)`` (its constraint equations, mbsim.model.constraints)
and ``coordinate_primitive(frame)`` (the equation that measures its coordinate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from mbsim.model.constraints import Primitive
from mbsim.model.spatial import orthonormal_basis, perp


@dataclass
class JointFrame:
    """Geometry of one joint at t = 0, in the frames every primitive needs.

    Attributes:
        body_i, body_j: extended body indices (ground = nbody).
        s_i, s_j: joint point in body i's and body j's frames.
        point: joint point, world (from body j's side).
        axis_i, axis_j: joint axis in body i's and body j's frames (unit; None if not given).
        rot_i, rot_j: initial rotations body -> world ((3,3) or (2,2)).
        axes: universal joint: first axis in body i, second in body j (body frames).
        dimension: 2 or 3.
    """

    body_i: int
    body_j: int
    s_i: np.ndarray
    s_j: np.ndarray
    point: np.ndarray
    axis_i: np.ndarray | None
    axis_j: np.ndarray | None
    rot_i: np.ndarray
    rot_j: np.ndarray
    axes: tuple[np.ndarray, np.ndarray] | None
    dimension: int

    # building blocks shared by several joint types ------------------------------

    def point_rows(self) -> Primitive:
        labels = ["x", "y", "z"][: self.dimension]
        return Primitive(
            "point", self.body_i, self.body_j, {"s_i": self.s_i, "s_j": self.s_j}, [f"point {c}" for c in labels]
        )

    def axis_parallel_rows(self) -> list[Primitive]:
        """Two dot1 rows keeping body j's axis parallel to body i's (3D)."""
        b1, b2 = orthonormal_basis(self.axis_i)
        return [
            Primitive("dot1", self.body_i, self.body_j, {"a_i": b, "b_j": self.axis_j}, [f"axis _|_ {name}"])
            for b, name in ((b1, "b1"), (b2, "b2"))
        ]

    def axis_offset_rows(self) -> list[Primitive]:
        """Body j's point stays on body i's axis line: two dot2 rows (3D) or one (2D)."""
        if self.dimension == 2:
            normals = [("n", perp(self.axis_i))]
        else:
            b1, b2 = orthonormal_basis(self.axis_i)
            normals = [("b1", b1), ("b2", b2)]
        return [
            Primitive(
                "dot2", self.body_i, self.body_j, {"a_i": n, "s_i": self.s_i, "s_j": self.s_j}, [f"offset along {name}"]
            )
            for name, n in normals
        ]

    def twist_rows(self) -> list[Primitive]:
        """Rotation about the axis locked: 3D one dot1 row; 2D the angle row."""
        if self.dimension == 2:
            return [self.relative_angle()]
        b1, b2 = orthonormal_basis(self.axis_i)
        c_j = self.rot_j.T @ self.rot_i @ b2  # body-j vector equal to b2 at t = 0
        return [Primitive("dot1", self.body_i, self.body_j, {"a_i": b1, "b_j": c_j}, ["twist"])]

    def relative_angle(self) -> Primitive:
        """Rotation of body j relative to body i about the axis, zero at t = 0."""
        if self.dimension == 2:
            offset = float(
                np.arctan2(self.rot_j[1, 0], self.rot_j[0, 0]) - np.arctan2(self.rot_i[1, 0], self.rot_i[0, 0])
            )
            return Primitive("angle", self.body_i, self.body_j, {}, ["angle"], offset=offset)
        b1, b2 = orthonormal_basis(self.axis_i)
        c_j = self.rot_j.T @ self.rot_i @ b1
        return Primitive("angle", self.body_i, self.body_j, {"b_i": b1, "e_i": b2, "c_j": c_j}, ["angle"])

    def axial_position(self) -> Primitive:
        """Distance of body j's point from body i's point along the axis."""
        return Primitive(
            "dot2", self.body_i, self.body_j, {"a_i": self.axis_i, "s_i": self.s_i, "s_j": self.s_j}, ["position"]
        )


class JointType:
    """Base of joint types (see the module docstring)."""

    name: ClassVar[str]
    dimensions: ClassVar[tuple[int, ...]] = (2, 3)
    keys: ClassVar[frozenset[str]] = frozenset()
    required: ClassVar[frozenset[str]] = frozenset()
    coordinate: ClassVar[str | None] = None
    doc: ClassVar[str] = ""

    @classmethod
    def allowed_keys(cls, dimension: int) -> frozenset[str]:
        return cls.keys

    @classmethod
    def required_keys(cls, dimension: int) -> frozenset[str]:
        return cls.required

    @classmethod
    def primitives(cls, frame: JointFrame) -> list[Primitive]:
        """The constraint equations of this joint (without its drive)."""
        return []

    @classmethod
    def coordinate_primitive(cls, frame: JointFrame) -> Primitive | None:
        """The equation whose value is the joint coordinate (for drives and springs)."""
        return None


JOINT_TYPES: dict[str, type[JointType]] = {}


def register_joint(cls: type[JointType]) -> type[JointType]:
    JOINT_TYPES[cls.name] = cls
    return cls
