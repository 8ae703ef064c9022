"""The cases of issue 13 (and issue 16's arm): each builds mbsim's contenders and every installed peer's
model of the same scene, and a cross-check of their motion (untimed)."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np

from benchmarks.contact_pile import PILE_SPACING, pile_scene
from benchmarks.peers.exudyn import KINEMATIC_TREE_LABELS, KINEMATIC_TREE_SOLVERS, ExudynSim, ExudynTreeSim
from benchmarks.peers.mbsim_run import MbsimRun, _h5_position
from benchmarks.peers.mujoco import (
    BLOCKS_SOLIMP,
    MujocoSim,
    arm_floor_mjcf,
    blocks_mjcf,
    mjcf_tree,
    pile_mjcf,
    rolling_mjcf,
    tower_mjcf,
)
from benchmarks.peers.pinocchio import PinocchioSim
from benchmarks.peers.shared import (
    BLOCKS_SCENE,
    CHECK_T,
    FOUR_BOX_SCENE,
    PEER_LABELS,
    SCENES,
    SLIDER_SCENE,
    Case,
    Contender,
    System,
    _absent,
    _check_row,
    _contender,
    _one_line,
    _peer_or_note,
    system_of,
)
from benchmarks.slider import _slider_reference

# the planar chain of case c
CHAIN_LINK_LENGTH = 0.5  # m, each a uniform bar
CHAIN_LINK_MASS = 1.0  # kg
CHAIN_LINK_WIDTH = 0.04  # m, only for the inertia and the shape
CHAIN_TILT = 0.3  # rad: the straight chain starts this far off the downward vertical
CHAIN_STEP = 1e-3  # s


def planar_chain_scene(
    n: int,
    steps: int = 1000,
    step: float = CHAIN_STEP,
    method: str = "lagrange",
    tilt: float = CHAIN_TILT,
    mass: float = CHAIN_LINK_MASS,
    length: float = CHAIN_LINK_LENGTH,
    width: float = CHAIN_LINK_WIDTH,
    every: int | None = None,
) -> str:
    """YAML text of a planar (``dimension: 2``) pendulum chain of ``n`` uniform bars on revolute joints.

    Link k (k = 1..n) is a bar of ``mass`` and ``length`` (a ``width`` x ``length`` rectangle,
    inertia m (L^2 + w^2) / 12 about its centre), its body frame with the bar along -y as in
    scenes/double_pendulum_2d.yaml, so the body angle is the bar's angle from the downward
    vertical. Joint k joins the lower end of link k-1 (the ground at the origin for k = 1) to the
    upper end of link k. The chain starts straight, at rest, ``tilt`` rad off the vertical.
    Gravity [0, -9.81]; ``method`` with rk4 and the projection on; ``time.end = steps * step``;
    output every ``every`` steps (default: the first and last states only).
    """
    if n < 1:
        raise ValueError(f"expected n >= 1 links, got {n}")
    inertia = mass * (length * length + width * width) / 12.0
    down = np.array([np.sin(tilt), -np.cos(tilt)])
    every = steps if every is None else every
    lines = [
        "mbsim: 1",
        f"name: {n}-link planar chain",
        f"description: benchmark, {n} uniform bars on revolute joints, started straight {tilt:g} rad off the vertical",
        "dimension: 2",
        "gravity: [0, -9.81]",
        f"time: {{end: {steps * step!r}, step: {step!r}}}",
        "solver:",
        f"  method: {method}",
        "  integrator: rk4",
        "  projection: {position: true, velocity: true, iterations: 2}",
        "output:",
        f"  every: {every}",
        "bodies:",
    ]
    for k in range(1, n + 1):
        x, y = ((k - 0.5) * length * down).tolist()
        lines.append(
            f"  - {{name: link{k}, mass: {mass!r}, inertia: {inertia!r}, position: [{x!r}, {y!r}], "
            f"orientation: {tilt!r}, shapes: [{{type: rectangle, size: [{width!r}, {length!r}]}}]}}"
        )
    lines.append("joints:")
    for k in range(1, n + 1):
        x, y = ((k - 1) * length * down).tolist()
        parent = "ground" if k == 1 else f"link{k - 1}"
        lines.append(f"  - {{name: hinge{k}, type: revolute, body1: {parent}, body2: link{k}, point: [{x!r}, {y!r}]}}")
    return "\n".join(lines) + "\n"


def _reference_run(runs: list[tuple[str, MbsimRun]], steps: int) -> tuple[str, Path]:
    """(method, result file) of the first mbsim method whose untimed check run completes."""
    errors = []
    for label, m in runs:
        try:
            return label, m.simulate(steps)
        except Exception as exc:  # a method that fails: the next one is the reference
            errors.append(f"{label}: {_one_line(f'{type(exc).__name__}: {exc}', 100)}")
    raise RuntimeError("no mbsim method completed the check run (" + "; ".join(errors) + ")")


def _checks_tree(system: System, body: str, t_check: float, runs: list[tuple[str, MbsimRun]], sims: list[tuple]):
    """The tree cases' check: ``body``'s centre of mass at ``t_check`` in mbsim and in each built peer.

    ``sims``: (peer column, label for the check, peer model or None, tolerance in m)."""

    def check() -> list[dict]:
        steps = max(1, round(t_check / system.step))
        label, path = _reference_run(runs, steps)
        t, ref = _h5_position(path, body)
        quantity = f"{body} centre of mass at t = {t:g} s (mbsim {label}), m"
        rows = []
        for peer, name, sim, tol in sims:
            if sim is None:
                continue
            try:
                if peer == "mujoco":
                    got = sim.com(sim.simulate(steps), body)
                elif peer == "pinocchio":
                    got = sim.com(sim.simulate(steps)[0], body)
                else:
                    got = sim.simulate(steps, body)[0]
            except Exception as exc:
                rows.append({"quantity": quantity, "peer": name, "error": _one_line(f"{type(exc).__name__}: {exc}")})
                continue
            rows.append(_check_row(quantity, name, ref, got, tol))
        return rows

    return check


def case_four_box(plan: dict, workdir: Path) -> Case:
    from mbsim.scene.spec import load_scene

    spec = load_scene(str(FOUR_BOX_SCENE))
    system = system_of(spec)
    mbsim = [
        MbsimRun(FOUR_BOX_SCENE, (), workdir, "four_box_lagrange"),
        MbsimRun(FOUR_BOX_SCENE, ("solver.method=variational",), workdir, "four_box_variational"),
        MbsimRun(FOUR_BOX_SCENE, ("solver.method=recursive",), workdir, "four_box_recursive"),
    ]
    labels = ("lagrange + rk4 (as shipped)", "variational", "recursive + rk4")
    mj, mj_note = _peer_or_note("mujoco", lambda: MujocoSim(mjcf_tree(system), system))
    pn, pn_note = _peer_or_note("pinocchio", lambda: PinocchioSim(system))
    ex, ex_note = _peer_or_note("exudyn", lambda: ExudynSim(system))
    contenders = [Contender("mbsim", label, m.run) for label, m in zip(labels, mbsim, strict=True)]
    contenders += [
        _contender("mujoco", "RK4, 4 bodies on ball joints", mj, mj_note),
        _contender("pinocchio", "Python RK4 loop around aba, 4 spherical joints", pn, pn_note),
        _contender("exudyn", "generalized-alpha, rigid bodies + spherical joints", ex, ex_note),
    ]
    t_check = min(CHECK_T, plan["four_box_steps"] * system.step)
    runs = list(zip(labels, mbsim, strict=True))
    sims = [("mujoco", "MuJoCo", mj, 1e-3), ("pinocchio", "Pinocchio", pn, 1e-3), ("exudyn", "Exudyn", ex, 1e-3)]
    check = _checks_tree(system, "box4", t_check, runs, sims)
    title = f"four-box chain ({plan['four_box_steps'] * system.step:g} s, h = {system.step:g})"
    case = Case("four_box", title, plan["four_box_steps"], plan["repeats"], contenders, check)
    if pn is not None:
        aba = pn.aba_us()
        case.notes.append(f"four-box: Pinocchio's bare `aba` on the chain: {aba:.1f} µs per call (4 per RK4 step)")
    return case


def case_slider(plan: dict, workdir: Path) -> Case:
    from mbsim.scene.spec import load_scene

    spec = load_scene(str(SLIDER_SCENE))
    system = system_of(spec)
    variants = (
        ("lagrange + rk4", ("solver.method=lagrange",)),
        ("null_space + rk4", ("solver.method=null_space",)),
        ("gauss (kkt) + rk4", ("solver.method=gauss", "solver.optimizer=kkt")),
    )
    mbsim = [MbsimRun(SLIDER_SCENE, ov, workdir, f"slider_{k}") for k, (_, ov) in enumerate(variants)]
    ex, ex_note = _peer_or_note("exudyn", lambda: ExudynSim(system))
    contenders = [Contender("mbsim", label, m.run) for (label, _), m in zip(variants, mbsim, strict=True)]
    contenders += [
        _absent("mujoco", "n/a: closed loop (Exudyn only, as the issue)"),
        _absent("pinocchio", "n/a: closed loop (Exudyn only, as the issue)"),
        _contender("exudyn", "generalized-alpha, 2D rigid bodies, revolute + prismatic joints", ex, ex_note),
    ]
    steps = plan["slider_steps"]
    title = f"slider-crank through the fold ({steps * system.step:g} s, h = {system.step:g})"
    case = Case("slider", title, steps, plan["repeats"], contenders)

    def check() -> list[dict]:
        import h5py

        reference = _slider_reference
        t_end = steps * system.step
        t_check = min(CHECK_T, t_end)
        check_steps = max(1, round(t_check / system.step))
        errors = []
        for (label, _), m in zip(variants, mbsim, strict=True):
            if m.last_file is None or not m.last_file.exists():
                continue
            with h5py.File(m.last_file, "r") as f:
                t, x = f["time"][...], f["bodies/slider/position"][:, 0]
            err = float(np.max(np.abs(x - reference(t))))
            errors.append(f"mbsim {label} {err:.2g} m (x({t[-1]:g} s) = {x[-1]:.4f})")
        label, path = _reference_run([(label, m) for (label, _), m in zip(variants, mbsim, strict=True)], check_steps)
        t_ref, ref = _h5_position(path, "slider")
        quantity = f"slider x at t = {t_ref:g} s (mbsim {label}), m"
        rows = []
        if ex is not None:
            try:
                pos, hist = ex.simulate(steps, "slider", history=True)  # the whole span, every step recorded
            except Exception as exc:
                rows.append(
                    {"quantity": quantity, "peer": "exudyn", "error": _one_line(f"{type(exc).__name__}: {exc}")}
                )
            else:
                at = int(np.argmin(np.abs(hist[:, 0] - t_ref)))
                rows.append(_check_row(quantity, "exudyn", ref[:1], hist[at, 1:2], tol=1e-2))
                err = np.abs(hist[:, 1] - reference(hist[:, 0]))
                off = np.nonzero(err > 1e-3)[0]
                first = f", first past 1 mm at t = {hist[off[0], 0]:.3g} s" if off.size else ""
                errors.append(f"Exudyn {float(np.max(err)):.2g} m (x({hist[-1, 0]:g} s) = {pos[0]:.4f}{first})")
                case.notes.append(_slider_equal_error(variants, workdir, steps * system.step, ex, steps, err))
        if errors:
            case.notes.append(
                f"slider: max |x - x_ref| against the one-coordinate reference over the {t_end:g} s "
                "(benchmarks/slider.py `_slider_reference`; mbsim: recorded rows of its last timed run, Exudyn: every "
                "step): " + ", ".join(errors)
            )
        return rows

    case.check = check
    return case


# the step sizes tried for the slider's equal-error comparison, largest first
SLIDER_STEPS = (0.05, 0.04, 0.025, 0.02, 0.01, 0.005, 0.002)


def _slider_equal_error(variants, workdir: Path, t_end: float, ex, ex_steps: int, ex_err: np.ndarray) -> str:
    """The issue's slider target: each mbsim method's wall time over the whole span at the largest
    step (of SLIDER_STEPS) whose max slider error is at most Exudyn's at the scene's step, against
    Exudyn's wall time (median of 3 runs each; what the note reports)."""
    import h5py

    reference = _slider_reference
    ex_wall = statistics.median(ex.run(ex_steps)[0] for _ in range(3))
    limit = float(np.max(ex_err))
    parts = []
    for label, overrides in variants:
        for h in SLIDER_STEPS:
            steps = round(t_end / h)
            run = MbsimRun(SLIDER_SCENE, (*overrides, f"time.step={h!r}"), workdir, f"slider_h{h:g}")
            walls = []
            try:
                for _ in range(3):
                    walls.append(run.run(steps)[0])
            except RuntimeError:
                continue  # failed at this step (e.g. left the branch at the fold)
            with h5py.File(run.last_file, "r") as f:
                t, x = f["time"][...], f["bodies/slider/position"][:, 0]
            err = float(np.max(np.abs(x - reference(t))))
            if err <= limit:
                wall = statistics.median(walls)
                parts.append(
                    f"{label} at h = {h:g} s: error {err:.2g} m, {wall * 1e3:.1f} ms = {wall / ex_wall:.2f}x Exudyn"
                )
                break
        else:
            parts.append(f"{label}: no step of {SLIDER_STEPS} reaches Exudyn's error")
    return (
        f"slider at equal or better error (the issue's target, <= 0.5x): Exudyn's max error {limit:.2g} m at its "
        f"step, {ex_wall * 1e3:.1f} ms over {t_end:g} s; mbsim, largest step with max error at most that "
        "(recorded rows, every row of the scene's output): " + "; ".join(parts)
    )


