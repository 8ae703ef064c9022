"""PNG plots of result files (matplotlib, no screen needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mbsim.errors import UsageError
from mbsim.output.safety import check_picture_target, written_atomically
from mbsim.output.summary import open_result, panels, split_items


def plot_result(path: str | Path, out: str | Path, items: list[str] | str) -> Path:
    """One panel per item against time; violations on a log scale. ``items``: a list, or
    ``--what``'s comma-separated text (split knowing the file's names, which may hold commas)."""
    check_picture_target(out)  # before the work: a wrong name is refused at once
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open_result(path) as f:
        time = f["time"][:]
        if isinstance(items, str):
            what, items = items, split_items(f, items)
            if not items:
                raise UsageError(f"expected a comma-separated list of quantities, got '{what}'", file="--what")
        drawn = [panel for item in items for panel in panels(f, item)]
        title = f"{f.attrs.get('scene_name', '')} ({f.attrs.get('method', '')}, {f.attrs.get('status', '')})"
    fig, axes = plt.subplots(len(drawn), 1, figsize=(8, 2.6 * len(drawn) + 0.6), sharex=True, squeeze=False)
    for ax, (name, values, labels) in zip(axes[:, 0], drawn, strict=True):
        if "max_penetration" in labels and len(labels) > 1:
            # metres and a count do not share a scale: the penetration gets its own axis (right)
            k = labels.index("max_penetration")
            depth = ax.twinx()
            depth.plot(time, values[:, k], color="C3", lw=1.0, label="max_penetration")
            depth.set_ylabel("max penetration, m", color="C3")
            depth.tick_params(axis="y", colors="C3")
            values = np.delete(values, k, axis=1)
            labels = [label for label in labels if label != "max_penetration"]
            name = "contact count"
        for k, label in enumerate(labels):
            ax.plot(time, values[:, k], label=label, lw=1.0)
        if name in ("constraint violation", "quaternion norm error"):  # not a user's output of that name
            positive = values[values > 0]
            if positive.size:
                ax.set_yscale("log")
        ax.set_ylabel(name)
        ax.grid(True, alpha=0.3)
        if len(labels) > 1 or (labels and labels[0] not in name):  # a group's one member: its name
            ax.legend(fontsize=8, loc="best")
    axes[-1, 0].set_xlabel("time, s")
    fig.suptitle(title)
    fig.tight_layout()
    out = check_picture_target(out)
    try:
        with written_atomically(out, "the plot") as tmp:
            fig.savefig(tmp, dpi=110)
    finally:
        plt.close(fig)
    return out


__all__ = ["plot_result"]
