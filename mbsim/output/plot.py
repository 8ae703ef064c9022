"""PNG plots of result files (matplotlib, no screen needed)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mbsim.errors import OutputError
from mbsim.output.safety import check_picture_target
from mbsim.output.summary import open_result, series


def plot_result(path: str | Path, out: str | Path, items: list[str]) -> Path:
    """One panel per item against time; violations on a log scale."""
    check_picture_target(out)  # before the work: a wrong name is refused at once
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open_result(path) as f:
        time = f["time"][:]
        panels = [series(f, item) for item in items]
        title = f"{f.attrs.get('scene_name', '')} ({f.attrs.get('method', '')}, {f.attrs.get('status', '')})"
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.6 * len(panels) + 0.6), sharex=True, squeeze=False)
    for ax, (name, values, labels) in zip(axes[:, 0], panels, strict=True):
        for k, label in enumerate(labels):
            ax.plot(time, values[:, k], label=label, lw=1.0)
        if "violation" in name or "quaternion" in name:
            positive = values[values > 0]
            if positive.size:
                ax.set_yscale("log")
        ax.set_ylabel(name)
        ax.grid(True, alpha=0.3)
        if len(labels) > 1:
            ax.legend(fontsize=8, loc="best")
    axes[-1, 0].set_xlabel("time, s")
    fig.suptitle(title)
    fig.tight_layout()
    out = check_picture_target(out)
    try:
        if out.parent.exists() and not out.parent.is_dir():
            raise OutputError(f"cannot write the plot: {out.parent} is not a directory", file=str(out))
        out.parent.mkdir(parents=True, exist_ok=True)
        # through a temporary name: a half-written picture never carries the final name
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=out.suffix, dir=out.parent)
        os.close(fd)
        try:
            fig.savefig(tmp, dpi=110)
            os.replace(tmp, out)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError as exc:
        raise OutputError(f"cannot write the plot: {exc.strerror or exc}", file=str(out)) from None
    finally:
        plt.close(fig)
    return out


__all__ = ["plot_result"]
