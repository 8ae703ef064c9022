"""Benchmark: what actuators cost, a servo-driven Panda against the same arm unactuated (issue 30).

    python benchmarks/actuated.py            # the section alone (printed), about a minute
    python benchmarks/actuated.py --quick    # one repeat, shorter runs

The Panda arm of the peers' case (``benchmarks.peers.cases.arm7_scene``: 7 axes from its URDF,
fingers welded, no joint dampers, recursive + rk4 at h = 1 ms, a row every 10th step), run as it
is and with a position servo on each of its 7 joints (``SERVOS``: target b + a sin(2 t), its rate
by symbolic differentiation, kp = I wn^2 and kd = 2 I wn with wn = 50 rad/s for the joint's
effective inertia I = 1 / (M^-1)_ii at the start pose (Pinocchio's CRBA of the welded arm; not
M_ii: joints 1 and 3 are nearly aligned there, and gains sized for M_ii put an eigenvalue of
M^-1 Kd at -3400 /s, beyond rk4's -2.8 / h), forcerange
and joint ``effort`` the URDF's <limit effort>) -- and with the servos and the URDF's joint limits
(compliant stops) and a Coulomb friction of 0.1 N m on every joint, all the joint-coordinate
forces of issue 30 at once. Four more cases say where the time goes (``CASES``): the efforts
alone (the joint-coordinate rows without an actuator), torque actuators of value 0 (the actuator
pass with a trivial expression), torque actuators a sin(2 t) (the expression interpreter), servos
with constant targets.

Timed per case, warm (one untimed run first, in this process), round robin over the cases:
``mbsim.simulate.run`` on the loaded scene, ``STEPS`` steps, twice per repeat: once with the run's
clock (``mbsim.simulate``'s ``time.perf_counter``, which times the stepping loop with its recording,
not the set-up) read from ``time.process_time`` instead -- the loop's CPU time, what the other
processes on the machine do not inflate --, once as it is (the loop's wall time,
``RunSummary.wall_time_s``); medians over the repeats. Target (issue 30): the servo-driven arm
within 1.3x the unactuated one's step. Nothing here asserts on a time.
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

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is a folder of the checkout, not an installed package
    sys.path.insert(0, str(ROOT))

STEPS = 5000
TARGET_RATIO = 1.3
# (joint, amplitude a, offset b = the arm7 start pose, effort from the URDF, effective inertia kg m^2)
SERVOS = (
    ("panda_joint1", 0.5, 0.0, 87.0, 0.0695),
    ("panda_joint2", 0.3, 0.3, 87.0, 0.7877),
    ("panda_joint3", 0.4, 0.0, 87.0, 0.0425),
    ("panda_joint4", 0.3, -1.5, 87.0, 0.2138),
    ("panda_joint5", 0.5, 0.0, 12.0, 0.0369),
    ("panda_joint6", 0.4, 1.2, 12.0, 0.0341),
    ("panda_joint7", 0.6, 0.0, 12.0, 0.0064),
)
# the URDF's limits of the joints (lower, upper), rad
LIMITS = {"panda_joint1": (-2.8973, 2.8973), "panda_joint2": (-1.7628, 1.7628), "panda_joint3": (-2.8973, 2.8973),
          "panda_joint4": (-3.0718, -0.0698), "panda_joint5": (-2.8973, 2.8973), "panda_joint6": (-0.0175, 3.7525),
          "panda_joint7": (-2.8973, 2.8973)}  # fmt: skip
WN = 50.0


def _joints_text(limits: bool) -> str:
    """The scene's ``joints:`` amendments: the efforts, and the limits and friction."""
    joints = []
    for name, _, _, effort, _ in SERVOS:
        extra = ""
        if limits:
            lower, upper = LIMITS[name]
            extra = f", limits: {{lower: {lower}, upper: {upper}}}, friction: {{coulomb: 0.1}}"
        joints.append(f"  - {{name: {name}, effort: {effort}{extra}}}")
    return "joints:\n" + "\n".join(joints) + "\n"