def case_planar_chain(n: int, plan: dict, workdir: Path) -> Case:
    from mbsim.scene.spec import load_scene

    steps = plan["chain10_steps"] if n <= 10 else plan["chain100_steps"]
    scene = workdir / f"planar_chain_{n}.yaml"
    scene.write_text(planar_chain_scene(n, steps=steps), encoding="utf-8")
    system = system_of(load_scene(str(scene)))
    main, other = ("recursive", "lagrange") if n <= 10 else ("lagrange", "recursive")
    mbsim = [
        MbsimRun(scene, (f"solver.method={main}",), workdir, f"chain{n}_{main}"),
        MbsimRun(scene, (f"solver.method={other}",), workdir, f"chain{n}_{other}"),
    ]
    mj, mj_note = _peer_or_note("mujoco", lambda: MujocoSim(mjcf_tree(system), system))
    pn, pn_note = _peer_or_note("pinocchio", lambda: PinocchioSim(system))
    ex, ex_note = _peer_or_note("exudyn", lambda: ExudynSim(system, sparse=n > 30))
    solver = "sparse LU (EigenSparse)" if n > 30 else "dense LU (default)"
    # extra: Exudyn's minimal-coordinate KinematicTree with explicit solvers (the run used explicit Euler)
    trees = []
    for name in KINEMATIC_TREE_SOLVERS[10 if n <= 10 else 100]:
        sim, _ = _peer_or_note("exudyn", lambda name=name: ExudynTreeSim(system, name))
        trees.append((name, sim))
    contenders = [
        Contender("mbsim", f"{main} + rk4", mbsim[0].run),
        Contender("mbsim", f"{other} + rk4 (extra)", mbsim[1].run),
        _contender("mujoco", "RK4, hinge joints", mj, mj_note),
        _contender("pinocchio", "Python RK4 loop around aba, revolute joints", pn, pn_note),
        _contender("exudyn", f"generalized-alpha, 2D rigid bodies + revolute joints, {solver}", ex, ex_note),
    ]
    contenders += [
        Contender("exudyn", f"KinematicTree (joint coordinates), {KINEMATIC_TREE_LABELS[name]}", sim.run, extra=True)
        for name, sim in trees
        if sim is not None
    ]
    t_check = min(CHECK_T, steps * system.step)
    runs = [(f"{main} + rk4", mbsim[0]), (f"{other} + rk4", mbsim[1])]
    sims = [("mujoco", "MuJoCo", mj, 1e-3), ("pinocchio", "Pinocchio", pn, 1e-3), ("exudyn", "Exudyn", ex, 1e-3)]
    for solver, sim in trees:
        # explicit Euler is first order: about a millimetre off after 1 s at h = 1e-3, so a looser tolerance
        sims.append(("exudyn", f"Exudyn KinematicTree {solver}", sim, 1e-3 if solver == "RK44" else 0.05))
    check = _checks_tree(system, f"link{n}", t_check, runs, sims)
    title = f"planar chain N = {n} ({steps * system.step:g} s, h = {system.step:g})"
    repeats = plan["repeats"] if n <= 10 else plan["chain100_repeats"]
    case = Case(f"chain{n}", title, steps, repeats, contenders, check)
    if pn is not None:
        case.notes.append(f"chain N = {n}: Pinocchio's bare `aba`: {pn.aba_us():.1f} µs per call (4 per RK4 step)")
    return case


