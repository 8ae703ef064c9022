"""mbsim benchmark suite: run ``python benchmarks/run.py`` from the repository root (see BENCHMARKS.md)."""