def _actuators_text(law: str) -> str:
    """The scene's ``actuators:``, one per joint: ``servo`` (the tracking servos), ``servo_fixed``
    (the same, a constant target), ``torque`` (b + a sin(2 t)) or ``torque_zero`` (0)."""
    actuators = []
    for name, amplitude, offset, effort, inertia in SERVOS:
        head = f"  - {{name: s_{name}, joint: {name}, "
        gains = f"kp: {inertia * WN**2:.6g}, kd: {2 * inertia * WN:.6g}, forcerange: [{-effort}, {effort}]}}"
        actuators.append(
            {
                "servo": f"{head}type: position, target: '{offset} + {amplitude}*sin(2*t)', {gains}",
                "servo_fixed": f"{head}type: position, target: {offset}, {gains}",
                "torque": f"{head}type: torque, value: '{amplitude}*sin(2*t)'}}",
                "torque_zero": f"{head}type: torque, value: 0}}",
            }[law]
        )
    return "actuators:\n" + "\n".join(actuators) + "\n"


# (label, scene text appended to the arm7 scene); the second is the case, the others say
# where its time goes
CASES = (
    ("unactuated (the peers' case)", ""),
    ("7 position servos, effort", _joints_text(False) + _actuators_text("servo")),
    ("7 position servos, effort, limits, friction", _joints_text(True) + _actuators_text("servo")),
    ("effort only (the joint-coordinate rows, no actuator)", _joints_text(False)),
    ("7 torque actuators of value 0", _actuators_text("torque_zero")),
    ("7 torque actuators a sin(2 t)", _actuators_text("torque")),
    ("7 position servos, constant targets", _actuators_text("servo_fixed")),
)


@dataclass
class Case:
    label: str
    text: str  # appended to the arm7 scene
    cpu_s: list[float] = field(default_factory=list)  # the loop's CPU seconds per step
    wall_s: list[float] = field(default_factory=list)  # the loop's wall seconds per step
    failure: str = ""


class _ProcessClock:
    """``mbsim.simulate``'s ``time`` module with ``perf_counter`` read from ``process_time``."""

    def __getattr__(self, name: str):
        return time.process_time if name == "perf_counter" else getattr(time, name)


def _timed(scene: Path, steps: int, out: Path, cpu: bool) -> tuple[float, str]:
    """(the stepping loop's seconds per step, CPU time if ``cpu`` else wall; failure or '')."""
    import mbsim.simulate
    from mbsim.scene.spec import load_scene

    spec = load_scene(str(scene), [f"time.end={steps * 1e-3!r}"])
    clock = mbsim.simulate.time
    mbsim.simulate.time = _ProcessClock() if cpu else clock
    try:
        summary = mbsim.simulate.run(spec, out)
    finally:
        mbsim.simulate.time = clock
    failure = "" if summary.status == "completed" else f"{summary.status}: {summary.message}"
    return summary.wall_time_s / max(summary.steps, 1), failure


def measure(repeats: int = 7, steps: int = STEPS, log: Callable[[str], None] = print) -> list[Case]:
    from benchmarks.peers.cases import arm7_scene

    cases = [Case(label, text) for label, text in CASES]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = arm7_scene(work, steps).read_text(encoding="utf-8")
        scenes = []
        for k, case in enumerate(cases):
            scene = work / f"case{k}.yaml"
            scene.write_text(base + case.text, encoding="utf-8")
            scenes.append(scene)
            _timed(scene, steps, work / f"warm{k}.h5", cpu=True)
        # round robin: the machine's other load spreads over every case alike
        for r in range(repeats):
            for k, (case, scene) in enumerate(zip(cases, scenes, strict=True)):
                cpu, failure = _timed(scene, steps, work / f"{k}-{r}-cpu.h5", cpu=True)
                wall, failure2 = _timed(scene, steps, work / f"{k}-{r}-wall.h5", cpu=False)
                case.failure = case.failure or failure or failure2
                case.cpu_s.append(cpu)
                case.wall_s.append(wall)
            log(f"  repeat {r + 1}/{repeats}: " + ", ".join(f"{1e6 * c.cpu_s[-1]:.1f}" for c in cases) + " µs/step")
    return cases