def case_blocks(plan: dict, workdir: Path) -> Case:
    from mbsim.scene.spec import load_scene

    spec = load_scene(str(BLOCKS_SCENE))
    system = system_of(spec)
    contact = spec.contacts[0]
    k = float(contact.raw["stiffness"])
    # mbsim's sample points are the slave's (block1's) mesh vertices: a box mesh has 8, 4 on the face that hits
    points = 4
    steps = plan["blocks_steps"]
    mb = MbsimRun(BLOCKS_SCENE, (), workdir, "blocks")
    mj, mj_note = _peer_or_note("mujoco", lambda: MujocoSim(blocks_mjcf(system, k * points), system))
    contenders = [
        Contender("mbsim", f"{spec.solver.method} + {spec.solver.integrator} (as shipped)", mb.run),
        _contender("mujoco", "RK4, frictionless box-box soft contact, solref = (-k/m_eff, 0)", mj, mj_note),
        _absent("pinocchio", "n/a: no contact dynamics in Pinocchio's aba"),
        _absent("exudyn", "not set up: no SDF / mesh compliant contact mapped"),
    ]
    title = f"two-block elastic impact ({steps * system.step:g} s, h = {system.step:g})"
    case = Case("blocks", title, steps, plan["repeats"], contenders)

    def check() -> list[dict]:
        import h5py

        path = mb.simulate(steps)
        with h5py.File(path, "r") as f:
            t = float(f["time"][-1])
            v_ref = np.array([f["bodies/block1/velocity"][-1][0], f["bodies/block2/velocity"][-1][0]])
            x_ref = f["bodies/block1/position"][-1]
        rows = []
        if mj is not None:
            data = mj.simulate(steps)
            ids = [mj.model.body(n).id for n in ("block1", "block2")]
            v_mj = np.array([data.qvel[mj.model.jnt_dofadr[mj.model.body_jntadr[i]]] for i in ids])  # free joint: x
            rows.append(_check_row(f"block1, block2 x-velocity at t = {t:g} s, m/s (exact: 3, -2)", "mujoco", v_ref,
                                   v_mj, tol=0.02))  # fmt: skip
            rows.append(_check_row(f"block1 centre at t = {t:g} s, m", "mujoco", x_ref, mj.com(data, "block1"), 1e-3))
        return rows

    case.check = check
    case.notes.append(
        f"blocks: mbsim's Hertz contact with exponent 1 and no damping is a linear spring of k = {k:g} N/m at each "
        f"penetrating sample point; the face of block1 that hits has {points} mesh vertices, so MuJoCo gets "
        f"{points} x k as the reference stiffness of its box-box contact (solref = (-{points}k/m_eff, 0), solimp "
        f"{BLOCKS_SOLIMP}); MuJoCo's stiffness acts in constraint space, not per point, so the two agree on the "
        "rebound velocities and the contact time, not on the force distribution"
    )
    return case


