"""Independent reference for IFToMM / UDC MBS benchmark A05, the stiff flyball governor.

numpy + scipy only (mbsim is NOT imported). Minimal (joint) coordinates, Lagrange's equations
written out by hand:

    q = (phi, s, th1, th2)
    phi  rotation of the shaft about the vertical z axis (free, cyclic coordinate)
    s    height of the slider's centre above the shaft's lower end (= world z of the slider)
    th1  angle of rod 1 (hinge at +x side, A = (+a, 0, H)) BELOW the horizontal
    th2  same for rod 2 (hinge at -x side, B = (-a, 0, H))

Model (benchmark data, see notes.md for the sources):
    shaft  1 x 0.01 x 0.01 m, rho = 3000  -> 0.3 kg; bottom end on a vertical revolute joint at the origin
    slider 0.1 m cube, rho = 3000         -> 3 kg; prismatic along the shaft, turns with it
    rods   1 x 0.01 x 0.01 m, rho = 3000  -> 0.3 kg; revolute hinges at A/B = (+-0.05, 0, 1) in the
           rotating plane, hinge axis horizontal (normal to that plane)
    balls  5 kg point masses at the free ends of the rods
    two linear spring-dampers (k = 8e5 N/m, c = 4e4 N s/m, L0 = 0.5 m) from slider points
           E/F = (+-0.05, 0, s) to the rods' midpoints
    gravity 9.81 m/s^2 along -z; start: s = 0.5 m, alpha = 30 deg, everything turning rigidly at
           omega = 2 pi rad/s about z, no other velocity. The springs start at their rest length.

Rod + ball are one rigid body (mass m_r, centre of mass at distance d from the hinge, inertia
I_a about its axis and I_t across it, about the centre of mass). The mass matrix in these
coordinates is diagonal:

    T = 1/2 [ J_phi(th1, th2) phi'^2 + m_sl s'^2 + J_th (th1'^2 + th2'^2) ]
    J_phi = I_sh,z + I_sl,z + sum_i [ m_r rho_i^2 + I_a sin^2 th_i + I_t cos^2 th_i ],  rho_i = a + d cos th_i
    J_th  = m_r d^2 + I_t
    V_g   = g [ m_sh H/2 + m_sl s + sum_i m_r (H - d sin th_i) ]
    spring i: l_i = sqrt( (L_s cos th_i)^2 + (H - s - L_s sin th_i)^2 ),  L_s = 0.5 (hinge to midpoint)
              tension F_i = k (l_i - L0) + c dl_i/dt,  generalized force -F_i dl_i/dq

Integrated with scipy's Radau at rtol = 1e-12 (atol 1e-14) and, as a check, with DOP853 at the
same tolerances; the script prints the largest difference between the two.

Output (one row every 0.01 s from 0 to T_END, fine enough for verify's cubic spline at an
adaptive integrator's own steps; each table holds exactly the columns one check compares):
    reference.csv        t,slider_z   slider_z = /bodies/slider/position column 2 (world z of the
                                      slider's centre of mass, the benchmark's coordinate s)
    reference_omega.csv  t,shaft_wz   shaft_wz = /bodies/shaft/angular_velocity column 2 (rad/s)

Usage: python reference.py [--t-end 10] [--dt 0.01] [--no-check]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

HERE = Path(__file__).resolve().parent

# ---- benchmark data ---------------------------------------------------------------------------
RHO = 3000.0
G = 9.81
L_BAR, W_BAR = 1.0, 0.01  # shaft and rods: 1 x 0.01 x 0.01 m
A_SL = 0.1  # slider cube edge
M_BALL = 5.0  # point masses
K, C, L0 = 8.0e5, 4.0e4, 0.5  # spring-dampers
H = 1.0  # height of the rod hinges (top of the shaft)
A_OFF = 0.05  # hinge / spring attachment offset from the axis (0.10 m apart)
L_S = 0.5  # hinge -> spring attachment on the rod (its midpoint)
S0 = 0.5  # initial slider height
ALPHA0 = math.radians(30.0)  # initial rod angle below the horizontal
OMEGA0 = 2.0 * math.pi  # initial spin

# ---- derived mass properties -----------------------------------------------------------------
M_BAR = RHO * L_BAR * W_BAR * W_BAR  # 0.3 kg
M_SL = RHO * A_SL**3  # 3 kg
I_SH_Z = M_BAR * (W_BAR**2 + W_BAR**2) / 12.0  # shaft about its own (z) axis
I_SL_Z = M_SL * (A_SL**2 + A_SL**2) / 12.0  # slider about z
M_R = M_BAR + M_BALL  # rod + ball
D = (M_BAR * L_BAR / 2 + M_BALL * L_BAR) / M_R  # hinge -> centre of mass of rod + ball
I_A = M_BAR * (W_BAR**2 + W_BAR**2) / 12.0  # about the rod axis (ball: point on the axis)
I_T = (
    M_BAR * (L_BAR**2 + W_BAR**2) / 12.0 + M_BAR * (D - L_BAR / 2) ** 2 + M_BALL * (L_BAR - D) ** 2
)  # across the rod, about the COM
J_TH = M_R * D**2 + I_T  # rod + ball about its hinge


def spin_inertia(th1: float, th2: float) -> float:
    j = I_SH_Z + I_SL_Z
    for th in (th1, th2):
        rho = A_OFF + D * math.cos(th)
        j += M_R * rho * rho + I_A * math.sin(th) ** 2 + I_T * math.cos(th) ** 2
    return j


def d_spin_inertia(th: float) -> float:
    """d J_phi / d th_i (the part of rod i)."""
    rho = A_OFF + D * math.cos(th)
    return -2.0 * M_R * rho * D * math.sin(th) + 2.0 * (I_A - I_T) * math.sin(th) * math.cos(th)


def spring(s: float, th: float, sd: float, thd: float) -> tuple[float, float, float, float]:
    """length, tension, dl/ds, dl/dth of one spring-damper."""
    hz = H - s - L_S * math.sin(th)
    hx = L_S * math.cos(th)
    ell = math.hypot(hx, hz)
    dl_ds = -hz / ell
    dl_dth = (-hx * L_S * math.sin(th) - hz * L_S * math.cos(th)) / ell
    ell_dot = dl_ds * sd + dl_dth * thd
    tension = K * (ell - L0) + C * ell_dot
    return ell, tension, dl_ds, dl_dth


def rhs(t: float, y: np.ndarray) -> np.ndarray:
    phi, s, th1, th2, w, sd, th1d, th2d = y
    jphi = spin_inertia(th1, th2)
    _, f1, ds1, dth1 = spring(s, th1, sd, th1d)
    _, f2, ds2, dth2 = spring(s, th2, sd, th2d)
    # phi: d/dt (J_phi w) = 0
    wd = -(d_spin_inertia(th1) * th1d + d_spin_inertia(th2) * th2d) * w / jphi
    # s: m_sl s'' = -m_sl g - F1 dl1/ds - F2 dl2/ds
    sdd = (-M_SL * G - f1 * ds1 - f2 * ds2) / M_SL
    # th_i: J_th th'' = 1/2 dJ_phi/dth w^2 + m_r g d cos th - F_i dl_i/dth
    th1dd = (0.5 * d_spin_inertia(th1) * w * w + M_R * G * D * math.cos(th1) - f1 * dth1) / J_TH
    th2dd = (0.5 * d_spin_inertia(th2) * w * w + M_R * G * D * math.cos(th2) - f2 * dth2) / J_TH
    return np.array([w, sd, th1d, th2d, wd, sdd, th1dd, th2dd])


def jac(t: float, y: np.ndarray, eps: float = 1e-7) -> np.ndarray:
    """Central-difference Jacobian (8 x 8) for Radau."""
    n = len(y)
    out = np.empty((n, n))
    for j in range(n):
        h = eps * max(1.0, abs(y[j]))
        yp = y.copy()
        yp[j] += h
        ym = y.copy()
        ym[j] -= h
        out[:, j] = (rhs(t, yp) - rhs(t, ym)) / (2 * h)
    return out


def energies(y: np.ndarray) -> tuple[float, float, float]:
    """kinetic, potential (gravity + springs), dissipated power (>= 0)."""
    phi, s, th1, th2, w, sd, th1d, th2d = y
    kin = 0.5 * (spin_inertia(th1, th2) * w * w + M_SL * sd * sd + J_TH * (th1d**2 + th2d**2))
    pot = G * (M_BAR * H / 2 + M_SL * s + M_R * (2 * H - D * math.sin(th1) - D * math.sin(th2)))
    diss = 0.0
    for th, thd in ((th1, th1d), (th2, th2d)):
        ell, _, dls, dlt = spring(s, th, sd, thd)
        pot += 0.5 * K * (ell - L0) ** 2
        ld = dls * sd + dlt * thd
        diss += C * ld * ld
    return kin, pot, diss


def initial_state() -> np.ndarray:
    return np.array([0.0, S0, ALPHA0, ALPHA0, OMEGA0, 0.0, 0.0, 0.0])


def world_columns(y: np.ndarray) -> dict[str, float]:
    """Quantities as mbsim records them (world frame)."""
    phi, s, th1, th2, w, sd, th1d, th2d = y
    rho1 = A_OFF + D * math.cos(th1)
    rho2 = A_OFF + D * math.cos(th2)
    return {
        "slider_z": s,
        "shaft_wz": w,
        "shaft_angle": phi,
        "rod1_x": rho1 * math.cos(phi),
        "rod1_y": rho1 * math.sin(phi),
        "rod1_z": H - D * math.sin(th1),
        "rod2_x": -rho2 * math.cos(phi),
        "rod2_y": -rho2 * math.sin(phi),
        "rod2_z": H - D * math.sin(th2),
        "alpha1_deg": math.degrees(th1),
        "alpha2_deg": math.degrees(th2),
    }


def integrate(method: str, t_end: float, t_eval: np.ndarray, rtol: float = 1e-12, atol: float = 1e-14):
    kw = dict(method=method, t_eval=t_eval, rtol=rtol, atol=atol, dense_output=False)
    if method in ("Radau", "BDF"):
        kw["jac"] = jac

    # the work of the dampers is integrated along as a 9th state (dW/dt = -dissipated power)
    def rhs_w(t, yy):
        dy = rhs(t, yy[:8])
        return np.append(dy, -energies(yy[:8])[2])

    if method in ("Radau", "BDF"):
        kw["jac"] = lambda t, yy: np.pad(jac(t, yy[:8]), ((0, 1), (0, 1)))  # the work row is not needed exactly
    y0 = np.append(initial_state(), 0.0)
    t0 = time.perf_counter()
    sol = solve_ivp(rhs_w, (0.0, t_end), y0, **kw)
    wall = time.perf_counter() - t0
    if not sol.success:
        raise RuntimeError(f"{method}: {sol.message}")
    return sol, wall


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--t-end", type=float, default=10.0)
    ap.add_argument("--dt", type=float, default=0.01, help="row spacing of reference.csv")
    ap.add_argument("--no-check", action="store_true", help="skip the DOP853 cross-check")
    ap.add_argument("--out", default=str(HERE / "reference.csv"))
    args = ap.parse_args(argv)

    n = int(round(args.t_end / args.dt))
    t_grid = np.round(np.arange(n + 1) * args.dt, 12)
    t_all = t_grid

    print(
        f"derived: m_bar={M_BAR:.6g} m_slider={M_SL:.6g} m_rod+ball={M_R:.6g} d={D:.12g} "
        f"I_a={I_A:.6g} I_t={I_T:.12g} J_th={J_TH:.12g}"
    )
    sol, wall = integrate("Radau", args.t_end, t_all)
    print(f"Radau rtol=1e-12: {sol.nfev} rhs evaluations, {wall:.1f} s")
    if not args.no_check:
        sol2, wall2 = integrate("DOP853", args.t_end, t_all)
        diff = np.max(np.abs(sol.y[:8] - sol2.y[:8]), axis=1)
        print(f"DOP853 rtol=1e-12: {sol2.nfev} rhs evaluations, {wall2:.1f} s")
        print(
            "max |Radau - DOP853| per state (phi, s, th1, th2, w, s', th1', th2'):", " ".join(f"{x:.2e}" for x in diff)
        )

    e0 = sum(energies(sol.y[:8, 0])[:2])
    drift = max(abs(sum(energies(sol.y[:8, k])[:2]) - sol.y[8, k] - e0) for k in range(sol.y.shape[1]))
    diss = -sol.y[8, -1]
    print(f"energy: E0={e0:.9f} J, dissipated by the dampers to t_end: {diss:.3e} J, max |E - W - E0| = {drift:.2e} J")
    print(f"symmetry: max |th1 - th2| = {np.max(np.abs(sol.y[2] - sol.y[3])):.2e} rad")

    idx = {t: k for k, t in enumerate(sol.t)}
    out = Path(args.out)
    tables = (
        (out, "slider_z", "/bodies/slider/position[:, 2], the slider height s (m)"),
        (out.with_name(out.stem + "_omega.csv"), "shaft_wz", "/bodies/shaft/angular_velocity[:, 2] (rad/s)"),
    )
    for path, col, what in tables:
        with open(path, "w", encoding="utf-8") as f:
            f.write("# IFToMM/UDC benchmark A05 (stiff flyball governor), independent reference: reference.py\n")
            f.write(
                "# minimal coordinates (phi, s, th1, th2), scipy Radau rtol=1e-12 atol=1e-14 (DOP853 agrees to 1e-12)\n"
            )
            f.write(f"# {col} = {what}\n")
            f.write(f"t,{col}\n")
            for t in t_grid:
                c = world_columns(sol.y[:8, idx[t]])
                f.write(f"{t:.10g},{c[col]:.15g}\n")
    print(f"wrote {tables[0][0]}, {tables[1][0]} ({len(t_grid)} rows each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