def markdown(cases: list[Case], repeats: int, steps: int, quick: bool = False) -> list[str]:
    """The section's lines (its first line the heading, as benchmarks/run.py numbers it)."""
    from benchmarks.machine import machine_info

    base = statistics.median(cases[0].cpu_s)
    rows = []
    for c in cases:
        cpu, wall = 1e6 * statistics.median(c.cpu_s), 1e6 * statistics.median(c.wall_s)
        ratio = cpu / (1e6 * base)
        verdict = "-" if c is cases[0] else ("yes" if ratio <= TARGET_RATIO else "**no**")
        note = f" {c.failure}" if c.failure else ""
        rows.append(f"| {c.label} | {cpu:.1f} | {wall:.1f} | {ratio:.2f}x | {verdict} |{note}")
    driven = statistics.median(cases[1].cpu_s) / base
    cpu = {c.label: 1e6 * statistics.median(c.cpu_s) for c in cases}
    labels = [label for label, _ in CASES]
    unactuated, servos, _, effort, zero, torque, fixed = (cpu[label] for label in labels)
    where = (
        f"Where the time goes (differences of the CPU medians, µs per step of 4 evaluations): the joint-coordinate "
        f"rows with an effort but no actuator {effort - unactuated:+.1f}; 7 actuators of value 0 (the actuator "
        f"pass) {zero - unactuated:+.1f}; their values a sin(2 t) (7 programs of the expression interpreter per "
        f"evaluation) {torque - zero:+.1f} more; 7 servos with constant targets {fixed - unactuated:+.1f}; their "
        f"targets b + a sin(2 t) and the targets' symbolic rates (14 programs per evaluation, sin(2 t) and "
        f"cos(2 t) each computed 7 times: no sharing between programs) {servos - fixed:+.1f} more."
    )
    machine = machine_info()
    return [
        "## Actuated arm: a servo-driven Panda against the unactuated one",
        "",
        "The Panda of the peers' case (7 axes from its URDF, recursive + rk4, h = 1 ms, a row every 10th step) "
        "as it is, with a position servo on each joint tracking b + a sin(2 t) (forcerange and `effort` the URDF's), "
        "and with the URDF's joint limits (compliant stops) and Coulomb friction 0.1 N m on every joint besides; "
        "the last four rows take the servos apart (where the time goes). "
        f"µs per step of the stepping loop with its recording ({steps} steps, set-up excluded), its CPU time "
        f"(`time.process_time`) and its wall time, warm, medians of {repeats} round-robin repeat(s). "
        f"`python benchmarks/actuated.py`{' (--quick: fewer steps and repeats)' if quick else ''}; "
        f"{time.strftime('%Y-%m-%d')}, {machine['CPU']}, {machine['cores (usable / logical)']} cores, "
        f"load {machine['load average at start (1, 5, 15 min)']}.",
        "",
        "| case | CPU µs/step | wall µs/step | against unactuated | within 1.3x |",
        "| --- | ---: | ---: | ---: | --- |",
        *rows,
        "",
        f"Target (issue 30): the servo-driven arm within {TARGET_RATIO:g}x the unactuated step. This run: "
        f"{driven:.2f}x, {'within' if driven <= TARGET_RATIO else 'over'} the target.",
        "",
        where,
        "",
    ]


def section(quick: bool = False, log: Callable[[str], None] | None = None) -> list[str]:
    """Run the benchmark and return its markdown section (for benchmarks/run.py and BENCHMARKS.md)."""
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    repeats, steps = (1, STEPS // 10) if quick else (7, STEPS)
    return markdown(measure(repeats, steps, log=log), repeats, steps, quick)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repeat of shorter runs")
    args = parser.parse_args(argv)
    print("\n".join(section(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