# the pile's check: mean centre within this, m (half a sphere diameter: the two contact models differ, see notes)
PILE_TOL = 0.05
# the pile's sweeps a step: its mean centre at 0.5 s is 1.1 mm from a solve of 2,000 sweeps (tol 1e-12)
PILE_SWEEPS = 20


def case_pile(plan: dict, workdir: Path) -> Case:
    from mbsim.scene.spec import load_scene

    steps = plan["pile_steps"]
    scene = workdir / "pile_1000.yaml"
    scene.write_text(pile_scene(10, t_end=steps * 2e-3, iterations=PILE_SWEEPS), encoding="utf-8")
    spec = load_scene(str(scene))
    system = system_of(spec)
    friction = float(spec.contacts[0].raw.get("friction", 0.3))
    mb = MbsimRun(scene, (), workdir, "pile")
    mj, mj_note = _peer_or_note("mujoco", lambda: MujocoSim(pile_mjcf(spec, system, friction), system))
    contenders = [
        Contender("mbsim", f"timestepping, {PILE_SWEEPS} round-cone sweeps (lcp pgs)", mb.run),
        _contender("mujoco", "CG solver, default (semi-implicit Euler) integrator", mj, mj_note),
        _absent("pinocchio", "n/a: no contact dynamics in Pinocchio's aba"),
        _absent("exudyn", "not set up"),
    ]
    t = steps * system.step
    case = Case("pile", f"pile of 1,000 spheres ({steps} steps from rest, h = 0.002)", steps, plan["pile_repeats"],
                contenders)  # fmt: skip

    def check() -> list[dict]:
        import h5py

        if mb.last_file is None or not mb.last_file.exists():
            return []
        with h5py.File(mb.last_file, "r") as f:
            centres = np.array([f[f"bodies/{b.name}/position"][-1] for b in system.bodies])
        rows = []
        if mj is not None:
            data = mj.simulate(steps)
            mj_centres = data.xipos[1:].copy()
            quantity = f"mean sphere centre at t = {t:g} s (the last timed run), m"
            rows.append(_check_row(quantity, "mujoco", centres.mean(axis=0), mj_centres.mean(axis=0), tol=PILE_TOL))
            half = 0.5 * 10 * PILE_SPACING
            out = int(np.sum(np.any(np.abs(mj_centres[:, :2]) > half, axis=1) | (mj_centres[:, 2] < 0)))
            case.notes.append(f"pile: MuJoCo spheres outside the box at the end: {out}; contacts {data.ncon}")
        return rows

    case.check = check
    case.notes.append(
        "pile: mbsim's rigid contacts with restitution 0.2 have no exact MuJoCo counterpart (MuJoCo's default soft "
        "contact, solref 0.02 / 1, is critically damped and lets spheres sink in a little), so the check compares "
        f"the mean sphere centre only to {PILE_TOL:g} m; friction 0.3 (condim 3, MuJoCo's default pyramidal cone); "
        "timed: a fixed number of steps from rest (the pile forms during them), not steps of a formed pile"
    )
    return case


# the tower's checks: mbsim's top box moves less than this over the run, m (the bar); MuJoCo's
# soft contacts let the ten interfaces sink together by up to this, m (measured 6.1 mm)
TOWER_DRIFT = 1e-3
TOWER_SINK = 0.01


def case_tower(plan: dict, workdir: Path) -> Case:
    """scenes/box_stack.yaml (ten boxes) as shipped (timestepping, active_set) against MuJoCo's
    Newton solver with its elliptic cone; both must keep the top box within TOWER_DRIFT."""
    from mbsim.scene.spec import load_scene

    steps = plan["tower_steps"]
    scene = SCENES / "box_stack.yaml"
    spec = load_scene(str(scene), [f"time.end={steps * 0.005!r}"])
    system = system_of(spec)
    friction = float(spec.contacts[0].raw.get("friction", 0.5))
    mb = MbsimRun(scene, (f"time.end={steps * 0.005!r}",), workdir, "tower")
    mj, mj_note = _peer_or_note("mujoco", lambda: MujocoSim(tower_mjcf(spec, system, friction), system))
    contenders = [
        Contender("mbsim", "timestepping, active_set (as shipped)", mb.run),
        _contender("mujoco", "Newton solver, elliptic cone", mj, mj_note),
        _absent("pinocchio", "n/a: no contact dynamics in Pinocchio's aba"),
        _absent("exudyn", "not set up"),
    ]
    t = steps * system.step
    case = Case("tower", f"ten-box tower ({t:g} s, h = {system.step:g})", steps, plan["repeats"], contenders)
    top = system.bodies[-1]

    def check() -> list[dict]:
        import h5py

        if mb.last_file is None or not mb.last_file.exists():
            return []
        with h5py.File(mb.last_file, "r") as f:
            path = f[f"bodies/{top.name}/position"][()]
        rows = [_check_row(f"{top.name} drift over {t:g} s (mbsim), m", "start", [0.0], [np.abs(path - path[0]).max()],
                           tol=TOWER_DRIFT)]  # fmt: skip
        if mj is not None:
            data = mj.simulate(steps)
            end = data.xipos[mj.model.body(top.name).id]
            rows.append(_check_row(f"{top.name} centre at t = {t:g} s, m", "mujoco", path[-1], end, tol=TOWER_SINK))
        return rows

    case.check = check
    case.notes.append(
        "tower: MuJoCo's soft contact (solref 0.02 / 1) lets each interface sink under its load, so the stack "
        f"settles lower than mbsim's rigid one (compared to {TOWER_SINK:g} m); mbsim's top box is checked against "
        f"its start to {TOWER_DRIFT:g} m"
    )
    return case


PANDA_URDF = SCENES / "robots" / "panda_description" / "urdf" / "panda.urdf"
# case arm7_floor: a box around the hand and its welded fingers (m, in panda_hand's frame: x, y, z
# extents, its centre HAND_BOX_Z along the hand's axis), the floor's top face (z, m) and slab
# thickness, the compliant Hertz contact (k g^n + chi g^m dg/dt: a hard contact), the joints'
# viscous damping (N m s/rad: the arm comes to rest within the 2 s), the explicit baseline's contact
# step (5e-4 diverges at 0.34 s; 2e-4 runs, 1e-4 is the issue's) and the time of the contact-free check
HAND_BOX, HAND_BOX_Z = (0.08, 0.2, 0.1), 0.055
FLOOR_TOP, FLOOR_SLAB = 0.1, 0.1
FLOOR_K, FLOOR_N, FLOOR_CHI, FLOOR_M, FLOOR_MU = 1.0e9, 1.5, 2.0e9, 1.5, 0.5
ARM_DAMPING = 1.0
ARMFLOOR_CONTACT_STEP = 1e-4
ARMFLOOR_FREE_T = 0.1
# the rest depth's tolerance (m) against the explicit baseline: Hertz's depth under the hand is 8.5 um
ARMFLOOR_DEPTH_TOL = 2e-6


