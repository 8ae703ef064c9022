"""Signed distance fields of closed triangle meshes: build on a uniform grid, query by trilinear interpolation.

A ``SignedDistanceField`` samples the signed distance ``d`` to a watertight mesh (negative inside)
at the nodes ``origin + cell * (i, j, k)`` of a uniform grid. Between nodes it is the trilinear
interpolant ``d_s`` of eq. (5) of the SDF-octree contact paper (/work/shared/papers/
sdf-octree-contact-dynamics.txt)::

    d_s(p) = sum_{i,j,k in {0,1}} d_ijk [(1-i)(1-xi) + i xi] [(1-j)(1-eta) + j eta] [(1-k)(1-zeta) + k zeta]

with (xi, eta, zeta) in [0, 1]^3 the position of p inside its grid cell; ``gradient`` is the exact
gradient of that interpolant, which eq. (6) normalises into the contact normal ``n``.

Points outside the grid box are clamped onto the box and the distance from the point to the
box is added: ``d(p) = d_s(clamp(p)) + |p - clamp(p)|``. This keeps far points reading as far
(it is an upper bound of the true distance outside, exact in the limit) and its gradient is
``(p - clamp(p)) / |p - clamp(p)|`` along the clamped axes plus the interpolant's gradient along
the others.

Build (``build_sdf``): the exact unsigned distance at each node is the minimum over triangles of
the point-to-triangle distance (Ericson, *Real-Time Collision Detection*, §5.1.5, closest point
on triangle), compiled (mbsim.model.contact.sdf_kernels). Acceleration, exact: a bounding volume
tree over the triangles (median splits, at most 4 triangles a leaf), each node bounded by a box
along the coordinate axes or along its patch's mean normal, whichever is smaller (a nearly flat
patch lies in a thin box along its normal, whatever the patch's tilt); a node's search descends
nearest child first and skips every subtree whose box is not nearer than the best triangle so
far. That bound starts tight: nodes are visited in grid order and each starts from the nearer of
two known triangles, the previous node's on its grid line and the one at the same place on the
previous line (``|d(p) - d(p')| <= |p - p'|``). On the 230k-triangle torus of
benchmarks/sdf_build.py a node costs about 120 box tests and 35 point-triangle distances.

Sign: angle-weighted pseudo-normals at the closest feature (Baerentzen and Aanaes, IEEE TVCG
11(3), 2005): the sign of ``(p - c) . n`` with ``c`` the closest point and ``n`` the face normal
(face region), the sum of the two adjacent face normals (edge region) or the angle-weighted sum of
the incident face normals (vertex region). It is exact for a watertight, consistently wound mesh;
a mesh that is not watertight raises ``ValueError``.

``cached_sdf`` keeps built fields as ``.npz`` files keyed by a hash of the mesh and the grid
settings; an unusable cache file is rebuilt and an unwritable cache bypassed, with a warning,
never an error. This module imports nothing from mbsim but its compiled kernels.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mbsim.model.contact.sdf_kernels import _query, _signed_distance_grid, _triangle_tree

if TYPE_CHECKING:  # imported where a mesh is checked: a scene without meshes never loads trimesh
    import trimesh

_CACHE_VERSION = 1  # bump when the build changes what is stored
# grid nodes a field may have: 2^26 float64 values are 512 MiB in memory and in the cache (a
# 406^3 grid, built in well under a minute); the default grid (1/64 of the master's size) has ~0.5 M
MAX_SDF_NODES = 1 << 26
_LOG = logging.getLogger("mbsim.cache")  # cache warnings (a name, not an import from mbsim)


# ------------------------------------------------------------------- the field


@dataclass(frozen=True)
class SignedDistanceField:
    """Signed distance samples on a uniform grid (negative inside the mesh).

    Attributes:
        origin: (3,) position of node (0, 0, 0).
        cell: node spacing, the same on all axes.
        shape: (3,) number of nodes per axis (nx, ny, nz), each >= 2.
        values: (nx, ny, nz) float64 signed distance at the nodes.
    """

    origin: np.ndarray
    cell: float
    shape: tuple[int, int, int]
    values: np.ndarray

    def distance(self, points: np.ndarray) -> np.ndarray:
        """(n, 3) points -> (n,) trilinear signed distance, eq. (5); outside the grid see the module doc."""
        p = _as_points(points)
        out_d = np.empty(p.shape[0])
        out_g = np.empty((0, 3))
        _query(self.values, np.asarray(self.origin, dtype=np.float64), float(self.cell), p, out_d, out_g, False)
        return out_d

    def gradient(self, points: np.ndarray) -> np.ndarray:
        """(n, 3) points -> (n, 3) exact gradient of ``distance`` (not normalised; eq. (6) normalises it)."""
        p = _as_points(points)
        out_d = np.empty(p.shape[0])
        out_g = np.empty((p.shape[0], 3))
        _query(self.values, np.asarray(self.origin, dtype=np.float64), float(self.cell), p, out_d, out_g, True)
        return out_g

    def distance_and_gradient(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Both at once, for the contact hot path: ((n,), (n, 3))."""
        p = _as_points(points)
        out_d = np.empty(p.shape[0])
        out_g = np.empty((p.shape[0], 3))
        _query(self.values, np.asarray(self.origin, dtype=np.float64), float(self.cell), p, out_d, out_g, True)
        return out_d, out_g

    @property
    def upper(self) -> np.ndarray:
        """(3,) position of the last node: the grid box is [origin, upper]."""
        return np.asarray(self.origin) + self.cell * (np.asarray(self.shape) - 1)

    def slope_pyramid(self) -> tuple[np.ndarray, np.ndarray]:
        """Bounds of the interpolant's slope over regions of the grid, for the octree's skip tests
        (compliant_kernels.penetrating_points): level 0 holds, per grid cell, G = |(M_0, M_1, M_2)|
        with M_a the largest size of the cell's four edge differences along axis a over the cell:
        on the cell each partial derivative of the trilinear interpolant is a blend of those, so
        |grad I| <= G there and the value changes by at most G |p - c| along a segment in the
        cell. Level l + 1 holds the largest of each 2 x 2 x 2 block of level l, up to a level of at
        most two blocks along each axis.

        Returns:
            (values of every level, concatenated; meta (1 + 4 * levels,): the number of levels, then
            per level its offset in values and its shape in blocks).
        """
        v = np.asarray(self.values, dtype=float)
        n0, n1, n2 = v.shape
        edges = [np.abs(np.diff(v, axis=a)) for a in range(3)]
        # the four edges of a cell along each axis, their largest difference
        m0 = np.maximum.reduce([edges[0][:, j : n1 - 1 + j, k : n2 - 1 + k] for j in (0, 1) for k in (0, 1)])
        m1 = np.maximum.reduce([edges[1][i : n0 - 1 + i, :, k : n2 - 1 + k] for i in (0, 1) for k in (0, 1)])
        m2 = np.maximum.reduce([edges[2][i : n0 - 1 + i, j : n1 - 1 + j, :] for i in (0, 1) for j in (0, 1)])
        level = np.sqrt(m0 * m0 + m1 * m1 + m2 * m2) / float(self.cell)
        levels = [level]
        while max(level.shape) > 2:
            pad = [(0, n % 2) for n in level.shape]
            even = np.pad(level, pad, mode="edge")
            n0, n1, n2 = (n // 2 for n in even.shape)
            level = even.reshape(n0, 2, n1, 2, n2, 2).max(axis=(1, 3, 5))
            levels.append(level)
        meta = [float(len(levels))]
        start = 0
        for part in levels:
            meta += [float(start), *map(float, part.shape)]
            start += part.size
        return np.concatenate([part.ravel() for part in levels]), np.array(meta)


def _as_points(points: np.ndarray) -> np.ndarray:
    p = np.ascontiguousarray(points, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 3:
        raise ValueError(f"points: expected an (n, 3) array, got shape {p.shape}")
    return p


# ------------------------------------------------------------------- build


def _pseudo_normals(mesh: trimesh.Trimesh) -> np.ndarray:
    """(nf, 7, 3) pseudo-normal of each face per feature: face, vertex a/b/c, edge ab/bc/ca."""
    fn = np.asarray(mesh.face_normals, dtype=np.float64)
    faces = np.asarray(mesh.faces)
    # vertices: sum of incident face normals weighted by the face's angle at the vertex
    vn = np.zeros((len(mesh.vertices), 3))
    angles = np.asarray(mesh.face_angles)
    for c in range(3):
        np.add.at(vn, faces[:, c], fn * angles[:, c : c + 1])
    # edges: sum of the two adjacent face normals (watertight: exactly two)
    fe = np.asarray(mesh.faces_unique_edges)  # (nf, 3) for edges ab, bc, ca
    en = np.zeros((len(mesh.edges_unique), 3))
    for c in range(3):
        np.add.at(en, fe[:, c], fn)
    out = np.empty((len(faces), 7, 3))
    out[:, 0] = fn
    out[:, 1:4] = vn[faces]
    out[:, 4:7] = en[fe]
    return out


def grid_size(bounds: np.ndarray, cell: float, padding: float) -> tuple[float, float, float]:
    """Node counts per axis of the grid ``build_sdf`` makes, as floats: computed before anything is
    allocated, and without the integer overflow of a grid of 1e30 nodes."""
    bounds = np.asarray(bounds, dtype=np.float64)
    counts = np.maximum(np.ceil(((bounds[1] + padding) - (bounds[0] - padding)) / cell) + 1.0, 2.0)
    return float(counts[0]), float(counts[1]), float(counts[2])


def grid_too_large(bounds: np.ndarray, cell: float, padding: float) -> str | None:
    """Why the grid of spacing ``cell`` and margin ``padding`` around ``bounds`` is too large to
    build (its size and memory, and the limit), or None when it is within :data:`MAX_SDF_NODES`."""
    counts = grid_size(bounds, cell, padding)
    nodes = counts[0] * counts[1] * counts[2]
    if nodes <= MAX_SDF_NODES:
        return None
    shown = "x".join(f"{n:.0f}" if n < 1e6 else f"{n:.3g}" for n in counts)
    amount = f"{nodes:.3g} nodes ({_bytes(8.0 * nodes)})" if np.isfinite(nodes) else "more than 1e308 nodes"
    return (
        f"a {shown} grid of {amount} for cell {cell:g} m and padding "
        f"{padding:g} m; expected at most {MAX_SDF_NODES:,} nodes ({_bytes(8.0 * MAX_SDF_NODES)})"
    )


def _bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n / 1e3:.3g} kB"


def _grid_for(bounds: np.ndarray, cell: float, padding: float) -> tuple[np.ndarray, np.ndarray]:
    """Origin and node counts of a grid of spacing ``cell`` covering ``bounds`` enlarged by ``padding``, centred."""
    lo = bounds[0] - padding
    hi = bounds[1] + padding
    shape = np.asarray(grid_size(bounds, cell, padding)).astype(np.int64)
    origin = 0.5 * (lo + hi) - 0.5 * cell * (shape - 1)
    return origin, shape


def _check_mesh(mesh: trimesh.Trimesh) -> trimesh.Trimesh:
    import trimesh

    if not isinstance(mesh, trimesh.Trimesh):
        raise ValueError(f"signed distance field: expected a trimesh.Trimesh, got {type(mesh).__name__}")
    if len(mesh.faces) == 0:
        raise ValueError("signed distance field: the mesh has no faces")
    if not mesh.is_watertight:
        raise ValueError(
            "signed distance field: the mesh is not watertight (it has open or non-manifold edges), "
            "so inside and outside are undefined; close the mesh (e.g. trimesh.repair.fill_holes) first"
        )
    if not mesh.is_winding_consistent:
        raise ValueError("signed distance field: the mesh's face winding is inconsistent; fix the normals first")
    if mesh.volume < 0.0:  # wound inside out: flip so that the normals point outward
        mesh = mesh.copy()
        mesh.invert()
    return mesh


def build_sdf(mesh: trimesh.Trimesh, cell: float, padding: float, threads: int = 2) -> SignedDistanceField:
    """Signed distance field of a watertight mesh on a uniform grid of spacing ``cell``.

    The grid covers the mesh's bounding box enlarged by ``padding`` on every side (it is centred
    on the box; the node count per axis is rounded up). Values are exact at the nodes (up to
    floating point), negative inside. Raises ``ValueError`` for a mesh that is not watertight.
    ``threads`` 2 (the default) shares a large grid with a second thread; 1 builds in this one.
    """
    if not (cell > 0.0 and np.isfinite(cell)):
        raise ValueError(f"signed distance field: cell must be a positive number, got {cell!r}")
    if not (padding >= 0.0 and np.isfinite(padding)):
        raise ValueError(f"signed distance field: padding must be a number >= 0, got {padding!r}")
    mesh = _check_mesh(mesh)
    too_large = grid_too_large(np.asarray(mesh.bounds, dtype=np.float64), float(cell), float(padding))
    if too_large is not None:
        raise ValueError(f"signed distance field: {too_large}")
    origin, shape = _grid_for(np.asarray(mesh.bounds, dtype=np.float64), float(cell), float(padding))

    tri = np.ascontiguousarray(mesh.triangles, dtype=np.float64)  # (nt, 3, 3)
    normals = _pseudo_normals(mesh)
    # the tree's leaves hold contiguous runs of triangles: store them in its order
    perm, nodes, links = _triangle_tree(tri)
    values = _signed_distance_grid(
        origin,
        float(cell),
        shape,
        np.ascontiguousarray(tri[perm]),
        np.ascontiguousarray(normals[perm]),
        nodes,
        links,
        int(threads),
    )
    return SignedDistanceField(origin=origin, cell=float(cell), shape=tuple(int(n) for n in shape), values=values)


# ------------------------------------------------------------------- disk cache


def sdf_cache_key(mesh: trimesh.Trimesh, cell: float, padding: float) -> str:
    """Hex digest of the mesh's vertices and faces bytes and the grid settings."""
    import hashlib  # here, not at module level: only scenes with an SDF need it (validate starts faster)

    h = hashlib.sha256()
    h.update(f"mbsim-sdf-v{_CACHE_VERSION}".encode())
    h.update(np.ascontiguousarray(mesh.vertices, dtype="<f8").tobytes())
    h.update(np.ascontiguousarray(mesh.faces, dtype="<i8").tobytes())
    h.update(np.asarray([cell, padding], dtype="<f8").tobytes())
    return h.hexdigest()


def cached_sdf(
    mesh: trimesh.Trimesh, cell: float, padding: float, cache_dir: str | os.PathLike | None
) -> SignedDistanceField:
    """``build_sdf`` through a disk cache: ``cache_dir/sdf-<key>.npz``, loaded when present, else built and saved.

    The cache never fails a run (CONTRACT §4, "Caches are safe"): a cache file that cannot be read
    or does not hold this field (zero bytes, truncated, not an npz, missing arrays, a grid of
    another shape, non-finite values) is rebuilt and replaced; a cache directory that cannot be
    created or written (read-only, a plain file in the way) is bypassed and the field kept in
    memory for this run. Both are logged as warnings on the ``mbsim.cache`` logger (stderr when
    logging is not configured). Writes go through a temporary file in the same directory,
    flushed to disk, and an atomic rename, so that concurrent runs never read half a file.
    ``cache_dir=None`` builds without a cache. Raises ``ValueError`` only for a bad mesh or grid
    (``build_sdf``).
    """
    if cache_dir is None:
        return build_sdf(mesh, cell, padding)
    path = Path(cache_dir) / f"sdf-{sdf_cache_key(mesh, cell, padding)[:40]}.npz"
    odd = _not_regular(path)
    if odd is not None:  # someone else's FIFO, device or directory: neither read nor replaced
        _LOG.warning(
            "mbsim: warning: signed distance field cache entry %s is %s, not a regular file; "
            "the cache is bypassed and the field kept in memory for this run only",
            path,
            odd,
        )
        return build_sdf(mesh, cell, padding)
    field = _load_cached(path, mesh, cell, padding)
    if field is None:
        field = build_sdf(mesh, cell, padding)
        _store(path, field)
    return field


def _not_regular(path: Path) -> str | None:
    """What ``path`` is when it exists and is no regular file (symlinks followed), else None."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):  # fmt: skip
        if test(mode):
            return what
    return "a special file"


def _load_cached(path: Path, mesh: trimesh.Trimesh, cell: float, padding: float) -> SignedDistanceField | None:
    """The field stored at ``path``, or None when there is none or it is unusable (then a warning)."""
    try:
        st = path.stat()
    except OSError:  # absent, or a parent directory that cannot be searched: _store reports it
        return None
    if not stat.S_ISREG(st.st_mode):
        return None  # cached_sdf bypasses it (opening a FIFO would block for ever)
    try:
        # O_NONBLOCK: the entry may have been swapped for a FIFO since the look above
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                raise OSError("not a regular file")
            data_file = np.load(stream, allow_pickle=False)
            with data_file as data:
                field = SignedDistanceField(
                    origin=np.array(data["origin"], dtype=np.float64),
                    cell=float(data["cell"]),
                    shape=tuple(int(n) for n in data["shape"]),
                    values=np.array(data["values"], dtype=np.float64),
                )
        problem = _mismatch(field, mesh, cell, padding)
    except Exception as exc:  # EOFError (zero bytes), BadZipFile, ValueError, KeyError, OSError, ...
        problem = _describe(exc)
    if problem is None:
        return field
    _LOG.warning("mbsim: warning: signed distance field cache file %s is unusable (%s); rebuilding it", path, problem)
    return None


def _mismatch(field: SignedDistanceField, mesh: trimesh.Trimesh, cell: float, padding: float) -> str | None:
    """Why a loaded field is not the one ``build_sdf(mesh, cell, padding)`` makes, or None."""
    origin, shape = _grid_for(np.asarray(mesh.bounds, dtype=np.float64), float(cell), float(padding))
    if field.cell != float(cell):
        return f"cell {field.cell!r}, expected {float(cell)!r}"
    if field.shape != tuple(int(n) for n in shape) or field.values.shape != field.shape:
        return f"a grid of shape {field.values.shape} (stored shape {field.shape}), expected {tuple(shape.tolist())}"
    if field.origin.shape != (3,) or not np.allclose(field.origin, origin, rtol=0.0, atol=1e-9 * float(cell)):
        return f"grid origin {field.origin.tolist()}, expected {origin.tolist()}"
    if not np.isfinite(field.values).all():
        return "non-finite distances"
    return None


def _store(path: Path, field: SignedDistanceField) -> None:
    """Write ``field`` to ``path`` atomically; on failure warn and carry on (the field stays in memory)."""
    import tempfile  # here, not at module level: only a field computed anew needs it (validate starts faster)

    directory = path.parent
    tmp = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".sdf-", suffix=".npz.tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, origin=field.origin, cell=field.cell, shape=np.asarray(field.shape), values=field.values)
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the name points at them
        os.replace(tmp, path)
    except Exception as exc:
        _LOG.warning(
            "mbsim: warning: cannot write the signed distance field cache in %s (%s); "
            "the field is kept in memory for this run only",
            directory,
            _describe(exc),
        )
        _discard(tmp)
    except BaseException:  # interrupted: leave no temporary file behind
        _discard(tmp)
        raise


def _discard(tmp: str | None) -> None:
    if tmp is not None:
        with contextlib.suppress(OSError):
            Path(tmp).unlink(missing_ok=True)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
