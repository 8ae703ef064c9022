"""Forces on a joint coordinate: spring and damper, limits, friction, effort limit (CONTRACT §8).

Each joint with a coordinate (revolute angle, prismatic or cylindrical position) has one row of
the model's joint-coordinate table (mbsim.model.dynamics.JointCoordinates, compiled as FlatModel
jc_*): its coordinate q (counted from the joint's ``initial`` origin) and rate qd at every
state, and the generalized force on it, applied to the two bodies as J^T f (the pair of equal
and opposite wrenches about or along the joint's axis). Per row, by mbsim.model.joint_force_kernels:

- spring and damper: f = -k (q - rest) - c qd;
- limits, in the smooth methods a compliant stop acting only beyond the limit:
  f = k_s (lower - q) - c_s qd below ``lower`` (f = -k_s (q - upper) - c_s qd above ``upper``),
  with a linear Kelvin-Voigt law: by default the stiffness puts the stop's natural period at
  ``STOP_PERIOD`` for the joint's effective inertia m at t = 0, k_s = m (2 pi / T)^2, and the
  damping gives the restitution e of a linear spring-damper impact, c_s = 2 zeta sqrt(k_s m) with
  zeta = -ln e / sqrt(pi^2 + ln^2 e) (zeta = 1 for e = 0); both may be given. The LCP methods
  (timestepping, event_driven) treat limits as unilateral contacts instead
  (mbsim.solvers.numerics.joint_rows; their force evaluations pass nonsmooth=True);
- friction, in the smooth methods regularised: the Coulomb (and Stribeck) force is
  -F(|qd|) qd / max(|qd|, v_s) with v_s = ``smoothing`` -- viscous below v_s, so a joint held by
  a force F < F_c creeps at about v_s F / F_c instead of sticking --, plus -viscous qd;
  F(v) = F_c + (F_s - F_c) exp(-(v / v_st)^2) with a Stribeck velocity v_st (Armstrong-Helouvry);
  the LCP methods bound the Coulomb/Stribeck force by F exactly instead (sticking at rest), and
  keep the viscous part as a force;
- effort: the actuators' summed force on the coordinate is clamped to [-effort, effort] (URDF
  ``<limit effort>``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mbsim.scene.fields import Context, Field, Number, read_mapping
from mbsim.scene.load import KeyPath

# the natural period of a compliant stop by default, s (MuJoCo's default solref time constant)
STOP_PERIOD = 0.02
# below this rate (rad/s or m/s) the smooth methods' friction is viscous, by default
FRICTION_SMOOTHING = 1e-3

SPRING_FIELDS = {
    "stiffness": Field(Number(minimum=0), "N/m or N m/rad"),
    "damping": Field(Number(minimum=0), "N s/m or N m s/rad", 0.0),
    "rest": Field(Number(), "coordinate at which the spring is relaxed", 0.0),
}
LIMIT_FIELDS = {
    "lower": Field(Number(), "the lowest coordinate, rad or m", -math.inf),
    "upper": Field(Number(), "the highest coordinate, rad or m", math.inf),
    "restitution": Field(Number(minimum=0, maximum=1), "Newton restitution coefficient at the stop", 0.0),
    "stiffness": Field(
        Number(positive=True),
        f"smooth methods' compliant stop, N m/rad or N/m; default: a natural period of {STOP_PERIOD} s "
        "for the joint's effective inertia at t = 0",
        None,
    ),
    "damping": Field(
        Number(minimum=0),
        "smooth methods' compliant stop, N m s/rad or N s/m; default: the restitution's (linear spring-damper)",
        None,
    ),
}
FRICTION_FIELDS = {
    "coulomb": Field(Number(minimum=0), "Coulomb (sliding) friction force, N m or N", 0.0),
    "static": Field(Number(minimum=0), "breakaway force of the Stribeck curve, N m or N; default: coulomb", None),
    "stribeck_velocity": Field(
        Number(positive=True), "Stribeck velocity v_st, rad/s or m/s (with static > coulomb)", None
    ),
    "viscous": Field(Number(minimum=0), "viscous friction, N m s/rad or N s/m", 0.0),
    "smoothing": Field(
        Number(positive=True),
        "smooth methods: below this rate the friction is viscous (its regularisation), rad/s or m/s",
        FRICTION_SMOOTHING,
    ),
}


@dataclass(frozen=True)
class Limits:
    """A coordinate's stops: lower <= q <= upper (either may be infinite), restitution, and the
    smooth methods' compliant stop (None: the defaults, resolved at compile)."""

    lower: float
    upper: float
    restitution: float
    stiffness: float | None
    damping: float | None