def _panda_copy(urdf: Path, damping: float | None = None, hand_box: bool = False) -> None:
    """Write the benchmarks' copy of the Panda URDF to ``urdf``: the fingers welded to the hand
    (prismatic joints fixed, mimic dropped), the revolute joints' limits at +-1000 rad (none), the joint
    dampers removed, or all set to ``damping`` (N m s/rad), and with ``hand_box`` a <collision>
    box of HAND_BOX on panda_hand around the hand and the welded fingers (the file has none)."""
    from lxml import etree

    tree = etree.parse(str(PANDA_URDF))
    for joint in tree.getroot().iter("joint"):
        for child in list(joint):
            if child.tag == "dynamics":
                joint.remove(child)
        if joint.get("type") == "revolute":
            # never limited (the peers' models have none): limits at +-1000 rad; revolute all the same,
            # since a URDF's continuous joint is a (cos, sin) pair of coordinates to Pinocchio's parser
            for limit in joint.iter("limit"):
                limit.set("lower", "-1000")
                limit.set("upper", "1000")
            if damping is not None:
                etree.SubElement(joint, "dynamics", damping=repr(damping))
        if joint.get("name", "").startswith("panda_finger_joint"):
            joint.set("type", "fixed")
            for child in list(joint):
                if child.tag in ("mimic", "axis", "limit", "dynamics"):
                    joint.remove(child)
    if hand_box:
        hand = next(link for link in tree.getroot().iter("link") if link.get("name") == "panda_hand")
        collision = etree.SubElement(hand, "collision")
        etree.SubElement(collision, "origin", xyz=f"0 0 {HAND_BOX_Z!r}", rpy="0 0 0")
        etree.SubElement(etree.SubElement(collision, "geometry"), "box", size=" ".join(map(repr, HAND_BOX)))
    tree.write(str(urdf), xml_declaration=True, encoding="utf-8")


def arm7_scene(workdir: Path, steps: int) -> Path:
    """The Panda arm (7 revolute axes) imported from its URDF with its fingers welded to the hand
    (their prismatic joints made fixed and the mimic dropped, in a copy: recursive takes trees
    without couplings) and without its joint dampers (the peers' models, built from mbsim's
    bodies and joints, have none; the arm is chaotic enough that 0.003 N m s/rad moves its wrist
    by 0.2 m in 1 s) and without its joint limits (moved to +-1000 rad: mbsim
    enforces a URDF's limits since issue 30, the peers' models have none, and the falling arm
    reaches panda_joint2's upper limit 1.7628 rad at t = 0.397 s, after which the motions part by
    0.28 m at 1 s), released from a bent pose under gravity, recursive + rk4 at 1 ms."""
    _panda_copy(workdir / "panda_arm.urdf")
    scene = workdir / "arm7.yaml"
    scene.write_text(
        "mbsim: 1\nname: Panda arm (7 axes, URDF)\ngravity: [0, 0, -9.81]\n"
        f"time: {{end: {steps * 1e-3!r}, step: 0.001}}\nsolver: {{method: recursive, integrator: rk4}}\n"
        "output: {every: 10}\n"
        "models:\n  - file: panda_arm.urdf\n"
        "    joint_positions: {panda_joint2: 0.3, panda_joint4: -1.5, panda_joint6: 1.2}\n",
        encoding="utf-8",
    )
    return scene


def case_arm7(plan: dict, workdir: Path) -> Case:
    """Issue 16's speed case: a 7-axis arm from a URDF, recursive + rk4, per step against
    Pinocchio's RK4 loop and MuJoCo's RK4 on the same compiled model."""
    from mbsim.scene.spec import load_scene

    steps = plan["chain10_steps"]
    scene = arm7_scene(workdir, steps)
    system = system_of(load_scene(str(scene)))
    mbsim = [
        MbsimRun(scene, (), workdir, "arm7_recursive"),
        MbsimRun(scene, ("output.every=1",), workdir, "arm7_recursive_every"),
        MbsimRun(scene, ("solver.method=lagrange",), workdir, "arm7_lagrange"),
    ]
    labels = (
        "recursive + rk4 (imported URDF), recording every 10th step",
        "recursive + rk4, recording every step (extra)",
        "lagrange + rk4, every 10th (extra)",
    )
    mj, mj_note = _peer_or_note("mujoco", lambda: MujocoSim(mjcf_tree(system), system))
    pn, pn_note = _peer_or_note("pinocchio", lambda: PinocchioSim(system))
    contenders = [Contender("mbsim", label, m.run) for label, m in zip(labels, mbsim, strict=True)]
    contenders += [
        _contender("mujoco", "RK4, 7 hinge joints", mj, mj_note),
        _contender("pinocchio", "Python RK4 loop around aba, 7 revolute joints", pn, pn_note),
        _absent("exudyn", "not run for this case (issue 16 compares with MuJoCo and Pinocchio)"),
    ]
    t_check = min(CHECK_T, steps * system.step)
    runs = list(zip(labels, mbsim, strict=True))[::2]
    sims = [("mujoco", "MuJoCo", mj, 1e-3), ("pinocchio", "Pinocchio", pn, 1e-3)]
    check = _checks_tree(system, "panda_link7", t_check, runs, sims)
    title = f"Panda arm, 7 axes from its URDF ({steps * system.step:g} s, h = {system.step:g})"
    case = Case("arm7", title, steps, plan["repeats"], contenders, check)
    case.notes.append(
        "arm7: mbsim records a row of the result file (joint coordinates, body states, joint reactions by "
        "inverse dynamics, energies) every 10th step, as a 100 Hz log; the peers record nothing. The extra row "
        "records every step: the row costs about as much as the RK4 step itself"
    )
    case.notes.append(
        "arm7: the benchmark's copy of the URDF moves the revolute joints' limits to +-1000 rad (none): mbsim enforces "
        "a URDF's joint limits, MuJoCo's and Pinocchio's models built from mbsim's bodies and joints have none, "
        "and the falling arm reaches panda_joint2's upper limit at t = 0.397 s"
    )
    if pn is not None:
        case.notes.append(f"arm7: Pinocchio's bare `aba`: {pn.aba_us():.1f} µs per call (4 per RK4 step)")
    return case


