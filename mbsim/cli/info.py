"""``mbsim info``: summary of a result file."""

from __future__ import annotations

import math

import click

from mbsim.cli.options import debug_option, emit_json, handle_errors, json_option
from mbsim.names import shown
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
    recorded = data.pop("max_position_violation_recorded", None)  # shown beside the run's own figure
    width = max(len(k) for k in data if not isinstance(data[k], (list, dict)))
    for key, value in data.items():
        if key == "max_position_violation":
            click.echo(f"{key:<{width}}  {_violation_text(value, recorded)}")
        elif isinstance(value, list):
            click.echo(f"{key}:")
            for item in value:
                click.echo(f"  {_member_text(item) if isinstance(item, dict) else item}")
        elif isinstance(value, float):
            click.echo(f"{key:<{width}}  {value:.6g}")
        else:
            click.echo(f"{key:<{width}}  {value}")


def _violation_text(over_steps: float | None, recorded: float | None) -> str:
    """The run's maximum over every step (what ``run`` printed) and the recorded rows' own."""
    rows = "no recorded rows" if recorded is None or math.isnan(recorded) else f"{recorded:.6g} in the recorded rows"
    if over_steps is None:
        return f"{rows} (the maximum over every step is written when the run ends)"
    return f"{over_steps:.6g} (every step; {rows})"


def _member_text(item: dict) -> str:
    """An output's or actuator's line: ``tip_y  final 0.27, min 0, max 0.29``."""
    values = ", ".join(f"{k.replace('_', ' ')} {_number(v)}" for k, v in item.items() if k != "name")
    return f"{shown(item['name'])}  {values}"


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.6g}"
