"""The plots people read (issue: mbsim plot's contact panel, compare's violation plot)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from export_scenes import SHAPES_2D

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def saved_figures(monkeypatch) -> list:
    """Every matplotlib figure saved during the test, kept for inspection."""
    from matplotlib.figure import Figure

    figures = []
    original = Figure.savefig

    def savefig(self, *args, **kwargs):
        figures.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return figures


def test_contact_panel_gives_penetration_its_own_axis(mbsim, tmp_path, saved_figures) -> None:
    out = tmp_path / "ball.h5"
    r = mbsim("run", ROOT / "scenes" / "bouncing_ball.yaml", "-o", out, "--set", "time.end=0.6", "-q")
    assert r.exit_code == 0, r.output
    r = mbsim("plot", out, "--what", "contacts", "-o", tmp_path / "c.png")
    assert r.exit_code == 0, r.output
    (figure,) = saved_figures
    count_axis, depth_axis = figure.axes  # the panel and its twin (right)
    assert count_axis.get_ylabel() == "contact count" and depth_axis.get_ylabel() == "max penetration, m"
    assert [line.get_label() for line in count_axis.lines] == ["count"]
    assert [line.get_label() for line in depth_axis.lines] == ["max_penetration"]
    with h5py.File(out, "r") as f:
        np.testing.assert_array_equal(depth_axis.lines[0].get_ydata(), f["diagnostics/contacts/max_penetration"][:])
        np.testing.assert_array_equal(count_axis.lines[0].get_ydata(), f["diagnostics/contacts/count"][:])


def test_compare_violation_plot_is_logarithmic(mbsim, write_scene, tmp_path, saved_figures) -> None:
    r = mbsim("compare", write_scene(SHAPES_2D), "--solvers", "lagrange,gauss", "-o", tmp_path / "cmp", "-q")
    assert r.exit_code == 0, r.output
    violation = next(f for f in saved_figures if f.axes[0].get_title() == "position violation")
    assert violation.axes[0].get_yscale() == "log"
    assert len(violation.axes[0].lines) == 2  # both solvers, round-off levels readable
