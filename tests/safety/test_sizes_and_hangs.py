"""Absurd sizes and things that could block (issue 28 items 9 and 7; CONTRACT §4 "Exit codes hold
everywhere", "Caches are safe").

- Every user-controlled size that allocates or loops (a signed distance field's grid, sample
  points, generated meshes, a swarm, iteration caps, step counts, --repeat, sweep case counts,
  --fps key times) is refused with exit 2 naming the key and the size it would need, within
  seconds, instead of an allocation failure (exit 1) or a run that never ends.
- Nothing mbsim reads may block: a cache entry that is a FIFO (a signed distance field) is
  bypassed with a warning, and the FIFO is left alone.

Each case runs the real command in a subprocess with a timeout, so a case that hangs fails in
seconds instead of blocking CI.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from cli_process import BLOCKS, PENDULUM, ROOT, run_mbsim
from quick_loop import quick

MESH_ON_BOX = ROOT / "scenes" / "mesh_on_box.yaml"
QUICK = 60  # seconds: a refusal comes within a few (the machine may be busy)

# (id, scene, --set overrides, text the message must contain): `mbsim validate` refuses each
SIZES = [
    ("sdf-cell-1e-4-on-a-0.3m-box", BLOCKS, ["contacts[0].sdf.cell=1e-4"], "contacts[0].sdf.cell"),
    ("sdf-cell-denormal", BLOCKS, ["contacts[0].sdf={cell: 1e-300}"], "contacts[0].sdf.cell"),
    ("sdf-padding-1km", BLOCKS, ["contacts[0].sdf.padding=1000"], "contacts[0].sdf.padding"),
    ("sdf-padding-1e300", BLOCKS, ["contacts[0].sdf.padding=1e300"], "contacts[0].sdf.padding"),
    ("samples-1e12", BLOCKS, ["contacts[0].samples=1e12"], "contacts[0].samples"),
    ("samples-just-over-the-limit", BLOCKS, ["contacts[0].samples=1000001"], "contacts[0].samples"),
    (
        "torus-segments-1e5-squared",
        MESH_ON_BOX,
        ["bodies[0].shapes[0].generate.segments=[100000, 100000]"],
        "generate.segments",
    ),
    ("torus-segments-1e9-by-3", MESH_ON_BOX, ["bodies[0].shapes[0].generate.segments=[1e9, 3]"], "generate.segments"),
    (
        "annulus-sections-1e9",
        MESH_ON_BOX,
        [
            "bodies[0].shapes[0].generate={kind: annulus, inner: 0.05, outer: 0.1, thickness: 0.02, sections: 1e9}",
        ],
        "generate.sections",
    ),
    (
        "pso-particles-1e12",
        PENDULUM,
        ["solver.method=gauss", "solver.optimizer=pso", "solver.pso.particles=1e12"],
        "solver.pso.particles",
    ),
    (
        "pso-max-iter-1e15",
        PENDULUM,
        ["solver.method=gauss", "solver.optimizer=pso", "solver.pso.max_iter=1e15"],
        "solver.pso.max_iter",
    ),
    (
        "slsqp-max-iter-1e12",
        PENDULUM,
        ["solver.method=gauss", "solver.optimizer=slsqp", "solver.slsqp.max_iter=1e12"],
        "solver.slsqp.max_iter",
    ),
    ("lcp-iterations-1e12", PENDULUM, ["solver.method=timestepping", "solver.iterations=1e12"], "solver.iterations"),
    ("lcp-iterations-2e19-int64", PENDULUM, ["solver.method=timestepping", "solver.iterations=2e19"], "iterations"),
    ("newton-max-iter-1e12", PENDULUM, ["solver.method=variational", "solver.max_iter=1e12"], "solver.max_iter"),
    (
        "multiplier-max-iter-1e12",
        PENDULUM,
        ["solver.method=augmented_lagrangian", "solver.max_iter=1e12"],
        "solver.max_iter",
    ),
    ("projection-iterations-1e12", PENDULUM, ["solver.projection.iterations=1e12"], "solver.projection.iterations"),
    ("time-step-1e-300", PENDULUM, ["time.step=1e-300"], "time"),
    ("time-end-1e300", PENDULUM, ["time.end=1e300"], "time"),
    ("output-every-1e300", PENDULUM, ["output.every=1e300"], "output.every"),
]


@pytest.mark.parametrize(
    "name, scene, overrides, key", quick(SIZES, keep="time-step-1e-300", ids=[c[0] for c in SIZES])
)
def test_an_absurd_size_is_exit_2_naming_the_key(tmp_path, name, scene, overrides, key):
    sets = [a for o in overrides for a in ("--set", o)]
    start = time.monotonic()
    code, out, err = run_mbsim("validate", scene, *sets, timeout=QUICK, cwd=tmp_path)
    assert code == 2, err
    assert key in err, err
    assert "Traceback" not in err and "internal error" not in err and "Allocation" not in err
    assert time.monotonic() - start < QUICK


def test_the_sdf_refusal_says_the_size_it_would_need(tmp_path):
    """The issue's reproduction: `sdf: {cell: 1e-4}` on a 0.3 m box was "internal error: Allocation failed"."""
    code, _, err = run_mbsim("validate", BLOCKS, "--set", "contacts[0].sdf.cell=1e-4", timeout=QUICK, cwd=tmp_path)
    assert code == 2, err
    assert "1401x2401x2401" in err and "GB" in err and "at most 67,108,864 nodes" in err


