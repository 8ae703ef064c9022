"""Benchmark: ``mbsim export`` of a large result, to .glb and to the .html page (CONTRACT §7).

    python benchmarks/export.py            # the section alone (printed)
    python benchmarks/export.py --quick    # a 1,001-row result (the smoke test)

The result: 100 bodies (boxes and capsules, no gravity, tumbling in a 10 x 10 grid) over 10 s
at 1 ms, every step recorded: 10,001 rows. Timed: the whole command ``mbsim export RESULT -o
FILE`` in a fresh process (Python start-up and imports included, what a user waits for),
median of three; the files' sizes. The issue's bounds: at most 5 s, and the page under 20 MB.
Nothing here asserts on a time.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TIME_BOUND_S = 5.0
PAGE_BOUND_MB = 20.0


def hundred_bodies(rows: int) -> str:
    """100 bodies (boxes and capsules) tumbling in a 10 x 10 grid, drifting apart slowly (no
    gravity: they stay in view), ``rows`` recorded rows at 1 ms."""
    rng = np.random.default_rng(1)
    lines = [
        "mbsim: 1",
        "name: hundred tumbling bodies",
        "gravity: [0, 0, 0]",
        f"time: {{end: {(rows - 1) * 1e-3:.3f}, step: 1.0e-3}}",
        "solver: {method: lagrange, integrator: rk4}",
        "bodies:",
    ]
    for i in range(100):
        shape = "{type: box, size: [0.2, 0.1, 0.05]}" if i % 3 else "{type: capsule, radius: 0.05, length: 0.2}"
        w = ", ".join(f"{x:.3f}" for x in rng.uniform(-8, 8, 3))
        lines.append(
            f"  - {{name: b{i}, density: 1000, shapes: [{shape}], position: [{i % 10 * 0.5}, {i // 10 * 0.5}, 0], "
            f"velocity: [0, 0, {rng.uniform(-0.05, 0.05):.3f}], angular_velocity: [{w}]}}"
        )
    return "\n".join(lines) + "\n"


def _mbsim(*args: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mbsim", *args], check=True, capture_output=True)
    return time.perf_counter() - started


def measure(quick: bool = False, repeats: int = 3) -> dict:
    rows = 1_001 if quick else 10_001
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        scene = folder / "hundred.yaml"
        scene.write_text(hundred_bodies(rows), encoding="utf-8")
        result = folder / "hundred.h5"
        _mbsim("run", str(scene), "-o", str(result), "-q")
        out = {"rows": rows, "bodies": 100, "result_mb": result.stat().st_size / 1e6}
        for suffix in ("glb", "html"):
            target = folder / f"hundred.{suffix}"
            walls = [_mbsim("export", str(result), "-o", str(target)) for _ in range(1 if quick else repeats)]
            out[suffix] = {"wall_s": float(np.median(walls)), "walls": walls, "mb": target.stat().st_size / 1e6}
        out["startup_s"] = float(np.median([_mbsim("--version") for _ in range(3)]))
    return out


def section(quick: bool = False) -> list[str]:
    """Run the benchmark and return its markdown section (for benchmarks/run.py and BENCHMARKS.md)."""
    m = measure(quick)
    glb, page = m["glb"], m["html"]

    def verdict(ok: bool) -> str:
        return "within" if ok else "**over**"

    return [
        "## Export: `mbsim export` to .glb and .html",
        "",
        f"A result of {m['rows']:,} rows and {m['bodies']} bodies (boxes and capsules tumbling for "
        f"{(m['rows'] - 1) / 1000:g} s at 1 ms, every step recorded; the result file has {m['result_mb']:.0f} MB)"
        + (" (--quick: shortened)" if quick else "")
        + ". Wall time of the whole command in a fresh process, median of "
        + f"{len(glb['walls'])}; `mbsim --version` alone takes {m['startup_s']:.2f} s.",
        "",
        "| output | wall s | size MB | bound |",
        "| --- | ---: | ---: | --- |",
        f"| .glb (glTF 2.0 binary, every row, float32) | {glb['wall_s']:.2f} | {glb['mb']:.1f} | "
        f"{TIME_BOUND_S:g} s: {verdict(glb['wall_s'] <= TIME_BOUND_S)} |",
        f"| .html (the page, every row, quantised and zlib-packed) | {page['wall_s']:.2f} | {page['mb']:.1f} | "
        f"{TIME_BOUND_S:g} s: {verdict(page['wall_s'] <= TIME_BOUND_S)}; {PAGE_BOUND_MB:g} MB: "
        f"{verdict(page['mb'] < PAGE_BOUND_MB)} |",
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: a 1,001-row result")
    args = parser.parse_args(argv)
    print("\n".join(section(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
