"""Joint and force physics in 3D with the ``lagrange`` method, each against an analytic solution, a
conservation law or an independent integration written here (never against mbsim's own numbers).

Orientations are read from the result file with scipy's Rotation (scalar-last), not with mbsim's
kernels. Measured numbers are quoted next to each bound.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.spatial.transform import Rotation
from scipy.special import ellipk

G = 9.81


def rotation(quats: np.ndarray) -> Rotation:
    """Rotation(s) of (..., 4) scalar-first quaternions (the result file's layout)."""
    return Rotation.from_quat(np.asarray(quats)[..., [1, 2, 3, 0]])


def axis_angle_matrix(axis, angle) -> np.ndarray:
    axis = np.asarray(axis, dtype=float)
    return Rotation.from_rotvec(axis / np.linalg.norm(axis) * angle).as_matrix()


def unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


def listed(v) -> list[float]:
    return [float(x) for x in np.ravel(v)]


def body(
    name, mass, inertia, position, axis=(0.3, -0.5, 0.8), angle=0.7, velocity=(0, 0, 0), angular_velocity=(0, 0, 0)
) -> dict:
    """A body dict of a scene; the orientation is an axis-angle rotation (default: a skew one, so that
    no world axis is a principal axis)."""
    return {
        "name": name,
        "mass": float(mass),
        "inertia": listed(inertia),
        "position": listed(position),
        "orientation": {"axis_angle": {"axis": listed(axis), "angle": float(angle)}},
        "velocity": listed(velocity),
        "angular_velocity": listed(angular_velocity),
    }


def scene(name, bodies, joints=(), forces=(), gravity=(0, 0, 0), end=1.0, step=1e-3, **solver) -> dict:
    return {
        "mbsim": 1,
        "name": name,
        "gravity": listed(gravity),
        "time": {"end": float(end), "step": float(step)},
        "solver": {"method": "lagrange", "integrator": "rk4", **solver},
        "bodies": list(bodies),
        "joints": list(joints),
        "forces": list(forces),
    }


def relative_rotation_angle(res, name: str, axis: np.ndarray) -> np.ndarray:
    """Rotation of a body since t = 0 about a world axis, from the recorded orientations (the rotation
    R(t) R(0)^T must be about that axis; its rotation vector is projected on it)."""
    rot = rotation(res[f"bodies/{name}/orientation"])
    rotvec = (rot * rot[0].inv()).as_rotvec()
    angle = rotvec @ axis
    assert np.max(np.linalg.norm(rotvec - np.outer(angle, axis), axis=1)) < 1e-10
    return angle


def energy_error(res) -> float:
    """max |(total - work)(t) - (total - work)(0)| in J."""
    balance = res["diagnostics/energy/total"] - res["diagnostics/energy/work"]
    return float(np.max(np.abs(balance - balance[0])))


# ----------------------------------------------------------------------------- revolute pendulum


def test_revolute_pendulum_about_a_skew_axis_has_the_physical_pendulum_period(run_scene, zero_crossings):
    """A body hinged about n = (1, 1, 0)/sqrt(2), gravity -z (perpendicular to n), centre of mass a distance
    L from the axis (and 0.15 m along it): a physical pendulum with I_pivot = n^T I_world n + m L^2, whose
    period at amplitude theta0 is 4 sqrt(I_pivot / (m g L)) K(sin^2(theta0/2)) -> 2 pi sqrt(I_pivot / (m g L))."""
    m, L, theta0 = 2.0, 0.4, 0.1
    inertia = np.array([0.02, 0.03, 0.05])
    n = unit([1, 1, 0])
    e = unit([1, -1, 0])  # horizontal, normal to the axis
    hinge = np.array([0.2, -0.1, 1.0])
    com = hinge + 0.15 * n + L * (np.sin(theta0) * e - np.cos(theta0) * np.array([0, 0, 1]))
    R0 = axis_angle_matrix((0.3, -0.5, 0.8), 0.7)
    i_pivot = n @ R0 @ np.diag(inertia) @ R0.T @ n + m * L**2
    small = 2 * np.pi * np.sqrt(i_pivot / (m * G * L))  # 1.3487 s
    exact = 4 * np.sqrt(i_pivot / (m * G * L)) * ellipk(np.sin(theta0 / 2) ** 2)
    spec = scene(
        "skew hinge",
        [body("bob", m, inertia, com)],
        [
            {
                "name": "hinge",
                "type": "revolute",
                "body1": "ground",
                "body2": "bob",
                "point": listed(hinge),
                "axis": listed(n),
            }
        ],
        gravity=(0, 0, -G),
        end=4.5,
        integrator="scipy:DOP853",
        rtol=1e-12,
        atol=1e-12,
        max_step=0.01,
    )
    summary, res = run_scene(spec)
    p, v = res["bodies/bob/position"], res["bodies/bob/velocity"]
    crossings = zero_crossings(res.time, (p - hinge) @ e, v @ e)
    assert len(crossings) >= 6
    period = 2 * np.polyfit(np.arange(len(crossings)), crossings, 1)[0]
    assert abs(period - exact) / exact < 1e-8  # measured 8.7e-12 (T = 1.318290043 s)
    # the small-amplitude (planar physical pendulum) period, up to the known theta0^2/16 correction
    assert period / small - 1 == pytest.approx(theta0**2 / 16, rel=1e-3)  # next term: 11/3072 theta0^4
    # the body turns about n only, and its centre keeps its distance from the axis and its axial position
    # (a turn by phi about n takes the centre's direction -z towards -e: theta = theta0 - phi)
    r = p - hinge
    theta = theta0 - relative_rotation_angle(res, "bob", n)
    assert np.max(np.abs(theta - np.arctan2(r @ e, -r[:, 2]))) < 1e-12
    assert np.max(np.abs(theta)) == pytest.approx(theta0, abs=1e-4)  # sampled every <= 0.01 s
    assert np.max(np.abs(r @ n - 0.15)) < 1e-12
    assert np.max(np.abs(np.linalg.norm(r - np.outer(r @ n, n), axis=1) - L)) < 1e-12
    assert summary.energy_drift < 1e-9
    # the hinge's reaction on the bob is m (a - g), with the centre's acceleration a = theta'' n x r - theta'^2 r_perp
    # and theta'' = n . (r x m g) / I_pivot; the hinge passes no moment about its own axis
    gvec = np.array([0.0, 0.0, -G])
    r_perp = r - np.outer(r @ n, n)
    rate = res["bodies/bob/angular_velocity"] @ n
    accel_angle = np.cross(r, m * gvec) @ n / i_pivot
    accel = np.outer(accel_angle, n)
    accel = np.cross(accel, r) - rate[:, None] ** 2 * r_perp
    reaction = res["joints/hinge/reaction"]
    assert np.max(np.abs(reaction[:, :3] - m * (accel - gvec))) < 1e-9 * m * G  # measured 4e-14 N
    assert np.max(np.abs(reaction[:, 3:] @ n)) < 1e-9 * m * G * L  # measured 8e-15 N m (of 2.1 N m across n)


# ----------------------------------------------------------------------------- prismatic


def test_prismatic_slide_on_an_incline_accelerates_at_g_dot_axis(run_scene):
    """A body on a prismatic joint along a = (2, 1, -2)/3 under g = (0, 0, -9.81) slides with
    s(t) = v0 t + 1/2 (g . a) t^2, keeps its orientation, and the joint carries m (g.a a - g)."""
    m, v0 = 3.0, 0.4
    a = unit([2, 1, -2])
    gvec = np.array([0, 0, -G])
    p0 = np.array([0.5, -0.2, 1.0])
    spec = scene(
        "incline",
        [body("slider", m, (0.1, 0.2, 0.25), p0, velocity=v0 * a)],
        [
            {
                "name": "slide",
                "type": "prismatic",
                "body1": "ground",
                "body2": "slider",
                "point": listed(p0),
                "axis": listed(a),
            }
        ],
        gravity=gvec,
        end=1.0,
        step=0.01,
    )
    _, res = run_scene(spec)
    t = res.time
    s = v0 * t + 0.5 * (gvec @ a) * t**2
    # rk4 integrates the quadratic exactly; measured 1e-15
    assert np.max(np.abs(res["bodies/slider/position"] - (p0 + np.outer(s, a)))) < 1e-10
    assert np.max(np.abs(res["bodies/slider/velocity"] - np.outer(v0 + (gvec @ a) * t, a))) < 1e-10
    rot = rotation(res["bodies/slider/orientation"])
    assert np.max((rot * rot[0].inv()).magnitude()) < 1e-12
    assert np.max(np.abs(res["bodies/slider/angular_velocity"])) < 1e-12
    # the reaction on the slider (at its centre of mass, so no moment) cancels gravity across the axis
    reaction = res["joints/slide/reaction"]
    assert np.max(np.abs(reaction[:, :3] - m * ((gvec @ a) * a - gvec))) < 1e-9
    assert np.max(np.abs(reaction[:, 3:])) < 1e-9


def test_driven_prismatic_needs_the_force_m_times_s_ddot_minus_g_axial(run_scene):
    """The same incline with the slide driven, s(t) = 0.3 sin(3t): the drive force along the axis is
    m (s'' - g . a), and with gravity's work in the potential, total - work is conserved."""
    m = 3.0
    a = unit([2, 1, -2])
    gvec = np.array([0, 0, -G])
    p0 = np.array([0.5, -0.2, 1.0])
    spec = scene(
        "driven incline",
        [body("slider", m, (0.1, 0.2, 0.25), p0, velocity=0.9 * a)],
        [
            {
                "name": "slide",
                "type": "prismatic",
                "body1": "ground",
                "body2": "slider",
                "point": listed(p0),
                "axis": listed(a),
                "drive": {"position": "0.3*sin(3*t)"},
            }
        ],
        gravity=gvec,
        end=2.0,
        step=1e-3,
    )
    summary, res = run_scene(spec)
    t = res.time
    assert np.max(np.abs(res["bodies/slider/position"] - (p0 + np.outer(0.3 * np.sin(3 * t), a)))) < 1e-9
    force = res["joints/slide/drive_force"]
    expected = m * (-2.7 * np.sin(3 * t) - gvec @ a)
    assert np.max(np.abs(force - expected)) < 1e-9 * np.max(np.abs(expected))  # measured 6e-16 relative
    assert energy_error(res) < 1e-9 * np.max(res["diagnostics/energy/kinetic"])
    assert summary.energy_drift < 1e-9


# ----------------------------------------------------------------------------- cylindrical


def test_cylindrical_joint_slides_and_spins_freely_about_its_axis(run_scene):
    """On a cylindrical joint through the centre of mass, along n = (0.6, 0, 0.8), under gravity -z: the
    body slides with s'' = g . n and spins at a constant rate w0 about n although n is no principal axis
    (the joint supplies the torques across n); the axial angular momentum n . (R I R^T w) stays w0 n^T I n."""
    m, w0, v0 = 1.5, 6.0, 0.2
    inertia = np.array([0.1, 0.2, 0.3])
    n = np.array([0.6, 0.0, 0.8])
    gvec = np.array([0, 0, -G])
    p0 = np.array([0.0, 0.3, 2.0])
    spec = scene(
        "spinning sleeve",
        [body("sleeve", m, inertia, p0, velocity=v0 * n, angular_velocity=w0 * n)],
        [
            {
                "name": "sleeve",
                "type": "cylindrical",
                "body1": "ground",
                "body2": "sleeve",
                "point": listed(p0),
                "axis": listed(n),
            }
        ],
        gravity=gvec,
        end=2.0,
        step=1e-3,
    )
    summary, res = run_scene(spec)
    t = res.time
    s = v0 * t + 0.5 * (gvec @ n) * t**2
    assert np.max(np.abs(res["bodies/sleeve/position"] - (p0 + np.outer(s, n)))) < 1e-10
    omega = res["bodies/sleeve/angular_velocity"]
    assert np.max(np.abs(omega - w0 * n)) < 1e-9  # measured 1.5e-14
    rot = rotation(res["bodies/sleeve/orientation"]).as_matrix()
    axial_momentum = np.einsum("i,nij,j,nkj,nk->n", n, rot, inertia, rot, omega)  # n . R I R^T omega
    R0 = axis_angle_matrix((0.3, -0.5, 0.8), 0.7)
    expected = w0 * n @ R0 @ np.diag(inertia) @ R0.T @ n
    assert np.max(np.abs(axial_momentum - expected)) < 1e-10 * expected  # measured 3e-15 relative
    angle = relative_rotation_angle(res, "sleeve", n)
    assert np.max(np.abs(np.unwrap(angle) - w0 * t)) < 1e-8  # measured 7e-12 rad after 12 rad
    assert summary.energy_drift < 1e-10  # measured 4e-14


# ----------------------------------------------------------------------------- universal


def test_universal_joint_keeps_its_cross_axes_perpendicular_and_conserves_energy(run_scene):
    """A double pendulum: arm hung from the ground by a spherical joint, a second arm on a universal
    joint at its lower end (cross axes x in the arm, y in the second arm), started with a consistent
    rigid velocity that turns both universal axes. The cross axes stay perpendicular and the points
    together; no force works, so total energy is constant."""
    a1, a2 = np.array([1.0, 0, 0]), np.array([0, 1.0, 0])
    joint = np.array([0.0, 0.0, -1.0])
    p1, p2 = np.array([0.0, 0.0, -0.5]), np.array([0.1, 0.05, -1.4])
    w1 = np.array([0.5, -1.0, 0.3])
    w2 = w1 + 1.5 * a1 - 2.0 * a2  # relative rotation about the two cross axes only
    v1 = np.cross(w1, p1)
    v2 = np.cross(w1, joint) + np.cross(w2, p2 - joint)
    spec = scene(
        "cardan pendulum",
        [
            body("arm", 1.0, (0.08, 0.09, 0.02), p1, velocity=v1, angular_velocity=w1),
            body("link", 0.7, (0.03, 0.04, 0.05), p2, axis=(1, 2, 0), angle=0.4, velocity=v2, angular_velocity=w2),
        ],
        [
            {"name": "ball", "type": "spherical", "body1": "ground", "body2": "arm", "point": [0, 0, 0]},
            {
                "name": "cardan",
                "type": "universal",
                "body1": "arm",
                "body2": "link",
                "point": listed(joint),
                "axes": [listed(a1), listed(a2)],
            },
        ],
        gravity=(0, 0, -G),
        end=3.0,
        step=1e-3,
    )
    summary, res = run_scene(spec)
    assert summary.assembly == []  # the start is consistent: nothing was projected
    rot1 = rotation(res["bodies/arm/orientation"])
    rot2 = rotation(res["bodies/link/orientation"])
    axis1 = (rot1 * rot1[0].inv()).apply(a1)  # the cross axes in the world, following their bodies
    axis2 = (rot2 * rot2[0].inv()).apply(a2)
    # measured 1e-13 (the projection's stopping tolerance): the dot1 row itself
    assert np.max(np.abs(np.einsum("ni,ni->n", axis1, axis2))) < 1e-12
    # both axes really turned: the test is not passed by a motion that keeps them fixed
    assert np.max(np.linalg.norm(axis1 - a1, axis=1)) > 0.3  # measured 0.79
    assert np.max(np.linalg.norm(axis2 - a2, axis=1)) > 0.3  # measured 0.61
    end1 = res["bodies/arm/position"] + (rot1 * rot1[0].inv()).apply(joint - p1)
    end2 = res["bodies/link/position"] + (rot2 * rot2[0].inv()).apply(joint - p2)
    assert np.max(np.abs(end1 - end2)) < 1e-12
    assert np.max(np.abs(np.linalg.norm(res["bodies/arm/position"], axis=1) - 0.5)) < 1e-12
    assert np.max(np.abs(res["diagnostics/energy/work"])) == 0.0
    # rk4 at h = 1e-3: measured relative drift 1.8e-12
    assert summary.energy_drift < 1e-9


# ----------------------------------------------------------------------------- fixed joint


def quat_product(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    pw, pv, qw, qv = p[0], p[1:], q[0], q[1:]
    return np.concatenate(([pw * qw - pv @ qv], pw * qv + qw * pv + np.cross(pv, qv)))


def free_rigid_body(inertia: np.ndarray, omega0_body: np.ndarray, t_eval: np.ndarray):
    """Torque-free rigid body from its frame aligned with the world at t = 0: Euler's equations
    I w' = -w x I w (body axes) with q' = 1/2 q (0, w); returns rotation matrices (n, 3, 3) and body
    angular velocities (n, 3)."""
    inv = np.linalg.inv(inertia)

    def rhs(_t, y):
        q, w = y[:4], y[4:]
        return np.concatenate((0.5 * quat_product(q, np.concatenate(([0.0], w))), -inv @ np.cross(w, inertia @ w)))

    sol = solve_ivp(
        rhs,
        (t_eval[0], t_eval[-1]),
        np.concatenate(([1.0, 0, 0, 0], omega0_body)),
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        t_eval=t_eval,
    )
    assert sol.success
    return rotation(sol.y[:4].T).as_matrix(), sol.y[4:].T


def test_fixed_joint_welds_two_bodies_into_one_rigid_body(run_scene):
    """Two bodies welded by a fixed joint, thrown with a rigid velocity under gravity, move as the single
    rigid body of their combined mass and inertia (parallel axis theorem, computed here): its centre
    falls on a parabola and it tumbles per Euler's equations (integrated here with solve_ivp)."""
    mA, mB = 2.0, 1.0
    IA, IB = np.diag([0.1, 0.2, 0.25]), np.diag([0.05, 0.03, 0.04])
    RA, RB = axis_angle_matrix((0.3, -0.5, 0.8), 0.7), axis_angle_matrix((1, 0, 1), -0.9)
    pA, pB = np.array([0.0, 0.0, 1.0]), np.array([0.5, 0.2, 1.1])
    gvec = np.array([0, 0, -G])
    mass = mA + mB
    c0 = (mA * pA + mB * pB) / mass
    inertia = np.zeros((3, 3))
    for m, I_body, R, p in ((mA, IA, RA, pA), (mB, IB, RB, pB)):
        d = p - c0
        inertia += R @ I_body @ R.T + m * (d @ d * np.eye(3) - np.outer(d, d))
    V, w0 = np.array([0.3, -0.2, 2.0]), np.array([1.0, 2.5, -0.7])
    spec = scene(
        "welded pair",
        [
            body("a", mA, np.diag(IA), pA, velocity=V + np.cross(w0, pA - c0), angular_velocity=w0),
            body(
                "b",
                mB,
                np.diag(IB),
                pB,
                axis=(1, 0, 1),
                angle=-0.9,
                velocity=V + np.cross(w0, pB - c0),
                angular_velocity=w0,
            ),
        ],
        [{"name": "weld", "type": "fixed", "body1": "a", "body2": "b", "point": [0.25, 0.1, 1.05]}],
        gravity=gvec,
        end=2.0,
        step=1e-3,
    )
    summary, res = run_scene(spec)
    assert summary.assembly == []
    t = res.time
    R, w_body = free_rigid_body(inertia, w0, t)
    centre = c0 + np.outer(t, V) + 0.5 * np.outer(t**2, gvec)
    omega = np.einsum("nij,nj->ni", R, w_body)
    for name, p, R_init in (("a", pA, RA), ("b", pB, RB)):
        expected = centre + np.einsum("nij,j->ni", R, p - c0)
        assert np.max(np.abs(res[f"bodies/{name}/position"] - expected)) < 1e-8  # measured 3e-12 m
        rot = rotation(res[f"bodies/{name}/orientation"]).as_matrix()
        assert np.max(np.abs(rot - R @ R_init)) < 1e-8  # measured 8e-12
        assert np.max(np.abs(res[f"bodies/{name}/angular_velocity"] - omega)) < 1e-8
    assert summary.energy_drift < 1e-9  # measured 4e-15


# ----------------------------------------------------------------------------- driven revolute


def test_driven_revolute_follows_its_drive_with_the_torque_I_theta_ddot(run_scene):
    """A body on a revolute joint through its centre of mass, axis n = (1, 2, 2)/3 (no principal axis),
    no gravity, driven by theta(t) = 0.5 sin 2t: it follows the drive, and the drive torque is
    I_n theta'' = -2 I_n sin 2t with I_n = n^T I_world n; the drive's work is the kinetic energy gained."""
    inertia = np.array([0.1, 0.2, 0.3])
    n = unit([1, 2, 2])
    p0 = np.array([0.1, 0.2, 0.3])
    spec = scene(
        "driven wheel",
        [body("wheel", 1.0, inertia, p0, angular_velocity=1.0 * n)],
        [
            {
                "name": "motor",
                "type": "revolute",
                "body1": "ground",
                "body2": "wheel",
                "point": listed(p0),
                "axis": listed(n),
                "drive": {"position": "0.5*sin(2*t)"},
            }
        ],
        end=3.0,
        step=1e-3,
    )
    summary, res = run_scene(spec)
    t = res.time
    R0 = axis_angle_matrix((0.3, -0.5, 0.8), 0.7)
    i_n = n @ R0 @ np.diag(inertia) @ R0.T @ n
    angle = relative_rotation_angle(res, "wheel", n)
    assert np.max(np.abs(angle - 0.5 * np.sin(2 * t))) < 1e-9  # measured 9e-14 rad
    assert np.max(np.abs(res["bodies/wheel/angular_velocity"] - np.outer(np.cos(2 * t), n))) < 1e-9
    torque = res["joints/motor/drive_force"]
    assert torque.shape == t.shape
    assert np.max(np.abs(torque - i_n * (-2.0 * np.sin(2 * t)))) < 1e-9 * i_n  # measured 2e-15 relative
    kinetic = 0.5 * i_n * np.cos(2 * t) ** 2
    assert np.max(np.abs(res["diagnostics/energy/kinetic"] - kinetic)) < 1e-12
    assert np.max(np.abs(res["diagnostics/energy/work"] - (kinetic - kinetic[0]))) < 1e-9 * kinetic[0]
    assert summary.max_position_violation < 1e-12


# ----------------------------------------------------------------------------- joint spring


def test_revolute_joint_spring_oscillates_with_period_2pi_sqrt_I_over_k(run_scene, zero_crossings):
    """A torsion spring k on a revolute joint through the centre of mass (no gravity): started at theta = 0
    with rate w0, theta(t) = w0/W sin(W t), W = sqrt(k / I_n), and 1/2 I_n theta'^2 + 1/2 k theta^2 is constant."""
    inertia = np.array([0.1, 0.2, 0.3])
    n = unit([1, -1, 2])
    k, w0 = 16.0, 0.8
    R0 = axis_angle_matrix((0.3, -0.5, 0.8), 0.7)
    i_n = n @ R0 @ np.diag(inertia) @ R0.T @ n
    W = np.sqrt(k / i_n)
    spec = scene(
        "torsion pendulum",
        [body("disc", 1.0, inertia, (0, 0, 0), angular_velocity=w0 * n)],
        [
            {
                "name": "torsion",
                "type": "revolute",
                "body1": "ground",
                "body2": "disc",
                "point": [0, 0, 0],
                "axis": listed(n),
                "spring": {"stiffness": k},
            }
        ],
        end=3.0,
        step=1e-3,
    )
    summary, res = run_scene(spec)
    t = res.time
    angle = relative_rotation_angle(res, "disc", n)
    assert np.max(np.abs(angle - w0 / W * np.sin(W * t))) < 1e-9  # measured 8e-11 rad
    rate = res["bodies/disc/angular_velocity"] @ n
    crossings = zero_crossings(t, angle, rate)
    crossings = crossings[crossings > 1e-6]  # not the start itself
    assert len(crossings) >= 6
    period = 2 * np.polyfit(np.arange(len(crossings)), crossings, 1)[0]
    assert period == pytest.approx(2 * np.pi * np.sqrt(i_n / k), rel=1e-9)  # measured 4e-11 relative
    potential = 0.5 * k * angle**2
    assert np.max(np.abs(res["diagnostics/energy/potential"] - potential)) < 1e-12
    assert summary.energy_drift < 1e-9  # measured 1.3e-11


def test_revolute_joint_spring_wound_past_half_a_turn_keeps_pulling_back(run_scene):
    """A torsion spring counts turns: started at theta = 0 with w0 = 4 W, the disc winds up to
    theta = w0 / W = 4 rad (past pi) and swings back, w(t) = w0 cos(W t), potential up to 1/2 k (4 rad)^2.
    (A planar revolute spring does this; the 3D one must too.)"""
    inertia = np.array([0.1, 0.2, 0.3])
    n = unit([1, -1, 2])
    k = 16.0
    R0 = axis_angle_matrix((0.3, -0.5, 0.8), 0.7)
    i_n = n @ R0 @ np.diag(inertia) @ R0.T @ n
    W = np.sqrt(k / i_n)
    amplitude = 4.0
    w0 = amplitude * W
    spec = scene(
        "wound torsion spring",
        [body("disc", 1.0, inertia, (0, 0, 0), angular_velocity=w0 * n)],
        [
            {
                "name": "torsion",
                "type": "revolute",
                "body1": "ground",
                "body2": "disc",
                "point": [0, 0, 0],
                "axis": listed(n),
                "spring": {"stiffness": k},
            }
        ],
        end=1.0,
        step=1e-3,
    )
    summary, res = run_scene(spec)
    t = res.time
    rate = res["bodies/disc/angular_velocity"] @ n
    assert np.max(np.abs(rate - w0 * np.cos(W * t))) < 1e-6 * w0
    potential = res["diagnostics/energy/potential"]
    # at the recorded times, the exact potential 1/2 k theta(t)^2 with theta = 4 sin(W t) (past pi)
    np.testing.assert_allclose(
        potential, 0.5 * k * (amplitude * np.sin(W * t)) ** 2, atol=1e-6 * 0.5 * k * amplitude**2
    )
    assert np.max(potential) > 0.5 * k * np.pi**2 * 1.5  # wound well past half a turn
    assert summary.energy_drift < 1e-9


# ----------------------------------------------------------------------------- spring-damper


def test_spring_damper_gives_the_damped_oscillator_and_its_energy_bookkeeping(run_scene):
    """A free body on a spring-damper from a ground point (attached at its centre of mass, no gravity),
    pulled x0 past the rest length along u: x'' + 2 zeta W x' + W^2 x = 0 with W = sqrt(k/m),
    zeta = c / (2 sqrt(k m)); the damper's work equals the mechanical energy lost."""
    m, k, c, rest, x0 = 2.0, 50.0, 2.0, 0.5, 0.1
    W = np.sqrt(k / m)
    zeta = c / (2 * np.sqrt(k * m))  # 0.1
    Wd = W * np.sqrt(1 - zeta**2)
    u = unit([1, 2, 2])
    anchor = np.array([0.1, 0.2, 0.3])
    p0 = anchor + (rest + x0) * u
    spec = scene(
        "damped oscillator",
        [body("mass", m, (0.01, 0.02, 0.025), p0)],
        forces=[
            {
                "type": "spring_damper",
                "body1": "ground",
                "body2": "mass",
                "point1": listed(anchor),
                "point2": listed(p0),
                "stiffness": k,
                "damping": c,
                "rest_length": rest,
            }
        ],
        end=3.0,
        step=1e-3,
    )
    summary, res = run_scene(spec)
    t = res.time
    decay = np.exp(-zeta * W * t)
    x = decay * x0 * (np.cos(Wd * t) + zeta * W / Wd * np.sin(Wd * t))
    xdot = -decay * x0 * W**2 / Wd * np.sin(Wd * t)
    assert np.max(np.abs(res["bodies/mass/position"] - (anchor + np.outer(rest + x, u)))) < 1e-9
    assert np.max(np.abs(res["bodies/mass/velocity"] - np.outer(xdot, u))) < 1e-9
    mechanical = 0.5 * m * xdot**2 + 0.5 * k * x**2
    assert np.max(np.abs(res["diagnostics/energy/total"] - mechanical)) < 1e-10
    work = res["diagnostics/energy/work"]
    lost = mechanical - mechanical[0]  # negative: energy leaves through the damper
    assert lost[-1] < -0.9 * mechanical[0]  # most of it is gone after 3 s (decay e^-3 in amplitude)
    assert np.max(np.abs(work - lost)) < 1e-10 * mechanical[0]
    # total - work conserved: measured 3e-12 J of 0.25 J (0.239 J went to the damper)
    assert energy_error(res) < 1e-10 * mechanical[0]


# ----------------------------------------------------------------------------- applied torque


@pytest.mark.parametrize("frame", ["world", "body"])
def test_constant_torque_spins_a_free_body_up_at_tau_over_I(run_scene, frame):
    """A constant torque tau along a principal axis (I = 2 of inertia (1, 2, 3)) of a free body at rest:
    w(t) = tau/I t about that axis, and the torque's work tau^2 t^2 / (2 I) is the kinetic energy."""
    inertia = np.array([1.0, 2.0, 3.0])
    tau = 0.6
    R0 = axis_angle_matrix((0.3, -0.5, 0.8), 0.7)
    axis = R0[:, 1]  # the body's y axis in the world
    value = listed(tau * axis) if frame == "world" else [0.0, tau, 0.0]
    spec = scene(
        "spin up",
        [body("top", 1.5, inertia, (0, 0, 0))],
        forces=[{"type": "torque", "body": "top", "value": value, "frame": frame}],
        end=2.0,
        step=1e-3,
    )
    summary, res = run_scene(spec)
    t = res.time
    assert np.max(np.abs(res["bodies/top/angular_velocity"] - np.outer(tau / 2.0 * t, axis))) < 1e-12
    angle = relative_rotation_angle(res, "top", axis)
    assert np.max(np.abs(angle - tau / 4.0 * t**2)) < 1e-12
    kinetic = tau**2 * t**2 / (2 * 2.0)
    assert np.max(np.abs(res["diagnostics/energy/kinetic"] - kinetic)) < 1e-12
    assert np.max(np.abs(res["diagnostics/energy/work"] - kinetic)) < 1e-12
    assert np.max(np.abs(res["bodies/top/position"])) == 0.0


# ----------------------------------------------------------------------------- free rigid body


def test_free_rigid_body_keeps_its_world_angular_momentum(run_scene):
    """Torque-free body with inertia (1, 2, 3) spun mostly about its intermediate axis (it tumbles, the
    Dzhanibekov effect): R I w_body stays constant, and the energy too; the motion matches Euler's
    equations integrated here."""
    inertia = np.array([1.0, 2.0, 3.0])
    R0 = axis_angle_matrix((0.3, -0.5, 0.8), 0.7)
    w0_body = np.array([0.05, 3.0, 0.05])
    w0 = R0 @ w0_body
    spec = scene("tumbling", [body("brick", 1.0, inertia, (0, 0, 0), angular_velocity=w0)], end=5.0, step=1e-3)
    summary, res = run_scene(spec)
    rot = rotation(res["bodies/brick/orientation"]).as_matrix()
    omega = res["bodies/brick/angular_velocity"]
    momentum = np.einsum("nij,j,nkj,nk->ni", rot, inertia, rot, omega)  # R I R^T w
    L0 = R0 @ (inertia * w0_body)
    assert np.max(np.abs(momentum - L0)) < 1e-8 * np.linalg.norm(L0)  # measured 6e-13 relative
    w_body = np.einsum("nji,nj->ni", rot, omega)
    assert np.min(w_body[:, 1]) < -2.0  # it did flip over: measured -2.98
    assert summary.energy_drift < 1e-10  # measured 6e-14
    R, w_ref = free_rigid_body(np.diag(inertia), w0_body, res.time)
    assert np.max(np.abs(w_body - w_ref)) < 1e-8  # measured 1.2e-11 rad/s
    assert np.max(np.abs(rot - np.einsum("ij,njk->nik", R0, R))) < 1e-8  # measured 9e-12