def test_the_samples_refusal_says_the_limit(tmp_path):
    """The issue's reproduction: `samples: 1e12` was "Unable to allocate 21.8 TiB" (exit 1)."""
    code, _, err = run_mbsim("validate", BLOCKS, "--set", "contacts[0].samples=1e12", timeout=QUICK, cwd=tmp_path)
    assert code == 2, err
    assert "at most 1,000,000" in err and "GB" in err


def test_sizes_within_the_limits_still_load(tmp_path):
    """The limits are generous: a 2x finer field than the shipped scene and 1000 samples load."""
    code, _, err = run_mbsim(
        "validate",
        BLOCKS,
        "--set",
        "contacts[0].sdf.cell=0.002",
        "--set",
        "contacts[0].samples=1000",
        timeout=300,
        cwd=tmp_path,
    )
    assert code == 0, err


# ------------------------------------------------------------------ counts on the command line


@pytest.fixture(scope="module")
def short_result(tmp_path_factory) -> Path:
    """A short pendulum result (0.5 s) for the export cases."""
    out = tmp_path_factory.mktemp("result") / "pendulum.h5"
    code, _, err = run_mbsim("run", PENDULUM, "--set", "time.end=0.5", "-o", out, "--quiet", timeout=300)
    assert code == 0, err
    return out


COUNTS = [
    ("compare-repeat-1e9", ["compare", PENDULUM, "--solvers", "lagrange", "--repeat", "1000000000"], "--repeat"),
    ("compare-repeat-0", ["compare", PENDULUM, "--solvers", "lagrange", "--repeat", "0"], "--repeat"),
    ("compare-repeat-huge-int", ["compare", PENDULUM, "--solvers", "lagrange", "--repeat", "9" * 40], "--repeat"),
    ("sweep-linspace-1e12", ["sweep", PENDULUM, "--param", "time.end=linspace(0.01,0.02,1e12)"], "linspace"),
    (
        "sweep-product-of-two-1000s",
        ["sweep", PENDULUM, "--param", "time.end=linspace(1,2,1000)", "--param", "parameters.L=linspace(1,2,1000)"],
        "100000",
    ),
    ("sweep-workers-1e9", ["sweep", PENDULUM, "--param", "time.end=0.01", "--workers", "1000000000"], "--workers"),
    ("sweep-retries-1e9", ["sweep", PENDULUM, "--param", "time.end=0.01", "--retries", "1000000000"], "--retries"),
]


