"""benchmarks/recursive.py (method ``recursive`` against ``lagrange`` on the N-link chain): the section
builds in quick mode on small chains. Nothing here looks at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # ~1.5 s of benchmark scaffolding (CI runs it)
def test_recursive_benchmark_section_quick(benchmark_module):
    module = benchmark_module("recursive")
    lines = module.section(quick=True, sizes=(10, 30))
    text = "\n".join(lines)
    assert lines[0].startswith("## ")
    table = [line for line in lines if line.startswith("| 10 ") or line.startswith("| 30 ")]
    assert len(table) == 2
    # every column filled: recursive and lagrange timings and their ratio
    assert all("| - |" not in row and row.count("|") == 9 for row in table)
    assert "Growth exponent" in text and "Pinocchio" in text
    assert abs(module.exponent([10, 100], [1.0, 10.0]) - 1.0) < 1e-12
