"""A mode of an ``mbsim modes`` file as a looped motion, for ``mbsim export --mode K``.

The file's one row (read by :func:`mbsim.output.motion.read_motion`: bodies, shapes, up) is the
rest pose p_b, R_b; mode K's shape gives each body's translation u_b and rotation phi_b (world
axes; planar: the angle). One period of the mode, keyed at frames j = 0 .. n (s = j / n, the last
key equal to the first so that a looping player wraps without a jump) over ``PERIOD`` seconds:
translation p_b + a sin(2 pi s) u_b, rotation exp(a sin(2 pi s) [phi_b]) R_b.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mbsim.errors import UsageError
from mbsim.model.spatial import quat_mul, quat_to_matrix, rotvec_to_quat
from mbsim.names import member
from mbsim.output.motion import MAX_FRAMES, Motion, layout, read_motion
from mbsim.output.summary import open_result

PERIOD = 2.0  # s: the display period of one cycle of the mode, whatever its frequency
FRAMES = 48  # keyed frames per period by default (24 per second)
SIZE_SHARE = 0.10  # the largest point translation, as a share of the mechanism's size
MAX_ROTATION = 0.3  # rad: no body turns further than this at the default amplitude


# glTF's quaternion order (x, y, z, w) and mbsim.model.spatial's (w, x, y, z)
_TO_WXYZ, _TO_XYZW = [3, 0, 1, 2], [1, 2, 3, 0]


def read_mode(path: str | Path, mode: int, bodies: list[str], dim: int) -> tuple[float, np.ndarray, np.ndarray]:
    """(frequency Hz, u (nbody, 3), phi (nbody, 3)) of mode ``mode`` (1-based, as ``mbsim modes``
    prints it) of the modes file ``path``; exit 2 when it has no /modes or no such mode."""
    with open_result(path) as f:
        group = f.get("modes")
        if group is None or "frequency_hz" not in group or "shape" not in group:
            raise UsageError(
                "has no /modes (not written by 'mbsim modes'); --mode animates a mode of such a file", file=str(path)
            )
        frequency = np.asarray(group["frequency_hz"][:], dtype=float)
        count = len(frequency)
        if not 1 <= mode <= count:
            listed = f"1 .. {count}" if count else "none"
            raise UsageError(
                f"expected a mode of {path} as 'mbsim modes' lists them ({listed}), got {mode}", file="--mode"
            )
        width = 6 if dim == 3 else 3
        u, phi = np.zeros((len(bodies), 3)), np.zeros((len(bodies), 3))
        for b, name in enumerate(bodies):
            data = member(group["shape"], name)
            if data is None:  # a body the analysis did not move (none today): it stays at rest
                continue
            if data.shape != (count, width):
                raise UsageError(f"/modes/shape/{name} must be ({count}, {width}), not {data.shape}", file=str(path))
            row = np.asarray(data[mode - 1], dtype=float)
            if dim == 3:
                u[b], phi[b] = row[:3], row[3:]
            else:
                u[b, :2], phi[b, 2] = row[:2], row[2]
    if not (np.all(np.isfinite(u)) and np.all(np.isfinite(phi)) and np.isfinite(frequency[mode - 1])):
        raise UsageError(f"mode {mode}'s shape or frequency is not finite", file=str(path))
    return float(frequency[mode - 1]), u, phi


def default_amplitude(rest: Motion, u: np.ndarray, phi: np.ndarray) -> float:
    """The amplitude a at which the largest translation of a point of the drawn mechanism,
    |u_b + phi_b x (R_b v)| over the vertices v of every body's meshes, is SIZE_SHARE of the
    diagonal of the bodies' bounding box (planar: in the plane), and no |phi_b| exceeds MAX_ROTATION."""
    look = layout([rest])
    lo, hi = rest.translation[:, 0].min(axis=0), rest.translation[:, 0].max(axis=0)
    largest = float(np.max(np.linalg.norm(u, axis=1), initial=0.0))
    for b, parts in enumerate(look.meshes[0]):
        turn = quat_to_matrix(rest.rotation[b, 0][_TO_WXYZ])
        for vertices, _, _ in parts:
            world = vertices @ turn.T
            points = world + rest.translation[b, 0]
            lo, hi = np.minimum(lo, points.min(axis=0)), np.maximum(hi, points.max(axis=0))
            moved = u[b] + np.cross(phi[b], world)
            largest = max(largest, float(np.linalg.norm(moved, axis=1).max()))
    # planar: the size in the plane (the drawn depth is a display choice, scaled to the motion)
    size = float(np.linalg.norm((hi - lo)[: rest.dimension]))
    turn_max = float(np.max(np.linalg.norm(phi, axis=1), initial=0.0))
    limits = []
    if largest > 0 and size > 0:
        limits.append(SIZE_SHARE * size / largest)
    if turn_max > 0:
        limits.append(MAX_ROTATION / turn_max)
    return min(limits) if limits else 1.0


def mode_motion(
    path: str | Path,
    mode: int,
    fps: float | None = None,
    amplitude: float | None = None,
) -> Motion:
    """The looped motion of mode ``mode`` (1-based) of the modes file ``path``: one period of
    ``PERIOD`` s keyed at ``FRAMES`` frames (``fps`` * ``PERIOD`` with --fps), amplitude
    ``amplitude`` (units of the mass-normalised shape; default :func:`default_amplitude`)."""
    if amplitude is not None and not (np.isfinite(amplitude) and amplitude >= 0):
        raise UsageError(f"expected a finite amplitude >= 0, got {amplitude:g}", file="--amplitude")
    frames = FRAMES
    if fps is not None:
        if not (np.isfinite(fps) and fps > 0):
            raise UsageError(f"expected a positive number of frames per second, got {fps:g}", file="--fps")
        frames = round(fps * PERIOD)
        if not 4 <= frames <= MAX_FRAMES:
            raise UsageError(
                f"--fps {fps:g} gives {frames} frames per {PERIOD:g} s period; expected 4 .. {MAX_FRAMES}",
                file="--fps",
            )
    rest = read_motion(path)
    frequency, u, phi = read_mode(path, mode, rest.bodies, rest.dimension)
    a = default_amplitude(rest, u, phi) if amplitude is None else float(amplitude)
    s = np.arange(frames + 1) / frames
    swing = a * np.sin(2.0 * np.pi * s)
    swing[-1] = 0.0  # exactly the first key: the loop closes without a jump
    p0, q0 = rest.translation[:, :1], rest.rotation[:, :1]  # (nbody, 1, ...)
    translation = p0 + swing[None, :, None] * u[:, None, :]
    turned = quat_mul(rotvec_to_quat(swing[None, :, None] * phi[:, None, :]), q0[..., _TO_WXYZ])
    rotation = turned[..., _TO_XYZW]
    label = f"mode {mode}: {frequency:.6g} Hz"
    attrs = dict(rest.attrs)
    attrs["scene_name"] = f"{attrs.get('scene_name') or Path(path).stem}, {label}"
    notes = [*rest.notes, f"{label}, amplitude {a:.4g} (mass-normalised shape), one period shown as {PERIOD:g} s"]
    return Motion(
        label=label,
        dimension=rest.dimension,
        times=s * PERIOD,
        bodies=rest.bodies,
        translation=translation,
        rotation=rotation,
        shapes=rest.shapes,
        mass=rest.mass,
        inertia=rest.inertia,
        up=rest.up,
        attrs=attrs,
        notes=notes,
    )


__all__ = ["FRAMES", "PERIOD", "default_amplitude", "mode_motion", "read_mode"]