def arm7_floor_scene(workdir: Path, steps: int) -> Path:
    """The Panda of case arm7 (``_panda_copy``) with joint dampers of ARM_DAMPING and the box
    HAND_BOX on its hand, imported with ``collisions: true``, released from arm7's bent pose: the
    hand falls onto the floor (a ground box, its top at FLOOR_TOP), lands on a corner at 0.22 s,
    tips onto an edge and comes to rest on its face; compliant Hertz contact between the floor and
    the hand only; recursive + rk4 at 1 ms with ``solver.contact_integration: implicit``."""
    _panda_copy(workdir / "panda_floor.urdf", damping=ARM_DAMPING, hand_box=True)
    scene = workdir / "arm7_floor.yaml"
    centre = FLOOR_TOP - 0.5 * FLOOR_SLAB
    scene.write_text(
        "mbsim: 1\nname: Panda hand falling onto a floor (URDF)\ngravity: [0, 0, -9.81]\n"
        f"time: {{end: {steps * 1e-3!r}, step: 0.001}}\n"
        "solver: {method: recursive, integrator: rk4, contact_integration: implicit}\n"
        "output: {every: 10}\n"
        f"ground:\n  shapes: [{{type: box, size: [2, 2, {FLOOR_SLAB!r}], pose: {{position: [0.5, 0, {centre!r}]}}}}]\n"
        "models:\n  - file: panda_floor.urdf\n    collisions: true\n"
        "    joint_positions: {panda_joint2: 0.3, panda_joint4: -1.5, panda_joint6: 1.2}\n"
        "contacts:\n"
        f"  - {{name: floor, type: compliant, body1: ground, body2: panda_link7, stiffness: {FLOOR_K!r}, "
        f"exponent: {FLOOR_N!r},\n     damping: {FLOOR_CHI!r}, damping_exponent: {FLOOR_M!r}, "
        f"friction: {FLOOR_MU!r}}}\n",
        encoding="utf-8",
    )
    return scene


def _box_heights(centre: np.ndarray, rot: np.ndarray) -> tuple[float, float]:
    """(centre, lowest corner) heights above the floor's top of a HAND_BOX at ``centre`` with axes ``rot``."""
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)
    corners = centre + (signs * (0.5 * np.asarray(HAND_BOX))) @ rot.T
    return float(centre[2] - FLOOR_TOP), float(corners[:, 2].min() - FLOOR_TOP)


def _hand_heights(path: Path, pose: dict) -> tuple[float, tuple[float, float]]:
    """(last recorded time, ``_box_heights`` of the hand's box) of an mbsim result file; ``pose``:
    the box's compiled pose in panda_link7's body frame (position, rotation)."""
    import h5py
    from scipy.spatial.transform import Rotation

    with h5py.File(path, "r") as f:
        t = float(f["time"][-1])
        p = np.asarray(f["bodies/panda_link7/position"][-1], dtype=float)
        quat = np.asarray(f["bodies/panda_link7/orientation"][-1], dtype=float)
    rot = Rotation.from_quat(quat, scalar_first=True).as_matrix()
    return t, _box_heights(p + rot @ np.asarray(pose["position"]), rot @ np.asarray(pose["rotation"]))


