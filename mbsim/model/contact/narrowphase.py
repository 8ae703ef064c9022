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
table); ``pair_function`` finds the row of either order. Boxes use the separating-axis test
(Ericson, Real-Time Collision Detection, §4.4.1, 15 axes) with face clipping in the style of
Box2D and ODE's dBoxBox, and a manifold reduced to at most four points (Bullet's
reduceContacts: deepest, farthest, largest triangle, largest quad). A new shape type (a
mesh through its signed distance field) adds its rows here with ``register``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

TINY = 1e-12  # m: below this two centres coincide and a normal is picked by convention
PARALLEL = 1e-6  # sin of the angle below which two box edges count as parallel (no edge axis)
MAX_FEATURE = 4096  # local feature numbers are below this (detect packs them into the key)
EPS_REL = 1e-6  # manifold points closer than this (relative to the face size) are one point
LEVEL = 1e-3  # manifold points within this depth (relative to the face size) are equally deep


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


# ----------------------------------------------------------------------------- helpers


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("...i,...i->...", a, b)


def _rotate(R: np.ndarray, v: np.ndarray) -> np.ndarray:
    """R @ v over the leading axes."""
    return np.einsum("...ij,...j->...i", R, v)


def _unrotate(R: np.ndarray, v: np.ndarray) -> np.ndarray:
    """R^T @ v over the leading axes."""
    return np.einsum("...ji,...j->...i", R, v)


def _sign(x: np.ndarray) -> np.ndarray:
    """+1 or -1 (+1 at zero), so that a tie picks a side instead of none."""
    return np.where(x >= 0.0, 1.0, -1.0)


def _cross2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _found(pair, point_a, point_b, normal, gap, feature, margin: float) -> Found:
    """A Found of the rows with gap < margin."""
    keep = gap < margin
    return Found(
        pair[keep], point_a[keep], point_b[keep], normal[keep], gap[keep], np.asarray(feature, dtype=np.int64)[keep]
    )


def _concat(parts: list[Found], d: int) -> Found:
    if not parts:
        return Found.empty(d)
    return Found(*(np.concatenate([getattr(p, f) for p in parts]) for f in Found.__dataclass_fields__))


def _spheres(ca, ra, cb, rb):
    """Closest points of spheres (ca, ra) and (cb, rb): point_a, point_b, normal a -> b, gap."""
    delta = cb - ca
    dist = np.linalg.norm(delta, axis=1)
    up = np.zeros_like(ca)
    up[:, -1] = 1.0  # coincident centres: push along +z (+y in 2D) by convention
    normal = np.where((dist > TINY)[:, None], delta / np.maximum(dist, TINY)[:, None], up)
    return ca + normal * ra[:, None], cb - normal * rb[:, None], normal, dist - ra - rb


def _segments(ca, ua, ha, cb, ub, hb):
    """Parameters (s, t) of the closest points ca + s ua, cb + t ub of two segments, |s| <= ha,
    |t| <= hb, unit directions (Ericson §5.1.9, with centred parameters)."""
    r = ca - cb
    b = _dot(ua, ub)
    c = _dot(ua, r)
    f = _dot(ub, r)
    denom = 1.0 - b * b
    s = np.where(denom > 1e-12, np.clip((b * f - c) / np.maximum(denom, 1e-12), -ha, ha), 0.0)
    t = f + s * b
    t_clamped = np.clip(t, -hb, hb)
    s = np.where(t != t_clamped, np.clip(t_clamped * b - c, -ha, ha), s)
    return s, t_clamped


# ----------------------------------------------------------------------------- half-spaces


@register(("plane", "sphere"), ("plane", "point"), ("line", "circle"), ("line", "point"))
def halfspace_sphere(a: Side, b: Side, margin: float) -> Found:
    """Plane (line) a against sphere, circle or point b: one point below the centre."""
    n = a.rot[..., -1]
    r = b.param[:, 0]
    height = _dot(n, b.pos - a.pos)
    point_b = b.pos - n * r[:, None]
    point_a = b.pos - n * height[:, None]
    pair = np.arange(len(r))
    return _found(pair, point_a, point_b, n, height - r, np.zeros(len(r)), margin)


