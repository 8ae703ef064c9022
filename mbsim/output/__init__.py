"""Result sinks: the HDF5 result file, run summaries and plots. They receive states and
evaluations; they never call solvers."""
