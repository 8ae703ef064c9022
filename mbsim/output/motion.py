"""A result file's motion, ready to export (CONTRACT §7): key times, body poses, what bodies look like.

:func:`read_motion` reads /time and /bodies/NAME/position and orientation (3D) or angle (2D)
into world translations and glTF-order quaternions (x, y, z, w), keeps the recorded times inside
``--from``/``--to`` or resamples them at ``--fps`` (positions linearly, rotations by slerp), and
reads ``/geometry``. :func:`layout` places several motions side by side (``mbsim compare``) and
sizes what has no size of its own (contact-point balls, the depth of planar shapes, ground patches).
The writers are mbsim.output.gltf (.glb) and mbsim.output.viewer (.html).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mbsim.errors import UsageError, plural
from mbsim.model.shapes import SHAPE_TYPES
from mbsim.names import member, member_names
from mbsim.output.geometry import GeometryError, Sizes, Triangles, inertia_box, read_geometry, shape_triangles
from mbsim.output.summary import check_result_path, open_result

# the largest |coordinate| (m) exported: its square (a distance, a bounding sphere) still fits a
# float32, which glTF viewers and the page compute in
MAX_COORDINATE = 1e18
MAX_FRAMES = 1_000_000  # --fps over the time range may not ask for more key times than this


@dataclass
class Motion:
    """One run's motion. ``translation`` (nbody, k, 3) and ``rotation`` (nbody, k, 4, x y z w)
    in world coordinates at ``times`` (k,), float64; ``shapes``: owner -> stored shapes."""

    label: str
    dimension: int
    times: np.ndarray
    bodies: list[str]
    translation: np.ndarray
    rotation: np.ndarray
    shapes: dict[str, list[dict[str, Any]]]
    mass: dict[str, float]
    inertia: dict[str, np.ndarray]
    up: np.ndarray  # the scene's up direction (against gravity) in world coordinates
    attrs: dict[str, str] = field(default_factory=dict)  # scene_name, method, integrator, status, message
    notes: list[str] = field(default_factory=list)  # what the export left out, and why


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _slerp(q0: np.ndarray, q1: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Spherical linear interpolation row by row (k, 4), along the shorter arc."""
    dot = np.sum(q0 * q1, axis=-1)
    q1 = np.where(dot[..., None] < 0, -q1, q1)
    dot = np.abs(dot)
    angle = np.arccos(np.clip(dot, -1.0, 1.0))
    sin = np.sin(angle)
    near = sin < 1e-9  # nearly equal: linear interpolation is exact to rounding
    safe = np.where(near, 1.0, sin)
    w0 = np.where(near, 1.0 - s, np.sin((1.0 - s) * angle) / safe)
    w1 = np.where(near, s, np.sin(s * angle) / safe)
    out = w0[..., None] * q0 + w1[..., None] * q1
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


def resample(times: np.ndarray, translation: np.ndarray, rotation: np.ndarray, at: np.ndarray):
    """Poses at the times ``at`` (inside ``times``' range): translations interpolated linearly,
    rotations by slerp between the recorded rows around each time."""
    k = np.clip(np.searchsorted(times, at, side="right") - 1, 0, max(len(times) - 2, 0))
    if len(times) == 1:
        return translation[:, [0] * len(at)], rotation[:, [0] * len(at)]
    span = times[k + 1] - times[k]
    s = np.clip((at - times[k]) / np.where(span > 0, span, 1.0), 0.0, 1.0)
    moved = translation[:, k] + s[None, :, None] * (translation[:, k + 1] - translation[:, k])
    turned = _slerp(rotation[:, k], rotation[:, k + 1], s[None, :])
    return moved, turned


def _check_range(fps: float | None, t_from: float | None, t_to: float | None) -> None:
    if fps is not None and not (np.isfinite(fps) and fps > 0):
        raise UsageError(f"expected a positive number of frames per second, got {fps:g}", file="--fps")
    for name, value in (("--from", t_from), ("--to", t_to)):
        if value is not None and not np.isfinite(value):
            raise UsageError(f"expected a finite time in seconds, got {value:g}", file=name)
    if t_from is not None and t_to is not None and t_from > t_to:
        raise UsageError(f"{t_from:g} s is after --to {t_to:g} s", file="--from")


