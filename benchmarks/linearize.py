"""Benchmark: linearisation and modes of an arm, against MuJoCo's and Pinocchio's (issue 32).

    python benchmarks/linearize.py            # the section alone (printed), about a minute
    python benchmarks/linearize.py --quick    # fewer repeats

Two arms imported from their URDFs, the Panda of the peers' case (7 axes, fingers welded:
``benchmarks.peers.cases.arm7_scene``) and the UR5 of ``scenes/ur5_arm.yaml`` (6 axes, without
its wrist spring), each at a bent pose and held there by constant joint torques equal to its
gravity torque g(q) (Pinocchio's ``computeGeneralizedGravity`` of the same URDF): a static
equilibrium, so that the linearisation is the same in every choice of coordinates and the
eigenvalues of A can be compared across codes. Timed, warm, medians of round-robin repeats of
CPU time (``time.process_time``):

- mbsim: ``Simulation.linearize()`` (A, B, C, D by central differences with one Richardson step,
  mbsim.analysis.modes) and ``Simulation.modes()`` (the same plus the eigenproblem);
- MuJoCo: ``mjd_transitionFD`` (centred, eps 1e-6) on the model of the same bodies and joints
  (``benchmarks.peers.mujoco.mjcf_tree``), the gravity held by ``qfrc_applied`` = its own bias
  force at rest, semi-implicit Euler at h = 1e-3 s (the transition supports no RK4): its rows of
  v+ = v + h a(q, v) give da/dq and da/dv exactly, A_d[v, q] / h and (A_d[v, v] - I) / h;
- Pinocchio: ``computeABADerivatives`` at (q, 0, g(q)), analytic: A = [[0, I], [da/dq, da/dv]].

Agreement: the largest distance from an eigenvalue of mbsim's A to the nearest of the peer's,
compared as lambda^2, relative to the largest |lambda^2|. Also timed: ``Simulation.equilibrium()``
of the UR5 held by six position servos (kp 2000 N m/rad, targets the pose: it sags under
gravity), no peer. Nothing here asserts on a time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is a folder of the checkout, not an installed package
    sys.path.insert(0, str(ROOT))

UR5_URDF = ROOT / "scenes" / "robots" / "ur_description" / "urdf" / "ur5_robot.urdf"
UR5_POSE = {"shoulder_lift_joint": -1.2, "elbow_joint": 0.7, "wrist_1_joint": -1.0, "wrist_2_joint": 0.4}
PANDA_POSE = {"panda_joint2": 0.3, "panda_joint4": -1.5, "panda_joint6": 1.2}
MUJOCO_STEP = 1e-3  # s: the Euler step (da/dq, da/dv are read from its transition without its error)
MUJOCO_EPS = 1e-6
SERVO_KP = 2000.0


@dataclass
class Arm:
    """One arm's timings (CPU s per call) and agreements."""

    label: str
    dof: int = 0
    linearize_s: list[float] = field(default_factory=list)
    modes_s: list[float] = field(default_factory=list)
    mujoco_s: list[float] = field(default_factory=list)
    pinocchio_s: list[float] = field(default_factory=list)
    against_pinocchio: float = float("nan")
    against_mujoco: float = float("nan")
    notes: list[str] = field(default_factory=list)


def held_scene(urdf: Path, pose: dict[str, float], name: str) -> tuple[dict, np.ndarray, list[str]]:
    """The arm at ``pose`` held by constant torques g(q): (the scene, g (nv,), the joint names)."""
    import pinocchio as pin

    pm = pin.buildModelFromUrdf(str(urdf))
    pd = pm.createData()
    q = pin.neutral(pm)
    for joint, value in pose.items():
        q[pm.joints[pm.getJointId(joint)].idx_q] = value
    gravity = pin.computeGeneralizedGravity(pm, pd, q)
    joints = [pm.names[i + 1] for i in range(pm.nv)]
    scene = {
        "mbsim": 1,
        "name": name,
        "gravity": [0.0, 0.0, -9.81],
        "time": {"end": 1.0, "step": 0.001},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "models": [{"file": str(urdf), "joint_positions": pose}],
        "actuators": [
            {"name": f"hold_{j}", "joint": j, "type": "torque", "value": repr(float(g))}
            for j, g in zip(joints, gravity, strict=True)
        ],
    }
    return scene, q, joints


def _nearest(ours: np.ndarray, theirs: np.ndarray) -> float:
    """max over ours of the distance to the nearest of theirs, compared as lambda^2 (the
    eigenvalues of -M^-1 K: a rigid-body mode's pair +-sqrt(noise) would be ~1e-6 of the scale in
    lambda itself), over the largest |lambda^2|."""
    ours, theirs = ours**2, theirs**2
    scale = max(float(np.max(np.abs(theirs))), 1e-300)
    return float(max(np.min(np.abs(theirs - value)) for value in ours)) / scale