def case_arm7_floor(plan: dict, workdir: Path) -> Case:
    """Issue 31's Panda target: the arm's hand falling onto a hard compliant floor (k = FLOOR_K),
    recursive + rk4 at the mechanism's step with the implicit contact step, against the explicit
    run at ARMFLOOR_CONTACT_STEP (the issue's baseline), lagrange + implicit and MuJoCo's RK4 at the
    same step with its default soft contact; per step and per simulated second. Checks: panda_link7
    before contact (ARMFLOOR_FREE_T) against MuJoCo; the hand box's height above the floor at the
    end (at rest) of each run against the explicit baseline's and MuJoCo's."""
    from mbsim.scene.spec import load_scene

    steps, h = plan["armfloor_steps"], 1e-3
    scene = arm7_floor_scene(workdir, steps)
    system = system_of(load_scene(str(scene)))
    link7 = system.bodies[system.index("panda_link7")]
    pose = link7.shapes[0]["pose"]
    explicit = ("solver.contact_integration=explicit", f"time.contact_step={ARMFLOOR_CONTACT_STEP!r}")
    variants = (
        ("recursive + rk4, implicit contact step (h = 1 ms)", ()),
        (f"recursive + rk4, explicit, contact_step {ARMFLOOR_CONTACT_STEP:g} (the issue's baseline)", explicit),
        ("lagrange + rk4, implicit contact step (extra)", ("solver.method=lagrange",)),
    )
    mbsim = [MbsimRun(scene, ov, workdir, f"armfloor_{k}") for k, (_, ov) in enumerate(variants)]
    centre = FLOOR_TOP - 0.5 * FLOOR_SLAB
    floor = f'<geom type="box" size="1 1 {0.5 * FLOOR_SLAB!r}" pos="0.5 0 {centre!r}"/>'
    xml = lambda: arm_floor_mjcf(system, floor, FLOOR_MU, ARM_DAMPING)  # noqa: E731
    mj, mj_note = _peer_or_note("mujoco", lambda: MujocoSim(xml(), system))
    contenders = [Contender("mbsim", label, m.run) for (label, _), m in zip(variants, mbsim, strict=True)]
    contenders += [
        _contender("mujoco", "RK4, 7 damped hinges, the hand's box geom on a box floor, default soft contact", mj,
                   mj_note),
        _absent("pinocchio", "n/a: no contact dynamics in Pinocchio's aba"),
        _absent("exudyn", "not set up"),
    ]  # fmt: skip
    span = steps * h
    title = f"Panda hand falling onto a floor, k = {FLOOR_K:g} ({span:g} s, h = {h:g})"
    case = Case("arm7_floor", title, steps, plan.get("armfloor_repeats", plan["repeats"]), contenders)
    labels = [label for label, _ in variants]

    def check() -> list[dict]:
        free = round(ARMFLOOR_FREE_T / h)
        label, path = _reference_run(list(zip(labels, mbsim, strict=True)), free)
        t, ref = _h5_position(path, "panda_link7")
        rows = []
        if mj is not None:
            quantity = f"panda_link7 centre of mass at t = {t:g} s, before contact (mbsim {label}), m"
            rows.append(_check_row(quantity, "mujoco", ref, mj.com(mj.simulate(free), "panda_link7"), tol=1e-3))
        # the hand at rest at the end: the explicit baseline is the reference of the implicit steps
        heights = {}
        for (name, _), m in zip(variants, mbsim, strict=True):
            try:
                heights[name] = _hand_heights(m.simulate(steps), pose)[1]
            except Exception as exc:
                heights[name] = _one_line(f"{type(exc).__name__}: {exc}", 120)
        base = heights[labels[1]]
        at = f"at t = {span:g} s (reference: mbsim {labels[1]}), m"
        # the face the hand comes to rest on is chaotic (explicit contact_step 2e-4 and 5e-5 and MuJoCo
        # rest it on another face than 1e-4): the lowest corner's height is the rest depth, compared
        quantity = f"hand box lowest corner above the floor {at}"
        for name in (labels[0], labels[2]):
            got = heights[name]
            if isinstance(base, str) or isinstance(got, str):
                error = got if isinstance(got, str) else base
                rows.append({"quantity": quantity, "peer": f"mbsim {name}", "error": error})
            else:
                rows.append(_check_row(quantity, f"mbsim {name}", base[1:], got[1:], tol=ARMFLOOR_DEPTH_TOL))
        if mj is not None and not isinstance(base, str):
            data = mj.simulate(steps)
            box = int(np.nonzero(mj.model.geom_bodyid == mj.model.body("panda_link7").id)[0][0])
            heights["MuJoCo"] = _box_heights(data.geom_xpos[box], data.geom_xmat[box].reshape(3, 3))
            rows.append(_check_row(quantity, "mujoco", base[1:], heights["MuJoCo"][1:], tol=5e-3))
        halves = " / ".join(f"{0.5 * x:g}" for x in HAND_BOX)
        centres = ", ".join(f"{name} {v[0]:.4f} m" for name, v in heights.items() if not isinstance(v, str))
        case.notes.append(
            f"arm7_floor: the hand box's centre above the floor at t = {span:g} s (its half extents {halves} m tell "
            f"the face it rests on): {centres}"
        )
        # per simulated second: each contender's median over the steps it took
        timed = {c.label: c for c in case.contenders if c.median is not None}
        mj_ms = next((1e-3 * c.median * c.steps / span for c in case.contenders
                      if c.column == "mujoco" and c.median is not None), None)  # fmt: skip
        parts = []
        for c in timed.values():
            ms = 1e-3 * c.median * c.steps / span
            ratio = f" = {ms / mj_ms:.0f}x MuJoCo" if mj_ms and c.column != "mujoco" else ""
            per = f"{c.median:.1f} µs/step x {c.steps} steps, {ms:.1f} ms{ratio}"
            parts.append(f"{PEER_LABELS[c.column]} {c.label}: {per}")
        if parts:
            case.notes.append(f"arm7_floor: stepping time per simulated second (over {span:g} s): " + "; ".join(parts))
        return rows

    case.check = check
    case.notes.append(
        f"arm7_floor: the arm7 copy of the Panda URDF with joint dampers of {ARM_DAMPING:g} N m s/rad (in MuJoCo's "
        f"hinges too) and a {' x '.join(f'{x:g}' for x in HAND_BOX)} m collision box on panda_hand; the floor is a "
        f"ground box with its top at z = {FLOOR_TOP:g} m; Hertz k = {FLOOR_K:g} N/m^{FLOOR_N:g}, damping "
        f"{FLOOR_CHI:g} g^{FLOOR_M:g} dg/dt, friction {FLOOR_MU:g}, between the floor and the hand only (the other "
        "links pass through the floor, in both codes); MuJoCo: its default soft contact (solref 0.02 / 1) on the "
        "same box, with its own rest depth (measured: 52 um, mbsim's Hertz 9 um). "
        "The hand lands on a corner at 0.22 s, tips onto an edge and "
        "rests on a face from about 1.4 s (explicit reference)"
    )
    return case


# the rolling cases: a ball (density 1000) of ROLL_RADIUS sliding at ROLL_V0 onto rolling, friction ROLL_MU
ROLL_V0, ROLL_MU, ROLL_RADIUS, ROLL_STEP = 2.0, 0.3, 0.05, 1e-3
ROLL_G = 9.81
# the ground mesh: a 4 x 1 x ROLL_SLAB m slab, its box's 12 triangles split in 4 this many times (768)
ROLL_SLAB, ROLL_SUBDIVISIONS = 0.1, 3


def rolling_scene(ground_shape: str, steps: int) -> str:
    """YAML text of the rolling cases: the ball at ROLL_V0 along x, 1e-5 m into the ground shape
    ``ground_shape`` (a flow mapping, its top face at z = 0), compliant Hertz contact (k 1e6, n 1.5,
    hysteresis damping 1e4, friction ROLL_MU), lagrange + rk4 at ROLL_STEP, a row every 10th step."""
    return (
        "mbsim: 1\n"
        "name: sphere sliding then rolling on a compliant floor\n"
        f"gravity: [0, 0, {-ROLL_G!r}]\n"
        f"time: {{end: {steps * ROLL_STEP!r}, step: {ROLL_STEP!r}}}\n"
        "solver: {method: lagrange, integrator: rk4}\n"
        "output: {every: 10}\n"
        f"ground:\n  shapes: [{ground_shape}]\n"
        "bodies:\n"
        f"  - {{name: ball, density: 1000, position: [0, 0, {ROLL_RADIUS - 1e-5!r}], velocity: [{ROLL_V0!r}, 0, 0],\n"
        f"     shapes: [{{type: sphere, radius: {ROLL_RADIUS!r}}}]}}\n"
        "contacts:\n"
        "  - {name: floor, type: compliant, body1: ground, body2: ball, stiffness: 1.0e6, exponent: 1.5,\n"
        f"     damping: 1.0e4, damping_exponent: 1.5, friction: {ROLL_MU!r}}}\n"
    )


def floor_mesh(workdir: Path) -> Path:
    """The ground mesh of case sphere_mesh written as STL: a 4 x 1 x ROLL_SLAB m slab centred at the
    origin, its box's triangles split ROLL_SUBDIVISIONS times (flat and convex: MuJoCo's convex
    hull of it is the mesh itself)."""
    import trimesh

    mesh = trimesh.creation.box(extents=(4.0, 1.0, ROLL_SLAB))
    for _ in range(ROLL_SUBDIVISIONS):
        mesh = mesh.subdivide()
    path = workdir / "rolling_floor.stl"
    mesh.export(path)
    return path


