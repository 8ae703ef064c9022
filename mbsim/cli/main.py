"""The click group ``mbsim`` and its commands.

The commands are imported when one is invoked, not when the group is: ``mbsim --help`` stays
quick, and the console script (mbsim.cli.entry) has installed the signal handlers before numpy,
h5py or Dask are imported, so that a signal during start-up ends the command like any other.
"""

from __future__ import annotations

import importlib

import click

import mbsim

# name -> (module, attribute, the one-line summary shown by ``mbsim --help`` without importing it);
# each summary is shown whole (wrapped, never cut), so keep it to one sentence
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("mbsim.cli.run", "run", "Simulate SCENE and write the HDF5 result file."),
    "validate": (
        "mbsim.cli.validate",
        "validate",
        "Check SCENE (keys, types, values, bodies, joints, solver, assembly) without simulating.",
    ),
    "info": (
        "mbsim.cli.info",
        "info",
        "Summarise the result file RESULT (status, steps, violations, energy, contents).",
    ),
    "plot": ("mbsim.cli.plot", "plot", "Plot quantities of RESULT against time into a PNG file."),
    "compare": (
        "mbsim.cli.compare",
        "compare",
        "Run SCENE once per solver spec and compare wall time, violations, energy drift and error.",
    ),
    "sweep": (
        "mbsim.cli.sweep",
        "sweep",
        "Run SCENE once per combination of --param values, on Dask, one result file per case.",
    ),
    "verify": (
        "mbsim.cli.verify",
        "verify",
        "Run the benchmark problems (all, or each PROBLEM) against their published or closed-form references.",
    ),
    "import": (
        "mbsim.cli.import_model",
        "import_model",
        "Write MODEL_FILE (URDF or MJCF) as a standalone scene: every body and joint spelled out.",
    ),
    "equilibrium": (
        "mbsim.cli.equilibrium",
        "equilibrium",
        "Find the static equilibrium of SCENE and write it as a one-row result file.",
    ),
    "export": (
        "mbsim.cli.export",
        "export",
        "Write the motion of RESULT as a .glb or a self-contained .html page.",
    ),
    # issue 32: linearisation and modes (mbsim.analysis.modes)
    "modes": (
        "mbsim.cli.modes",
        "modes",
        "Natural frequencies, damping ratios and mode shapes of SCENE about a state.",
    ),
    "linearize": (
        "mbsim.cli.modes",
        "linearize",
        "State-space matrices A, B, C, D of SCENE about a state.",
    ),
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use (their modules import numpy, h5py, ...)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[cmd_name]
        return getattr(importlib.import_module(module), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, short) for name, (_, _, short) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(mbsim.__version__, prog_name="mbsim")
def cli() -> None:
    """mbsim: multibody dynamics from YAML scenes to HDF5 results.

    Exit codes: 0 done; 2 the scene or the command line is wrong, or an output (stdout too)
    cannot be written; 3 the simulation failed (the result file is kept with status failed);
    4 an --assert did not hold (verify: a problem failed); 128 + N a signal N ended it (130
    SIGINT, 143 SIGTERM, 129 SIGHUP; the result file is closed with status failed); 141 the
    reader of stdout went away (| head); 1 anything else.
    """
