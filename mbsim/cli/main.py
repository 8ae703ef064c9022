"""The click group ``mbsim`` and its commands."""

from __future__ import annotations

import click

import mbsim
from mbsim.cli.compare import compare
from mbsim.cli.info import info
from mbsim.cli.plot import plot
from mbsim.cli.run import run
from mbsim.cli.sweep import sweep
from mbsim.cli.validate import validate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(mbsim.__version__, prog_name="mbsim")
def cli() -> None:
    """mbsim: multibody dynamics from YAML scenes to HDF5 results.

    Exit codes: 0 done; 2 the scene or the command line is wrong; 3 the simulation failed
    (the result file is kept with status failed); 4 an --assert did not hold; 130 interrupted;
    1 anything else.
    """


cli.add_command(run)
cli.add_command(validate)
cli.add_command(info)
cli.add_command(plot)
cli.add_command(compare)
cli.add_command(sweep)


def main() -> None:
    cli(prog_name="mbsim")