def _read_bodies(f, bodies: list[str], n: int, dim: int):
    """World translations and x y z w rotations (nbody, rows, ...), masses, inertias and the
    number of rows every body has (a file cut short by a crash has fewer in some)."""
    translation = np.zeros((len(bodies), n, 3))
    rotation = np.zeros((len(bodies), n, 4))
    rotation[..., 3] = 1.0
    mass, inertia = {}, {}
    for b, name in enumerate(bodies):
        group = member(f["bodies"], name)  # stored escaped (mbsim.names)
        mass[name] = float(group.attrs.get("mass", 1.0))
        inertia[name] = np.asarray(group.attrs.get("inertia", 1.0), dtype=float)
        if "position" not in group:
            continue
        m = min(n, len(group["position"]))
        translation[b, :m, :dim] = group["position"][:m]
        if dim == 3:
            q = group["orientation"][:m]  # w, x, y, z
            rotation[b, :m] = q[:, [1, 2, 3, 0]]
        else:
            half = 0.5 * group["angle"][:m]
            rotation[b, :m, 2] = np.sin(half)
            rotation[b, :m, 3] = np.cos(half)
        n = min(n, m)
    return translation, rotation, mass, inertia, n


def read_motion(
    path: str | Path,
    fps: float | None = None,
    t_from: float | None = None,
    t_to: float | None = None,
    label: str | None = None,
) -> Motion:
    """The motion of the result file ``path`` (exit 2 when it is missing, not a result, holds no
    rows in the range, or the range options are wrong)."""
    _check_range(fps, t_from, t_to)
    check_result_path(path)
    with open_result(path) as f:
        attrs = {
            key: _text(f.attrs.get(key, "")) for key in ("scene_name", "method", "integrator", "status", "message")
        }
        try:
            dim = int(f.attrs.get("dimension", 3))
            times = np.asarray(f["time"][:] if "time" in f else np.zeros(0), dtype=float)
            if dim not in (2, 3) or times.ndim != 1:
                raise GeometryError("its dimension must be 2 or 3 and /time one column")
            bodies = member_names(f.get("bodies"))  # the users' names
            if "geometry" in f and "bodies" in f["geometry"].attrs:  # the scene's order
                order = [_text(name) for name in f["geometry"].attrs["bodies"]]
                bodies = [name for name in order if name in bodies] + [name for name in bodies if name not in order]
            translation, rotation, mass, inertia, n = _read_bodies(f, bodies, len(times), dim)
            shapes = read_geometry(f)
            geometry = f.get("geometry")
            up = None
            if geometry is not None and "up" in geometry.attrs:
                up = np.asarray(geometry.attrs["up"], dtype=float)
                if up.shape != (3,) or not np.all(np.isfinite(up)) or not np.any(up):
                    raise GeometryError("/geometry: 'up' must be 3 finite numbers, not all zero")
        except (GeometryError, KeyError, ValueError, TypeError) as exc:
            raise UsageError(f"not a well-formed mbsim result: {exc}", file=str(path)) from None
    notes = []
    if shapes is None:
        shapes = {}
        notes.append("the result file has no /geometry (written before mbsim stored it): bodies are drawn as boxes")
    if up is None:
        up = np.array([0.0, 1.0, 0.0]) if dim == 2 else np.array([0.0, 0.0, 1.0])
    times, translation, rotation = times[:n], translation[:, :n], rotation[:, :n]
    finite = (
        np.isfinite(times) & np.all(np.isfinite(translation), axis=(0, 2)) & np.all(np.isfinite(rotation), axis=(0, 2))
    )
    if not finite.all():
        notes.append(f"{int((~finite).sum())} rows with non-finite values left out")
        times, translation, rotation = times[finite], translation[:, finite], rotation[:, finite]
    # positions so far out (a diverged run's last rows) that glTF's and the page's float32
    # arithmetic would overflow are left out too
    near = np.all(np.abs(translation) <= MAX_COORDINATE, axis=(0, 2))
    if not near.all():
        far = plural(int((~near).sum()), "row")
        notes.append(f"{far} with a position beyond {MAX_COORDINATE:g} m left out (viewers compute in float32)")
        times, translation, rotation = times[near], translation[:, near], rotation[:, near]
    # glTF key times are float32 and strictly increasing: of rows whose times are equal in
    # float32 (an impact's two rows, steps shorter than float32 resolves), the last is kept
    t32 = times.astype(np.float32)
    keep = np.ones(len(times), dtype=bool)
    keep[:-1] = t32[1:] > t32[:-1]
    if len(times) and not np.all(np.diff(times) >= 0):
        raise UsageError("its /time is not in increasing order; not a result mbsim wrote", file=str(path))
    if not keep.all():
        notes.append(f"{int((~keep).sum())} rows at a time equal (in float32) to the next row's left out")
        times, translation, rotation = times[keep], translation[:, keep], rotation[:, keep]
    if len(times) == 0:
        raise UsageError("has no recorded rows to export (the run ended before its first row)", file=str(path))
    lo = times[0] if t_from is None else t_from
    hi = times[-1] if t_to is None else t_to
    if fps is None:
        inside = (times >= lo) & (times <= hi)
        if not inside.any():
            raise UsageError(
                f"has no recorded time in [{lo:g}, {hi:g}] s (it holds {times[0]:g} .. {times[-1]:g} s)", file=str(path)
            )
        times, translation, rotation = times[inside], translation[:, inside], rotation[:, inside]
    else:
        lo, hi = max(lo, times[0]), min(hi, times[-1])
        if lo > hi:
            raise UsageError(f"holds {times[0]:g} .. {times[-1]:g} s, outside --from/--to", file=str(path))
        count = int(np.floor((hi - lo) * fps * (1 + 1e-12))) + 1
        if count > MAX_FRAMES:
            raise UsageError(
                f"--fps {fps:g} over {hi - lo:g} s gives {count} frames; at most {MAX_FRAMES} are exported",
                file="--fps",
            )
        at = lo + np.arange(count) / fps
        if count > 1 and not np.all(np.diff(at.astype(np.float32)) > 0):
            raise UsageError(
                f"--fps {fps:g} is finer than glTF's float32 key times resolve at t = {hi:g} s", file="--fps"
            )
        translation, rotation = resample(times, translation, rotation, at)
        times = at
    return Motion(
        label=label or attrs["scene_name"] or Path(path).stem,
        dimension=dim,
        times=times,
        bodies=bodies,
        translation=translation,
        rotation=rotation,
        shapes=shapes,
        mass=mass,
        inertia=inertia,
        up=up,
        attrs=attrs,
        notes=notes,
    )


