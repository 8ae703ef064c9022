"""Pinocchio as a peer: a ``pin.Model`` of a tree ``System`` and a Python RK4 (Runge-Kutta-Munthe-Kaas)
loop around ``pin.aba``. ``import pinocchio`` below is the library (absolute imports), not this module."""

from __future__ import annotations

import time

import numpy as np

from benchmarks.peers.shared import System, _tree

_CYCLE1, _CYCLE2 = np.array([1, 2, 0]), np.array([2, 0, 1])


def _cross_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise a x b of (k, 3) arrays (np.cross costs more at this size)."""
    return a[:, _CYCLE1] * b[:, _CYCLE2] - a[:, _CYCLE2] * b[:, _CYCLE1]


def _dexpinv_so3(theta: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Rows of J_r(theta)^-1 w for SO(3) (theta, w: (k, 3)): the rate of theta for q = q0 exp(theta)."""
    a2 = np.einsum("ij,ij->i", theta, theta)
    a = np.sqrt(a2)
    with np.errstate(all="ignore"):
        coef = 1.0 / a2 - (1.0 + np.cos(a)) / (2.0 * a * np.sin(a))
    small = a < 1e-4
    if small.any():  # the series 1/12 + a^2/720 where the formula cancels
        coef[small] = 1.0 / 12.0 + a2[small] / 720.0
    c = _cross_rows(theta, w)
    return w + 0.5 * c + coef[:, None] * _cross_rows(theta, c)


class PinocchioSim:
    """A Pinocchio model of a tree system and a Python RK4 (Munthe-Kaas) loop around ``aba``.

    Joint frames: at mbsim's joint point, with the child body's start orientation, so that the
    neutral configuration is the start; each body's inertia is appended to its joint at its centre
    of mass. Spherical joints: ``JointModelSpherical`` (quaternion, body-axes angular velocity);
    revolute joints about the joint frame's z: ``JointModelRZ``, else ``JointModelRevoluteUnaligned``.
    """

    def __init__(self, system: System):
        import pinocchio as pin

        self.pin = pin
        self.system = system
        model = pin.Model()
        model.gravity = pin.Motion(np.asarray(system.gravity, dtype=float), np.zeros(3))
        children = _tree(system)
        self.joint_of: dict[int, int] = {}
        frames: dict[int, pin.SE3] = {}  # world placement of each body's joint frame
        order = list(children.get(-1, []))
        spherical_v: list[int] = []
        while order:
            j = order.pop(0)
            body = system.bodies[j.child]
            world = pin.SE3(body.rot, np.asarray(j.point, dtype=float))
            parent_id = 0 if j.parent < 0 else self.joint_of[j.parent]
            parent_frame = pin.SE3.Identity() if j.parent < 0 else frames[j.parent]
            if j.type == "spherical":
                jm = pin.JointModelSpherical()
            elif j.type == "revolute":
                local = body.rot.T @ j.axis
                jm = pin.JointModelRZ() if np.allclose(local, [0, 0, 1]) else pin.JointModelRevoluteUnaligned(local)
            else:
                raise ValueError(f"Pinocchio mapping: joint type {j.type} not mapped")
            if np.any(body.vel != 0) or np.any(body.omega != 0):
                raise ValueError("Pinocchio mapping: bodies with a start velocity are not mapped")
            jid = model.addJoint(parent_id, jm, parent_frame.inverse() * world, j.name)
            if j.type == "spherical":
                spherical_v += list(range(model.idx_vs[jid], model.idx_vs[jid] + 3))
            lever = body.rot.T @ (body.pos - j.point)
            model.appendBodyToJoint(jid, pin.Inertia(body.mass, lever, body.inertia), pin.SE3.Identity())
            self.joint_of[j.child] = jid
            frames[j.child] = world
            order += children.get(j.child, [])
        if len(self.joint_of) != len(system.bodies):
            raise ValueError("Pinocchio mapping: every body needs a joint path to the ground")
        self.model = model
        self.data = model.createData()
        self.spherical = np.array(spherical_v, dtype=int)
        self.q0 = pin.neutral(model)
        self.v0 = np.zeros(model.nv)
        self.tau = np.zeros(model.nv)

    def _rate(self, theta: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Tangent rate at q0 exp(theta) for velocity v: identity but for spherical joints."""
        if self.spherical.size == 0:
            return v
        out = v.copy()
        idx = self.spherical
        out[idx] = _dexpinv_so3(theta[idx].reshape(-1, 3), v[idx].reshape(-1, 3)).ravel()
        return out

    def step(self, q: np.ndarray, v: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray]:
        pin, model, data, tau = self.pin, self.model, self.data, self.tau
        a1 = pin.aba(model, data, q, v, tau).copy()
        k1 = v
        t2 = 0.5 * h * k1
        v2 = v + 0.5 * h * a1
        a2 = pin.aba(model, data, pin.integrate(model, q, t2), v2, tau).copy()
        k2 = self._rate(t2, v2)
        t3 = 0.5 * h * k2
        v3 = v + 0.5 * h * a2
        a3 = pin.aba(model, data, pin.integrate(model, q, t3), v3, tau).copy()
        k3 = self._rate(t3, v3)
        t4 = h * k3
        v4 = v + h * a3
        a4 = pin.aba(model, data, pin.integrate(model, q, t4), v4, tau).copy()
        k4 = self._rate(t4, v4)
        q_new = pin.integrate(model, q, (h / 6.0) * (k1 + 2 * k2 + 2 * k3 + k4))
        return q_new, v + (h / 6.0) * (a1 + 2 * a2 + 2 * a3 + a4)

    def run(self, steps: int) -> tuple[float, int]:
        q, v, h = self.q0.copy(), self.v0.copy(), self.system.step
        step = self.step
        start = time.perf_counter()
        for _ in range(steps):
            q, v = step(q, v, h)
        return time.perf_counter() - start, steps

    def simulate(self, steps: int) -> tuple[np.ndarray, np.ndarray]:
        q, v = self.q0.copy(), self.v0.copy()
        for _ in range(steps):
            q, v = self.step(q, v, self.system.step)
        return q, v

    def com(self, q: np.ndarray, name: str) -> np.ndarray:
        self.pin.forwardKinematics(self.model, self.data, q)
        jid = self.joint_of[self.system.index(name)]
        return np.array(self.data.oMi[jid].act(self.model.inertias[jid].lever))

    def aba_us(self, calls: int = 2000) -> float:
        """µs per bare ``aba`` call at the start state (the C++ part of a Pinocchio RK4 stage)."""
        pin, model, data = self.pin, self.model, self.data
        q, v = self.q0, self.v0 + 0.1
        start = time.perf_counter()
        for _ in range(calls):
            pin.aba(model, data, q, v, self.tau)
        return 1e6 * (time.perf_counter() - start) / calls
