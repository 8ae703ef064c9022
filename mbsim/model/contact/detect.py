"""The contact detector: every rigid contact of one state, as one ``ContactBatch``.

``ContactDetector(model)`` groups the compiled shapes (the model's ``shape_*`` arrays,
mbsim.model.shapes) of the bodies that may touch by type once (body, local pose, parameters). ``detect(frames,
margin)`` then runs, with no Python loop over bodies or pairs:

1. world poses of all shapes, one batched transform per shape type;
2. broad phase (mbsim.model.contact.broadphase): AABBs per type (its ``aabb_half``), enlarged by half the margin
   each, sort and sweep; half-spaces (planes, lines) against the boxes of their partners;
3. the allowed body pairs and their contact entry (mbsim.model.contact.pairs);
4. narrow phase per shape-type pair (mbsim.model.contact.narrowphase.PAIR_FUNCTIONS), each
   function vectorised over all candidate pairs of its types;
5. the batch: the ground is always body i; pairs of one type are ordered by shape id.

When every type pair of the model has a compiled kernel (all do today, meshes too: their
vertices and fields in ``mesh_table``), steps 4 and 5 are one compiled pass over the candidates
(narrowphase_kernels.contact_batch, rows in candidate order).

It is not the contact law: restitution and friction are the solver's (method timestepping).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbsim.model.contact import broadphase_kernels
from mbsim.model.contact.broadphase import all_pairs, candidates
from mbsim.model.contact.mesh_rigid import MeshData, mesh_data
from mbsim.model.contact.narrowphase import MAX_FEATURE, Side, pair_function
from mbsim.model.contact.narrowphase_kernels import MeshTable, contact_batch
from mbsim.model.contact.pairs import ContactPairs
from mbsim.model.model import Frames, Model
from mbsim.model.shapes import SHAPE_KINDS, ShapeType, base

_AABB = broadphase_kernels.AabbKernel
if (base.AABB_BALL, base.AABB_BOX, base.AABB_CAPSULE, base.AABB_CYLINDER) != (
    _AABB.AABB_BALL,
    _AABB.AABB_BOX,
    _AABB.AABB_CAPSULE,
    _AABB.AABB_CYLINDER,
):
    raise ImportError("world box kinds of mbsim.model.shapes differ from mbsim.model.contact.broadphase_kernels")


@dataclass
class ContactBatch:
    """All contacts of one state, k rows.

    Attributes:
        body_i, body_j: (k,) extended body indices (ground = model.nbody, always body_i).
        entry: (k,) index into model.contacts (restitution, friction of the pair).
        point_i, point_j: (k, d) world points on the surfaces of body i and body j, m.
        normal: (k, d) unit world normal pointing from body i to body j.
        gap: (k,) signed distance (point_j - point_i) . normal, m; < 0 is penetration.
        feature: (k,) int64 key, stable while the same features touch (shape pair and
            vertex/edge/face numbers), for warm starts.
    """

    body_i: np.ndarray
    body_j: np.ndarray
    entry: np.ndarray
    point_i: np.ndarray
    point_j: np.ndarray
    normal: np.ndarray
    gap: np.ndarray
    feature: np.ndarray

    def __len__(self) -> int:
        return len(self.gap)

    @staticmethod
    def empty(d: int) -> ContactBatch:
        i = np.zeros(0, dtype=np.int64)
        z = np.zeros((0, d))
        return ContactBatch(i, i, i, z, z, z, np.zeros(0), i)


@dataclass
class _TypeTable:
    """The shapes of one type: ids start..stop-1, their bodies and local poses."""

    name: str
    kind: ShapeType
    start: int
    stop: int
    body: np.ndarray  # (n,) extended body index
    pos_local: np.ndarray | None  # (n, d) shape origin in the body frame; None: all at the origin
    rot_local: np.ndarray | None  # (n, d, d) shape axes in the body frame; None: all identity
    oriented: bool  # the narrow phase needs the rotation


class ContactDetector:
    """Rigid contact detection for a compiled model.

    Args:
        model: the compiled model; its ``contact_pairs`` (set by compile) says which bodies may
            touch. A model without it has no contacts.
        broadphase: "sweep" (sort and sweep, the default) or "all" (every pair of shapes of
            allowed bodies goes to the narrow phase: the brute-force reference for tests).
    """

    def __init__(self, model: Model, broadphase: str = "sweep") -> None:
        if broadphase not in ("sweep", "all"):
            raise ValueError(f"broadphase: expected 'sweep' or 'all', got {broadphase!r}")
        self.broadphase = broadphase
        self.dimension = d = model.dimension
        self.nbody = nb = model.nbody
        self.pairs: ContactPairs = getattr(model, "contact_pairs", None) or ContactPairs(nb)
        # per type, the shapes of bodies that may touch something (the model's shape arrays, in
        # their order); bounded types first, each in the registry's order
        active = np.nonzero(self.pairs.body_active[model.shape_body])[0] if model.nshape else np.zeros(0, np.int64)
        codes = sorted(set(model.shape_type[active].tolist()), key=lambda c: (SHAPE_KINDS[c].unbounded, c))
        names = [SHAPE_KINDS[c].name for c in codes]
        self.type_names = names
        self.tables: list[_TypeTable] = []
        bodies, params = [], []
        self.mesh_data: dict[int, MeshData] = {}
        start = 0
        for c in codes:
            kind = SHAPE_KINDS[c]
            ids = active[model.shape_type[active] == c]
            n = len(ids)
            body = model.shape_body[ids]
            pos, rot = model.shape_pos[ids], model.shape_rot[ids]
            params.append(model.shape_param[ids])
            bodies.append(body)
            self.tables.append(
                _TypeTable(
                    kind.name,
                    kind,
                    start,
                    start + n,
                    body,
                    None if not np.any(pos) else pos,
                    None if np.allclose(rot, np.eye(d)) else rot,
                    not kind.isotropic,
                )
            )
            if kind.narrow_sdf:  # fields built (or loaded from the cache) once
                from mbsim.model.contact.compliant import cache_dir

                for k, i in enumerate(ids):
                    self.mesh_data[start + k] = mesh_data(kind.surface(model.shape_values[i]), cache_dir())
            start += n
        self.nshape = start
        # the meshes' vertices and fields as the compiled kernels read them, by shape id
        self.mesh_table = MeshTable([self.mesh_data.get(s) for s in range(start)])
        self.shape_body = np.concatenate(bodies) if bodies else np.zeros(0, dtype=np.int64)
        self.shape_param = np.concatenate(params) if params else np.zeros((0, 3))
        self.shape_type = np.repeat(np.arange(len(self.tables)), [t.stop - t.start for t in self.tables])
        self._oriented = [t.oriented for t in self.tables]
        self.nbounded = sum(t.stop - t.start for t in self.tables if not t.kind.unbounded)
        # half-space candidates are static: each plane (line) with every bounded shape it may touch
        planes = np.arange(self.nbounded, self.nshape)
        shapes = np.arange(self.nbounded)
        hp, hs = (x.ravel() for x in np.meshgrid(planes, shapes, indexing="ij"))
        entry = self.pairs.entry(self.shape_body[hp], self.shape_body[hs]) if len(hp) else np.zeros(0, np.int64)
        allowed = entry >= 0
        self._half_plane, self._half_shape, self._half_entry = hp[allowed], hs[allowed], entry[allowed]
        # the narrow-phase function of each type pair (code = type_a * ntypes + type_b)
        nt = len(names)
        self._functions = {}
        for ka, ta in enumerate(names):
            for kb, tb in enumerate(names):
                try:
                    self._functions[ka * nt + kb] = (*pair_function(ta, tb), ta == tb)
                except KeyError:
                    self._functions[ka * nt + kb] = None
        # and its compiled kernel (-1 never touch, -2 no rule, -3 a Python function); the compiled
        # pass runs when no pair is -3
        self._pair_kernel = np.full(nt * nt, -2, dtype=np.int64)
        self._pair_swap = np.zeros(nt * nt, dtype=np.uint8)
        for code, function in self._functions.items():
            if function is not None:
                self._pair_kernel[code] = -1 if function[0] is None else getattr(function[0], "kernel", -3)
                self._pair_swap[code] = function[1]
        self.python_pairs = [f"{names[c // nt]}-{names[c % nt]}" for c in np.nonzero(self._pair_kernel == -3)[0]]
        self._compiled = not self.python_pairs

    # ------------------------------------------------------------------ per step

    def _world(self, frames: Frames) -> tuple[np.ndarray, np.ndarray]:
        """World position (nshape, d) and rotation (nshape, d, d) of every shape (rotation only
        filled for the types that need it)."""
        d = self.dimension
        pos = np.empty((self.nshape, d))
        rot = np.zeros((self.nshape, d, d))
        for t in self.tables:
            p = frames.pos[t.body]
            if t.pos_local is None and not t.oriented:  # spheres at their body's origin: no rotation needed
                pos[t.start : t.stop] = p
                continue
            R = frames.rot[t.body]
            pos[t.start : t.stop] = p if t.pos_local is None else p + np.einsum("nij,nj->ni", R, t.pos_local)
            if t.oriented:
                rot[t.start : t.stop] = R if t.rot_local is None else R @ t.rot_local
        return pos, rot

    def _bounds(self, pos: np.ndarray, rot: np.ndarray) -> np.ndarray:
        """Half extents (nbounded, d) of the world AABBs of the bounded shapes."""
        half = np.empty((self.nbounded, self.dimension))
        for t in self.tables:
            if t.kind.unbounded:
                continue
            sl = slice(t.start, t.stop)
            half[sl] = t.kind.aabb_half(pos[sl], rot[sl] if t.oriented else None, self.shape_param[sl])
        return half

    def _side(self, pos: np.ndarray, rot: np.ndarray, shapes: np.ndarray) -> Side:
        """Narrow-phase input for shapes of one type."""
        oriented = self._oriented[self.shape_type[shapes[0]]]
        data = [self.mesh_data[s] for s in shapes] if int(shapes[0]) in self.mesh_data else None
        return Side(pos[shapes], rot[shapes] if oriented else None, self.shape_param[shapes], data)

    def candidates(self, frames: Frames, margin: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Broad phase only: shape pairs (a, b) (ids) of allowed bodies whose bounds come within
        ``margin``, and the entry of each; (k,) arrays each."""
        pos, rot = self._world(frames)
        return self._candidates(pos, rot, margin)

    def _candidates(self, pos, rot, margin):
        nbd = self.nbounded
        half = self._bounds(pos, rot)
        hp, hs, he = self._half_plane, self._half_shape, self._half_entry
        if self.broadphase == "sweep":
            grown = half + 0.5 * max(margin, 0.0)
            lo, hi = pos[:nbd] - grown, pos[:nbd] + grown
            lookup = self.pairs.lookup
            return candidates(lo, hi, self.shape_body, *lookup, self.nbody, hp, hs, he, pos, rot, half, margin)
        a, b = all_pairs(nbd)
        entry = self.pairs.entry(self.shape_body[a], self.shape_body[b])
        keep = entry >= 0
        return np.concatenate((a[keep], hp)), np.concatenate((b[keep], hs)), np.concatenate((entry[keep], he))

    def detect(self, frames: Frames, margin: float) -> ContactBatch:
        """Every contact with gap < margin.

        Args:
            frames: body frames of the state (model.frames), ground at index nbody.
            margin: m; contacts closer than this are reported (0: touching or penetrating only).
        Returns:
            ContactBatch (see its docstring for the conventions).
        """
        d = self.dimension
        if self.nshape == 0:
            return ContactBatch.empty(d)
        pos, rot = self._world(frames)
        a, b, entry = self._candidates(pos, rot, margin)
        if not len(a):
            return ContactBatch.empty(d)
        if self._compiled:
            return ContactBatch(
                *contact_batch(
                    a,
                    b,
                    entry,
                    self.shape_type,
                    self.shape_body,
                    self._pair_kernel,
                    self._pair_swap,
                    self.type_names,
                    pos,
                    rot,
                    self.shape_param,
                    margin,
                    self.nbody,
                    MAX_FEATURE,
                    self.mesh_table,
                )
            )
        nt = len(self.tables)
        code = self.shape_type[a] * nt + self.shape_type[b]
        parts = []
        for c in np.unique(code):
            function = self._functions[int(c)]
            ta, tb = self.type_names[c // nt], self.type_names[c % nt]
            if function is None:  # compile refuses such pairs; reaching this is an internal error
                raise RuntimeError(f"no rigid contact rule between '{ta}' and '{tb}'")
            fn, swap, same = function
            if fn is None:  # pairs that never touch (two points)
                continue
            idx = np.nonzero(code == c)[0]
            sa, sb = a[idx], b[idx]
            if swap:
                sa, sb = sb, sa
            elif same:  # one order per pair of shapes, whatever order the sweep found them in
                sa, sb = np.minimum(sa, sb), np.maximum(sa, sb)
            found = fn(self._side(pos, rot, sa), self._side(pos, rot, sb), margin)
            r = found.pair
            parts.append((sa[r], sb[r], entry[idx][r], found))
        if not parts:
            return ContactBatch.empty(d)
        sa = np.concatenate([p[0] for p in parts])
        sb = np.concatenate([p[1] for p in parts])
        ent = np.concatenate([p[2] for p in parts])
        pa = np.concatenate([p[3].point_a for p in parts])
        pb = np.concatenate([p[3].point_b for p in parts])
        normal = np.concatenate([p[3].normal for p in parts])
        gap = np.concatenate([p[3].gap for p in parts])
        local = np.concatenate([p[3].feature for p in parts])
        feature = (sa * self.nshape + sb) * MAX_FEATURE + local
        body_i, body_j = self.shape_body[sa], self.shape_body[sb]
        # the ground is body i
        flip = body_j == self.nbody
        if flip.any():
            body_i, body_j = np.where(flip, body_j, body_i), np.where(flip, body_i, body_j)
            pa, pb = np.where(flip[:, None], pb, pa), np.where(flip[:, None], pa, pb)
            normal = np.where(flip[:, None], -normal, normal)
        return ContactBatch(body_i, body_j, ent, pa, pb, normal, gap, feature)