def up_rotation(up: np.ndarray) -> np.ndarray:
    """The quaternion (x, y, z, w) of the smallest rotation that turns ``up`` into glTF's +Y."""
    u = np.asarray(up, dtype=float) / np.linalg.norm(up)
    y = np.array([0.0, 1.0, 0.0])
    c = float(u @ y)
    if c < -1.0 + 1e-12:  # upside down: half a turn about x
        return np.array([1.0, 0.0, 0.0, 0.0])
    axis = np.cross(u, y)
    w = np.sqrt(0.5 * (1.0 + c))
    return np.array([*(axis / (2.0 * w)), w])


@dataclass
class Look:
    """What a set of motions looks like: per run and body the triangle meshes in the body frame
    (``meshes[r][b]``), the ground's (``ground[r]``), each run's offset in world coordinates, the
    sizes used and the world box of all of it (offsets included)."""

    meshes: list[list[list[Triangles]]]
    ground: list[list[Triangles]]
    offsets: np.ndarray
    sizes: list[Sizes]
    lo: np.ndarray
    hi: np.ndarray


def _horizontal(up: np.ndarray, dim: int) -> np.ndarray:
    """The direction in which copies stand side by side: across the screen, perpendicular to up."""
    if dim == 2:
        return np.array([1.0, 0.0, 0.0]) if abs(up[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    ref = np.array([1.0, 0.0, 0.0]) if abs(up[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    h = ref - (ref @ up) * up
    return h / np.linalg.norm(h)


def layout(motions: list[Motion]) -> Look:
    """Meshes of every body and the ground, sized to the motion, and the runs' offsets (the
    second run beside the first along a horizontal direction, ...)."""
    meshes, grounds, boxes, sizes_all = [], [], [], []
    for motion in motions:
        dim = motion.dimension
        lo = motion.translation.min(axis=(0, 1)) if motion.translation.size else np.zeros(3)
        hi = motion.translation.max(axis=(0, 1)) if motion.translation.size else np.zeros(3)
        # shapes with a size of their own first, triangulated once (their extent joins the
        # motion's box); the others are sized from that box
        provisional = Sizes(marker=0.0, depth=0.0, lo=lo, hi=hi)
        reach = 0.0
        fixed: dict[tuple[str, int], Triangles] = {}
        for name in motion.bodies:
            for k, shape in enumerate(motion.shapes.get(name, [])):
                kind = SHAPE_TYPES[shape["type"]]
                if not kind.display_sized:
                    fixed[name, k] = shape_triangles(shape, dim, provisional)
                    reach = max(reach, float(np.linalg.norm(fixed[name, k][0], axis=1).max()))
                elif not kind.unbounded:  # its extent in the plane (a disc, a rectangle; a point's place)
                    reach = max(reach, float(np.linalg.norm(shape["position"])) + kind.rbound(shape))
        scale = max(float(np.max(hi - lo)) + 2 * reach, 1e-3)
        depth = 0.06 * scale
        sizes = Sizes(marker=0.012 * scale, depth=depth, lo=lo - reach, hi=hi + reach)
        if dim == 2:
            sizes = Sizes(
                marker=sizes.marker, depth=depth, lo=np.r_[sizes.lo[:2], -depth], hi=np.r_[sizes.hi[:2], depth]
            )
        run_meshes = []
        for b, name in enumerate(motion.bodies):
            body_sizes = sizes
            if dim == 2:  # overlapping planar bodies: fronts a little apart, so none flickers
                body_sizes = Sizes(sizes.marker, depth * (1.0 + 0.02 * (b % 25)), sizes.lo, sizes.hi)
            shapes = motion.shapes.get(name, [])
            body = [
                fixed[name, k] if (name, k) in fixed else shape_triangles(s, dim, body_sizes)
                for k, s in enumerate(shapes)
            ]
            if not body:  # nothing to draw: its inertia box, as MuJoCo shows a body without geoms
                body = [inertia_box(motion.mass[name], motion.inertia[name], dim)]
            run_meshes.append(body)
        meshes.append(run_meshes)
        # the ground's solid shapes first: a plane's patch covers them as well as the motion
        ground_shapes = motion.shapes.get("ground", [])
        solid = {
            k: shape_triangles(s, dim, sizes)
            for k, s in enumerate(ground_shapes)
            if not SHAPE_TYPES[s["type"]].unbounded
        }
        if solid:
            points = np.concatenate([v for v, _, _ in solid.values()])
            low, high = np.minimum(sizes.lo, points.min(axis=0)), np.maximum(sizes.hi, points.max(axis=0))
            sizes = Sizes(sizes.marker, sizes.depth, low, high)
        grounds.append(
            [solid[k] if k in solid else shape_triangles(s, dim, sizes) for k, s in enumerate(ground_shapes)]
        )
        boxes.append((sizes.lo, sizes.hi))
        sizes_all.append(sizes)
    offsets = np.zeros((len(motions), 3))
    if len(motions) > 1:
        h = _horizontal(motions[0].up, motions[0].dimension)
        widths = [float((hi - lo) @ np.abs(h)) for lo, hi in boxes]
        gap = 0.25 * max(widths)
        for r in range(1, len(motions)):
            offsets[r] = offsets[r - 1] + h * (0.5 * widths[r - 1] + gap + 0.5 * widths[r])
    corners_lo = np.min([lo + o for (lo, _), o in zip(boxes, offsets, strict=True)], axis=0)
    corners_hi = np.max([hi + o for (_, hi), o in zip(boxes, offsets, strict=True)], axis=0)
    # down to the ground's shapes along up (a viewer's floor grid goes under them), not sideways
    up = motions[0].up
    for ground, offset in zip(grounds, offsets, strict=True):
        for vertices, _, _ in ground:
            low, high = vertices.min(axis=0) + offset, vertices.max(axis=0) + offset
            for i in range(3):
                if up[i] > 0.5:
                    corners_lo[i] = min(corners_lo[i], low[i])
                elif up[i] < -0.5:
                    corners_hi[i] = max(corners_hi[i], high[i])
    return Look(meshes, grounds, offsets, sizes_all, corners_lo, corners_hi)


__all__ = ["MAX_FRAMES", "Look", "Motion", "layout", "read_motion", "resample", "up_rotation"]