def _rolling_closed_form(t: float) -> tuple[float, float]:
    """(x, x-velocity) of a solid ball started sliding at ROLL_V0 without spin under Coulomb
    friction ROLL_MU: it slides until t_s = 2 v0 / (7 mu g), then rolls at 5/7 v0."""
    t_s = 2.0 * ROLL_V0 / (7.0 * ROLL_MU * ROLL_G)
    if t <= t_s:
        return ROLL_V0 * t - 0.5 * ROLL_MU * ROLL_G * t * t, ROLL_V0 - ROLL_MU * ROLL_G * t
    x_s = ROLL_V0 * t_s - 0.5 * ROLL_MU * ROLL_G * t_s * t_s
    return x_s + 5.0 / 7.0 * ROLL_V0 * (t - t_s), 5.0 / 7.0 * ROLL_V0


def case_rolling(key: str, plan: dict, workdir: Path) -> Case:
    """Issue 31's rolling cases: the ball on the compliant floor box (``sphere_floor``; MuJoCo: a
    sphere on a box geom) or on a flat ground mesh (``sphere_mesh``; MuJoCo: a mesh geom of the
    same STL), lagrange + rk4 against MuJoCo's RK4 at the same step; the check: the ball's x and
    x-velocity at CHECK_T against the closed form (5/7 v0 after the slip) and MuJoCo's."""
    from mbsim.scene.spec import load_scene

    steps = plan["rolling_steps"]
    if key == "sphere_mesh":
        path = floor_mesh(workdir)
        shape = f"{{type: mesh, file: {path.name}, pose: {{position: [1.5, 0, {-0.5 * ROLL_SLAB!r}]}}}}"
        floor = f'<geom type="mesh" mesh="floor" pos="1.5 0 {-0.5 * ROLL_SLAB!r}"/>'
        asset = f'<mesh name="floor" file="{path}"/>'
        what = f"a flat ground mesh ({12 * 4**ROLL_SUBDIVISIONS} triangles, STL)"
    else:
        shape = "{type: box, size: [4, 1, 0.04], pose: {position: [1.5, 0, -0.02]}}"
        floor = '<geom type="box" size="2 0.5 0.02" pos="1.5 0 -0.02"/>'
        asset = ""
        what = "a compliant floor box"
    scene = workdir / f"{key}.yaml"
    scene.write_text(rolling_scene(shape, steps), encoding="utf-8")
    system = system_of(load_scene(str(scene)))
    mb = MbsimRun(scene, (), workdir, key)
    mj, mj_note = _peer_or_note("mujoco", lambda: MujocoSim(rolling_mjcf(system, floor, ROLL_MU, asset), system))
    label = "mesh geom (its convex hull: the slab)" if key == "sphere_mesh" else "box geom"
    contenders = [
        Contender("mbsim", "lagrange + rk4, compliant SDF contact (as the scene)", mb.run),
        _contender("mujoco", f"RK4, sphere on a {label}, default soft contact", mj, mj_note),
        _absent("pinocchio", "n/a: no contact dynamics in Pinocchio's aba"),
        _absent("exudyn", "not set up"),
    ]
    title = f"sphere rolling on {what} ({steps * ROLL_STEP:g} s, h = {ROLL_STEP:g})"
    case = Case(key, title, steps, plan["repeats"], contenders)
    check_steps = round(CHECK_T / ROLL_STEP)

    def check() -> list[dict]:
        import h5py

        path = mb.simulate(check_steps)
        with h5py.File(path, "r") as f:
            t = float(f["time"][-1])
            ref = np.array([f["bodies/ball/position"][-1][0], f["bodies/ball/velocity"][-1][0]])
        quantity = f"ball x (m) and x-velocity (m/s) at t = {t:g} s"
        rows = [_check_row(f"{quantity} (closed form: 5/7 v0 after the slip)", "closed form", ref,
                           np.array(_rolling_closed_form(t)), tol=0.01)]  # fmt: skip
        if mj is not None:
            data = mj.simulate(check_steps)
            got = np.array([mj.com(data, "ball")[0], data.qvel[0]])
            rows.append(_check_row(quantity, "mujoco", ref, got, tol=0.02))
        # per simulated second (both step at ROLL_STEP): the timed medians of this run
        per_s = [f"{PEER_LABELS[c.column]} {1e-3 * c.median / ROLL_STEP:.1f} ms" for c in case.contenders
                 if c.median is not None]  # fmt: skip
        if per_s:
            per = f"{key}: stepping time per simulated second (h = {ROLL_STEP:g} for both): "
            case.notes.append(per + ", ".join(per_s))
        return rows

    case.check = check
    case.notes.append(
        f"{key}: the ball (r = {ROLL_RADIUS:g} m, 1000 kg/m^3) starts at {ROLL_V0:g} m/s without spin, 1e-5 m into "
        f"the ground, friction {ROLL_MU:g}; mbsim's Hertz contact (k 1e6 per sample point, n 1.5, hysteresis damping "
        "1e4) has no MuJoCo counterpart (MuJoCo's default soft contact, solref 0.02 / 1), so the check is the "
        "motion a solid ball must have: it slides until 2 v0 / (7 mu g) = 0.194 s, then rolls at 5/7 v0"
    )
    if key == "sphere_mesh":
        case.notes.append(
            "sphere_mesh: MuJoCo collides with a mesh's convex hull, so the ground mesh is a flat slab (4 x 1 x "
            f"{ROLL_SLAB:g} m, {12 * 4**ROLL_SUBDIVISIONS} triangles, the box's faces subdivided): both codes see the "
            "same surface; mbsim takes the mesh's SDF as for any mesh"
        )
    return case


CASES = (
    "four_box", "slider", "chain10", "chain100", "blocks", "pile", "tower", "arm7", "arm7_floor", "sphere_floor",
    "sphere_mesh",
)  # fmt: skip


def _build(key: str, plan: dict, workdir: Path) -> Case:
    if key == "four_box":
        return case_four_box(plan, workdir)
    if key == "slider":
        return case_slider(plan, workdir)
    if key == "chain10":
        return case_planar_chain(10, plan, workdir)
    if key == "chain100":
        return case_planar_chain(100, plan, workdir)
    if key == "blocks":
        return case_blocks(plan, workdir)
    if key == "pile":
        return case_pile(plan, workdir)
    if key == "tower":
        return case_tower(plan, workdir)
    if key == "arm7":
        return case_arm7(plan, workdir)
    if key == "arm7_floor":
        return case_arm7_floor(plan, workdir)
    if key in ("sphere_floor", "sphere_mesh"):
        return case_rolling(key, plan, workdir)
    raise ValueError(f"unknown case {key!r}; expected one of {CASES}")
