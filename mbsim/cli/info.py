"""``mbsim info``: summary of a result file."""

from __future__ import annotations

import click

from mbsim.cli.options import debug_option, emit_json, handle_errors, json_option
from mbsim.output.summary import check_result_path, read_info


@click.command()
@click.argument("result", type=click.Path(dir_okay=False))
@json_option
@debug_option
@handle_errors
def info(result: str, as_json: bool, debug: bool) -> None:
    """Summarise the result file RESULT (status, steps, violations, energy, contents)."""
    check_result_path(result)
    data = read_info(result)
    if as_json:
        emit_json(data)
        return
    width = max(len(k) for k in data if not isinstance(data[k], (list, dict)))
    for key, value in data.items():
        if isinstance(value, list):
            click.echo(f"{key}:")
            for item in value:
                click.echo(f"  {item}")
        elif isinstance(value, float):
            click.echo(f"{key:<{width}}  {value:.6g}")
        else:
            click.echo(f"{key:<{width}}  {value}")