_CORNERS = {
    d: np.array(np.meshgrid(*([[-1.0, 1.0]] * d), indexing="ij")).reshape(d, -1).T for d in (2, 3)
}  # (2^d, d) corner signs; corner k is the feature number


@register(("plane", "box"), ("line", "rectangle"))
def halfspace_box(a: Side, b: Side, margin: float) -> Found:
    """Plane (line) a against box (rectangle) b: the lowest 4 (2) corners with gap < margin."""
    d = b.pos.shape[1]
    local = _CORNERS[d][None] * b.param[:, None, :d]
    corners = b.pos[:, None, :] + np.einsum("mij,mkj->mki", b.rot, local)
    n = a.rot[..., -1]
    height = np.einsum("mki,mi->mk", corners - a.pos[:, None, :], n)
    cap = 4 if d == 3 else 2
    lowest = np.argpartition(height, cap - 1, axis=1)[:, :cap]
    low = np.take_along_axis(height, lowest, axis=1)
    rows, col = np.nonzero(low < margin)
    k = lowest[rows, col]
    point_b = corners[rows, k]
    gap = low[rows, col]
    point_a = point_b - n[rows] * gap[:, None]
    return Found(rows, point_a, point_b, n[rows], gap, k.astype(np.int64))


@register(("plane", "capsule"))
def halfspace_capsule(a: Side, b: Side, margin: float) -> Found:
    """Plane a against capsule b: both end spheres (features 0 and 1), so that a lying capsule rests on two."""
    u = b.rot[..., 2]
    half = b.param[:, 1]
    parts = []
    for feature, sign in enumerate((1.0, -1.0)):
        found = halfspace_sphere(a, Side(b.pos + sign * u * half[:, None], None, b.param), margin)
        found.feature[:] = feature
        parts.append(found)
    return _concat(parts, 3)


@register(("plane", "cylinder"))
def halfspace_cylinder(a: Side, b: Side, margin: float) -> Found:
    """Plane a against cylinder b, per cap: four rim points (at the cap's local +-x, +-y) when the
    cap lies flat within the margin (r sin(tilt) <= margin/2: all its rim points are within the
    margin of each other), so that a standing cylinder rests on a polygon; otherwise the lowest
    rim point. Features: cap * 5 + (0..3 the fixed rim points, 4 the lowest one).
    """
    n = a.rot[..., -1]
    u = b.rot[..., 2]
    r, half = b.param[:, 0], b.param[:, 1]
    m = len(r)
    pair = np.arange(m)
    tilt = n - u * _dot(n, u)[:, None]  # n's part in the cap plane; |tilt| = sin(tilt angle)
    sin_tilt = np.linalg.norm(tilt, axis=1)
    flat = r * sin_tilt <= 0.5 * margin + 1e-12 * r
    lowest_dir = -tilt / np.maximum(sin_tilt, TINY)[:, None]
    rim = (b.rot[..., 0], b.rot[..., 1], -b.rot[..., 0], -b.rot[..., 1])
    parts = []
    for cap, sign in enumerate((1.0, -1.0)):
        centre = b.pos + sign * u * half[:, None]
        for k, direction in enumerate((*rim, lowest_dir)):
            use = flat if k < 4 else ~flat
            point_b = centre + direction * r[:, None]
            height = _dot(n, point_b - a.pos)
            point_a = point_b - n * height[:, None]
            gap = np.where(use, height, np.inf)
            parts.append(_found(pair, point_a, point_b, n, gap, np.full(m, 5 * cap + k), margin))
    return _concat(parts, 3)


# ----------------------------------------------------------------------------- spheres and points


@register(("sphere", "sphere"), ("sphere", "point"), ("circle", "circle"), ("circle", "point"))
def sphere_sphere(a: Side, b: Side, margin: float) -> Found:
    """Two spheres (circles), either of which may be a point (radius zero)."""
    point_a, point_b, normal, gap = _spheres(a.pos, a.param[:, 0], b.pos, b.param[:, 0])
    m = len(gap)
    return _found(np.arange(m), point_a, point_b, normal, gap, np.zeros(m), margin)


