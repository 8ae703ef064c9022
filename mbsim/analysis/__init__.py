"""Analyses of a model beside time integration, one module each: equilibrium (static equilibrium),
modes (linearisation, modes and the state-space matrices)."""
