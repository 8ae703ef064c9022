"""``mbsim export`` and ``--export``: result files to a .glb or an .html page (CONTRACT §7).

The target is checked first (suffix, no clobbering: CONTRACT §4), then the motions are read
(mbsim.output.motion), laid out, and written through a temporary name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mbsim.output.motion import Motion, layout, read_motion
from mbsim.output.safety import check_export_target, written_atomically


@dataclass
class Exported:
    """What an export wrote: the file, its size in bytes, what was left out (notes)."""

    file: Path
    bytes: int
    notes: list[str]


def export_motions(motions: list[Motion], out: str | Path) -> Exported:
    """Write ``motions`` (one, or several side by side) to ``out`` (.glb or .html)."""
    out = check_export_target(out)
    look = layout(motions)
    if out.suffix.lower() == ".glb":
        from mbsim.output.gltf import glb_bytes

        data = glb_bytes(motions, look)
    else:
        from mbsim.output.viewer import page

        data = page(motions, look).encode("utf-8")
    with written_atomically(out, "the export") as tmp:
        Path(tmp).write_bytes(data)
    return Exported(file=out, bytes=len(data), notes=[note for m in motions for note in m.notes])


def export_results(
    results: list[tuple[str | Path, str | None]],
    out: str | Path,
    fps: float | None = None,
    t_from: float | None = None,
    t_to: float | None = None,
) -> Exported:
    """Export result files (path, label) to ``out``; exit 2 (UsageError, OutputError) for a
    wrong target, a file that is not an mbsim result or a wrong range."""
    check_export_target(out)  # before reading anything: a wrong name is refused at once
    motions = [read_motion(path, fps, t_from, t_to, label) for path, label in results]
    return export_motions(motions, out)


__all__ = ["Exported", "export_motions", "export_results"]