def _cpu(call: Callable[[], object]) -> float:
    start = time.process_time()
    call()
    return time.process_time() - start


def measure(repeats: int, log: Callable[[str], None]) -> tuple[list[Arm], dict]:
    import mbsim
    from benchmarks.peers.cases import PANDA_URDF, _panda_copy

    work = Path(tempfile.mkdtemp(prefix="mbsim-linearize-"))
    panda = work / "panda_arm.urdf"
    _panda_copy(panda)
    del PANDA_URDF  # the copy (fingers welded) is the arm
    arms = []
    for label, urdf, pose in (("Panda (7 axes)", panda, PANDA_POSE), ("UR5 (6 axes)", UR5_URDF, UR5_POSE)):
        arm = Arm(label)
        scene, q, _ = held_scene(urdf, pose, label)
        sim = mbsim.load(scene)
        ss = sim.linearize()
        arm.dof = ss.A.shape[0] // 2
        ours = np.linalg.eigvals(ss.A)
        peers = _peers(urdf, q, scene, arm)
        if "pinocchio" in peers:
            arm.against_pinocchio = _nearest(ours, peers["pinocchio"])
        if "mujoco" in peers:
            arm.against_mujoco = _nearest(ours, peers["mujoco"])
        arms.append((arm, sim, peers))
        log(f"  {label}: {arm.dof} dof, eigenvalues against Pinocchio {arm.against_pinocchio:.1e}")
    for r in range(repeats):  # round robin
        for arm, sim, peers in arms:
            arm.linearize_s.append(_cpu(sim.linearize))
            arm.modes_s.append(_cpu(sim.modes))
            for key, call in peers.get("calls", {}).items():
                getattr(arm, f"{key}_s").append(call())
        log(f"  repeat {r + 1}/{repeats}")
    # the UR5 held by position servos: its equilibrium sags from the targets
    scene, _, joints = held_scene(UR5_URDF, UR5_POSE, "UR5 on servos")
    scene["actuators"] = [
        {"name": f"servo_{j}", "joint": j, "type": "position", "kp": SERVO_KP, "kd": 0.0, "target": "0"} for j in joints
    ]
    for item in scene["actuators"]:
        item["target"] = repr(float(UR5_POSE.get(item["joint"], 0.0)))
    servo = mbsim.load(scene)
    found = servo.equilibrium()
    times = [_cpu(servo.equilibrium) for _ in range(repeats)]
    equilibrium = {
        "converged": found.converged,
        "iterations": found.iterations,
        "residual": found.residual,
        "cpu_s": statistics.median(times),
    }
    return [arm for arm, _, _ in arms], equilibrium


def _peers(urdf: Path, q: np.ndarray, scene: dict, arm: Arm) -> dict:
    """The peers' eigenvalues of the same arm and their timed calls (CPU s per call)."""
    out: dict = {"calls": {}}
    try:
        import pinocchio as pin
    except ImportError:
        arm.notes.append("Pinocchio is not installed (the `bench` extra)")
    else:
        pm = pin.buildModelFromUrdf(str(urdf))
        pd = pm.createData()
        v = np.zeros(pm.nv)
        tau = pin.computeGeneralizedGravity(pm, pd, q).copy()
        pin.computeABADerivatives(pm, pd, q, v, tau)
        n = pm.nv
        A = np.zeros((2 * n, 2 * n))
        A[:n, n:] = np.eye(n)
        A[n:, :n], A[n:, n:] = pd.ddq_dq, pd.ddq_dv
        out["pinocchio"] = np.linalg.eigvals(A)
        out["calls"]["pinocchio"] = lambda: _cpu(lambda: pin.computeABADerivatives(pm, pd, q, v, tau))
    try:
        import mujoco
    except ImportError:
        arm.notes.append("MuJoCo is not installed (the `bench` extra)")
        return out
    from benchmarks.peers.mujoco import mjcf_tree
    from benchmarks.peers.shared import system_of
    from mbsim.scene.spec import load_scene

    work = Path(tempfile.mkdtemp(prefix="mbsim-linearize-mj-"))
    path = work / "arm.yaml"
    import yaml

    bare = dict(scene, actuators=[])
    path.write_text(yaml.safe_dump(bare), encoding="utf-8")
    system = system_of(load_scene(str(path)))
    model = mujoco.MjModel.from_xml_string(mjcf_tree(system, integrator="Euler"))
    model.opt.timestep = MUJOCO_STEP
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    data.qfrc_applied[:] = data.qfrc_bias  # at rest: the gravity torque, held
    nx = 2 * model.nv + model.na
    A = np.zeros((nx, nx))

    def transition() -> None:
        mujoco.mjd_transitionFD(model, data, MUJOCO_EPS, True, A, None, None, None)

    transition()
    n, h = model.nv, MUJOCO_STEP
    continuous = np.zeros((2 * n, 2 * n))
    continuous[:n, n:] = np.eye(n)
    continuous[n:, :n] = A[n : 2 * n, :n] / h
    continuous[n:, n:] = (A[n : 2 * n, n : 2 * n] - np.eye(n)) / h
    out["mujoco"] = np.linalg.eigvals(continuous)
    out["calls"]["mujoco"] = lambda: _cpu(transition)
    return out


