"""The mbsim benchmark suite: one command times everything and rewrites BENCHMARKS.md.

    python benchmarks/run.py            # full suite (about 15 minutes on 2 cores); rewrites BENCHMARKS.md
    python benchmarks/run.py --quick    # smoke run: fewer repeats and steps; writes nothing unless --output

This file is the driver: the plan of each run (FULL, QUICK), the order of the sections and the
report. Each section is a module of this folder, its docstring saying what it measures:

1. The four-box chain, lagrange + rk4 as shipped (four_box.py).
2. The N-link 3D revolute chain, N = 10, 100, 1000: cost per step and per link (chain.py).
3. The slider-crank through its singular positions, six methods and the paper's cases (slider.py).
4. The four-box chain with the variational integrator against lagrange + rk4 (variational.py).
5. Contact: a pile of 1,000 spheres under timestepping with PGS (contact_pile.py), and Lemke
   against PGS on the four-bar against a wall and the box stack (lcp.py).
6. Mesh contact through signed distance fields (mesh_contact.py).
7. Method ``recursive`` against ``lagrange`` on the N-link chain (recursive.py).
8. ``mbsim sweep`` on Dask: 16 four-box cases against one after another (sweep.py).
9. The peers (the peers/ package, the ``bench`` extra): MuJoCo, Pinocchio and Exudyn on the cases
   of issue 13, interleaved with mbsim in one run: µs per step and the ratio to the best peer.
10. Impacts: ``event_driven`` against ``timestepping`` (events.py).
11. ``mbsim export`` to .glb and .html (export.py).
12. The first run with every cache empty, per method, against the same run warm; ``mbsim validate``;
    with ``--install``, a fresh clone, venv and ``pip install -e .`` and the flagship run (cold_start.py).
13. Recording every step against every 100th, per method (recording.py).
14. The full ``mbsim verify`` run: written by ``python benchmarks/verify.py`` on its own (about 45
   minutes); this script keeps that section of BENCHMARKS.md as it is.
15. The adaptive pair DOP853 against RK4 per step, and the four-box chain at equal accuracy against
    MuJoCo RK4's whole run (adaptive.py).
16. A servo-driven Panda against the unactuated one, recursive + rk4, and where the actuators'
    time goes (actuated.py).
17. Linearisation and modes of two arms held at a pose against MuJoCo's ``mjd_transitionFD``
    and Pinocchio's ABA derivatives, and a static equilibrium (linearize.py).

The machine table comes from machine.py, the report's frame from report.py. Times are
``time.perf_counter`` wall seconds; nothing here asserts on a time. Result files go to a temporary
directory. This module is importable without side effects (the tests import ``chain_scene`` and
``pile_scene`` through it).
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # as the mbsim command: single-threaded BLAS, set before numpy loads
    for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import importlib  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is a folder of the checkout, not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks.chain import (  # noqa: E402  # noqa: E402
    ChainResult,
    bench_chain,
    chain_errors,
    chain_scene,
    chain_table,
    scaling_verdict,
    write_chain_scene,
)
from benchmarks.contact_pile import (  # noqa: E402  # noqa: E402
    PILE_PROFILE_STEPS,
    PILE_SPACING,
    PILE_VARIANT_STEPS,
    PileResult,
    bench_pile,
    pile_scene,
    write_pile_scene,
)
from benchmarks.four_box import FOUR_BOX_SCENE, FourBoxResult, bench_four_box, four_box_table  # noqa: E402
from benchmarks.lcp import LCP_SCENES, LCPResults, bench_lcp, lcp_difference  # noqa: E402
from benchmarks.machine import machine_info  # noqa: E402
from benchmarks.report import contact_section, report  # noqa: E402
from benchmarks.shared import _short  # noqa: E402
from benchmarks.slider import (  # noqa: E402  # noqa: E402  # noqa: E402
    SLIDER_EXUDYN_S,
    SLIDER_METHODS,
    SLIDER_PAPER_CASES,
    SliderResults,
    _slider_reference,
    bench_slider,
    slider_paper_table,
    slider_section,
    slider_swarm,
    slider_table,
    slider_targets,
)
from benchmarks.variational import (  # noqa: E402  # noqa: E402  # noqa: E402  # noqa: E402
    VARIATIONAL_FINE_STEP,
    VariationalResults,
    bench_variational,
    variational_long_table,
    variational_long_verdicts,
    variational_notes,
    variational_scaling,
    variational_scaling_notes,
    variational_scaling_table,
    variational_section,
    variational_table,
)

# what the tests and the other benchmark modules take from here (the suite's API before the split)
__all__ = [
    "FOUR_BOX_SCENE", "LCP_SCENES", "PILE_SPACING", "SLIDER_EXUDYN_S", "SLIDER_METHODS", "SLIDER_PAPER_CASES",
    "ChainResult", "FourBoxResult", "LCPResults", "PileResult", "SliderResults", "VariationalResults",
    "_short", "_slider_reference", "bench_chain", "bench_four_box", "bench_lcp", "bench_pile", "bench_slider",
    "bench_variational", "chain_scene", "contact_section", "lcp_difference", "machine_info", "main", "pile_scene",
    "report", "slider_section", "variational_scaling", "variational_section", "write_chain_scene",
    "write_pile_scene",
]  # fmt: skip

DEFAULT_OUTPUT = ROOT / "BENCHMARKS.md"


# chain plans: (N, steps, repeats); sizes given with --sizes take the steps of the nearest planned N
FULL = {
    "four_box_repeats": 3,
    "four_box_t_end": None,
    "warmup_steps": 50,
    "chain": ((10, 200, 3), (100, 200, 3), (1000, 50, 3)),
    "slider_repeats": 3,
    "slider_t_end": None,
    "variational_repeats": 3,
    "variational_t_end": None,
    "variational_long_t_end": 100.0,
    "variational_fine_t_end": 20.0,
    "pile_n_side": 10,
    "pile_t_end": 1.0,
    "pile_measure_from": 0.5,
    "pile_iterations": 100,
    "pile_variant_steps": PILE_VARIANT_STEPS,
    "pile_profile_steps": PILE_PROFILE_STEPS,
    "lcp_repeats": 3,
    "lcp_t_end": None,
}
QUICK = {
    "four_box_repeats": 1,
    "four_box_t_end": 0.5,
    "warmup_steps": 5,
    "chain": ((10, 20, 1), (100, 10, 1), (1000, 3, 1)),
    "slider_repeats": 1,
    "slider_t_end": 1.0,
    "variational_repeats": 1,
    "variational_t_end": 0.5,
    "variational_long_t_end": 1.0,
    "variational_fine_t_end": 0.5,
    "pile_n_side": 3,
    "pile_t_end": 0.1,
    "pile_measure_from": 0.05,
    "pile_iterations": 100,
    "pile_variant_steps": 2,
    "pile_profile_steps": 2,
    "lcp_repeats": 1,
    "lcp_t_end": 0.1,
}


def _print_contact(lines: list[str]) -> None:
    """Section 5's tables, verdicts and notes on the terminal, without its headings and prose."""
    for line in lines:
        if line.startswith(("|", "- ", "  ", "Target")):
            print(line.replace("`", "").replace("**", ""))
    print()


