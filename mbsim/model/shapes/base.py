"""What a shape type is: the one object holding every fact of one type (MuJoCo's compiler keeps
them per geom type; here one module of mbsim/model/shapes per type).

A shape's checked scene values (``read_shape``: a dict of its field table's keys, a mesh's
trimesh under ``_mesh``) go through its type's methods; the result file's stored values (the
same keys, a pose as ``position``/``rotation``, a mesh's ``vertices``/``faces``) go through
the display ones. Conventions shared with the narrow phase (mbsim.model.contact.narrowphase.Side):

- local pose: the shape's origin and axes in its body's frame; a half-space boundary (plane,
  line) has its outward normal as the last axis;
- narrow-phase parameters: 3 numbers per shape (radius, half extents, ...), zero where unused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from mbsim.scene.fields import Context, Custom, Field, Name, Text, Vector, read_mapping
from mbsim.scene.load import KeyPath
from mbsim.scene.readers import read_orientation  # the one orientation reader of the scene

MassProps = tuple[float, np.ndarray | None, np.ndarray | None]  # volume, centre, inertia per unit density
AabbHalf = Callable[[np.ndarray, np.ndarray | None, np.ndarray], np.ndarray]


def _pose_reader(ctx: Context, path: KeyPath, value: Any) -> dict[str, np.ndarray]:
    got = read_mapping(
        ctx,
        path,
        value,
        {
            "position": Field(Vector("dim"), "shape origin in the body frame", None),
            "orientation": Field(Custom(read_orientation, "orientation"), "shape axes in the body frame", None),
        },
    )
    d = ctx.dimension
    pos = got["position"] if got["position"] is not None else np.zeros(d)
    if d == 3:
        from mbsim.model.spatial import quat_to_matrix

        quat = got["orientation"] if got["orientation"] is not None else np.array([1.0, 0, 0, 0])
        rot = quat_to_matrix(quat)
    else:
        a = float(got["orientation"][0]) if got["orientation"] is not None else 0.0
        rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return {"position": pos, "rotation": rot}


POSE = Field(Custom(_pose_reader, "{position, orientation} in the body frame"), "local pose", None)
SHAPE_NAME = Field(Name(), "optional name, unique on its body (compliant contacts pick shapes by it)", None)


def type_field(name: str) -> Field:
    return Field(Text(), name)


# kinds of world boxes (ShapeType.aabb_kernel): mbsim.model.contact.broadphase_kernels.AabbKernel's
# values, which mbsim.model.contact.detect checks at import (the compiled module imports the contact
# package, which imports the shapes)
AABB_BALL, AABB_BOX, AABB_CAPSULE, AABB_CYLINDER = range(4)


class ShapeType:
    """One shape type. Subclasses set the class attributes and override what differs.

    Attributes:
        name: the scene's ``type``.
        dimensions: the scene dimensions it exists in.
        fields: its scene keys (``name`` is added to every type by the registry).
        doc: one sentence for the scene reference.
        ground_only: only the ground may carry it.
        unbounded: a half-space boundary (plane, line): no world box, no bounding radius; the
            broad phase tests it against the other shapes' boxes.
        isotropic: the narrow phase needs no rotation (the shape looks the same turned: sphere,
            circle, point); its world rotation is not even computed.
        rounded: it has no flat face (sphere, capsule, circle, point), so a body carrying one
            never lies face on face on another (event_driven refuses stacks of bodies without).
        many_contact_points: it touches a face at many points at once (a mesh's vertices), which
            event_driven's contact modes cannot settle.
        solid: it has a volume (a compliant contact's master or slave: ``surface``).
        narrow_sdf: the narrow phase looks it up in its signed distance field
            (mbsim.model.contact.mesh_rigid.mesh_data of ``surface(values, fine=True)``).
        stored_triangles: its triangles are data (the result file stores them), not made from
            its sizes.
        aabb_kernel: its world box's kind (mbsim.model.contact.broadphase_kernels: AABB_BALL ...),
            computed by ``aabb_half`` and by the compiled step alike; -1: unbounded.
        display_sized: drawn at a size taken from the scene's extent (a point's ball, a planar
            shape's depth, a plane's patch), so the viewer sizes the scene before drawing it.
    """

    name: ClassVar[str]
    dimensions: ClassVar[tuple[int, ...]]
    fields: ClassVar[dict[str, Field]]
    doc: ClassVar[str]
    ground_only: ClassVar[bool] = False
    unbounded: ClassVar[bool] = False
    isotropic: ClassVar[bool] = False
    rounded: ClassVar[bool] = False
    many_contact_points: ClassVar[bool] = False
    solid: ClassVar[bool] = False
    narrow_sdf: ClassVar[bool] = False
    stored_triangles: ClassVar[bool] = False
    display_sized: ClassVar[bool] = False
    aabb_kernel: ClassVar[int] = -1

    # ---------------------------------------------------------------- scene values

    def load(self, ctx: Context, path: KeyPath, got: dict[str, Any], base_dir: Any) -> None:
        """Complete the checked values in place (a mesh reads its file); nothing by default."""

    def mass(self, values: dict[str, Any]) -> MassProps:
        """(volume, centre of volume, inertia about it) per unit density in the shape's own
        frame; in 2D volume is area. Massless shapes: (0, None, None)."""
        return 0.0, None, None

    def check_mass(self, ctx: Context, values: dict[str, Any]) -> None:
        """Refuse values whose mass properties are meaningless (an open mesh); nothing by default."""

    def check_contact(self, ctx: Context, values: dict[str, Any]) -> None:
        """Refuse values that rigid contact cannot use (an open mesh has no signed distance)."""

    def move(self, values: dict[str, Any], offset: np.ndarray) -> None:
        """Shift the shape by ``offset`` in its body's frame, in place (the body frame moves to the
        centre of mass). Pose-carrying types move their pose."""
        d = len(offset)
        if values.get("pose") is not None:
            values["pose"]["position"] = values["pose"]["position"] + offset
        elif "pose" in values:
            values["pose"] = {"position": np.array(offset, dtype=float), "rotation": np.eye(d)}

    # ---------------------------------------------------------------- contact

    def local_pose(self, values: dict[str, Any], d: int) -> tuple[np.ndarray, np.ndarray]:
        """(position (d,), rotation (d, d)) of the shape's frame in its body's frame."""
        pose = values.get("pose")
        if pose is None:
            return np.zeros(d), np.eye(d)
        return np.asarray(pose["position"], dtype=float), np.asarray(pose["rotation"], dtype=float)

    def param(self, values: dict[str, Any]) -> np.ndarray:
        """The narrow phase's 3 parameters (zero where unused)."""
        return np.zeros(3)

    def aabb_half(self, pos: np.ndarray, rot: np.ndarray | None, param: np.ndarray) -> np.ndarray:
        """Half extents (m, d) of the world AABBs of m shapes of this type about their origins,
        from world (pos (m, d), rot (m, d, d) or None when isotropic, param (m, 3)): the compiled
        kind ``aabb_kernel`` (mbsim.model.contact.broadphase_kernels.aabb_half_into)."""
        if self.aabb_kernel < 0:
            raise NotImplementedError(f"shape type '{self.name}' is unbounded: it has no box")
        from mbsim.model.contact.broadphase_kernels import aabb_half

        rot = None if rot is None else np.ascontiguousarray(rot, dtype=float)
        return aabb_half(self.aabb_kernel, rot, np.ascontiguousarray(param, dtype=float), pos.shape[1])

    def rbound(self, values: dict[str, Any]) -> float:
        """Radius of a ball about the shape's origin holding the whole shape, m (inf: unbounded).
        Every shape type gives its own (tests/model/test_shapes.py checks each against its surface)."""
        raise NotImplementedError(f"shape type '{self.name}' gives no bounding radius")

    # ---------------------------------------------------------------- triangles

    def surface(self, values: dict[str, Any], fine: bool = True):
        """A watertight trimesh of the shape in its own frame (before its pose): ``fine`` for a
        compliant contact's signed distance field, coarser for drawing. May be shared: copy it
        before changing it."""
        raise ValueError(f"a '{self.name}' shape has no volume for a compliant contact")

    def display_mesh(self, values: dict[str, Any], marker: float, depth: float):
        """The trimesh drawn for it in its own frame (``marker``: the size of a drawn point,
        ``depth``: the extrusion of a planar shape along z). Solid types draw their surface."""
        return self.surface(values, fine=False)

    def triangles(self, values: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """(vertices (n, 3), faces (m, 3)) stored in the result file when ``stored_triangles``."""
        raise NotImplementedError(f"shape type '{self.name}' stores no triangles")

    def __repr__(self) -> str:
        return f"<shape type {self.name}>"
