"""Readers of scene values shared by the scene checks (mbsim.scene.spec), the shapes' field
tables (mbsim.model.shapes) and the model importers (mbsim.models): an orientation in any of
its forms, and the physical checks of an inertia."""

from __future__ import annotations

from typing import Any

import numpy as np

from mbsim.errors import did_you_mean
from mbsim.scene.fields import Context, Field, Number, Text, Vector, kind_of, read_mapping
from mbsim.scene.load import KeyPath
from mbsim.scene.rotations import quat_from_axis_angle, quat_from_euler


def read_orientation(ctx: Context, path: KeyPath, value: Any) -> np.ndarray:
    """Orientation -> unit quaternion (w, x, y, z); in 2D a single angle -> array([angle])."""
    if ctx.dimension == 2:
        return np.array([Number().read(ctx, path, value)])
    forms = ("euler", "quaternion", "axis_angle")
    if not isinstance(value, dict) or len(value) != 1:
        raise ctx.error(path, "expected a mapping with exactly one of euler, quaternion, axis_angle")
    ((kind, spec),) = value.items()
    if kind not in forms:
        raise ctx.error(
            (*path, kind),
            f"unknown orientation form '{kind}'; expected one of {', '.join(forms)}",
            did_you_mean(kind, forms),
        )
    sub = (*path, kind)
    if kind == "quaternion":
        quat = Vector(4, nonzero=True).read(ctx, sub, spec)
        with np.errstate(over="ignore"):  # [1e300, ...]: norm inf, refused below
            norm = np.linalg.norm(quat)
        if abs(norm - 1.0) > 1e-6:
            raise ctx.error(sub, f"expected a unit quaternion (w, x, y, z), got norm {norm:.6g}")
        return quat / norm
    if kind == "axis_angle":
        got = read_mapping(
            ctx,
            sub,
            spec,
            {
                "axis": Field(Vector(3, nonzero=True), "rotation axis"),
                "angle": Field(Number(), "rotation angle, rad"),
            },
        )
        axis = got["axis"] / np.max(np.abs(got["axis"]))  # scaled first: the norm of [1e200, ...] overflows
        axis = axis / np.linalg.norm(axis)
        quat = quat_from_axis_angle(axis, got["angle"])
    else:
        got = read_mapping(
            ctx,
            sub,
            spec,
            {
                "sequence": Field(Text(), "scipy Rotation sequence, e.g. ZXZ (intrinsic) or zxz (extrinsic)"),
                "angles": Field(Vector(3), "the three angles, rad"),
            },
        )
        seq = got["sequence"]
        shown = kind_of(seq)
        if len(seq) != 3 or not (set(seq) <= set("XYZ") or set(seq) <= set("xyz")):
            raise ctx.error(
                (*sub, "sequence"),
                f"expected three axis letters all upper case (intrinsic) or all lower case (extrinsic), got {shown}",
            )
        if seq[0] == seq[1] or seq[1] == seq[2]:
            raise ctx.error(
                (*sub, "sequence"),
                f"expected three axis letters with no axis twice in a row (e.g. ZXZ or XYZ), got {shown}",
            )
        quat = quat_from_euler(seq, got["angles"])
    if not np.all(np.isfinite(quat)):
        raise ctx.error(sub, "not a valid orientation: the rotation is not finite")
    return quat


def check_inertia(ctx: Context, path: KeyPath, inertia: np.ndarray) -> None:
    """Positive definite, and the triangle inequality of principal moments."""
    with np.errstate(all="ignore"):  # entries near 1e308 overflow: refused below, without warnings
        eig = np.linalg.eigvalsh(inertia)
        if not np.all(np.isfinite(eig)) or not np.isfinite(eig[0] + eig[1]):
            raise ctx.error(path, "inertia too large: its principal values overflow")
    if eig[0] <= 0:
        raise ctx.error(path, f"inertia is not positive definite (principal values {[float(f'{x:.9g}') for x in eig]})")
    tol = 1e-9 * eig[-1]
    if eig[0] + eig[1] < eig[2] - tol:
        raise ctx.error(
            path,
            f"principal inertias {[float(f'{x:.9g}') for x in eig]} break the triangle inequality "
            "I1 + I2 >= I3 that every rigid body satisfies",
        )
