"""PNG plots of ``mbsim compare``: every solver's run on one axis (matplotlib Agg, no screen).

``violation.png``: position violation against time; ``energy.png``: |relative energy error|
against time, both on a log scale so that methods orders of magnitude apart stay visible.
Failed runs are drawn dashed up to where they stopped; files without rows are skipped. Each
PNG carries the text chunk ``Software: mbsim compare``, by which a later comparison into the
same folder knows it may replace it (mbsim.output.outdir).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from mbsim.output.outdir import Mark, write_report
from mbsim.output.summary import open_result, relative_energy_error

PLOT_SOFTWARE = "mbsim compare"  # the PNGs' Software text: their mark in OUTDIR
PLOT_NAMES = ("violation.png", "energy.png")


def _series(path: Path, what: str) -> tuple[np.ndarray, np.ndarray]:
    with open_result(path) as f:
        t = f["time"][:] if "time" in f else np.zeros(0)
        if what == "violation":
            name = "diagnostics/constraints/position_violation"
            y = f[name][:] if name in f else np.zeros(0)
        else:
            y = np.abs(relative_energy_error(f))
    n = min(len(t), len(y))
    return t[:n], y[:n]


def plot_comparison(runs: list[tuple[str, Path, str]], outdir: str | Path, marks: Mapping[str, Mark]) -> list[Path]:
    """Write violation.png and energy.png into ``outdir``.

    Args:
        runs: (label, result file, status) per run, in table order.
        outdir: the comparison's directory.
        marks: file name -> the mark an existing file must carry to be replaced.
    Returns:
        The two PNG paths.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    panels = (
        ("violation", PLOT_NAMES[0], "max |Phi(q)|", "position violation"),
        ("energy", PLOT_NAMES[1], "|relative energy error|", "energy error: |(E - W)(t) - (E - W)(0)| / scale"),
    )
    for what, name, ylabel, title in panels:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        plotted, positive = 0, False
        for k, (label, path, status) in enumerate(runs):
            try:
                t, y = _series(path, what)
            except Exception:  # an unreadable file is skipped; the table says what happened
                continue
            if len(t) == 0:
                continue
            # zeros (exact at t = 0, or below rounding) cannot be drawn on a log axis
            y = np.where(y > 0, y, np.nan)
            style = "--" if status != "completed" else "-"
            tag = f"{label} ({status})" if status != "completed" else label
            ax.plot(t, y, style, lw=1.1, label=tag, color=f"C{k % 10}")
            plotted += 1
            positive = positive or bool(np.any(np.isfinite(y)))
        if positive:
            ax.set_yscale("log")
            if what == "violation" and ax.get_ylim()[0] < 1e-18:  # below: rounding noise, spikes only
                ax.set_ylim(bottom=1e-18)
        else:
            ax.text(0.5, 0.5, "nothing to plot (all zero or no rows)", transform=ax.transAxes, ha="center")
        ax.set_xlabel("time, s")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if plotted:
            ax.legend(fontsize=8, loc="best")
        fig.tight_layout()
        path = outdir / name
        picture = io.BytesIO()
        fig.savefig(picture, format="png", dpi=110, metadata={"Software": PLOT_SOFTWARE})
        plt.close(fig)
        write_report(path, picture.getvalue(), marks[name])
        written.append(path)
    return written


__all__ = ["PLOT_NAMES", "PLOT_SOFTWARE", "plot_comparison", "relative_energy_error"]