def _ms(values: list[float]) -> str:
    return f"{1e3 * statistics.median(values):.2f}" if values else "-"


def markdown(arms: list[Arm], equilibrium: dict, repeats: int, quick: bool = False) -> list[str]:
    """The section's lines (its first line the heading, as benchmarks/run.py numbers it)."""
    from benchmarks.machine import machine_info

    rows = []
    for a in arms:
        lin = statistics.median(a.linearize_s)
        mj = statistics.median(a.mujoco_s) if a.mujoco_s else float("nan")
        pn = statistics.median(a.pinocchio_s) if a.pinocchio_s else float("nan")
        rows.append(
            f"| {a.label} | {a.dof} | {_ms(a.linearize_s)} | {_ms(a.modes_s)} | {_ms(a.mujoco_s)} "
            f"({lin / mj:.0f}x) | {1e6 * pn:.1f} µs ({lin / pn:.0f}x) | {a.against_mujoco:.1e} | "
            f"{a.against_pinocchio:.1e} |"
        )
    notes = [f"- {a.label}: {note}" for a in arms for note in a.notes]
    machine = machine_info()
    eq = equilibrium
    return [
        "## Linearisation: `mbsim linearize` and `modes` against MuJoCo and Pinocchio",
        "",
        "Two arms from their URDFs, each at a bent pose held by constant joint torques equal to its gravity "
        "torque (a static equilibrium: the eigenvalues of A are then the same in every coordinates): mbsim's "
        "`Simulation.linearize()` (central differences, one Richardson step, in the constraint manifold's "
        "coordinates) and `modes()`, MuJoCo's `mjd_transitionFD` (centred, eps 1e-6, semi-implicit Euler at "
        "h = 1e-3 s: da/dq and da/dv read from the rows of v+ = v + h a) and Pinocchio's analytic "
        "`computeABADerivatives`. CPU time per call, warm, "
        f"medians of {repeats} round-robin repeat(s); the ratios are mbsim's linearize over the peer's. "
        "Eigenvalues: the largest distance from one of mbsim's to the nearest of the peer's, compared as "
        "lambda^2 (the eigenvalues of -M^-1 K; in lambda itself a rigid-body pair +-sqrt(noise) would show "
        "as 1e-6), over the largest |lambda^2|. "
        f"`python benchmarks/linearize.py`{' (--quick: fewer repeats)' if quick else ''}; "
        f"{time.strftime('%Y-%m-%d')}, {machine['CPU']}, {machine['cores (usable / logical)']} cores, "
        f"load {machine['load average at start (1, 5, 15 min)']}.",
        "",
        "| arm | dof | mbsim linearize ms | mbsim modes ms | MuJoCo mjd_transitionFD ms | Pinocchio ABA "
        "derivatives | eigenvalues vs MuJoCo | vs Pinocchio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
        "",
        "mbsim differentiates its constrained equations numerically in Python around the compiled evaluation "
        "(4 evaluations of the forces per reduced coordinate, each with the projection onto the joints); "
        "MuJoCo differences its compiled step, Pinocchio differentiates the articulated-body algorithm "
        "analytically. A linearisation is a one-off analysis, not a step of a loop: milliseconds are what a "
        "user waits.",
        "",
        f"Static equilibrium of the UR5 held by six position servos (kp {SERVO_KP:g} N m/rad, targets the "
        f"pose, so it sags under gravity): {'converged' if eq['converged'] else 'NOT converged'} in "
        f"{eq['iterations']} Newton iterations, residual {eq['residual']:.1e} N m, "
        f"{1e3 * eq['cpu_s']:.1f} ms CPU.",
        "",
        *notes,
        *([""] if notes else []),
    ]


def section(quick: bool = False, log: Callable[[str], None] | None = None) -> list[str]:
    """Run the benchmark and return its markdown section (for benchmarks/run.py and BENCHMARKS.md)."""
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    repeats = 3 if quick else 15
    arms, equilibrium = measure(repeats, log)
    return markdown(arms, equilibrium, repeats, quick)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args(argv)
    print("\n".join(section(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