@register(("box", "sphere"), ("box", "point"), ("rectangle", "circle"), ("rectangle", "point"))
def box_sphere(a: Side, b: Side, margin: float) -> Found:
    """Box (rectangle) a against sphere, circle or point b.

    Outside the box: the closest point of the box (clamped centre); the feature is the region
    (below, within or above the box along each axis: face, edge or corner region, 3^d codes).
    Centre inside: pushed out through the nearest face (feature 27 + 2 axis + side).
    """
    d = a.pos.shape[1]
    h = a.param[:, :d]
    r = b.param[:, 0]
    m = len(r)
    rows = np.arange(m)
    local = _unrotate(a.rot, b.pos - a.pos)
    clamped = np.clip(local, -h, h)
    diff = local - clamped
    dist = np.linalg.norm(diff, axis=1)
    outside = dist > TINY
    depth = h - np.abs(local)
    k = np.argmin(depth, axis=1)
    side = _sign(local[rows, k])
    n_in = np.zeros_like(local)
    n_in[rows, k] = side
    face = local.copy()
    face[rows, k] = side * h[rows, k]
    n_local = np.where(outside[:, None], diff / np.maximum(dist, TINY)[:, None], n_in)
    p_local = np.where(outside[:, None], clamped, face)
    gap = np.where(outside, dist, -depth[rows, k]) - r
    normal = _rotate(a.rot, n_local)
    point_a = a.pos + _rotate(a.rot, p_local)
    point_b = b.pos - normal * r[:, None]
    region = (local >= -h).astype(np.int64) + (local > h)
    code = region @ (3 ** np.arange(d))
    feature = np.where(outside, code, 27 + 2 * k + (side > 0))
    return _found(rows, point_a, point_b, normal, gap, feature, margin)


@register(("capsule", "sphere"), ("capsule", "point"))
def capsule_sphere(a: Side, b: Side, margin: float) -> Found:
    """Capsule a against sphere or point b: the closest point of the axis segment as a sphere."""
    u = a.rot[..., 2]
    t = np.clip(_dot(b.pos - a.pos, u), -a.param[:, 1], a.param[:, 1])
    point_a, point_b, normal, gap = _spheres(a.pos + u * t[:, None], a.param[:, 0], b.pos, b.param[:, 0])
    m = len(gap)
    return _found(np.arange(m), point_a, point_b, normal, gap, np.zeros(m), margin)


@register(("capsule", "capsule"))
def capsule_capsule(a: Side, b: Side, margin: float) -> Found:
    """Two capsules: the closest points of the axis segments (feature 0); when the axes are so
    nearly parallel that the ends of their overlap are within the margin of each other
    (sin(angle) * overlap <= margin), the two ends of the overlap instead (features 1, 2), so
    that a capsule lying along another does not rock on one point.
    """
    ua, ub = a.rot[..., 2], b.rot[..., 2]
    ha, hb = a.param[:, 1], b.param[:, 1]
    ra, rb = a.param[:, 0], b.param[:, 0]
    m = len(ra)
    pair = np.arange(m)
    # overlap of b's axis projected on a's axis
    cos = _dot(ua, ub)
    sin = np.sqrt(np.maximum(0.0, 1.0 - cos * cos))
    centre = _dot(b.pos - a.pos, ua)
    reach = hb * np.abs(cos)
    lo = np.maximum(centre - reach, -ha)
    hi = np.minimum(centre + reach, ha)
    two = (hi - lo > TINY) & (sin * (hi - lo) <= max(margin, 0.0) + 1e-12 * ha)
    parts = []
    s, t = _segments(a.pos, ua, ha, b.pos, ub, hb)
    pa, pb, n, gap = _spheres(a.pos + ua * s[:, None], ra, b.pos + ub * t[:, None], rb)
    parts.append(_found(pair, pa, pb, n, np.where(two, np.inf, gap), np.zeros(m), margin))
    for feature, s_end in ((1, lo), (2, hi)):
        on_a = a.pos + ua * s_end[:, None]
        t_end = np.clip(_dot(on_a - b.pos, ub), -hb, hb)
        pa, pb, n, gap = _spheres(on_a, ra, b.pos + ub * t_end[:, None], rb)
        parts.append(_found(pair, pa, pb, n, np.where(two, gap, np.inf), np.full(m, feature), margin))
    return _concat(parts, 3)


