"""``mbsim import``: a URDF or MJCF file as a standalone scene (CONTRACT §5)."""

from __future__ import annotations

from pathlib import Path

import click

from mbsim.cli.options import debug_option, handle_errors
from mbsim.errors import SceneError, path_text
from mbsim.output.safety import written_atomically

HEADER = "# written by mbsim import from "  # the first line of every scene this command writes


def standalone_scene(model_file: str, base: str, fmt: str | None = None, prefix: str = "") -> str:
    """The YAML text of the scene equivalent to ``models: [{file: model_file, base: base, prefix:
    prefix}]``: every body and joint spelled out, the file's gravity, a time section and a method."""
    import yaml

    from mbsim.models import expand_models, model_format
    from mbsim.models.files import not_regular
    from mbsim.scene.fields import Context
    from mbsim.scene.load import RawScene

    path = Path(model_file)
    problem = not_regular(path)
    if problem:
        raise SceneError("model file not found" if problem == "not found" else problem, file=model_file)
    fmt = model_format(path, fmt)
    if fmt is None:
        raise SceneError("cannot tell the format from the extension; expected .urdf, .xml or .mjcf", file=model_file)
    raw = RawScene(
        {"models": [{"file": str(path.resolve()), "format": fmt, "base": base, "prefix": prefix}]},
        file=model_file,
        base_dir=Path.cwd(),
    )
    try:
        expanded, (imported,) = expand_models(raw, Context(scene=raw))
    except SceneError as exc:  # the entry above is ours, not the user's: its prefix is --prefix
        if not exc.key_path.startswith("models[0].prefix"):
            raise
        raise SceneError(exc.reason, file=model_file, key_path="--prefix", hint=exc.hint) from None
    data = expanded.data
    if not data["bodies"]:  # a scene needs one body: say so of the model, not of a scene the user never wrote
        raise SceneError(
            "nothing in the model moves (every link is welded to the ground); try --base free",
            file=model_file,
        )
    scene = {
        "mbsim": 1,
        "name": f"{path_text(Path(model_file).stem)} (imported)",
        "description": f"Imported by mbsim import from {path_text(path.name)} ({fmt.upper()}, base {base}).",
        "gravity": imported.gravity,
        "time": {"end": 1.0, "step": 0.001},
        # recursive takes trees without constraints
        "solver": {"method": "lagrange" if imported.constrained else "recursive", "integrator": "rk4"},
    }
    if data.get("ground"):
        scene["ground"] = data["ground"]
    scene["bodies"] = data["bodies"]
    scene["joints"] = data["joints"]
    if data.get("couplings"):
        scene["couplings"] = data["couplings"]
    if data.get("actuators"):  # MJCF: each with its control 0, clamped to its ctrlrange (edit the "0")
        scene["actuators"] = data["actuators"]
    text = yaml.safe_dump(scene, sort_keys=False, default_flow_style=None, width=100)
    lines = [f"{HEADER}{path_text(path.name)}"]  # UTF-8 text whatever the locale decoded
    lines += [f"# skipped (not imported): {s}" for s in imported.skipped]
    return "\n".join(lines) + "\n" + text


@click.command(name="import")
@click.argument("model_file", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), default=None,
              help="Scene file to write (default: print it); replaces only a file this command wrote.")  # fmt: skip
@click.option("--base", type=click.Choice(["fixed", "free"]), default="fixed", show_default=True,
              help="fixed: the root is welded to the ground; free: a floating base.")  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(["urdf", "mjcf"]), default=None,
              help="urdf or mjcf (default: from the extension).")  # fmt: skip
@click.option("--prefix", default="", help="Prepended to every body and joint name (as a models: entry's prefix).")
@debug_option
@handle_errors
def import_model(model_file: str, output: str | None, base: str, fmt: str | None, prefix: str, debug: bool) -> None:
    """Write MODEL_FILE (URDF or MJCF) as a standalone scene: every body and joint spelled out."""
    text = standalone_scene(model_file, base, fmt, prefix)
    if output is None:
        click.echo(text, nl=False)
        return
    target = Path(output)
    if target.exists():
        try:
            with open(target, encoding="utf-8", errors="replace") as f:
                first = f.readline()
        except OSError as exc:
            raise SceneError(f"cannot use this path: {exc.strerror}", file=output) from None
        if not target.is_file() or not first.startswith(HEADER):
            raise SceneError(
                "exists and was not written by mbsim import; mbsim does not overwrite it (choose another name, "
                "or move the file away)",
                file=output,
            )
    folder = target.resolve().parent
    if not folder.is_dir():
        raise SceneError(f"the folder {folder} does not exist", file=output)
    # through a temporary name: a full disk or a read-only folder is exit 2 with no half-written scene
    with written_atomically(target, "the scene") as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    click.echo(f"{output}: scene written from {model_file}", err=True)