@pytest.mark.parametrize("name, args, key", quick(COUNTS, keep="compare-repeat-1e9", ids=[c[0] for c in COUNTS]))
def test_an_absurd_count_option_is_exit_2_within_seconds(tmp_path, name, args, key):
    start = time.monotonic()
    code, out, err = run_mbsim(*args, "-o", tmp_path / "out", timeout=QUICK, cwd=tmp_path)
    assert code == 2, out + err
    assert key in err, err
    assert "Traceback" not in err
    assert time.monotonic() - start < QUICK
    assert not any((tmp_path / "out").rglob("*.h5")) if (tmp_path / "out").exists() else True


@pytest.mark.parametrize(
    "fps", quick(["1e12", "1e300", "inf"], keep="fps-inf", ids=["fps-1e12", "fps-1e300", "fps-inf"])
)
def test_export_fps_over_the_run_is_bounded(tmp_path, short_result, fps):
    code, _, err = run_mbsim("export", short_result, "--fps", fps, "-o", tmp_path / "x.glb", timeout=QUICK)
    assert code == 2, err
    assert "--fps" in err and "Traceback" not in err
    assert not (tmp_path / "x.glb").exists()


# ------------------------------------------------------------------ caches that would block


@pytest.fixture(scope="module")
def sdf_cache(tmp_path_factory) -> Path:
    """An SDF cache the blocks scene filled (computed once: a few seconds of CPU)."""
    folder = tmp_path_factory.mktemp("sdf")
    env = dict(os.environ, MBSIM_CACHE=str(folder / "cache"))
    code, _, err = run_mbsim("validate", BLOCKS, timeout=300, env=env, cwd=folder)
    assert code == 0, err
    return folder / "cache"


def _sdf_cache_entry(tmp_path: Path, filled: Path) -> tuple[dict, Path]:
    """A fresh copy of the filled SDF cache without the entry the scene reads, and that entry's path."""
    env = dict(os.environ, MBSIM_CACHE=str(tmp_path / "cache"))
    shutil.copytree(filled, tmp_path / "cache", symlinks=True)
    (entry,) = (tmp_path / "cache").glob("sdf-*.npz")
    entry.unlink()
    return env, entry


@pytest.mark.parametrize("kind", quick(["fifo", "directory", "dangling-symlink-to-fifo"], keep="fifo"))
def test_an_sdf_cache_entry_that_is_no_regular_file_is_bypassed(tmp_path, sdf_cache, kind):
    env, entry = _sdf_cache_entry(tmp_path, sdf_cache)
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "directory":
        entry.mkdir()
    else:
        os.mkfifo(tmp_path / "elsewhere.fifo")
        entry.symlink_to(tmp_path / "elsewhere.fifo")
    code, out, err = run_mbsim("validate", BLOCKS, timeout=QUICK, env=env, cwd=tmp_path)  # used to block for ever
    assert code == 0, err
    assert "warning" in err and "bypassed" in err and str(entry.name) in err
    assert "Traceback" not in err
    if kind == "fifo":
        assert entry.is_fifo()  # someone else's: left alone
    elif kind == "directory":
        assert entry.is_dir()


def test_a_run_through_a_fifo_sdf_cache_entry_completes(tmp_path, sdf_cache):
    env, entry = _sdf_cache_entry(tmp_path, sdf_cache)
    os.mkfifo(entry)
    out = tmp_path / "blocks.h5"
    code, _, err = run_mbsim("run", BLOCKS, "--set", "time.end=0.002", "-o", out, "--quiet", timeout=300, env=env)
    assert code == 0, err
    assert "bypassed" in err and out.is_file()


def test_a_cache_directory_that_is_a_fifo_does_not_block(tmp_path):
    os.mkfifo(tmp_path / "cache")
    env = dict(os.environ, MBSIM_CACHE=str(tmp_path / "cache"))
    code, _, err = run_mbsim("validate", BLOCKS, timeout=QUICK * 5, env=env, cwd=tmp_path)
    assert code == 0, err
    assert "warning" in err and "Traceback" not in err