@register(("cylinder", "sphere"), ("cylinder", "point"))
def cylinder_sphere(a: Side, b: Side, margin: float) -> Found:
    """Cylinder a against sphere or point b: the closest point of the solid cylinder to the
    centre, or, for a centre inside, the exit through the nearer of side and cap.
    Features: 0 side, 1 top cap, 2 bottom cap, 3 top rim, 4 bottom rim (by region).
    """
    r, half = a.param[:, 0], a.param[:, 1]
    rs = b.param[:, 0]
    m = len(r)
    local = _unrotate(a.rot, b.pos - a.pos)
    radial, z = local[:, :2], local[:, 2]
    rho = np.linalg.norm(radial, axis=1)
    ex = np.zeros_like(radial)
    ex[:, 0] = 1.0
    radial_dir = np.where((rho > TINY)[:, None], radial / np.maximum(rho, TINY)[:, None], ex)
    closest = np.concatenate((radial_dir * np.minimum(rho, r)[:, None], np.clip(z, -half, half)[:, None]), axis=1)
    diff = local - closest
    dist = np.linalg.norm(diff, axis=1)
    outside = dist > TINY
    side_depth, cap_depth = r - rho, half - np.abs(z)
    through_side = side_depth < cap_depth
    zs = _sign(z)
    n_cap = np.zeros((m, 3))
    n_cap[:, 2] = zs
    n_in = np.where(through_side[:, None], np.concatenate((radial_dir, np.zeros((m, 1))), axis=1), n_cap)
    p_in = np.where(
        through_side[:, None],
        np.concatenate((radial_dir * r[:, None], z[:, None]), axis=1),
        np.concatenate((radial, (zs * half)[:, None]), axis=1),
    )
    n_local = np.where(outside[:, None], diff / np.maximum(dist, TINY)[:, None], n_in)
    p_local = np.where(outside[:, None], closest, p_in)
    gap = np.where(outside, dist, -np.minimum(side_depth, cap_depth)) - rs
    normal = _rotate(a.rot, n_local)
    point_a = a.pos + _rotate(a.rot, p_local)
    point_b = b.pos - normal * rs[:, None]
    beyond_cap = np.abs(z) > half
    beyond_side = rho > r
    cap_id = np.where(zs > 0, 1, 2)
    feature = np.where(
        outside,
        np.where(beyond_cap & beyond_side, cap_id + 2, np.where(beyond_cap, cap_id, 0)),
        np.where(through_side, 0, cap_id),
    )
    return _found(np.arange(m), point_a, point_b, normal, gap, feature, margin)


# ----------------------------------------------------------------------------- boxes and rectangles


