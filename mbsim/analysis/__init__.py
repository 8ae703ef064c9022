"""Analyses about one state of a mechanism: static equilibrium, linearisation and modes."""
