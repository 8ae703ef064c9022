"""Compliant contacts: a normal force law (Hertz with hysteresis damping by default) and a
velocity-dependent friction law, from the master's signed distance field
(papers/sdf-octree-contact-dynamics.txt, eqs. (5)-(6) and (36)-(43)); the laws are the
registry's (mbsim.model.contact.laws).

Each ``type: compliant`` contact entry pairs a master body (``body1``: its one solid shape, or
the one named by ``shape1``, becomes a triangle mesh whose signed distance field is precomputed,
cached on disk) with a slave body (``body2``: the vertices of its shape's mesh, plus optional
even surface samples, are the sample points); either may be the ground. At every evaluation each
slave point p is mapped into the master's frame, the field gives its signed distance d and
the normal n (the normalised gradient of the trilinear interpolant); a point with d < 0 has
penetration g = -d and pushes with

    f_N = k g^n + chi g^m dg/dt,     f_T = -mu(|v_T|) f_N v_T / |v_T|,

(eqs. 36-38, or the contact's other ``law`` and ``friction``; f_N is not allowed to pull) at the
slave point and, opposite, at its projection p - d n on the master's surface (eq. 43). The
elastic part acts along the raw gradient of the interpolant, so that it is exactly conservative
(potential k g^(n+1)/(n+1)); damping and friction are not (friction with a stick limiter,
compliant_kernels.pair_forces). This is a force element: every method takes it. Detection as the
paper's (``detection: sdf_octree``): oriented bounding boxes of both bodies and the 15-axis
separating-axis test first, then the slave's sample points in an octree
(mbsim.model.contact.octree) whose cells are skipped when the interpolated field at their
centre exceeds sqrt(3) times their radius, or G times it with G the field's slope bound over the
cell (SignedDistanceField.slope_pyramid; no point the full look-up finds is dropped), the
surviving points looked up in the same compiled pass (compliant_kernels.penetrating_points; the
compiled step keeps a cache of candidate points per pair between evaluations,
compliant_kernels._cached_points); ``sdf`` looks every point up, ``brute_force`` uses
trimesh's exact closest points (for comparisons). ``near`` is the paper's step control
(mbsim.simulate takes time.contact_step while it holds).

The compiled step evaluates the pairs (``sdf_octree``, ``sdf``): ``flat_arrays`` lays them out as
the FlatModel's cc_* arrays, compliant_kernels.compliant_forces_into computes the forces, counters
and potential at every stage, ``read_counters`` brings the counters of an evaluation to the run's
Data. ``evaluate`` is the Python path of ``brute_force`` (trimesh's queries), which has no compiled
form (mbsim.model.flat.compiled_form).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mbsim.errors import did_you_mean
from mbsim.model.contact.compliant_kernels import (
    CACHE_ROW,
    FRICTION_STRIBECK,
    OBB_EPS,
    LawTable,
    friction_coefficients,
    obb_overlap_one,
    pair_forces,
    penetrating_points,
)
from mbsim.model.contact.laws import CONTACT_LAW, law_row, read_contact_law
from mbsim.model.contact.obb import EPS, obb_from_points
from mbsim.model.contact.octree import Octree
from mbsim.model.contact.sdf import SignedDistanceField, cached_sdf, grid_too_large
from mbsim.model.model import Frames
from mbsim.model.shapes import SHAPE_TYPES
from mbsim.names import CONTACT_DATASETS, hdf5_name
from mbsim.scene.fields import Context, Field, Number, read_mapping

if TYPE_CHECKING:
    from mbsim.model.data import Data
    from mbsim.model.layout import FlatData, FlatModel

if OBB_EPS != EPS:
    raise ImportError("the compiled step's box margin differs from mbsim.model.contact.obb.EPS")

_LOG = logging.getLogger("mbsim.cache")
# even surface samples a contact may ask for: a million take trimesh ~20 s and 1 GB to spread, and
# every sample is queried at every evaluation (a mesh's own vertices come on top)
MAX_SAMPLES = 1_000_000
OCTREE_ABOVE = 256  # sample points; fewer are cheaper to query all at once than to cull

SDF_FIELDS = {
    "cell": Field(
        Number(positive=True),
        "grid spacing of the master's field, m (default: 1/64 of its size; at most half its thickness)",
        None,
    ),
    "padding": Field(
        Number(minimum=0),
        "margin of the grid around the master, m (default: 1/10 of its size; at most 8 cells when its thickness "
        "sets the cell)",
        None,
    ),
}


# the coarsest cell, in thicknesses of the master (the thinnest extent of its bounding box): a grid
# node then lies inside the solid within half its thickness of each face, so the interpolant's
# zero is the face's (a coarser grid can straddle a thin plate and miss it: no contact at all)
THICKNESS_CELLS = 0.5
# the default padding of a field whose automatic cell is set by the thickness, in cells (the
# default 1/10 of the size would make a thin floor's grid huge)
THIN_PADDING_CELLS = 8


def _grid_spacing(
    ctx: Any, path: tuple, grid: dict, label: str, master_name: str, size: float, thickness: float
) -> tuple[float, float]:
    """(cell, padding) of a contact's field: the given ones, or 1/64 and 1/10 of the master's
    size, the cell at most THICKNESS_CELLS of its thickness (then the padding at most
    THIN_PADDING_CELLS cells). A given cell coarser than that is refused (exit 2) with the
    value that works."""
    fine = THICKNESS_CELLS * thickness
    if grid["cell"] is not None and grid["cell"] > fine * (1.0 + 1e-9):
        raise ctx.error(
            (*path, "sdf", "cell"),
            f"contact '{label}': cell {grid['cell']:g} m is coarser than half the thickness of its master "
            f"'{master_name}' ({thickness:.3g} m, "
            "the thinnest extent of its bounding box): the field's grid could straddle the solid and miss "
            "its contacts",
            f"choose sdf.cell <= {_round_down(fine)}",
        )
    cell = grid["cell"] or min(size / 64.0, fine)
    padding = 0.1 * size
    if grid["cell"] is None and cell < size / 64.0:
        padding = min(padding, THIN_PADDING_CELLS * cell)
    return cell, grid["padding"] if grid["padding"] is not None else padding


def _round_down(x: float) -> str:
    """x rounded down to two significant digits, as text (a hint's value that satisfies the bound)."""
    digits = 10.0 ** (np.floor(np.log10(x)) - 1)
    return f"{np.floor(x / digits) * digits:.2g}"


def cache_dir() -> Path | None:
    """Where fields are cached: $MBSIM_CACHE, else $XDG_CACHE_HOME/mbsim/sdf, else ~/.cache/mbsim/sdf.

    Only names the place: ``cached_sdf`` creates it on first use and bypasses it, with a warning,
    when it cannot be written. None (no cache) when there is no $MBSIM_CACHE, no absolute
    $XDG_CACHE_HOME (the XDG spec ignores relative ones) and no home directory.
    """
    if os.environ.get("MBSIM_CACHE"):
        return Path(os.environ["MBSIM_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "mbsim" / "sdf"
    try:
        home = Path.home()
    except (RuntimeError, KeyError, OSError):  # no $HOME and no password entry
        _LOG.warning("mbsim: warning: no home directory to cache signed distance fields in; set MBSIM_CACHE")
        return None
    return home / ".cache" / "mbsim" / "sdf"


def shape_mesh(shape: dict[str, Any]):
    """A watertight trimesh of one solid shape in its body's frame (pose applied; its type's fine
    surface, mbsim.model.shapes). Raises ValueError for a shape without volume."""
    mesh = SHAPE_TYPES[shape["type"]].surface(shape, fine=True).copy()
    pose = shape.get("pose")
    if pose is not None:
        transform = np.eye(4)
        transform[:3, :3] = pose["rotation"]
        transform[:3, 3] = pose["position"]
        mesh.apply_transform(transform)
    return mesh


def exact_signed_distance(mesh, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact signed distance (negative inside) and outward direction of points to a mesh by
    trimesh's closest-point query: the "traditional" detection the paper compares against."""
    import trimesh

    # in chunks: trimesh gathers candidate triangles per point, which for points far from a
    # large mesh is most of it
    parts = [trimesh.proximity.closest_point(mesh, points[i : i + 64]) for i in range(0, len(points), 64)]
    closest = np.concatenate([c for c, _, _ in parts])
    dist = np.concatenate([d for _, d, _ in parts])
    tri = np.concatenate([t for _, _, t in parts])
    offset = closest - points
    face_normal = mesh.face_normals[tri]
    inside = np.einsum("ij,ij->i", offset, face_normal) > 0.0  # the surface lies outward of the point
    d = np.where(inside, -dist, dist)
    direction = np.where(inside[:, None], offset, -offset) / np.maximum(dist, 1e-300)[:, None]
    direction = np.where((dist > 1e-12)[:, None], direction, face_normal)
    return d, direction


def friction_coefficient(v: np.ndarray, mu_s: float, mu_d: float, v_s: float, v_d: float) -> np.ndarray:
    """mu(v) of eq. (38) for sliding speeds v >= 0 (the compiled stribeck law of the contact force)."""
    speeds = np.ascontiguousarray(v, dtype=float).ravel()
    law = law_row(friction=FRICTION_STRIBECK, mu_s=mu_s, mu_d=mu_d, v_s=v_s, v_d=v_d)
    return friction_coefficients(law, 0, speeds).reshape(np.shape(v))


class _EmptyTree:
    """Stands in for the octree when there is none (the compiled walk is then not taken)."""

    point_order = node_child_start = node_child_count = node_point_start = node_point_count = np.zeros(1, np.int64)
    node_centre = np.zeros((1, 3))
    node_radius = np.zeros(1)


_NO_TREE = _EmptyTree()


@dataclass
class CompliantPair:
    """One master-slave pair: the master's field, the slave's sample points (its frame), the law."""

    master: int
    slave: int
    field: SignedDistanceField
    points: np.ndarray  # (n, 3) slave sample points in the slave's frame
    law: np.ndarray  # its law arrays: one CONTACT_LAW row (mbsim.model.contact.laws), limiter included
    master_box: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # OBB (centre, axes, half), master frame
    slave_box: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # OBB of the sample points, slave frame
    tree: Octree | None = None  # octree over the sample points (slave frame)
    name: str = ""
    classes: np.ndarray | None = None  # penetration thresholds splitting the point count (ascending)
    detection: str = "sdf_octree"  # or "sdf" (every point queried), "brute_force" (exact distances)
    mesh: Any = None  # the master's mesh (its frame), for brute_force

    def __post_init__(self) -> None:
        if self.slave_box is None:
            self.slave_box = obb_from_points(self.points)
        if self.tree is None and len(self.points) > OCTREE_ABOVE:
            self.tree = Octree.build(self.points)
        self.points = np.ascontiguousarray(self.points, dtype=float)
        self.field_origin = np.asarray(self.field.origin, dtype=float)
        bounds = np.asarray(self.mesh.bounds, dtype=float) if self.mesh is not None else None
        self.mesh_lo = bounds[0] if bounds is not None else self.field_origin
        self.mesh_hi = bounds[1] if bounds is not None else self.field.upper
        # the field's slope bounds by region (the octree's skip tests), when the octree culls
        self.slope_bound, self.slope_meta = self.field.slope_pyramid() if self.tree is not None else (None, None)


class CompliantContacts:
    """The force group of all compliant pairs (see the module docstring)."""

    def __init__(self, pairs: list[CompliantPair], nbody: int) -> None:
        self.pairs = pairs
        self.nbody = nbody
        # the pairs' law arrays, one row each (what the kernel reads, by the pair's index)
        self.laws = np.concatenate([pair.law for pair in pairs]) if pairs else np.zeros(0, dtype=CONTACT_LAW)
        self.law_table = LawTable(self.laws)

    @property
    def compiled(self) -> bool:
        """Whether the compiled step evaluates the group (compliant_kernels.compliant_forces_into, over
        the FlatModel's cc_* arrays: flat_arrays); ``brute_force`` detection (trimesh) is Python's."""
        return all(pair.detection != "brute_force" for pair in self.pairs)

    def flat_arrays(self) -> dict[str, Any]:
        """The FlatModel's cc_* arrays of the pairs (mbsim.model.layout.FlatModel; flat_arrays(None):
        none), all pairs' points, octrees and fields concatenated, the indices pair-local."""
        return compliant_arrays(self.pairs, self.laws)

    def read_counters(self, data: Data, flat_data: FlatData) -> None:
        """The counters of the compiled evaluation that last ran on ``flat_data`` (FlatData.cc_*)
        into ``data.contacts``, which pair_diagnostics and the recorded rows read."""
        pair, classes, total = (
            np.asarray(flat_data.cc_pair),
            np.asarray(flat_data.cc_class_counts),
            np.asarray(flat_data.cc_total),
        )
        start = 0
        for k, p in enumerate(self.pairs):
            count, deepest = int(pair[k, 0]), float(pair[k, 1])
            counts = None
            if p.classes is not None:
                counts = classes[start + k : start + k + len(p.classes) + 1].copy() if count else None
                start += len(p.classes)
            data.contacts.pairs[k] = (count, deepest, counts)
        data.contacts.count, data.contacts.penetration = int(total[0]), float(total[1])

    def pair_diagnostics(self, data: Data) -> dict[str, float | np.ndarray]:
        """Per pair, of the run's last evaluation: /diagnostics/contacts/NAME/count, max_penetration
        and class_counts."""
        row: dict[str, float | np.ndarray] = {}
        for pair, (count, deepest, classes) in zip(self.pairs, data.contacts.pairs, strict=True):
            group = f"diagnostics/contacts/{hdf5_name(pair.name)}"  # one link per name (mbsim.names)
            row[f"{group}/count"] = float(count)
            row[f"{group}/max_penetration"] = deepest
            if pair.classes is not None:
                row[f"{group}/class_counts"] = classes if classes is not None else np.zeros(len(pair.classes) + 1)
        return row

    def _boxes_overlap(self, pair: CompliantPair, f: Frames, grow: float = 0.0) -> bool:
        m, s = pair.master, pair.slave
        cm, am, hm = pair.master_box
        cs, as_, hs = pair.slave_box
        return obb_overlap_one(
            f.pos[m] + f.rot[m] @ cm, f.rot[m] @ am, hm + grow, f.pos[s] + f.rot[s] @ cs, f.rot[s] @ as_, hs, 0.0, EPS
        )

    def near(self, f: Frames, h: float) -> bool:
        """Whether the bounding boxes of some pair overlap now or may within a step h (the
        master's box grown by how far both boxes' corners can move in h): the paper's switch
        to the small step."""
        for pair in self.pairs:
            grow = 0.0
            for body, box in ((pair.master, pair.master_box), (pair.slave, pair.slave_box)):
                reach = np.linalg.norm(box[0]) + np.linalg.norm(box[2])  # farthest corner from the body's origin
                grow += h * (np.linalg.norm(f.vel[body]) + np.linalg.norm(f.omega[body]) * reach)
            if self._boxes_overlap(pair, f, grow):
                return True
        return False

    def _penetrating(self, pair: CompliantPair, f: Frames, buffers: tuple[np.ndarray, np.ndarray, np.ndarray]):
        """Slave points inside the master: world points p, penetrations g > 0, the field's raw
        gradient (world) at them; None when there are none."""
        m, s = pair.master, pair.slave
        # global detection: oriented bounding boxes, the 15-axis separating-axis test
        if not self._boxes_overlap(pair, f):
            return None
        # slave frame -> master frame: x_m = R x_s + t
        R = f.rot[m].T @ f.rot[s]
        t = f.rot[m].T @ (f.pos[s] - f.pos[m])
        if pair.detection == "brute_force":
            local = pair.points @ R.T + t
            d, grad_local = exact_signed_distance(pair.mesh, local)
            idx = np.nonzero(d < 0.0)[0]
            d, grad_local = d[idx], grad_local[idx]
        else:
            # local detection, compiled: the octree walk (a cell whose centre's interpolated
            # distance exceeds sqrt(3) times its radius holds no contact) and the field lookups
            # of the remaining points
            tree, field = pair.tree, pair.field
            use_tree = pair.detection == "sdf_octree" and tree is not None
            if tree is None:
                tree = _NO_TREE
            n = penetrating_points(
                pair.points, tree.point_order, tree.node_centre, tree.node_radius, tree.node_child_start,
                tree.node_child_count, tree.node_point_start, tree.node_point_count, use_tree, R, t,
                field.values, pair.field_origin, field.cell, pair.mesh_lo, pair.mesh_hi, field.cell,
                *buffers, 0.0, pair.slope_bound if use_tree else None, pair.slope_meta if use_tree else None,
            )  # fmt: skip
            idx, d, grad_local = buffers[0][:n], buffers[1][:n], buffers[2][:n]
            if use_tree:  # in point order, as without the tree: the same sums to the last bit
                order = np.argsort(idx)
                idx, d, grad_local = idx[order], d[order], grad_local[order]
        if not len(idx):
            return None
        p = f.pos[s] + np.einsum("ij,nj->ni", f.rot[s], pair.points[idx])  # world (einsum: no BLAS threads)
        return p, -d, np.einsum("ij,nj->ni", f.rot[m], grad_local)

    def evaluate(self, f: Frames, t: float, data: Data):
        """The pairs' forces; the counts and penetrations of this evaluation go to ``data``."""
        nb = self.nbody
        cons = np.zeros((nb + 1, 6))
        nonc = np.zeros((nb + 1, 6))
        potential = 0.0
        count, deepest = 0, 0.0
        wrench = np.zeros((4, 6))
        for k, pair in enumerate(self.pairs):
            m, s = pair.master, pair.slave
            found = self._penetrating(pair, f, data.contacts.buffers[k])
            if found is None:
                data.contacts.pairs[k] = (0, 0.0, None)
                continue
            p, g, grad = found
            classes = None
            if pair.classes is not None:
                classes = np.bincount(np.searchsorted(pair.classes, g, side="right"), minlength=len(pair.classes) + 1)
            data.contacts.pairs[k] = (len(g), float(g.max()), classes.astype(float) if classes is not None else None)
            # eqs. (36)-(43), compiled (compliant_kernels.pair_forces): the elastic part along the
            # raw gradient of the interpolant, so that it is exactly conservative (|grad d| is
            # not 1 between grid nodes); damping and friction along the unit normal
            wrench[:] = 0.0
            potential += pair_forces(
                p, g, grad, f.pos[s], f.rot[s], f.vel[s], f.omega[s], f.pos[m], f.rot[m], f.vel[m], f.omega[m],
                self.law_table, k, wrench,
            )  # fmt: skip
            cons[s] += wrench[0]
            cons[m] += wrench[1]
            nonc[s] += wrench[2]
            nonc[m] += wrench[3]
            count += len(g)
            deepest = max(deepest, float(g.max()))
        data.contacts.count, data.contacts.penetration = count, deepest
        return cons, nonc, potential


def compliant_arrays(pairs: list[CompliantPair], laws: np.ndarray) -> dict[str, Any]:
    """The FlatModel's cc_* arrays of ``pairs`` (their law rows ``laws``); see flat_arrays."""
    n = len(pairs)
    trees = [pair.tree if pair.detection == "sdf_octree" and pair.tree is not None else None for pair in pairs]
    node_keys = ("centre", "radius", "child_start", "child_count", "point_start", "point_count")
    nodes = {key: [getattr(t, f"node_{key}") for t in trees if t is not None] for key in node_keys}
    empty = {"centre": np.zeros((0, 3)), "radius": np.zeros(0)}
    fields = [pair.field for pair in pairs]
    sizes = [f.values.size for f in fields]
    classes = [np.asarray(pair.classes, dtype=float) for pair in pairs if pair.classes is not None]
    class_sizes = [len(pair.classes) if pair.classes is not None else 0 for pair in pairs]

    # the slope pyramids of the octree pairs' fields (an empty one, meta 0 levels, for the others)
    pyramids = [(pair.slope_bound, pair.slope_meta) if tree is not None else (np.zeros(0), np.zeros(1))
                for pair, tree in zip(pairs, trees, strict=True)]  # fmt: skip
    bounds = [b for b, _ in pyramids]
    metas = [m for _, m in pyramids]
    width = max((len(m) for m in metas), default=1)

    def starts(counts: list[int]) -> np.ndarray:
        return np.concatenate(([0], np.cumsum(counts, dtype=np.int64))).astype(np.int64)

    def boxes(index: int) -> np.ndarray:  # centre, axes or half extents of master then slave, per pair
        return np.array([[pair.master_box[index], pair.slave_box[index]] for pair in pairs], dtype=float)

    if laws.dtype.itemsize != 8 * len(laws.dtype.names or ()):
        raise ValueError("the contact law rows must have 8-byte fields only (compliant_kernels.ContactLaw)")
    return {
        "ncc": n,
        "cc_master": np.array([pair.master for pair in pairs], dtype=np.int64),
        "cc_slave": np.array([pair.slave for pair in pairs], dtype=np.int64),
        "cc_tree": np.array([t is not None for t in trees], dtype=np.int64),
        "cc_point_start": starts([len(pair.points) for pair in pairs]),
        "cc_points": np.concatenate([pair.points for pair in pairs]) if n else np.zeros((0, 3)),
        "cc_point_order": np.concatenate(
            [t.point_order if t is not None else np.arange(len(p.points)) for t, p in zip(trees, pairs, strict=True)]
        ).astype(np.int64)
        if n
        else np.zeros(0, dtype=np.int64),
        "cc_node_start": starts([len(t.node_radius) if t is not None else 0 for t in trees]),
        **{
            f"cc_node_{key}": np.concatenate(parts) if parts else empty.get(key, np.zeros(0, dtype=np.int64))
            for key, parts in nodes.items()
        },
        "cc_sdf_start": starts(sizes)[:n],
        "cc_sdf_shape": np.array([f.values.shape for f in fields], dtype=np.int64).reshape(n, 3),
        "cc_sdf_origin": np.array([pair.field_origin for pair in pairs], dtype=float).reshape(n, 3),
        "cc_sdf_cell": np.array([f.cell for f in fields], dtype=float),
        "cc_sdf_values": np.concatenate([f.values.ravel() for f in fields]) if n else np.zeros(0),
        "cc_sdf_bound_start": starts([len(b) for b in bounds])[:n],
        "cc_sdf_bound": np.concatenate([*bounds, np.zeros(1)]),  # one more: a pair without one points at it
        "cc_sdf_bound_meta": np.array([np.pad(m, (0, width - len(m))) for m in metas], dtype=float).reshape(n, width),
        "cc_mesh_lo": np.array([pair.mesh_lo for pair in pairs], dtype=float).reshape(n, 3),
        "cc_mesh_hi": np.array([pair.mesh_hi for pair in pairs], dtype=float).reshape(n, 3),
        "cc_box_centre": boxes(0).reshape(n, 2, 3),
        "cc_box_axes": boxes(1).reshape(n, 2, 3, 3),
        "cc_box_half": boxes(2).reshape(n, 2, 3),
        "cc_law": np.ascontiguousarray(laws).view(np.float64).reshape(n, -1) if n else np.zeros((0, 16)),
        "cc_class_start": starts(class_sizes),
        "cc_classes": np.concatenate(classes) if classes else np.zeros(0),
    }


def compliant_buffers(flat: FlatModel) -> dict[str, np.ndarray]:
    """The FlatData's cc_* buffers of a FlatModel's pairs (see mbsim.model.layout.FlatData)."""
    points = int(np.max(np.diff(flat.cc_point_start), initial=0))
    nodes = int(np.max(np.diff(flat.cc_node_start), initial=0))
    return {
        "cc_idx": np.zeros(points, dtype=np.int64),
        "cc_d": np.zeros(points),
        "cc_grad": np.zeros((points, 3)),
        "cc_p": np.zeros((points, 3)),
        "cc_stack": np.zeros(max(nodes, 1), dtype=np.int64),
        "cc_R": np.zeros((3, 3)),
        "cc_t": np.zeros(3),
        "cc_box_c": np.zeros((3, 3)),
        "cc_box_R": np.zeros((2, 3, 3)),
        "cc_wrench": np.zeros((4, 6)),
        "cc_pair": np.zeros((flat.ncc, 2)),
        "cc_class_counts": np.zeros(len(flat.cc_classes) + flat.ncc),
        "cc_total": np.zeros(4),
        "cc_linear": np.zeros(1),
        "cc_stiffness": np.zeros((flat.ncc, 12, 12)),
        "cc_damping": np.zeros((flat.ncc, 12, 12)),
        # each pair's cache of candidate points (compliant_kernels.CACHE_*): the list at the pair's
        # point offset with the values and points of their last look-up, then a row per pair (count,
        # margin, valid, uses, size bound, the pose)
        "cc_cand_idx": np.zeros(len(flat.cc_points), dtype=np.int64),
        "cc_cand_d": np.zeros(len(flat.cc_points)),
        "cc_cand_d0": np.zeros(len(flat.cc_points)),
        "cc_cand_x": np.zeros((len(flat.cc_points), 3)),
        "cc_cache": np.zeros((flat.ncc, CACHE_ROW)),
    }


def _inverse_mass(slave: int, master: int, nbody: int, masses, inertias) -> tuple[float, float, float, float]:
    """1/m and 1/I_min of slave and master (zero for the ground or without masses)."""
    if masses is None:
        return (0.0, 0.0, 0.0, 0.0)

    def inv(b: int) -> tuple[float, float]:
        if b >= nbody:
            return 0.0, 0.0
        return 1.0 / float(masses[b]), 1.0 / float(np.linalg.eigvalsh(inertias[b]).min())

    (ms, Is), (mm, Im) = inv(slave), inv(master)
    return (ms, mm, Is, Im)


def _pick_shape(ctx: Context, path, body_key: str, shape_key: str, body: str, wanted, shapes: dict) -> dict:
    """The one solid shape of a body, or the one named by shape1/shape2."""
    solid = [sh for sh in shapes.get(body, []) if SHAPE_TYPES[sh["type"]].solid]
    if wanted is not None:
        named = [sh for sh in solid if sh.get("name") == wanted]
        if not named:
            known = [sh["name"] for sh in solid if sh.get("name")]
            raise ctx.error(
                (*path, shape_key),
                f"no solid shape named '{wanted}' on '{body}'; named solid shapes: {', '.join(known) or 'none'}",
                did_you_mean(str(wanted), known),
            )
        return named[0]
    if len(solid) != 1:
        raise ctx.error(
            (*path, body_key),
            f"a compliant contact needs one solid shape on '{body}', found {len(solid)}; "
            f"name the shapes and pick one with {shape_key}",
        )
    return solid[0]


def build_compliant(
    ctx: Context,
    items,
    body_index: dict[str, int],
    shapes: dict,
    nbody: int,
    dimension: int,
    masses: np.ndarray | None = None,
    inertias: np.ndarray | None = None,
    stick_step: float = 0.0,
):
    """The compliant contact force group of a scene, or None when it has none.

    ``masses`` and ``inertias`` (per body) and ``stick_step`` (the step the run takes in
    contact) set the stick limiter of the friction; without them there is none."""
    pairs = []
    # an unnamed pair is called MASTER_SLAVE, made unique: two pairs' series must not share a group
    taken = set(CONTACT_DATASETS) | {item.values["name"] for item in items if item.values.get("name")}
    for item in items:
        values = item.values
        if values.get("type") != "compliant" or not values.get("enabled", True):
            continue
        path = item.path
        if dimension != 3:
            raise ctx.error((*path, "type"), "compliant contacts are 3D only")
        names = []
        for key, shape_key in (("body1", "shape1"), ("body2", "shape2")):
            name = values[key]
            if not isinstance(name, str):
                raise ctx.error((*path, key), f"a compliant contact needs one body name (or ground), got {name!r}")
            if name not in body_index:
                raise ctx.error(
                    (*path, key),
                    f"unknown body '{name}'; expected a body of the scene or ground",
                    did_you_mean(name, body_index),
                )
            names.append((name, _pick_shape(ctx, path, key, shape_key, name, values.get(shape_key), shapes)))
        if names[0][0] == names[1][0]:
            raise ctx.error((*path, "body2"), "a compliant contact needs two different bodies")
        law = read_contact_law(ctx, path, values, item.raw)
        (master_name, master_shape), (slave_name, slave_shape) = names
        try:
            master_mesh = shape_mesh(master_shape)
            slave_mesh = shape_mesh(slave_shape)
        except ValueError as exc:
            raise ctx.error(path, str(exc)) from None
        size = float(np.linalg.norm(master_mesh.extents))
        master_box = obb_from_points(np.asarray(master_mesh.vertices, dtype=float))
        grid = read_mapping(ctx, (*path, "sdf"), values.get("sdf") or {}, SDF_FIELDS)
        label = values.get("name") or f"{master_name}_{slave_name}"
        thickness = 2.0 * float(np.min(master_box[2]))
        cell, padding = _grid_spacing(ctx, path, grid, label, master_name, size, thickness)
        too_large = grid_too_large(np.asarray(master_mesh.bounds), cell, padding)
        if too_large is not None:  # refused before a byte is allocated (a 1e-4 m cell: 216 GB)
            blame = "padding" if grid["padding"] is not None and 2 * padding > size else "cell"
            raise ctx.error(
                (*path, "sdf", blame) if grid[blame] is not None else (*path, "sdf"),
                f"the signed distance field of '{master_name}' ({size:.3g} m across) would be {too_large}; "
                "choose a larger sdf.cell or a smaller sdf.padding",
            )
        extra = int(values.get("samples") or 0)
        if extra > MAX_SAMPLES:
            raise ctx.error(
                (*path, "samples"),
                f"{extra:.3g} sample points would need {24 * extra / 1e9:.3g} GB and more per step; "
                f"expected at most {MAX_SAMPLES:,} (the slave's mesh vertices are sample points as well)",
            )
        try:
            field = cached_sdf(master_mesh, cell, padding, cache_dir())
        except ValueError as exc:
            raise ctx.error((*path, "body1"), f"no signed distance field for '{master_name}': {exc}") from None
        # the stick limiter's columns of the law arrays (compliant_kernels.pair_forces)
        law["stick_step"] = stick_step if masses is not None else 0.0
        inverse = _inverse_mass(body_index[slave_name], body_index[master_name], nbody, masses, inertias)
        for column, value in zip(
            ("inv_mass_slave", "inv_mass_master", "inv_inertia_slave", "inv_inertia_master"), inverse, strict=True
        ):
            law[column] = value
        points = np.asarray(slave_mesh.vertices, dtype=float)
        if extra:  # evenly spread surface points, reproducible (fixed seed)
            import trimesh

            spread, _ = trimesh.sample.sample_surface_even(slave_mesh, extra, seed=0)
            points = np.concatenate((points, np.asarray(spread, dtype=float)))
        pairs.append(
            CompliantPair(
                master=body_index[master_name],
                slave=body_index[slave_name],
                field=field,
                points=points,
                law=law,
                master_box=master_box,
                name=values.get("name") or _unique(f"{master_name}_{slave_name}", taken),
                classes=None if values.get("penetration_classes") is None else values["penetration_classes"],
                detection=values.get("detection") or "sdf_octree",
                mesh=master_mesh,
            )
        )
    return CompliantContacts(pairs, nbody) if pairs else None


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``... when taken; the result is taken from then on."""
    out, k = name, 2
    while out in taken:
        out, k = f"{name}_{k}", k + 1
    taken.add(out)
    return out