def chain_plan(plan: dict, sizes: list[int] | None = None) -> list[tuple[int, int, int]]:
    """(N, steps, repeats) per chain size; other sizes borrow the row of the nearest planned N."""
    rows = list(plan["chain"])
    if not sizes:
        return rows
    return [(n, *min(rows, key=lambda row: abs(np.log(row[0] / n)))[1:]) for n in sizes]


# sections 6-13: modules of their own, each with section(quick) -> markdown lines
EXTRA_MODULES = ("mesh_contact", "recursive", "sweep", "peers", "events", "export", "cold_start", "recording")
# sections 15 on: the same, numbered after the kept verify section (14)
AFTER_VERIFY = ("adaptive", "actuated", "linearize")


def _module(name: str):
    """benchmarks/NAME.py or the package benchmarks/NAME/, imported as ``benchmarks.NAME``."""
    return importlib.import_module(f"benchmarks.{name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer repeats and steps")
    parser.add_argument(
        "--output",
        default=None,
        help=f"markdown report to write; default {DEFAULT_OUTPUT.name} at the repository root for a full "
        "run and nothing for --quick; '-' writes nothing",
    )
    parser.add_argument("--sizes", default=None, help="comma-separated chain sizes N (default 10,100,1000)")
    parser.add_argument(
        "--install",
        action="store_true",
        help="the first-run section also times a fresh clone + venv + pip install -e . + the flagship run (minutes)",
    )
    args = parser.parse_args(argv)

    plan = QUICK if args.quick else FULL
    sizes = [int(n) for n in args.sizes.split(",") if n.strip()] if args.sizes else None
    if sizes and min(sizes) < 1:
        parser.error(f"--sizes: expected chain sizes >= 1, got {args.sizes}")

    started = time.perf_counter()
    machine = machine_info()
    print("machine:")
    for k, v in machine.items():
        print(f"  {k}: {v}")

    print("\nfour-box chain ...", flush=True)
    four = bench_four_box(plan["four_box_repeats"], plan["four_box_t_end"])
    print("\n".join(four_box_table(four)))

    chains = []
    for n, steps, repeats in chain_plan(plan, sizes):
        print(f"\nN-link chain N = {n} ({steps} steps x {repeats}) ...", flush=True)
        r = bench_chain(n, steps, repeats, warmup_steps=min(steps, plan["warmup_steps"]))
        chains.append(r)
        failed = f"; FAILED: {r.error}" if r.error else ""
        print(
            f"  loop {r.s_per_step:.3e} s/step, {1e6 * r.s_per_step_link:.1f} µs/step/link, "
            f"{'sparse' if r.sparse else 'dense'}{failed}",
            flush=True,
        )
    print()
    print("\n".join(chain_table(chains)))
    print(scaling_verdict(chains))
    for line in chain_errors(chains):
        print(line.replace("`", ""))  # plain text on the terminal

    t_slider = plan["slider_t_end"]
    print(
        f"\nslider-crank through singular positions ({'10' if t_slider is None else f'{t_slider:g}'} s, "
        f"{len(SLIDER_METHODS)} methods x {plan['slider_repeats']} + {len(SLIDER_PAPER_CASES)} cases "
        "without projection) ...",
        flush=True,
    )
    slider = bench_slider(plan["slider_repeats"], t_slider)
    for line in (*slider_table(slider), "", *slider_targets(slider), "", *slider_swarm(slider), ""):
        print(line.replace("`", "").replace("**", ""))
    for line in slider_paper_table(slider):
        print(line)

    t_var, t_long = plan["variational_t_end"], plan["variational_long_t_end"]
    print(
        f"\nfour-box chain, variational against lagrange + rk4 ({'10' if t_var is None else f'{t_var:g}'} s x "
        f"{plan['variational_repeats']} each; long runs {t_long:g} s; step {VARIATIONAL_FINE_STEP:g} over "
        f"{plan['variational_fine_t_end']:g} s) ...",
        flush=True,
    )
    variational = bench_variational(
        plan["variational_repeats"], t_var, long_t_end=t_long, fine_t_end=plan["variational_fine_t_end"]
    )
    for line in (
        *variational_table(variational),
        "",
        *variational_notes(variational),
        "",
        *variational_long_table(variational),
        "",
        *variational_long_verdicts(variational),
        "",
        *variational_scaling_table(variational),
        "",
        *variational_scaling_notes(variational),
    ):
        print(line.replace("`", "").replace("**", ""))

    side = plan["pile_n_side"]
    print(
        f"\npile of {side**3} spheres ({plan['pile_t_end']:g} s, PGS at most {plan['pile_iterations']} sweeps; "
        f"timed after t = {plan['pile_measure_from']:g} s) ...",
        flush=True,
    )
    pile = bench_pile(
        side,
        plan["pile_t_end"],
        plan["pile_measure_from"],
        plan["pile_iterations"],
        variant_steps=plan["pile_variant_steps"],
        profile_steps=plan["pile_profile_steps"],
    )
    _print_contact(contact_section(pile, None))
    t_lcp = plan["lcp_t_end"]
    print(
        f"\nLemke against PGS (four-bar {'1' if t_lcp is None else f'{t_lcp:g}'} s, box stack "
        f"{'1' if t_lcp is None else f'{t_lcp:g}'} s, x {plan['lcp_repeats']}) ...",
        flush=True,
    )
    lcp = bench_lcp(plan["lcp_repeats"], t_lcp)
    _print_contact(contact_section(None, lcp))
    extra = []
    for name in EXTRA_MODULES:
        print(f"\n{name} ...", flush=True)
        options = {"install": args.install} if name == "cold_start" else {}
        lines = _module(name).section(quick=args.quick, **options)
        print("\n".join(lines).replace("`", "").replace("**", ""))
        extra.append(lines)
    after = []
    for name in AFTER_VERIFY:
        print(f"\n{name} ...", flush=True)
        lines = _module(name).section(quick=args.quick)
        print("\n".join(lines).replace("`", "").replace("**", ""))
        after.append(lines)
    elapsed = time.perf_counter() - started
    print(f"\nsuite took {elapsed:.1f} s")

    output = args.output if args.output is not None else (None if args.quick else str(DEFAULT_OUTPUT))
    if output and output != "-":
        text = report(machine, four, chains, args.quick, elapsed, slider, variational, pile, lcp, extra)
        kept = _module("verify").kept_section(Path(output))  # benchmarks/verify.py's section stays as it is
        # ... numbered after the others
        kept = re.sub(r"^## \d+\. ", f"## {6 + len(EXTRA_MODULES)}. ", kept, count=1, flags=re.MULTILINE)
        text = text.rstrip("\n") + "\n\n" + kept + "\n" if kept else text
        # ... and the sections after it, numbered on from the verify section's number
        for number, lines in enumerate(after, start=7 + len(EXTRA_MODULES)):
            text = "\n".join([text.rstrip("\n"), "", re.sub(r"^## ", f"## {number}. ", lines[0]), *lines[1:], ""])
        Path(output).write_text(text, encoding="utf-8")
        print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
