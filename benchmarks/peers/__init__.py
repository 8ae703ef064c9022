"""mbsim against peer multibody codes (MuJoCo, Pinocchio, Exudyn) in the same session.

    python benchmarks/peers               # full: about 2-4 minutes on 2 cores; prints a markdown section
    python benchmarks/peers --quick       # smoke run (about 1 minute): fewer steps and repeats

Install the peers with ``pip install -e '.[bench]'``; a peer that does not import is reported as
"not installed" and skipped. ``run_peers(quick)`` returns one row per (case, mbsim method):
``{case, method, mbsim_us, mujoco_us, pinocchio_us, exudyn_us, best_peer, ratio}`` (µs per step of
the stepping loop, median of the repeats; ``ratio`` = mbsim / best peer; a peer that does not take
part is None, its reason in ``notes``), each row carrying the case's physics cross-check in ``checks``.
``markdown(rows)`` renders them.

Every peer model is built from mbsim's own compiled model of the case (``compile_model`` of the
scene: masses, inertias about the centre of mass in body axes, start poses, joint points and
axes, gravity, step), so that the codes integrate the same physics; a cross-check run of each
peer (untimed) compares a body's position with mbsim's at a given time, so that a mismatched
model shows. The timed runs go round robin (mbsim's methods, then each peer, repeated), so that a
change of the machine's load hits all of them alike; one short untimed warm-up run of each goes
first (caches). What is timed:

- mbsim: ``mbsim.simulate.run`` on the scene, ``RunSummary.wall_time_s / steps`` (the stepping
  loop, with its checks and the result file's recording at the scene's ``output.every``);
- MuJoCo: ``mujoco.mj_step(model, data, nstep=steps)`` from a fresh ``MjData``;
- Pinocchio: a Python RK4 loop around ``pinocchio.aba`` (4 evaluations per step), configurations
  advanced with ``pinocchio.integrate`` (Runge-Kutta-Munthe-Kaas: the stage increments of a
  spherical joint go through the inverse right Jacobian of SO(3), so the scheme is 4th order);
- Exudyn: ``mbs.SolveDynamic`` (its default implicit generalized-alpha, spectral radius 0.9,
  index 3), no solution file, wall time divided by the steps it took.

Nothing here asserts on a time. Result files go to a temporary directory. Importable without
side effects (tests/test_benchmarks_peers.py).

One module per peer (mujoco.py, pinocchio.py, exudyn.py; mbsim_run.py for mbsim itself), what they
share (shared.py: the scenes, the plans, ``system_of``, a case and its contenders), the cases
(cases.py), running them (runner.py) and the markdown (report.py). This package re-exports their
names, so ``benchmarks.peers.<name>`` is what ``benchmarks/peers.py`` held.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:  # benchmarks/ is a folder of the checkout, not an installed package
    sys.path.insert(0, str(_ROOT))

from benchmarks.peers.cases import (  # noqa: E402
    CASES,
    CHAIN_LINK_LENGTH,
    CHAIN_LINK_MASS,
    CHAIN_LINK_WIDTH,
    CHAIN_STEP,
    CHAIN_TILT,
    PANDA_URDF,
    PILE_TOL,
    ROLL_V0,
    SLIDER_STEPS,
    arm7_floor_scene,
    arm7_scene,
    case_arm7,
    case_arm7_floor,
    case_blocks,
    case_four_box,
    case_pile,
    case_planar_chain,
    case_rolling,
    case_slider,
    planar_chain_scene,
    rolling_scene,
)
from benchmarks.peers.exudyn import (  # noqa: E402
    KINEMATIC_TREE_LABELS,
    KINEMATIC_TREE_SOLVERS,
    ExudynSim,
    ExudynTreeSim,
)
from benchmarks.peers.mbsim_run import MbsimRun, _h5_position  # noqa: E402
from benchmarks.peers.mujoco import (  # noqa: E402
    BLOCKS_SOLIMP,
    MujocoSim,
    arm_floor_mjcf,
    blocks_mjcf,
    mjcf_tree,
    pile_mjcf,
)
from benchmarks.peers.pinocchio import PinocchioSim  # noqa: E402
from benchmarks.peers.report import main, markdown, section, versions  # noqa: E402
from benchmarks.peers.runner import check_case, rows_of, run_peers, time_case  # noqa: E402
from benchmarks.peers.shared import (  # noqa: E402
    BLOCKS_SCENE,
    CHECK_T,
    FOUR_BOX_SCENE,
    FULL,
    PEER_DISTRIBUTIONS,
    PEER_LABELS,
    PEER_MODULES,
    PEERS,
    QUICK,
    ROOT,
    SCENES,
    SLIDER_SCENE,
    WARMUP_STEPS,
    Body,
    Case,
    Contender,
    Joint,
    System,
    peer_module,
    peer_version,
    system_of,
)

__all__ = [
    "BLOCKS_SCENE", "BLOCKS_SOLIMP", "CASES", "CHAIN_LINK_LENGTH", "CHAIN_LINK_MASS", "CHAIN_LINK_WIDTH",
    "CHAIN_STEP", "CHAIN_TILT", "CHECK_T", "FOUR_BOX_SCENE", "FULL", "KINEMATIC_TREE_LABELS",
    "KINEMATIC_TREE_SOLVERS", "PANDA_URDF", "PEERS", "PEER_DISTRIBUTIONS", "PEER_LABELS", "PEER_MODULES",
    "PILE_TOL", "QUICK", "ROLL_V0", "ROOT", "SCENES", "SLIDER_SCENE", "SLIDER_STEPS", "WARMUP_STEPS", "Body", "Case",
    "Contender", "ExudynSim", "ExudynTreeSim", "Joint", "MbsimRun", "MujocoSim", "PinocchioSim", "System",
    "_h5_position", "arm7_floor_scene", "arm7_scene", "arm_floor_mjcf", "blocks_mjcf", "case_arm7",
    "case_arm7_floor", "case_blocks", "case_four_box", "case_pile",
    "case_planar_chain", "case_rolling", "case_slider", "check_case", "main", "markdown", "mjcf_tree", "peer_module",
    "peer_version", "pile_mjcf", "planar_chain_scene", "rolling_scene", "rows_of", "run_peers", "section", "system_of",
    "time_case", "versions",
]  # fmt: skip