def _prefer_second(first: np.ndarray, second: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Take the second axis only when it separates clearly more (stable choice, Box2D's k_tol)."""
    return second > first + 0.05 * np.abs(first) + 1e-5 * scale


def _reduce(uv: np.ndarray, gap: np.ndarray, valid: np.ndarray, scale: np.ndarray, keep: int) -> np.ndarray:
    """At most ``keep`` (2 or 4) of the candidate points per row, spanning the largest area.

    Bullet's reduceContacts: the deepest point, then the farthest from it, then the farthest
    from that line on either side, then the farthest on the other side. Points that add less
    than EPS_REL * scale are dropped, so duplicates never survive. Points within LEVEL * scale
    of the deepest count as equally deep, and the first is then the
    one farthest along a fixed direction of the face, so that the choice (and the features)
    stays put under the jitter of resting contact.

    Args:
        uv: (m, K, 2) candidate points in the contact plane (2D: second column zero).
        gap: (m, K); valid: (m, K) bool; scale: (m,) size of the reference face, m.
    Returns:
        (m, K) bool: the chosen candidates.
    """
    m = len(gap)
    rows = np.arange(m)
    chosen = np.zeros(valid.shape, dtype=bool)
    any_valid = valid.any(axis=1)
    eps = EPS_REL * scale
    deepest = np.min(np.where(valid, gap, np.inf), axis=1)
    level = valid & (gap <= (deepest + LEVEL * scale)[:, None])
    first = np.argmax(np.where(level, uv[..., 0] * 0.8 + uv[..., 1] * 0.6, -np.inf), axis=1)
    chosen[rows, first] = any_valid
    p1 = uv[rows, first]
    far2 = np.where(valid, np.sum((uv - p1[:, None]) ** 2, axis=2), -1.0)
    second = np.argmax(far2, axis=1)
    ok = any_valid & (far2[rows, second] > eps**2)
    chosen[rows[ok], second[ok]] = True
    if keep <= 2:
        return chosen
    edge = uv[rows, second] - p1
    length = np.linalg.norm(edge, axis=1)
    cross = _cross2(edge[:, None, :], uv - p1[:, None])
    third = np.argmax(np.where(valid, np.abs(cross), -1.0), axis=1)
    ok &= np.abs(cross[rows, third]) > eps * length
    chosen[rows[ok], third[ok]] = True
    side = _sign(cross[rows, third])
    other = np.where(valid, -side[:, None] * cross, -1.0)
    fourth = np.argmax(other, axis=1)
    ok &= other[rows, fourth] > eps * length
    chosen[rows[ok], fourth[ok]] = True
    return chosen


_SQUARE = np.array([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]])  # face corners in cyclic order


def _box_face(c_ref, R_ref, h_ref, c_inc, R_inc, h_inc, k, margin):
    """Face contact of boxes: reference face normal to axis k of the reference box, incident face
    of the other box clipped to it.

    The overlap of the reference face and the incident face (projected along the normal) is the
    convex polygon whose corners are among: incident corners inside the reference face (0-3),
    reference corners inside the projected incident face (4-7), and crossings of their edges
    (8 + 4 incident edge + reference edge). Each corner x on the reference face pairs with the
    point x + gap n of the incident face plane; at most four are kept (``_reduce``).

    Returns rows, point_ref, point_inc, normal (ref -> inc), gap, and the local feature (incident
    face id 0-5 times 24 plus the candidate number).
    """
    m = len(c_ref)
    rows = np.arange(m)
    axis = R_ref[rows, :, k]
    normal = axis * _sign(_dot(axis, c_inc - c_ref))[:, None]
    k1, k2 = (k + 1) % 3, (k + 2) % 3
    U, V = R_ref[rows, :, k1], R_ref[rows, :, k2]
    hu, hv = h_ref[rows, k1], h_ref[rows, k2]
    centre = c_ref + normal * h_ref[rows, k][:, None]
    # incident face: the face of the other box most anti-parallel to the normal
    along = _unrotate(R_inc, normal)
    j = np.argmax(np.abs(along), axis=1)
    sj = -_sign(along[rows, j])
    n_inc = R_inc[rows, :, j] * sj[:, None]
    f_inc = c_inc + n_inc * h_inc[rows, j][:, None]
    j1, j2 = (j + 1) % 3, (j + 2) % 3
    P = R_inc[rows, :, j1] * h_inc[rows, j1][:, None]
    Q = R_inc[rows, :, j2] * h_inc[rows, j2][:, None]
    corners = f_inc[:, None] + _SQUARE[None, :, :1] * P[:, None] + _SQUARE[None, :, 1:] * Q[:, None]
    rel = corners - centre[:, None]
    inc = np.stack((_dot(rel, U[:, None]), _dot(rel, V[:, None])), axis=2)  # (m, 4, 2) in the face plane
    ref = _SQUARE[None] * np.stack((hu, hv), axis=1)[:, None]
    scale = np.maximum(hu, hv)
    tol = 1e-9 * scale
    # incident corners inside the reference face
    ok_inc = (np.abs(inc[..., 0]) <= (hu + tol)[:, None]) & (np.abs(inc[..., 1]) <= (hv + tol)[:, None])
    # reference corners inside the incident quad (convex; its orientation from its signed area)
    edges = np.roll(inc, -1, axis=1) - inc
    orient = _sign(np.sum(_cross2(inc, np.roll(inc, -1, axis=1)), axis=1))
    inside = _cross2(edges[:, None, :, :], ref[:, :, None, :] - inc[:, None, :, :]) * orient[:, None, None]
    ok_ref = np.all(inside >= -(tol * scale)[:, None, None], axis=2)
    # crossings of incident edges (p + s e) with reference edges (q + t f)
    ref_edges = np.roll(ref, -1, axis=1) - ref
    denom = _cross2(edges[:, :, None, :], ref_edges[:, None, :, :])
    w = ref[:, None, :, :] - inc[:, :, None, :]
    safe = np.where(np.abs(denom) > TINY * scale[:, None, None] ** 2, denom, 1.0)
    s = _cross2(w, ref_edges[:, None, :, :]) / safe
    t = _cross2(w, edges[:, :, None, :]) / safe
    ok_cross = (np.abs(denom) > TINY * scale[:, None, None] ** 2) & (s >= 0) & (s <= 1) & (t >= 0) & (t <= 1)
    crossing = inc[:, :, None, :] + s[..., None] * edges[:, :, None, :]
    uv = np.concatenate((inc, ref, crossing.reshape(m, 16, 2)), axis=1)  # (m, 24, 2)
    valid = np.concatenate((ok_inc, ok_ref, ok_cross.reshape(m, 16)), axis=1)
    on_ref = centre[:, None] + uv[..., :1] * U[:, None] + uv[..., 1:] * V[:, None]
    gap = _dot(n_inc[:, None], f_inc[:, None] - on_ref) / _dot(n_inc, normal)[:, None]
    valid &= gap < margin
    chosen = _reduce(uv, gap, valid, scale, 4)
    r, c = np.nonzero(chosen)
    p_ref = on_ref[r, c]
    g = gap[r, c]
    p_inc = p_ref + normal[r] * g[:, None]
    feature = (2 * j[r] + (sj[r] > 0)) * 24 + c
    return r, p_ref, p_inc, normal[r], g, feature


@register(("box", "box"))
def box_box(a: Side, b: Side, margin: float) -> Found:
    """Two boxes: separating-axis test over the 15 axes (3 + 3 face normals, 9 edge crossings),
    then, on the axis of least penetration (faces preferred unless an edge axis separates
    clearly more): a face axis gives the clipped face manifold (at most 4 points), an edge axis
    the closest points of the two edges. Features: face axis (0-5) * 144 + face contact feature;
    edge axes 864 + ((i*3 + j)*4 + edge of a)*4 + edge of b.
    """
    m = len(a.pos)
    rows = np.arange(m)
    A, B = a.rot, b.rot
    ha, hb = a.param, b.param
    t = b.pos - a.pos
    ta = _unrotate(A, t)
    C = np.einsum("mki,mkj->mij", A, B)  # C[i, j] = A_i . B_j
    absC = np.abs(C)
    tb = np.einsum("mij,mi->mj", C, ta)
    sep_a = np.abs(ta) - ha - np.einsum("mij,mj->mi", absC, hb)
    sep_b = np.abs(tb) - hb - np.einsum("mij,mi->mj", absC, ha)
    # edge axes L = A_i x B_j, in a's axes, row 3 i + j
    L = np.cross(np.eye(3)[None, :, None, :], C.transpose(0, 2, 1)[:, None, :, :]).reshape(m, 9, 3)
    norm = np.linalg.norm(L, axis=2)
    r_a = np.einsum("mkc,mc->mk", np.abs(L), ha)
    r_b = np.einsum("mkj,mj->mk", np.abs(np.einsum("mkc,mcj->mkj", L, C)), hb)
    t_l = np.einsum("mkc,mc->mk", L, ta)
    edge_ok = norm > PARALLEL
    sep_e = np.where(edge_ok, (np.abs(t_l) - r_a - r_b) / np.where(edge_ok, norm, 1.0), -np.inf)
    scale = (ha.sum(axis=1) + hb.sum(axis=1)) / 6.0
    best_a, best_b = sep_a.max(axis=1), sep_b.max(axis=1)
    use_b = _prefer_second(best_a, best_b, scale)
    face_sep = np.where(use_b, best_b, best_a)
    face_axis = np.where(use_b, 3 + np.argmax(sep_b, axis=1), np.argmax(sep_a, axis=1))
    edge_sep = sep_e.max(axis=1)
    use_edge = _prefer_second(face_sep, edge_sep, scale)
    near = np.where(use_edge, edge_sep, face_sep) < margin
    parts = []
    for axis in range(6):
        sel = rows[near & ~use_edge & (face_axis == axis)]
        if not len(sel):
            continue
        if axis < 3:
            r, p_ref, p_inc, n, g, f = _box_face(a.pos[sel], A[sel], ha[sel], b.pos[sel], B[sel], hb[sel], axis, margin)
            parts.append(Found(sel[r], p_ref, p_inc, n, g, axis * 144 + f))
        else:
            r, p_ref, p_inc, n, g, f = _box_face(
                b.pos[sel], B[sel], hb[sel], a.pos[sel], A[sel], ha[sel], axis - 3, margin
            )
            parts.append(Found(sel[r], p_inc, p_ref, -n, g, axis * 144 + f))
    sel = rows[near & use_edge]
    if len(sel):
        parts.append(_box_edges(a, b, sel, np.argmax(sep_e[sel], axis=1), margin))
    return _concat(parts, 3)


def _box_edges(a: Side, b: Side, sel: np.ndarray, axis: np.ndarray, margin: float) -> Found:
    """Edge-edge contact of boxes on the edge axis A_i x B_j: the closest points of the edge of a
    farthest along the normal and the edge of b farthest against it."""
    n_sel = len(sel)
    rows = np.arange(n_sel)
    A, B, ha, hb = a.rot[sel], b.rot[sel], a.param[sel], b.param[sel]
    i, j = axis // 3, axis % 3
    Ai, Bj = A[rows, :, i], B[rows, :, j]
    normal = np.cross(Ai, Bj)
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    normal *= _sign(_dot(normal, b.pos[sel] - a.pos[sel]))[:, None]
    sa = _sign(_unrotate(A, normal))
    sb = -_sign(_unrotate(B, normal))
    sa[rows, i] = 0.0
    sb[rows, j] = 0.0
    ea = a.pos[sel] + _rotate(A, sa * ha)
    eb = b.pos[sel] + _rotate(B, sb * hb)
    s, t = _segments(ea, Ai, ha[rows, i], eb, Bj, hb[rows, j])
    pa = ea + Ai * s[:, None]
    pb = eb + Bj * t[:, None]
    gap = _dot(pb - pa, normal)
    edge_a = 2 * (sa[rows, (i + 1) % 3] > 0) + (sa[rows, (i + 2) % 3] > 0)
    edge_b = 2 * (sb[rows, (j + 1) % 3] > 0) + (sb[rows, (j + 2) % 3] > 0)
    feature = 864 + (axis * 4 + edge_a) * 4 + edge_b
    return _found(sel, pa, pb, normal, gap, feature, margin)


def _rect_face(c_ref, R_ref, h_ref, c_inc, R_inc, h_inc, k, margin):
    """Face contact of rectangles: reference edge normal to axis k, incident edge clipped to it
    (candidates: the incident corners 0, 1 inside it, the reference corners 2, 3 over the incident
    edge); at most two points are kept."""
    m = len(c_ref)
    rows = np.arange(m)
    axis = R_ref[rows, :, k]
    normal = axis * _sign(_dot(axis, c_inc - c_ref))[:, None]
    T = R_ref[rows, :, 1 - k]
    ht = h_ref[rows, 1 - k]
    centre = c_ref + normal * h_ref[rows, k][:, None]
    along = _unrotate(R_inc, normal)
    j = np.argmax(np.abs(along), axis=1)
    sj = -_sign(along[rows, j])
    n_inc = R_inc[rows, :, j] * sj[:, None]
    f_inc = c_inc + n_inc * h_inc[rows, j][:, None]
    P = R_inc[rows, :, 1 - j] * h_inc[rows, 1 - j][:, None]
    ends = np.stack((f_inc + P, f_inc - P), axis=1)
    s_inc = _dot(ends - centre[:, None], T[:, None])
    tol = 1e-9 * ht
    s = np.concatenate((s_inc, np.stack((ht, -ht), axis=1)), axis=1)  # (m, 4)
    lo, hi = s_inc.min(axis=1), s_inc.max(axis=1)
    valid = np.concatenate(
        (np.abs(s_inc) <= (ht + tol)[:, None], (s[:, 2:] >= (lo - tol)[:, None]) & (s[:, 2:] <= (hi + tol)[:, None])),
        axis=1,
    )
    on_ref = centre[:, None] + s[..., None] * T[:, None]
    gap = _dot(n_inc[:, None], f_inc[:, None] - on_ref) / _dot(n_inc, normal)[:, None]
    valid &= gap < margin
    uv = np.stack((s, np.zeros_like(s)), axis=2)
    chosen = _reduce(uv, gap, valid, ht, 2)
    r, c = np.nonzero(chosen)
    p_ref = on_ref[r, c]
    g = gap[r, c]
    feature = (2 * j[r] + (sj[r] > 0)) * 4 + c
    return r, p_ref, p_ref + normal[r] * g[:, None], normal[r], g, feature


@register(("rectangle", "rectangle"))
def rectangle_rectangle(a: Side, b: Side, margin: float) -> Found:
    """Two rectangles: separating-axis test over the 4 edge normals; the edge of least
    penetration is the reference, the other rectangle's most anti-parallel edge is clipped to
    it (at most two points). Features: axis (0-3) * 16 + face contact feature.
    """
    m = len(a.pos)
    rows = np.arange(m)
    A, B = a.rot, b.rot
    ha, hb = a.param[:, :2], b.param[:, :2]
    ta = _unrotate(A, b.pos - a.pos)
    C = np.einsum("mki,mkj->mij", A, B)
    absC = np.abs(C)
    tb = np.einsum("mij,mi->mj", C, ta)
    sep_a = np.abs(ta) - ha - np.einsum("mij,mj->mi", absC, hb)
    sep_b = np.abs(tb) - hb - np.einsum("mij,mi->mj", absC, ha)
    scale = (ha.sum(axis=1) + hb.sum(axis=1)) / 4.0
    best_a, best_b = sep_a.max(axis=1), sep_b.max(axis=1)
    use_b = _prefer_second(best_a, best_b, scale)
    near = np.where(use_b, best_b, best_a) < margin
    face_axis = np.where(use_b, 2 + np.argmax(sep_b, axis=1), np.argmax(sep_a, axis=1))
    parts = []
    for axis in range(4):
        sel = rows[near & (face_axis == axis)]
        if not len(sel):
            continue
        if axis < 2:
            r, p_ref, p_inc, n, g, f = _rect_face(
                a.pos[sel], A[sel], ha[sel], b.pos[sel], B[sel], hb[sel], axis, margin
            )
            parts.append(Found(sel[r], p_ref, p_inc, n, g, axis * 16 + f))
        else:
            r, p_ref, p_inc, n, g, f = _rect_face(
                b.pos[sel], B[sel], hb[sel], a.pos[sel], A[sel], ha[sel], axis - 2, margin
            )
            parts.append(Found(sel[r], p_inc, p_ref, -n, g, axis * 16 + f))
    return _concat(parts, 2)
