"""Benchmark: the signed distance field build against libigl's ``signed_distance`` (issue 31).

    python benchmarks/sdf_build.py            # the 230,400-triangle torus, 128 x 128 x 62 nodes (about a minute)
    python benchmarks/sdf_build.py --quick    # a 14,400-triangle torus on a coarser grid (seconds)

The mesh is the rippled torus of benchmarks/mesh_contact.py (the mesh-mesh master: ring radius
100 mm, tube 30 mm rippling by 25 % twelve times), the grid the one of its "SDF build" section:
padding 60 mm, 128 nodes along the longest axis of the padded box (cell 3.094 mm; 128 x 128 x 62
= 1,015,808 nodes). mbsim: ``build_sdf(mesh, cell, padding, threads=1)`` in this process, which
includes checking the mesh and its pseudo-normals (no cache). libigl: ``igl.signed_distance`` on
the very same nodes (``origin + cell * (i, j, k)``), one thread (``IGL_NUM_THREADS=1``), with its
pseudo-normal sign (the sign mbsim uses) and with its default sign (the winding number), in a
subprocess of the Python found at ``$MBSIM_IGL_PYTHON`` or ``/work/venv-igl/bin/python`` (a venv
of its own: ``python -m venv /work/venv-igl && /work/venv-igl/bin/pip install libigl numpy``);
without it the table says "libigl not installed". Times are CPU seconds (``time.process_time``,
the best of the repeats) and wall seconds. Values: the largest difference of mbsim's field from
libigl's over all nodes, relative to the mesh's size (its largest extent), and the number of
nodes of different sign. Nothing here asserts on a time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is a folder of the checkout, not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks.mesh_contact import TORUS_PADDING, torus_cell, torus_mesh  # noqa: E402

FULL = {"segments": (480, 240), "torus_cells": 127, "repeats": 2}
QUICK = {"segments": (120, 60), "torus_cells": 47, "repeats": 1}
IGL_PYTHON = os.environ.get("MBSIM_IGL_PYTHON", "/work/venv-igl/bin/python")
IGL_SIGNS = ("pseudonormal", "default")

# Run in libigl's own Python: argv = npz of the mesh and grid, output npz; prints JSON timings.
_IGL_SCRIPT = """
import json, sys, time
import numpy as np
import igl
d = np.load(sys.argv[1])
origin, shape, cell = d["origin"], d["shape"], float(d["cell"])
axes = [origin[a] + cell * np.arange(shape[a]) for a in range(3)]
nodes = np.ascontiguousarray(np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3))
kinds = {"pseudonormal": igl.SIGNED_DISTANCE_TYPE_PSEUDONORMAL, "default": igl.SIGNED_DISTANCE_TYPE_DEFAULT}
times, values = {}, {}
for name in sys.argv[3].split(","):
    best_cpu = best_wall = float("inf")
    for _ in range(int(sys.argv[4])):
        c0, w0 = time.process_time(), time.perf_counter()
        s = igl.signed_distance(nodes, d["V"], d["F"], kinds[name])[0]
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    times[name] = (best_cpu, best_wall)
    values[name] = s.reshape(tuple(shape))