@dataclass(frozen=True)
class Friction:
    """Friction on a coordinate (see the module docstring)."""

    coulomb: float
    static: float
    stribeck_velocity: float  # 0: none
    viscous: float
    smoothing: float


def read_limits(ctx: Context, path: KeyPath, value) -> Limits | None:
    """A joint's ``limits`` mapping; exit 2 for lower > upper or none given."""
    if value is None:
        return None
    got = read_mapping(ctx, path, value, LIMIT_FIELDS)
    if "lower" not in value and "upper" not in value:
        raise ctx.error(path, "expected at least one of lower and upper")
    if got["lower"] > got["upper"]:
        raise ctx.error(path, f"expected lower <= upper, got lower {got['lower']:g} > upper {got['upper']:g}")
    return Limits(got["lower"], got["upper"], got["restitution"], got["stiffness"], got["damping"])


def read_friction(ctx: Context, path: KeyPath, value) -> Friction | None:
    """A joint's ``friction`` mapping (a number is its Coulomb force)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        value = {"coulomb": value}
    got = read_mapping(ctx, path, value, FRICTION_FIELDS)
    static = got["static"] if got["static"] is not None else got["coulomb"]
    if static < got["coulomb"]:
        raise ctx.error((*path, "static"), f"expected static >= coulomb ({got['coulomb']:g}), got {static:g}")
    if static > got["coulomb"] and got["stribeck_velocity"] is None:
        raise ctx.error(path, "static above coulomb needs stribeck_velocity (the Stribeck curve's velocity)")
    return Friction(got["coulomb"], static, got["stribeck_velocity"] or 0.0, got["viscous"], got["smoothing"])


def stop_parameters(limits: Limits, inertia: float) -> tuple[float, float]:
    """(stiffness, damping) of the smooth methods' compliant stop for a coordinate of effective
    inertia ``inertia`` (kg m^2 or kg): the ones given, else the defaults of the module docstring."""
    stiffness = limits.stiffness
    if stiffness is None:
        stiffness = inertia * (2.0 * math.pi / STOP_PERIOD) ** 2
    damping = limits.damping
    if damping is None:
        damping = 2.0 * stop_damping_ratio(limits.restitution) * math.sqrt(stiffness) * math.sqrt(inertia)
    return stiffness, damping


def stop_damping_ratio(restitution: float) -> float:
    """The damping ratio zeta of a linear spring-damper impact whose rebound speed is
    ``restitution`` times the approach speed: e = exp(-zeta pi / sqrt(1 - zeta^2)) for the half
    period of the damped oscillation; 1 (critical) for e = 0."""
    if restitution <= 0.0:
        return 1.0
    log_e = math.log(restitution)
    return -log_e / math.sqrt(math.pi**2 + log_e**2)


def resolve_stops(model, ctx: Context) -> None:
    """The compliant stops' stiffness and damping (JointCoordinates.stop_k, stop_c) of a model just
    compiled: those given, else the defaults for each coordinate's effective inertia at t = 0
    (exit 2 naming the joint when that default is not a finite positive number)."""
    if not model.joint_coordinates:
        return
    table = model.joint_coordinates[0]
    rows = [r for r, limits in enumerate(table.limits) if limits is not None]
    if not rows:
        return
    need = [r for r in rows if table.limits[r].stiffness is None or table.limits[r].damping is None]
    inertia = effective_inertia(model, need) if need else {}
    for r in rows:
        k, c = stop_parameters(table.limits[r], inertia.get(r, math.nan))
        if not (math.isfinite(k) and k > 0 and math.isfinite(c) and c >= 0):
            joint = next(j for j in model.joints if j.coordinate_row == r)
            path = ("joints", [j.name for j in model.joints].index(joint.name), "limits")
            raise ctx.error(
                path,
                f"the compliant stop's default stiffness and damping of joint '{joint.name}' are not finite "
                f"(its effective inertia at t = 0 is {inertia.get(r, math.nan):.3g})",
                "give limits.stiffness and limits.damping",
            )
        table.stop_k[r], table.stop_c[r] = k, c
    model.drop_cached()  # its compiled form was built before the stops were known


def effective_inertia(model, rows: list[int]) -> dict[int, float]:
    """The effective inertia m = 1 / (c P c^T) of each joint coordinate row (kg m^2 or kg) at the
    model's initial state: c the coordinate's Jacobian row, P = M^-1 - M^-1 G^T (G M^-1 G^T)^+ G M^-1
    the inverse mass restricted to the motions the joints allow (G the constraint Jacobian)."""
    import numpy as np

    from mbsim.model.constraints import constraint_values, coordinate_rows

    table = model.joint_coordinates[0]
    frames = model.frames(model.q0, np.zeros(model.nv))
    G = constraint_values(model, frames, 0.0).jacobian
    G = G.toarray() if hasattr(G, "toarray") else np.asarray(G)
    _, blocks = coordinate_rows(model, frames, 0.0, table.initial.copy())
    w, nb = model.body_width, model.nbody
    minv = np.zeros((model.nv, model.nv))
    for b in range(nb):
        minv[w * b : w * (b + 1), w * b : w * (b + 1)] = model.inv_mass_blocks[b]
    C = coordinate_jacobian(model, blocks, rows)
    # c P c^T is linear in M^-1: computed with M^-1 scaled to order 1 (masses of 1e300 kg or
    # 1e-300 kg would under- or overflow the products), then scaled back
    scale = float(np.max(np.abs(minv))) or 1.0
    minv = minv / scale
    with np.errstate(all="ignore"):
        mc = minv @ C.T
        reduced = C @ mc
        if G.shape[0]:
            mg = minv @ G.T
            try:
                reduced = reduced - mc.T @ G.T @ np.linalg.lstsq(G @ mg, G @ mc, rcond=1e-12)[0]
            except (np.linalg.LinAlgError, ValueError):  # absurd mass properties: no default then
                reduced = np.full_like(reduced, np.nan)
        return {r: 1.0 / scale / float(reduced[k, k]) if reduced[k, k] > 0 else math.nan for k, r in enumerate(rows)}


def coordinate_jacobian(model, blocks, rows):
    """The Jacobian rows (len(rows), nv), dense, of the joint coordinates ``rows`` from their body
    blocks (mbsim.model.constraints.coordinate_rows: each row's body i block, then body j's)."""
    import numpy as np

    table = model.joint_coordinates[0]
    w, nb = model.body_width, model.nbody
    item = np.zeros(table.ncoord, dtype=np.int64)  # the item of each row
    for p, (first, count) in enumerate(zip(table.item_row, table.item_nrow, strict=True)):
        item[first : first + count] = p
    C = np.zeros((len(rows), model.nv))
    for k, r in enumerate(rows):
        p = item[r]
        for side, body in enumerate((table.item_bi[p], table.item_bj[p])):
            if body < nb:
                C[k, w * body : w * (body + 1)] += blocks[r, side * w : (side + 1) * w]
    return C
