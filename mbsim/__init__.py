"""mbsim: multibody dynamics from YAML scenes to HDF5 results."""

__version__ = "0.1.0"
