"""The Model as flat arrays for the compiled step, and the per-run buffers it writes into.

``flatten(model)`` turns what a right-hand side needs -- bodies, constraint primitives, joint
springs, force elements, drive and load expressions -- into one ``FlatModel`` of numpy
arrays (MuJoCo's mjModel: sizes ``n<object>``, arrays ``<object>_<attribute>``), read by
mbsim.model.step_kernels and mbsim.solvers.ode.ode_kernels. ``make_data`` allocates a
``FlatData``: every buffer a step writes (MuJoCo's mjData), so that a step allocates nothing
and one FlatModel can serve two runs at once.

2D and 3D share one layout (rotations are stored 3x3, positions with 3 columns, the 2D
kernels read the upper-left part) so that one compiled specialisation serves both.

A Model has one FlatModel (``model_form``: built once, kept by the frozen Model), which the
solvers' steps and Python's single evaluations of the constraint rows (``rows_form``) share.
What is not flat (compliant contact with trimesh's ``brute_force`` detection) is left out of it:
the ODE methods add those forces from Python at every stage, the methods that need every force
compiled step through the Python path (``python_reason``); so does a caller whose linear algebra
is dense only, for a sparse model too large for it (``dense_reason``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mbsim.model import kernels
from mbsim.model.contact import compliant_kernels
from mbsim.model.contact.compliant import CompliantContacts, compliant_arrays, compliant_buffers
from mbsim.model.contact.laws import CONTACT_LAW
from mbsim.model.force_kernels import VARIABLES  # the load expressions' registers (drives: t only)
from mbsim.model.forces.applied import Loads
from mbsim.model.forces.spring_damper import SpringDamperGroup
from mbsim.model.layout import FlatData, FlatModel
from mbsim.model.model import Model, inverse_sqrt_mass_blocks
from mbsim.model.signals import KINDS, signal_table
from mbsim.scene.expr import Expression, compile_programs

# primitive kinds of the flat table (mbsim.model.kernels: KINDS, kernels.pxd)
POINT3, DOT1_3, DOT2_3, ANGLE3, POINT2, ANGLE2, DOT2_2, COUPLING = range(8)
_CODES = {(3, "point"): POINT3, (3, "dot1"): DOT1_3, (3, "dot2"): DOT2_3, (3, "angle"): ANGLE3, (2, "point"): POINT2,
          (2, "angle"): ANGLE2, (2, "dot2"): DOT2_2, (3, "coupling"): COUPLING, (2, "coupling"): COUPLING}  # fmt: skip
if _CODES != kernels.KINDS:
    raise ImportError("primitive kinds of mbsim.model.flat differ from mbsim.model.kernels")


# each kind's local vectors in the order its kernel takes them (2D angle: none)
_VECTORS = {
    "point": ("s_i", "s_j"),
    "dot1": ("a_i", "b_j"),
    "dot2": ("a_i", "s_i", "s_j"),
    "angle": ("b_i", "e_i", "c_j"),
}


def vectors(kind: str, dimension: int) -> tuple[str, ...]:
    """The params keys of a primitive kind in the order its kernel takes them (the rows of a flat
    table's vec); a coupling's are its parts'."""
    return () if (kind, dimension) in (("angle", 2), ("coupling", 3), ("coupling", 2)) else _VECTORS[kind]


def coupling_table(g: Any, dimension: int) -> dict[str, np.ndarray]:
    """The two-item table of a coupling's parts (kind, bi, bj, vec, offset, wrap) that
    mbsim.model.kernels.coupling_at reads."""
    vec = np.zeros((2, 3, 3))
    for k, part in enumerate(g.parts):
        for m, key in enumerate(vectors(part.kind, dimension)):
            vec[k, m, :dimension] = part.params[key][0]
    return {
        "kind": np.array([kernels.KINDS[(dimension, part.kind)] for part in g.parts], dtype=np.int64),
        "bi": np.array([part.body_i[0] for part in g.parts], dtype=np.int64),
        "bj": np.array([part.body_j[0] for part in g.parts], dtype=np.int64),
        "vec": vec,
        "offset": np.array([part.offset[0, 0] for part in g.parts], dtype=float),
        "wrap": np.array([int(part.wrap) for part in g.parts], dtype=np.int64),
    }


def _primitive_table(groups: list[Any], dim: int, expressions: list[Expression]) -> dict[str, np.ndarray]:
    """The flat table of batched primitive groups; drives append (c, c', c'') to ``expressions``.
    A coupling is an entry of kind COUPLING (offset: the coupling's, then its ratio) followed by
    its two parts (nrow 0: they make no row of their own), which mbsim.model.kernels.coupling_at
    reads."""
    items = []
    for g in groups:
        if g.kind == "coupling":
            part = coupling_table(g, dim)
            row = g.rows[0, 0]
            items.append((COUPLING, part["bi"][0], part["bj"][0], np.zeros((3, 3)), row, 1,
                          np.array([g.offset[0, 0], g.ratio, 0.0]), -1, False))  # fmt: skip
            for k in range(2):
                offset = np.array([part["offset"][k], 0.0, 0.0])
                items.append((part["kind"][k], part["bi"][k], part["bj"][k], part["vec"][k], row, 0, offset, -1,
                              part["wrap"][k]))  # fmt: skip
            continue
        kind, keys = kernels.KINDS[(dim, g.kind)], vectors(g.kind, dim)
        drives = {idx: (c, c1, c2) for idx, c, c1, c2 in g.drives}
        for k in range(len(g.body_i)):
            vec = np.zeros((3, 3))
            for m, key in enumerate(keys):
                vec[m, :dim] = g.params[key][k]
            offset = np.zeros(3)
            offset[: g.rows.shape[1]] = g.offset[k]
            drive = -1
            if k in drives:
                drive = len(expressions)
                expressions.extend(drives[k])
            items.append((kind, g.body_i[k], g.body_j[k], vec, g.rows[k, 0], g.rows.shape[1], offset, drive, g.wrap))
    n = len(items)
    return {
        "kind": np.array([it[0] for it in items], dtype=np.int64).reshape(n),
        "bi": np.array([it[1] for it in items], dtype=np.int64).reshape(n),
        "bj": np.array([it[2] for it in items], dtype=np.int64).reshape(n),
        "vec": np.array([it[3] for it in items], dtype=float).reshape(n, 3, 3),
        "row": np.array([it[4] for it in items], dtype=np.int64).reshape(n),
        "nrow": np.array([it[5] for it in items], dtype=np.int64).reshape(n),
        "offset": np.array([it[6] for it in items], dtype=float).reshape(n, 3),
        "drive": np.array([it[7] for it in items], dtype=np.int64).reshape(n),
        "wrap": np.array([it[8] for it in items], dtype=np.int64).reshape(n),
    }


def _row_bodies(prims: dict[str, np.ndarray], nc: int, nb: int) -> np.ndarray:
    """(4, nc): the bodies of each constraint row (nb: none). A primitive's rows: its bodies i and
    j (the ground included, as the kernels see them); a coupling's row: the distinct bodies of its
    two parts, ground left out (up to four; mbsim.model.step_kernels.row_nbody, row_body)."""
    rb = np.full((4, nc), nb, dtype=np.int64)  # primitives are grouped by kind, not row
    for p in range(len(prims["kind"])):
        r0, n = prims["row"][p], prims["nrow"][p]
        if prims["kind"][p] == COUPLING:
            bodies = [prims[side][p + k] for k in (1, 2) for side in ("bi", "bj")]
            distinct = list(dict.fromkeys(int(b) for b in bodies if b < nb))
            rb[: len(distinct), r0] = distinct
        elif n:
            rb[0, r0 : r0 + n], rb[1, r0 : r0 + n] = prims["bi"][p], prims["bj"][p]
    return rb


def _padded(rows: list, n: int, width: int = 3) -> np.ndarray:
    out = np.zeros((n, width))
    for k, r in enumerate(rows):
        out[k, : len(r)] = r
    return out


# the most entries (nc x nv) of the dense Jacobian a sparse model's compiled step may allocate
# (lagrange: its solves follow S's envelope, so only memory and the row records grow with it)
DENSE_LIMIT = 4_000_000


def dense_reason(model: Model, dense_limit: int) -> str:
    """Why a caller that keeps the constraint Jacobian dense (the ODE methods' compiled steps, the
    variational one) steps ``model`` in Python: a sparse model (mbsim.model.compile.SPARSE_ABOVE_NV)
    whose dense Jacobian exceeds the caller's ``dense_limit`` entries; "" when it does not."""
    if model.sparse and model.nc * model.nv > dense_limit:
        return f"{model.nv} velocity coordinates use sparse linear algebra (compiled: dense only)"
    return ""


def compiled_form(group) -> bool:
    """Whether ``flatten`` takes force group ``group`` into the FlatModel (compliant contacts: unless
    a pair's detection is trimesh's ``brute_force``)."""
    return isinstance(group, (SpringDamperGroup, Loads)) or (isinstance(group, CompliantContacts) and group.compiled)


def python_reason(model: Model) -> str:
    """Why a method that needs every force compiled steps ``model`` through the Python path: a
    force group without a compiled form (compliant contact with ``brute_force`` detection); "" when
    there is none."""
    for group in model.forces:
        if not compiled_form(group):
            return f"force group {type(group).__name__} has no compiled form (it steps through the Python path)"
    return ""


def contacts_near(model: Model, q: np.ndarray, v: np.ndarray, h: float) -> bool:
    """time.contact_step's test (CompliantContacts.near: some pair's boxes overlap or may within a
    step h) at the state (q, v) of ``model`` (body coordinates): compiled (compliant_kernels.near,
    in the model's rows_form scratch) unless the compliant contacts have no compiled form."""
    compliant = model.compliant
    if not compliant.compiled:
        return compliant.near(model.frames(q, v), h)
    form = rows_form(model)
    q, v = np.ascontiguousarray(q, dtype=float), np.ascontiguousarray(v, dtype=float)
    return bool(compliant_kernels.near(form.flat, form.data, q, v, h))


def model_form(model: Model) -> FlatModel:
    """The model's FlatModel, built once and kept by the Model (Model.cached): a pure function of
    the frozen model, so every run, solver and thread shares it. Force groups without a compiled
    form are not in it (python_reason). Whether the caller's linear algebra takes it (a sparse
    model's dense Jacobian) is the caller's question: dense_reason."""
    return model.cached("flat", flatten)


# the per-row arrays of the joint-coordinate table (mbsim.model.dynamics.JointCoordinates) that
# FlatModel holds as jc_<name>
COORDINATE_FORCES = ("stiffness", "damping", "rest", "initial", "lower", "upper", "stop_k", "stop_c", "coulomb",
                     "static", "stribeck", "viscous", "smoothing", "effort")  # fmt: skip


def _coordinate_forces(table) -> dict[str, np.ndarray]:
    """Per joint-coordinate row (mbsim.model.joint_forces), the arrays FlatModel's jc_* hold."""
    return {key: np.zeros(0) if table is None else getattr(table, key) for key in COORDINATE_FORCES}


def _coordinates_needed(coordinates: dict[str, np.ndarray], nact: int, signals) -> bool:
    """Whether a right-hand side needs the joint coordinates: a force acts on one (spring, damper,
    limit, friction), an actuator, or a signal reads one."""
    if nact or np.any(np.isin(signals.kind, [KINDS.index("coordinate"), KINDS.index("rate")])):
        return True
    forces = [coordinates[k] for k in ("stiffness", "damping", "coulomb", "static", "viscous")]
    limited = np.isfinite(coordinates["lower"]) | np.isfinite(coordinates["upper"])
    return bool(np.any(limited) or any(np.any(f != 0) for f in forces))


def flatten(model: Model) -> FlatModel:
    """A new FlatModel of ``model`` (model_form keeps one per model); force groups without a
    compiled form are left out (python_reason)."""
    d, nb = model.dimension, model.nbody
    expressions: list[Expression] = []
    prims = _primitive_table(model.groups, d, expressions)
    table = model.joint_coordinates[0] if model.joint_coordinates else None
    coordinate_rows = _primitive_table(table.groups if table else [], d, expressions)
    coordinates = _coordinate_forces(table)
    sd = {"b1": [], "b2": [], "s1": [], "s2": [], "k": [], "c": [], "rest": []}
    ld = {"body": [], "point": [], "body_frame": [], "torque": [], "expr": []}
    contacts = compliant_arrays([], np.zeros(0, dtype=CONTACT_LAW))
    for group in model.forces:
        if isinstance(group, CompliantContacts) and group.compiled:
            contacts = group.flat_arrays()
        if isinstance(group, SpringDamperGroup):
            for key in sd:
                sd[key].extend(list(getattr(group, key)))
        elif isinstance(group, Loads):
            parts = zip(group.bodies, group.points, group.values, group.body_frame, strict=True)
            for b, point, exprs, body_frame in parts:
                ld["body"].append(b)
                ld["point"].append(point)
                ld["body_frame"].append(bool(body_frame))
                ld["torque"].append(group.torque)
                ld["expr"].append(list(range(len(expressions), len(expressions) + len(exprs))))
                expressions.extend(exprs)
    nsd, nld = len(sd["k"]), len(ld["body"])
    # actuators: value (or target) and the target's rate; outputs; then the signals all of them read
    act = {"row": [], "law": [], "expr": [], "rate": [], "kp": [], "kd": [], "gear": [], "lower": [], "upper": []}
    for a in model.actuators:
        for key in ("row", "law", "kp", "kd", "gear", "lower", "upper"):
            act[key].append(getattr(a, key))
        act["expr"].append(len(expressions))
        expressions.append(a.value)
        act["rate"].append(len(expressions) if a.rate is not None else -1)
        if a.rate is not None:
            expressions.append(a.rate)
    out_expr = list(range(len(expressions), len(expressions) + len(model.outputs)))
    expressions.extend(expr for _, expr in model.outputs)
    signals = signal_table(model.signals, {v for expr in expressions for v in expr.variables})
    programs = compile_programs(expressions, (*VARIABLES[d], *signals.names))
    inertia = np.zeros((nb, 3, 3))
    inertia[:, : model.body_inertia.shape[1], : model.body_inertia.shape[2]] = model.body_inertia
    weight = np.zeros((nb, 3))
    weight[:, :d] = model.weight
    expr_index = np.full((nld, 3), -1, dtype=np.int64)
    for k, idx in enumerate(ld["expr"]):
        expr_index[k, : len(idx)] = idx
    row_bodies = _row_bodies(prims, model.nc, nb)
    return FlatModel(
        dim=d,
        nbody=nb,
        nq=model.nq,
        nv=model.nv,
        nc=model.nc,
        body_inv_mass=np.ascontiguousarray(model.inv_mass_blocks, dtype=float),
        body_inertia=inertia,
        body_weight=weight,
        **{f"prim_{k}": v for k, v in prims.items()},
        njc=len(coordinates["stiffness"]),
        jc_forces=int(_coordinates_needed(coordinates, len(act["row"]), signals)),
        **{f"jc_{k}": v for k, v in coordinate_rows.items()},
        **{f"jc_{k}": np.asarray(v, dtype=float) for k, v in coordinates.items()},
        nact=len(act["row"]),
        act_row=np.array(act["row"], dtype=np.int64).reshape(-1),
        act_law=np.array(act["law"], dtype=np.int64).reshape(-1),
        act_expr=np.array(act["expr"], dtype=np.int64).reshape(-1),
        act_rate=np.array(act["rate"], dtype=np.int64).reshape(-1),
        **{f"act_{k}": np.array(act[k], dtype=float).reshape(-1) for k in ("kp", "kd", "gear", "lower", "upper")},
        nsig=len(signals.names),
        sig_first=len(VARIABLES[d]),
        sig_kind=signals.kind,
        sig_index=signals.index,
        sig_comp=signals.component,
        dist_body=signals.distance_body,
        dist_point=signals.distance_point,
        nout=len(out_expr),
        out_expr=np.array(out_expr, dtype=np.int64).reshape(-1),
        sd_b1=np.array(sd["b1"], dtype=np.int64).reshape(nsd),
        sd_b2=np.array(sd["b2"], dtype=np.int64).reshape(nsd),
        sd_s1=_padded(sd["s1"], nsd),
        sd_s2=_padded(sd["s2"], nsd),
        sd_k=np.array(sd["k"], dtype=float).reshape(nsd),
        sd_c=np.array(sd["c"], dtype=float).reshape(nsd),
        sd_rest=np.array(sd["rest"], dtype=float).reshape(nsd),
        ld_body=np.array(ld["body"], dtype=np.int64).reshape(nld),
        ld_point=_padded(ld["point"], nld),
        ld_body_frame=np.array(ld["body_frame"], dtype=np.int64).reshape(nld),
        ld_torque=np.array(ld["torque"], dtype=np.int64).reshape(nld),
        ld_expr=expr_index,
        prog_op=programs.op,
        prog_dst=programs.dst,
        prog_args=programs.args,
        prog_imm=programs.imm,
        prog_start=programs.start,
        prog_stop=programs.stop,
        prog_result=programs.result,
        nreg=max(programs.nreg, len(VARIABLES[d]) + len(signals.names)),
        row_bi=row_bodies[0],
        row_bj=row_bodies[1],
        row_bk=row_bodies[2],
        row_bl=row_bodies[3],
        body_mass_block=np.ascontiguousarray(model.mass_diag_blocks, dtype=float),
        rx_joint=np.asarray(model.row_joint, dtype=np.int64),
        rx_body=np.asarray(model.row_body, dtype=np.int64),
        joint_body=np.asarray(model.joint_body, dtype=np.int64),
        joint_point=_padded(list(model.joint_point), len(model.joints)),
        driven_rows=np.asarray(model.driven_rows, dtype=np.int64),
        body_inv_sqrt_mass=inverse_sqrt_mass_blocks(model),
        **_schur_pattern(row_bodies, nb),
        **contacts,
    )


class RowsForm:
    """What Python's single evaluations of the constraint rows need (mbsim.model.constraints:
    constraint_values, constraint_residual, coordinate_rows), built once per Model (rows_form):
    the model's FlatModel (model_form), one scratch FlatData (the frames and a
    row's scratch, which step_kernels.constraint_rows alone writes, holding the GIL), the width of
    J's row blocks and,
    for a sparse model, J's CSR pattern over those blocks (the entries of block ``side`` of row r
    in the column order of body row_body(r, side): take[k] is the index in the blocks' ravel of
    entry k)."""

    def __init__(self, model: Model) -> None:
        self.flat = model_form(model)
        self.data = make_data(self.flat, dense=False)
        nb, w = model.nbody, model.body_width
        four = bool(np.any(self.flat.row_bk < nb))  # a coupling's row with four bodies
        self.block_width = (4 if four else 2) * w
        self.take = self.indices = self.indptr = None
        if model.sparse:
            self.take, self.indices, self.indptr = _blocks_pattern(self.flat, nb, w, self.block_width)


def rows_form(model: Model) -> RowsForm:
    """The model's RowsForm, built once and kept by the Model (Model.cached): a pure function of
    the frozen model, so every run and thread shares it; the Model rather than a run's Data holds
    it because constraint_values, constraint_residual and the joint springs take the model alone."""
    return model.cached("rows_form", RowsForm)


def _blocks_pattern(flat: FlatModel, nb: int, w: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR pattern of J from its rows' body blocks (step_kernels.constraint_blocks_into's layout,
    read as row_blocks_dot does: a row whose two bodies coincide holds body j's block, the dense
    row's): for each row its bodies ascending, w columns each."""
    bi, bj = np.asarray(flat.row_bi), np.asarray(flat.row_bj)
    bodies = np.stack([np.where(bi != bj, bi, nb), bj, np.asarray(flat.row_bk), np.asarray(flat.row_bl)], axis=1)
    order = np.argsort(bodies, axis=1, kind="stable")
    bodies = np.take_along_axis(bodies, order, axis=1)
    keep = bodies < nb  # row-major: rows in order, each row's bodies ascending
    rows = np.broadcast_to(np.arange(flat.nc)[:, None], bodies.shape)
    m = np.arange(w)
    take = ((rows * width + order * w)[keep][:, None] + m).ravel()
    indices = ((bodies * w)[keep][:, None] + m).ravel()
    indptr = np.concatenate(([0], np.cumsum(keep.sum(axis=1) * w)))
    return take.astype(np.int64), indices.astype(np.int32), indptr.astype(np.int32)


def _schur_pattern(row_bodies: np.ndarray, nb: int) -> dict[str, np.ndarray]:
    """FlatModel's s_rows, s_ptr, s_col, row_first and row_last from the bodies of each row
    (row_bodies: (4, nc), _row_bodies).

    S is factored in the order s_rows (position i holds row s_rows[i]): the rows as given, or
    their reverse Cuthill-McKee order when that shrinks S's envelope (the Cholesky factor's work)
    by a fifth or more. The scene's joint order decides the given one: the IFToMM N four-bar lists
    its ground hinges first and the couplers' hinges after, which spreads every coupler row's
    envelope back to its crank's hinge (N = 40: an envelope of 14,660 entries below the diagonal, 2.5 ms
    per lagrange step; in reverse Cuthill-McKee order 757 and 0.13 ms)."""
    nc = row_bodies.shape[1]
    bodies_of_row = [{int(b) for b in row_bodies[:, r]} - {nb} for r in range(nc)]
    rows_of_body: list[list[int]] = [[] for _ in range(nb)]
    for r in range(nc):
        for b in bodies_of_row[r]:
            rows_of_body[b].append(r)
    neighbours = [sorted({c for b in bodies_of_row[r] for c in rows_of_body[b]}) for r in range(nc)]

    def envelope(order: np.ndarray) -> tuple[np.ndarray, int]:
        position = np.empty(nc, dtype=np.int64)
        position[order] = np.arange(nc)
        first = np.array([min(position[c] for c in neighbours[r]) for r in order], dtype=np.int64).reshape(nc)
        first = np.minimum(first, np.arange(nc))
        return first, int(np.sum(np.arange(nc) - first))

    given = np.arange(nc, dtype=np.int64)
    order, (first, size) = given, envelope(given)
    if nc > 2:
        rcm = reverse_cuthill_mckee(neighbours)
        rcm_first, rcm_size = envelope(rcm)
        if rcm_size <= 0.8 * size:
            order, first = rcm, rcm_first
    position = np.empty(nc, dtype=np.int64)
    position[order] = np.arange(nc)
    ptr, cols = [0], []
    for i in range(nc):
        row = sorted(int(position[c]) for c in neighbours[int(order[i])] if position[c] <= i)
        cols.extend(row)
        ptr.append(len(cols))
    last = np.arange(nc, dtype=np.int64)
    for k in range(nc):
        last[first[k] : k] = np.maximum(last[first[k] : k], k)
    return {
        "s_rows": order,
        "s_ptr": np.asarray(ptr, dtype=np.int64),
        "s_col": np.asarray(cols, dtype=np.int64),
        "row_first": first,
        "row_last": last,
    }


def reverse_cuthill_mckee(neighbours: list[list[int]]) -> np.ndarray:
    """The reverse Cuthill-McKee order of a graph given by each node's neighbours (symmetric; a
    node may list itself): per connected component, a breadth-first search from a node of least
    degree that visits each node's new neighbours in increasing degree (ties by index), the whole
    order reversed (E. Cuthill, J. McKee, "Reducing the bandwidth of sparse symmetric matrices",
    1969; reversed after A. George, 1971). Written here rather than taken from
    scipy.sparse.csgraph, whose import costs a small scene's ``mbsim validate`` ~0.1 s of its 0.3 s."""
    n = len(neighbours)
    degree = [len(nodes) for nodes in neighbours]
    seen = [False] * n
    order: list[int] = []
    for seed in sorted(range(n), key=lambda i: (degree[i], i)):
        if seen[seed]:
            continue
        seen[seed] = True
        start = len(order)
        order.append(seed)
        while start < len(order):
            node = order[start]
            start += 1
            new = sorted((j for j in neighbours[node] if not seen[j]), key=lambda j: (degree[j], j))
            for j in new:
                seen[j] = True
            order.extend(new)
    return np.asarray(order[::-1], dtype=np.int64)


def robust_size(nv: int, nc: int) -> int:
    """The length of FlatData.robust_work (mbsim.solvers.numerics.robust_kernels.buffers lays it out)."""
    n = nv + nc
    return nc * nv * 2 + nc * nc + min(nc, nv) + nv * nv * 2 + 4 * nv + nc + n * n + 2 * n


def make_data(
    flat: FlatModel, robust: bool = False, dense: bool = True, coordinate_reference: np.ndarray | None = None
) -> FlatData:
    """Fresh buffers for one run of ``flat``; ``coordinate_reference``: the run's joint-spring
    unwrapping state (mbsim.model.data.Data.coordinate_reference), which jc_ref then views (the one
    copy), else jc_ref's own at its t = 0 value, the joints' initial coordinates.
    ``robust``: with the rank-robust methods' buffers (SVD, KKT, augmented Lagrangian).
    ``dense=False``: without the dense constraint Jacobian and what is built from it (J, minv_jt,
    S: empty), whose nc x nv and nc x nc entries a 3,000-link chain counts in gigabytes; for a
    caller whose kernels never read them (mbsim.solvers.recursive.recursive_kernels)."""
    nb, nv, nc, nq = flat.nbody, flat.nv, flat.nc, flat.nq
    ny = nq + nv + 1
    ncoord = flat.njc
    # rows and columns of the dense matrices (none without ``dense``)
    jr, jc, sc = (nc, nv, nc) if dense else (0, 0, 0)
    return FlatData(
        pos=np.zeros((nb + 1, 3)),
        rot=np.zeros((nb + 1, 3, 3)),
        vel=np.zeros((nb + 1, 3)),
        omega_body=np.zeros((nb + 1, 3)),
        omega=np.zeros((nb + 1, 3)),
        omega2=np.zeros(nb + 1),
        angle=np.zeros(nb + 1),
        Q=np.zeros(nv),
        Qn=np.zeros(nv),
        phi=np.zeros(nc),
        phi_t=np.zeros(nc),
        gamma=np.zeros(nc),
        J=np.zeros((jr, jc)),
        minv_jt=np.zeros((jc, sc)),
        S=np.zeros((sc, sc)),
        lam=np.zeros(nc),
        rhs=np.zeros(nc),
        s_work=np.zeros(nc),
        minv_q=np.zeros(nv),
        jc_value=np.zeros(ncoord),
        jc_jac=np.zeros((ncoord, 12 if flat.dim == 3 else 6)),  # body blocks (mbsim.model.joint_force_kernels)
        jc_ref=flat.jc_initial.copy() if coordinate_reference is None else coordinate_reference,
        jc_rate=np.zeros(ncoord),
        jc_bias=np.zeros(ncoord),
        jc_qd=np.zeros(ncoord),
        jc_tau=np.zeros(ncoord),
        jc_limit_force=np.zeros(ncoord),
        jc_friction_force=np.zeros(ncoord),
        act_force=np.zeros(flat.nact),
        row_val=np.zeros((2, 3)),  # two: a coupling's parts (mbsim.model.kernels.coupling_at)
        row_jac_i=np.zeros((2, 3, 6)),
        row_jac_j=np.zeros((2, 3, 6)),
        row_bias=np.zeros((2, 3)),
        regs=np.zeros(max(flat.nreg, 1)),
        vec3=np.zeros(3),
        y=np.zeros(ny),
        ynew=np.zeros(ny),
        ytmp=np.zeros(ny),
        k1=np.zeros(ny),
        k2=np.zeros(ny),
        k3=np.zeros(ny),
        k4=np.zeros(ny),
        q_scratch=np.zeros(nq),
        dx=np.zeros(nv),
        k1_valid=np.zeros(1, dtype=np.int64),
        joint_gen=np.zeros((flat.joint_body.shape[0], 6)),
        seg=np.zeros(7),
        solve_stats=np.zeros(9),
        robust_work=np.zeros(robust_size(nv, nc) if robust else 0),
        kkt_rank=np.zeros(1, dtype=np.intc),  # LAPACK's integer (scipy.linalg.cython_lapack: C int)
        **compliant_buffers(flat),
    )
