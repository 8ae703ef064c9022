"""benchmarks/actuated.py on short runs: every case loads and completes (the servos, sized for the
arm's effective inertias, keep rk4 stable), the table has a row per case and the verdict."""

from __future__ import annotations

import pytest


@pytest.mark.slow  # ~3 s of benchmark scaffolding (CI runs it)
def test_actuated_section_short_run(benchmark_module) -> None:
    actuated = benchmark_module("actuated")
    cases = actuated.measure(1, steps=200, log=lambda _: None)
    assert [c.label for c in cases] == [label for label, _ in actuated.CASES]
    assert all(c.failure == "" and c.cpu_s[0] > 0 and c.wall_s[0] > 0 for c in cases), [c.failure for c in cases]
    text = "\n".join(actuated.markdown(cases, 1, 200))
    assert text.startswith("## Actuated arm: a servo-driven Panda against the unactuated one")
    assert all(f"| {c.label} |" in text for c in cases)
    assert "Target (issue 30): the servo-driven arm within 1.3x" in text and "Where the time goes" in text


def test_actuated_servos_are_stable_for_rk4_at_1_ms(benchmark_module, tmp_path) -> None:
    """The benchmark's servo gains (kp = I wn^2, kd = 2 I wn, I the effective inertia 1 / (M^-1)_ii of
    Pinocchio's CRBA at the start pose) keep every eigenvalue of the linearised servoed arm
    [[0, 1], [-M^-1 Kp, -M^-1 Kd]] within rk4's real stability bound 2.78 / h; gains sized for
    M_ii would not (joints 1 and 3 nearly aligned: an eigenvalue near -3400 /s)."""
    import numpy as np

    pin = pytest.importorskip("pinocchio")
    actuated = benchmark_module("actuated")  # puts the checkout on sys.path, as its runs need
    from benchmarks.peers.cases import arm7_scene

    arm7_scene(tmp_path, 10)
    model = pin.buildModelFromUrdf(str(tmp_path / "panda_arm.urdf"))
    q = np.array([0.0, 0.3, 0.0, -1.5, 0.0, 1.2, 0.0])
    mass = pin.crba(model, model.createData(), q)
    mass = np.triu(mass) + np.triu(mass, 1).T
    inertia = np.array([servo[4] for servo in actuated.SERVOS])
    assert np.allclose(inertia, 1 / np.diag(np.linalg.inv(mass)), rtol=2e-3)

    def fastest(i: np.ndarray) -> float:
        kp, kd = np.diag(i * actuated.WN**2), np.diag(2 * i * actuated.WN)
        a = np.block([[np.zeros((7, 7)), np.eye(7)], [-np.linalg.solve(mass, kp), -np.linalg.solve(mass, kd)]])
        return float(np.abs(np.linalg.eigvals(a)).max())

    assert fastest(inertia) * 1e-3 < 2.78 / 4  # a margin of 4
    assert fastest(np.diag(mass)) * 1e-3 > 2.78
