"""Narrow phase of rigid contact: the contact points of candidate shape pairs, one function per
pair of shape types, each vectorised over every candidate pair of its types.

A pair function ``f(a, b, margin) -> Found`` receives two ``Side``s (world pose and parameters of
shape a and of shape b, row r of both being candidate pair r) and returns the points with
gap < margin. Conventions, for every function:

- the normal is a unit world vector pointing from shape a to shape b;
- point_a lies on a's surface, point_b on b's surface, gap = (point_b - point_a) . normal, so
  that gap < 0 is penetration and point_b then lies behind point_a along the normal;
- ``feature`` numbers the touching features within the pair (which corner, which cap rim
  point, which face pair and clip point); it stays the same while the same features touch,
  so that a solver can warm-start from the previous step's impulses.

Shape parameters (``Side.param``, (m, 3)): sphere and circle (r, 0, 0); point (0, 0, 0), a
sphere of radius zero, so that every sphere function also serves points; box and rectangle
the half extents; capsule and cylinder (r, half length, 0) with the axis along local z; plane
and line have no parameters: the outward normal is the last column of the rotation.

``PAIR_FUNCTIONS`` is the collision table keyed by (type_a, type_b) (MuJoCo's collision
table); ``pair_function`` finds the row of either order. Every row is a compiled kernel
(mbsim.model.contact.narrowphase_kernels, one per type pair, each over one candidate pair; the
row here runs it over the candidate rows). Meshes' rows look sample points up in signed distance
fields (mbsim.model.contact.mesh_rigid: the method, and each mesh's data, ``Side.data``). Boxes use the
separating-axis test (Ericson, Real-Time Collision Detection, §4.4.1, 15 axes) with face
clipping in the style of Box2D and ODE's dBoxBox, and a manifold reduced to at most four
points (Bullet's reduceContacts: deepest, farthest, largest triangle, largest quad). A new
shape type adds its rows here with ``register``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mbsim.model.contact.narrowphase_kernels import HALF_FEATURE, Kernel, MeshTable, pair_points

MAX_FEATURE = 4096  # local feature numbers are below this (detect packs them into the key)
if MAX_FEATURE != 2 * HALF_FEATURE:  # the meshes' kernels number b's sample points from the half up
    raise ImportError("narrowphase_kernels.HALF_FEATURE is not half of narrowphase.MAX_FEATURE")


@dataclass
class Side:
    """One side of m candidate pairs: world poses and parameters of its shapes.

    Attributes:
        pos: (m, d) shape origin, world, m.
        rot: (m, d, d) shape axes -> world (None for spheres, circles and points).
        param: (m, 3) shape parameters (see the module docstring).
        data: per row, the shape's own data for types that need more than param (meshes).
    """

    pos: np.ndarray
    rot: np.ndarray | None
    param: np.ndarray
    data: list | None = None  # per row, for types with data of their own (meshes: MeshData)


@dataclass
class Found:
    """Contact points found in m candidate pairs (k rows).

    Attributes:
        pair: (k,) candidate row each point belongs to.
        point_a, point_b: (k, d) world points on the surfaces of a and b.
        normal: (k, d) unit world normal from a to b.
        gap: (k,) (point_b - point_a) . normal, m; < 0 is penetration.
        feature: (k,) int feature number within the pair (< MAX_FEATURE).
    """

    pair: np.ndarray
    point_a: np.ndarray
    point_b: np.ndarray
    normal: np.ndarray
    gap: np.ndarray
    feature: np.ndarray

    @staticmethod
    def empty(d: int) -> Found:
        z = np.zeros((0, d))
        return Found(np.zeros(0, dtype=np.int64), z, z, z, np.zeros(0), np.zeros(0, dtype=np.int64))


PairFunction = Callable[[Side, Side, float], Found]
PAIR_FUNCTIONS: dict[tuple[str, str], PairFunction] = {}
NO_CONTACT = frozenset({("point", "point")})  # pairs that cannot touch: skipped, not an error


def register(*keys: tuple[str, str]) -> Callable[[PairFunction], PairFunction]:
    """Decorator: make ``f`` the row of each (type_a, type_b) in ``keys``."""

    def add(function: PairFunction) -> PairFunction:
        for key in keys:
            PAIR_FUNCTIONS[key] = function
        return function

    return add


def pair_function(type_a: str, type_b: str) -> tuple[PairFunction | None, bool]:
    """The function of a shape-type pair and whether its arguments go in the other order.

    Returns (None, False) for pairs that never touch (two points). Raises KeyError for pairs
    that have no function yet.
    """
    if (type_a, type_b) in PAIR_FUNCTIONS:
        return PAIR_FUNCTIONS[(type_a, type_b)], False
    if (type_b, type_a) in PAIR_FUNCTIONS:
        return PAIR_FUNCTIONS[(type_b, type_a)], True
    if (type_a, type_b) in NO_CONTACT or (type_b, type_a) in NO_CONTACT:
        return None, False
    raise KeyError((type_a, type_b))


def partners(shape_type: str) -> list[str]:
    """The shape types that ``shape_type`` has rigid contact with (for error messages)."""
    out = {b for a, b in PAIR_FUNCTIONS if a == shape_type} | {a for a, b in PAIR_FUNCTIONS if b == shape_type}
    return sorted(out)


# ----------------------------------------------------------------------------- primitive shapes


def _compiled(kernel: Kernel) -> PairFunction:
    """The row of a compiled kernel: it runs over the candidate rows of a and b."""

    def run(a: Side, b: Side, margin: float) -> Found:
        c = np.ascontiguousarray
        rot_a = None if a.rot is None else c(a.rot, dtype=float)
        rot_b = None if b.rot is None else c(b.rot, dtype=float)
        mesh_a = None if a.data is None else MeshTable(list(a.data))
        mesh_b = None if b.data is None else MeshTable(list(b.data))
        found = pair_points(
            kernel,
            c(a.pos, dtype=float),
            rot_a,
            c(a.param, dtype=float),
            c(b.pos, dtype=float),
            rot_b,
            c(b.param, dtype=float),
            margin,
            mesh_a,
            mesh_b,
        )
        return Found(*found)

    run.__name__ = run.__qualname__ = kernel.name.lower()
    run.__doc__ = f"Compiled kernel {kernel.name} (narrowphase_kernels) over the candidate rows."
    run.kernel = int(kernel)  # the detector's compiled pass calls the kernel itself
    return run


# the kernel of each primitive type pair; its behaviour and features: the kernel's comment
for _kernel, _keys in (
    (Kernel.HALFSPACE_SPHERE, (("plane", "sphere"), ("plane", "point"), ("line", "circle"), ("line", "point"))),
    (Kernel.HALFSPACE_BOX, (("plane", "box"), ("line", "rectangle"))),
    (Kernel.HALFSPACE_CAPSULE, (("plane", "capsule"),)),
    (Kernel.HALFSPACE_CYLINDER, (("plane", "cylinder"),)),
    (Kernel.SPHERE_SPHERE, (("sphere", "sphere"), ("sphere", "point"), ("circle", "circle"), ("circle", "point"))),
    (Kernel.BOX_SPHERE, (("box", "sphere"), ("box", "point"), ("rectangle", "circle"), ("rectangle", "point"))),
    (Kernel.CAPSULE_SPHERE, (("capsule", "sphere"), ("capsule", "point"))),
    (Kernel.CAPSULE_CAPSULE, (("capsule", "capsule"),)),
    (Kernel.CYLINDER_SPHERE, (("cylinder", "sphere"), ("cylinder", "point"))),
    (Kernel.BOX_BOX, (("box", "box"),)),
    (Kernel.RECTANGLE_RECTANGLE, (("rectangle", "rectangle"),)),
    (Kernel.PLANE_MESH, (("plane", "mesh"),)),
    (Kernel.MESH_SPHERE, (("mesh", "sphere"), ("mesh", "point"))),
    (Kernel.BOX_MESH, (("box", "mesh"),)),
    (Kernel.MESH_MESH, (("mesh", "mesh"),)),
):
    register(*_keys)(_compiled(_kernel))
