"""The peers' markdown section: the table, the cross-checks, the notes and how each peer was set up."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

from benchmarks.peers.cases import CASES
from benchmarks.peers.runner import run_peers
from benchmarks.peers.shared import PEER_LABELS, PEERS, peer_version


def _us(value: float | None, note: str | None = None) -> str:
    if value is None:
        if note and note.startswith("not installed"):
            return "not installed"
        if note and note.startswith("failed"):
            return "failed"
        return "n/a"
    return f"{value:.1f}" if value < 1000 else f"{value:,.0f}"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "numpy": np.__version__}
    try:
        from importlib import metadata

        out["mbsim"] = metadata.version("mbsim")
    except Exception:  # an uninstalled checkout
        out["mbsim"] = "checkout"
    for peer in PEERS:
        out[peer] = peer_version(peer) or "not installed"
    return out


def markdown(rows: list[dict]) -> str:
    """The section: the table, the cross-checks, and how each peer was set up."""
    v = versions()
    lines = [
        "## Peers: µs per step, same session",
        "",
        "Stepping-loop µs per step (median of the repeats, `time.perf_counter`), every contender of a case timed "
        "round robin in the same process after one untimed warm-up run, single-threaded "
        "(OMP/OPENBLAS/MKL_NUM_THREADS=1). mbsim: `RunSummary.wall_time_s / steps` of `mbsim.simulate.run` "
        "(including its per-step checks and the result file's recording). *best peer* is the fastest peer "
        "that ran the case; *mbsim / best* above 1 means mbsim is slower.",
        "",
        "| case | mbsim method | steps x repeats | mbsim | MuJoCo | Pinocchio | Exudyn | best peer | mbsim / best |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for r in rows:
        notes = r.get("notes", {})
        best = PEER_LABELS.get(r["best_peer"], "-") if r["best_peer"] else "-"
        ratio = f"{r['ratio']:.1f}x" if r["ratio"] is not None else "-"
        lines.append(
            f"| {r['case']} | {r['method']} | {r['steps']} x {r['repeats']} | "
            f"{_us(r['mbsim_us'], notes.get('mbsim'))} | "
            + " | ".join(_us(r[f"{p}_us"], notes.get(p)) for p in PEERS)
            + f" | {best} | {ratio} |"
        )
    # the cross-checks and notes, once per case
    seen: list[str] = []
    checks, case_notes, absent = [], [], []
    for r in rows:
        if r["key"] in seen:
            continue
        seen.append(r["key"])
        for c in r.get("checks", []):
            checks.append((r["case"], c))
        case_notes += r.get("case_notes", [])
        for p, why in r.get("notes", {}).items():
            absent.append(f"{r['case']}: {PEER_LABELS[p]}: {why}")
    lines += [
        "",
        "Physics cross-check (untimed runs from the same start): the peer's value against mbsim's "
        "(the case's first mbsim method), Euclidean distance.",
        "",
        "| case | quantity | peer | mbsim | peer's | distance | tolerance | verdict |",
        "| --- | --- | --- | --- | --- | ---: | ---: | --- |",
    ]
    for case, c in checks:
        if "error" in c:
            lines.append(f"| {case} | {c['quantity']} | {PEER_LABELS.get(c['peer'], c['peer'])} | - | - | - | - | "
                         f"error: {c['error']} |")  # fmt: skip
            continue
        fmt = lambda xs: "(" + ", ".join(f"{x:.5f}" for x in xs) + ")"  # noqa: E731
        lines.append(
            f"| {case} | {c['quantity']} | {PEER_LABELS.get(c['peer'], c['peer'])} | {fmt(c['mbsim'])} | "
            f"{fmt(c['value'])} | "
            f"{c['distance']:.1e} | {c['tol']:g} | {'agrees' if c['ok'] else '**differs**'} |"
        )
    loads = [x for r in rows for x in r.get("loadavg", ()) if x is not None]
    lines += ["", "Notes:", ""]
    if loads:
        lines.append(
            f"- machine: {os.cpu_count()} cores; 1-minute load average {min(loads):.1f} to {max(loads):.1f} at the "
            "cases' starts and ends (other processes share the machine; the round robin spreads their load over "
            "all contenders alike)"
        )
    lines += [f"- {n}" for n in case_notes]
    lines += [f"- {a}" for a in absent]
    lines += [
        "",
        f"Versions: mbsim {v['mbsim']}, MuJoCo {v['mujoco']}, Pinocchio (`pin`) {v['pinocchio']}, Exudyn "
        f"{v['exudyn']}; Python {v['python']}, NumPy {v['numpy']}. Set-up (benchmarks/peers/): every peer model is "
        "built from mbsim's compiled model of the case (masses, inertias about the centre of mass in body axes, start "
        "poses, e.g. the four-box chain's quaternions from its ZXZ Euler angles, joint points and axes, gravity, "
        "step), 2D scenes in the x-y plane with joint axes along z and gravity along -y. "
        "**MuJoCo**: MJCF of nested bodies (body frame = mbsim's, explicit `inertial` with `diaginertia`), ball / "
        "hinge joints at mbsim's joint points, `integrator=\"RK4\"` at the scene's step, no contacts in the chains "
        "(geoms `contype=0 conaffinity=0`); the blocks as free bodies with a frictionless soft box-box contact; the "
        'pile as 1,000 free spheres and the box\'s five planes with `solver="CG"`; timed as '
        "`mj_step(model, data, nstep=steps)` (its C loop). **Pinocchio**: a `pin.Model` of `JointModelSpherical` / "
        "`JointModelRZ` joints (joint frame at the joint point with the child's start orientation, the body inertia "
        "at its centre of mass), integrated by a Python RK4 loop (Runge-Kutta-Munthe-Kaas, 4th order) around "
        "`pin.aba` with `pin.integrate` for the configurations: most of its time per step is the Python around four "
        "`aba` calls. **Exudyn**: rigid bodies in maximal coordinates (3D: `CreateRigidBody`, Euler parameters, "
        "`CreateSphericalJoint`; 2D: `NodeRigidBody2D` / `ObjectRigidBody2D`, `ObjectJointRevolute2D`, "
        "`ObjectJointPrismatic2D`), gravity as body loads, `SolveDynamic` with its default implicit "
        "generalized-alpha (spectral radius 0.9, index-3 constraints, modified Newton) at the scene's step, no "
        "solution file; wall time of `SolveDynamic` (including its set-up) over the steps it took. The planar "
        "chains' Exudyn column is that generalized-alpha set-up (maximal coordinates, like mbsim's lagrange; "
        "Exudyn's explicit solvers do not take these joint constraints); the issue's explicit-Euler Exudyn run "
        "needs joint coordinates, so it is timed as an extra set-up (notes): one `ObjectKinematicTree` "
        "(`CreateKinematicTree`, revolute-z links) with `ExplicitEuler`, and with `RK44`.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from benchmarks import peers

    parser = argparse.ArgumentParser(description=peers.__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer steps and repeats (about 1 minute)")
    parser.add_argument("--case", action="append", choices=CASES, help="run only this case (repeatable)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    rows = run_peers(quick=args.quick, cases=tuple(args.case) if args.case else CASES, log=log)
    print(markdown(rows))
    log(f"total {time.perf_counter() - start:.1f} s")
    return 0


def section(quick: bool = False) -> list[str]:
    """The peers section of BENCHMARKS.md (benchmarks/run.py), or a line saying why it is absent."""
    installed = [p for p in ("mujoco", "pinocchio", "exudyn") if peer_version(p) is not None]
    if not installed:
        return [
            "## Peers: µs per step, same session",
            "",
            "No peer installed (`pip install -e '.[bench]'` adds mujoco, pin and exudyn); section skipped.",
        ]
    return markdown(run_peers(quick)).splitlines()
