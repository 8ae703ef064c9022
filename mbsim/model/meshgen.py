"""Procedural meshes: a ``mesh`` shape may give ``generate: {kind: ..., ...}`` instead of a file.

Each generator is one entry of ``GENERATORS``: its field table (checked, documented in the scene
reference) and a function returning a closed, consistently oriented trimesh in the shape's frame.
Scenes stay small text files while their meshes can be as large as a scanned part: the
``mesh_on_box`` scene's rippled torus has 230,400 triangles and is built in well under a second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mbsim.errors import did_you_mean
from mbsim.scene.fields import Context, Custom, Field, Number, Text, Vector, read_mapping
from mbsim.scene.load import KeyPath


def rippled_torus(major: float, minor: float, ripple: float, waves: int, segments: tuple[int, int]):
    """A torus about local z whose tube radius ripples: r(u, w) = minor (1 + ripple sin(waves u) cos(3 w)),
    u around the z axis, w around the tube. Closed, genus one, non-convex; 2 nu nw triangles."""
    import trimesh

    nu, nw = segments
    u = np.linspace(0.0, 2.0 * np.pi, nu, endpoint=False)
    w = np.linspace(0.0, 2.0 * np.pi, nw, endpoint=False)
    U, W = np.meshgrid(u, w, indexing="ij")
    r = minor * (1.0 + ripple * np.sin(waves * U) * np.cos(3.0 * W))
    ring = major + r * np.cos(W)
    vertices = np.stack((ring * np.cos(U), ring * np.sin(U), r * np.sin(W)), axis=-1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(nu), np.arange(nw), indexing="ij")
    a = i * nw + j
    b = ((i + 1) % nu) * nw + j
    c = ((i + 1) % nu) * nw + (j + 1) % nw
    d = i * nw + (j + 1) % nw
    faces = np.concatenate((np.stack((a, b, c), -1).reshape(-1, 3), np.stack((a, c, d), -1).reshape(-1, 3)))
    mesh = trimesh.Trimesh(vertices, faces, process=False)
    if mesh.volume < 0:  # outward normals
        mesh.invert()
    return mesh


def annulus(inner: float, outer: float, thickness: float, sections: int):
    """A flat ring about local z, centred: radii inner..outer, extent thickness along z."""
    import trimesh

    return trimesh.creation.annulus(r_min=inner, r_max=outer, height=thickness, sections=sections)


def convex_hull(points: list[np.ndarray]):
    """The convex hull of the given points (local frame): wedges, latches, prisms."""
    import trimesh

    mesh = trimesh.convex.convex_hull(np.asarray(points, dtype=float))
    if mesh.volume <= 0:
        raise ValueError("the points span no volume")
    return mesh


# triangles a generator may make: 4 million take ~40 s and ~2 GB to check and build (mass
# properties, watertightness, a field or octree), as many as the largest mesh file that loads
MAX_GENERATED_TRIANGLES = 4_000_000


def _points(ctx: Context, path: KeyPath, value: Any) -> list[np.ndarray]:
    if not isinstance(value, list) or len(value) < 4:
        raise ctx.error(path, "expected a list of at least 4 points [x, y, z]")
    return [Vector(3).read(ctx, (*path, k), p) for k, p in enumerate(value)]


def _segments(ctx: Context, path: KeyPath, value: Any) -> tuple[int, int]:
    got = Vector(2).read(ctx, path, value)
    if np.any(got < 3) or np.any(got != np.round(got)):
        raise ctx.error(path, f"expected two whole numbers >= 3, got {value}")
    triangles = 2.0 * float(got[0]) * float(got[1])
    if triangles > MAX_GENERATED_TRIANGLES:
        raise ctx.error(
            path,
            f"{got[0]:.3g} x {got[1]:.3g} segments make {triangles:.3g} triangles (about "
            f"{triangles * 400 / 1e9:.3g} GB to build); expected at most {MAX_GENERATED_TRIANGLES:,} triangles",
        )
    return int(got[0]), int(got[1])


@dataclass(frozen=True)
class Generator:
    fields: dict[str, Field]
    build: Callable[..., Any]
    doc: str


_KIND = Field(Text(), "generator name")
GENERATORS: dict[str, Generator] = {
    "rippled_torus": Generator(
        {
            "kind": _KIND,
            "major": Field(Number(positive=True), "radius of the tube's centre line, m"),
            "minor": Field(Number(positive=True), "mean tube radius, m"),
            "ripple": Field(Number(minimum=0, maximum=0.9), "relative amplitude of the tube-radius ripple", 0.25),
            "waves": Field(Number(minimum=0, integer=True), "ripples around the ring", 12),
            "segments": Field(Custom(_segments, "[around the ring, around the tube]"), "grid", (480, 240)),
        },
        lambda v: rippled_torus(v["major"], v["minor"], v["ripple"], int(v["waves"]), v["segments"]),
        "torus about local z with a rippled tube (default 480 x 240 segments: 230,400 triangles)",
    ),
    "annulus": Generator(
        {
            "kind": _KIND,
            "inner": Field(Number(positive=True), "inner radius, m"),
            "outer": Field(Number(positive=True), "outer radius, m"),
            "thickness": Field(Number(positive=True), "extent along local z, m"),
            "sections": Field(
                Number(minimum=8, maximum=MAX_GENERATED_TRIANGLES // 8, integer=True), "segments around", 128
            ),
        },
        lambda v: annulus(v["inner"], v["outer"], v["thickness"], int(v["sections"])),
        "flat ring about local z, centred",
    ),
    "convex_hull": Generator(
        {"kind": _KIND, "points": Field(Custom(_points, "a list of [x, y, z] points"), "hull points, m")},
        lambda v: convex_hull(v["points"]),
        "convex hull of points (wedges, latches)",
    ),
}


def read_generated_mesh(ctx: Context, path: KeyPath, value: Any):
    """Check a ``generate`` mapping and build its mesh."""
    if not isinstance(value, dict) or "kind" not in value:
        raise ctx.error(path, f"expected a mapping with 'kind' (one of {', '.join(GENERATORS)})")
    kind = value["kind"]
    if kind not in GENERATORS:
        raise ctx.error(
            (*path, "kind"),
            f"unknown mesh generator '{kind}'; expected one of {', '.join(GENERATORS)}",
            did_you_mean(str(kind), GENERATORS),
        )
    gen = GENERATORS[kind]
    got = read_mapping(ctx, path, value, gen.fields)
    if kind == "annulus" and got["inner"] >= got["outer"]:
        raise ctx.error((*path, "inner"), f"expected inner < outer, got {got['inner']} >= {got['outer']}")
    try:
        return gen.build(got)
    except ValueError as exc:
        raise ctx.error(path, f"cannot generate the mesh: {exc}") from None
