"""The LCP methods' rows of the joint coordinates (CONTRACT §8), one place for timestepping and
event_driven: a joint's limits as unilateral rows and its Coulomb/Stribeck friction as
box-bounded rows, instead of the smooth methods' compliant stop and regularised friction (which
their force evaluations leave out: mbsim.model.dynamics.applied_forces(nonsmooth=True)).

Every joint coordinate q (mbsim.model.dynamics.JointCoordinates, from the joint's ``initial``) with
Jacobian row c (qd = c v) gives:

- a stop per finite limit, with gap g = q - lower and row +c, or g = upper - q and row -c: a
  unilateral contact with the limit's Newton restitution (0 <= P _|_ g_dot+ + e g_dot- >= 0);
- a friction row on c when its Coulomb (or static) force is positive: the force f on the
  coordinate is bounded by a constant, |f| <= F(|qd|), the Stribeck curve
  F(v) = F_c + (F_s - F_c) exp(-(v / v_st)^2) (F(0) = F_s the breakaway force, F = F_c without
  a Stribeck velocity), not by a normal force.
"""

from __future__ import annotations

import numpy as np

from mbsim.model.constraints import coordinate_rows
from mbsim.model.joint_forces import coordinate_jacobian
from mbsim.model.model import Frames, Model


class JointRows:
    """The stops and friction rows of a model's joint coordinates (module docstring)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        names = {j.coordinate_row: j.name for j in model.joints if j.coordinate_row is not None}
        table = model.joint_coordinates[0] if model.joint_coordinates else None
        ncoord = table.ncoord if table is not None else 0
        lower = table.lower if table is not None else np.zeros(0)
        upper = table.upper if table is not None else np.zeros(0)
        # the stops: lower ones first, then upper ones, each in row order
        low, up = np.flatnonzero(np.isfinite(lower)), np.flatnonzero(np.isfinite(upper))
        self.stop_row = np.concatenate((low, up)).astype(np.int64)
        self.stop_sign = np.concatenate((np.ones(len(low)), -np.ones(len(up))))
        self.stop_bound = np.concatenate((lower[low], upper[up]))
        self.stop_restitution = table.restitution[self.stop_row] if table is not None else np.zeros(0)
        self.stop_name = [names.get(int(r), f"coordinate {r}") for r in self.stop_row]
        if table is not None:
            rough = np.flatnonzero((table.coulomb > 0.0) | (table.static > 0.0))
        else:
            rough = np.zeros(0, dtype=np.int64)
        self.friction_row = rough.astype(np.int64)
        self.friction_name = [names.get(int(r), f"coordinate {r}") for r in self.friction_row]
        # the stops of each frictional coordinate (indices into the stops)
        self.friction_stops = [set(np.flatnonzero(self.stop_row == r).tolist()) for r in self.friction_row]
        if table is not None:
            self.coulomb, self.static = table.coulomb[rough], table.static[rough]
            self.stribeck = table.stribeck[rough]
        else:
            self.coulomb = self.static = self.stribeck = np.zeros(0)
        self.ncoord = ncoord
        self.nstop, self.nfriction = len(self.stop_row), len(self.friction_row)
        # the rows whose Jacobian is needed
        self._rows = np.union1d(self.stop_row, self.friction_row).astype(np.int64)
        self._at = {int(r): k for k, r in enumerate(self._rows)}

    def __bool__(self) -> bool:
        return bool(self.nstop or self.nfriction)

    def at(self, frames: Frames, t: float, reference: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(stop gaps (nstop,) and rows (nstop, nv), friction rows (nfriction, nv)) at a state:
        (g, G, C) with G v the gaps' rates and C v the frictional coordinates' rates."""
        m = self.model
        table = m.joint_coordinates[0]
        ref = table.initial.copy() if reference is None else reference
        q, blocks = coordinate_rows(m, frames, t, ref)
        C = coordinate_jacobian(m, blocks, self._rows)
        stops = np.array([self._at[int(r)] for r in self.stop_row], dtype=np.int64)
        rough = np.array([self._at[int(r)] for r in self.friction_row], dtype=np.int64)
        gap = self.stop_sign * (q[self.stop_row] - self.stop_bound)
        G = self.stop_sign[:, None] * C[stops] if len(stops) else np.zeros((0, m.nv))
        return gap, G, (C[rough] if len(rough) else np.zeros((0, m.nv)))

    def friction_bound(self, rate: np.ndarray) -> np.ndarray:
        """The friction force's bound F(|rate|) (nfriction,): the Stribeck curve (module docstring)."""
        bound = self.coulomb.copy()
        curve = self.stribeck > 0.0
        ratio = np.abs(rate[curve]) / self.stribeck[curve]
        bound[curve] += (self.static[curve] - self.coulomb[curve]) * np.exp(-(ratio**2))
        return bound

    def forces(self, stop_force: np.ndarray, friction_force: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per coordinate (ncoord,): the stops' force on it (a stop's force f >= 0 pushes along
        its sign) and the friction rows' force, for the record (/joints/NAME/limit_force,
        friction_force)."""
        limit = np.zeros(self.ncoord)
        np.add.at(limit, self.stop_row, self.stop_sign * stop_force)
        friction = np.zeros(self.ncoord)
        friction[self.friction_row] = friction_force
        return limit, friction