np.savez(sys.argv[2], **values)
print(json.dumps(times))
"""


@dataclass
class SdfBuildResult:
    triangles: int
    cell: float
    shape: tuple[int, int, int]
    mbsim_cpu_s: float
    mbsim_wall_s: float
    igl: dict[str, tuple[float, float]] = field(default_factory=dict)  # sign -> (cpu s, wall s)
    max_rel_diff: dict[str, float] = field(default_factory=dict)  # sign -> max |mbsim - libigl| / size
    sign_mismatch: dict[str, int] = field(default_factory=dict)  # sign -> nodes of another sign
    igl_note: str = ""  # why libigl was not run, if it was not


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def bench_sdf_build(plan: dict, igl_python: str = IGL_PYTHON) -> SdfBuildResult:
    """Build the torus's field with mbsim (one thread), then with libigl on the same nodes."""
    import trimesh

    from mbsim.model.contact.sdf import build_sdf

    build_sdf(trimesh.creation.box(extents=(1.0, 1.0, 1.0)), 0.25, 0.1, threads=1)  # kernels' first call
    mesh = torus_mesh(plan["segments"])
    cell = torus_cell(mesh, plan["torus_cells"])
    _log(f"  SDF build: {len(mesh.faces):,} triangles, cell {cell:.4g} m ...")
    best_cpu = best_wall = np.inf
    for _ in range(plan["repeats"]):
        c0, w0 = time.process_time(), time.perf_counter()
        sdf = build_sdf(mesh, cell, TORUS_PADDING, threads=1)
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    _log(f"    mbsim: grid {sdf.shape}, {best_cpu:.2f} s CPU, {best_wall:.2f} s wall")
    result = SdfBuildResult(len(mesh.faces), cell, sdf.shape, best_cpu, best_wall)
    if not Path(igl_python).is_file():
        result.igl_note = f"libigl not installed ({igl_python} not found; set MBSIM_IGL_PYTHON)"
        _log(f"    {result.igl_note}")
        return result
    with tempfile.TemporaryDirectory(prefix="mbsim-sdf-bench-") as tmp:
        grid = Path(tmp) / "grid.npz"
        out = Path(tmp) / "igl.npz"
        np.savez(grid, V=np.asarray(mesh.vertices, dtype=np.float64), F=np.asarray(mesh.faces, dtype=np.int64),
                 origin=np.asarray(sdf.origin), shape=np.asarray(sdf.shape), cell=sdf.cell)  # fmt: skip
        env = dict(os.environ, IGL_NUM_THREADS="1", OMP_NUM_THREADS="1")
        try:
            run = subprocess.run(
                [igl_python, "-c", _IGL_SCRIPT, str(grid), str(out), ",".join(IGL_SIGNS), str(plan["repeats"])],
                capture_output=True,
                text=True,
                env=env,
            )
        except OSError as exc:  # not executable
            run = subprocess.CompletedProcess([], 1, "", str(exc))
        if run.returncode != 0:
            last = (run.stderr.strip().splitlines() or ["no message"])[-1]
            result.igl_note = f"libigl not installed or failed ({igl_python}: {last})"
            _log(f"    {result.igl_note}")
            return result
        times = json.loads(run.stdout.strip().splitlines()[-1])
        size = float(np.max(mesh.extents))
        with np.load(out) as data:
            for name in IGL_SIGNS:
                ref = data[name]
                result.igl[name] = (float(times[name][0]), float(times[name][1]))
                result.max_rel_diff[name] = float(np.abs(sdf.values - ref).max()) / size
                result.sign_mismatch[name] = int(np.count_nonzero(np.signbit(sdf.values) != np.signbit(ref)))
                _log(
                    f"    libigl {name}: {times[name][0]:.2f} s CPU, max |diff| / size "
                    f"{result.max_rel_diff[name]:.2e}, {result.sign_mismatch[name]} signs differ"
                )
    return result


def table(r: SdfBuildResult) -> list[str]:
    nodes = int(np.prod(r.shape))
    lines = [
        "### SDF build against libigl",
        "",
        f"The rippled torus of {r.triangles:,} triangles, padding {1e3 * TORUS_PADDING:g} mm, cell "
        f"{1e3 * r.cell:.4g} mm: {r.shape[0]} x {r.shape[1]} x {r.shape[2]} nodes ({nodes:,}), one thread each; "
        "libigl's `signed_distance` on the same nodes. CPU seconds, best of the repeats.",
        "",
        "| build | CPU s | wall s | per node | mbsim / it | max abs. difference / mesh size | nodes of another sign |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| mbsim `build_sdf` (threads=1) | {r.mbsim_cpu_s:.2f} | {r.mbsim_wall_s:.2f} | "
        f"{1e6 * r.mbsim_cpu_s / nodes:.2f} µs | | | |",
    ]
    if r.igl_note:
        lines.append(f"| libigl `signed_distance` | {r.igl_note} | | | | | |")
    for name, (cpu, wall) in r.igl.items():
        lines.append(
            f"| libigl `signed_distance`, sign {name} | {cpu:.2f} | {wall:.2f} | {1e6 * cpu / nodes:.2f} µs | "
            f"{r.mbsim_cpu_s / cpu:.2f}x | {r.max_rel_diff[name]:.1e} | {r.sign_mismatch[name]} |"
        )
    lines.append("")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller torus on a coarser grid")
    parser.add_argument("--igl-python", default=IGL_PYTHON, help="the Python of a venv with libigl")
    args = parser.parse_args(argv)
    result = bench_sdf_build(QUICK if args.quick else FULL, args.igl_python)
    print("\n".join(table(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
