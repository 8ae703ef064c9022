"""Motions as one self-contained HTML page (CONTRACT §7): plays offline, opened from disk.

The page is viewer.html with viewer.js inlined (mbsim's own WebGL code, about 500 lines): no
library to vendor, bundle or fetch, and the page reads exactly the data laid out here. The data is
a JSON header and one zlib stream in base64, which the browser inflates with its own
DecompressionStream:

- meshes: float32 vertex positions and normals, uint32 indices (the triangles of the .glb);
- per run: its key times (float64, shown as the simulated time) and every body's translations
  and rotations (x, y, z, w) as integers: quantised (translations in steps of ``quantum``, about
  6e-8 of the motion's size; rotations in steps of 2^-20), differenced along time, zigzag-coded and
  split into byte planes, which zlib packs well (10,000 rows of 100 bodies: a few MB).

A page larger than :data:`PAGE_BUDGET` would not open well in a browser: then every n-th recorded
row is kept (the last one always), with a note on the page saying so.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import zlib
from importlib import resources

import numpy as np

from mbsim.output.geometry import Triangles, triangle_arrays
from mbsim.output.gltf import GROUND_COLOUR, PALETTE
from mbsim.output.motion import Look, Motion, up_rotation

PAGE_BUDGET = 19_000_000  # bytes of the whole page; the contract's limit is 20 MB
_TURN_QUANTUM = 2.0**-20


def _srgb(colour: tuple[float, ...]) -> list[float]:
    """glTF's linear base colour as the page's sRGB (what a glTF viewer shows)."""
    return [round(float(c) ** (1 / 2.2), 4) for c in colour]


def _zigzag_planes(steps: np.ndarray) -> bytes:
    """int64 steps (any shape) -> zigzag uint32 codes as 4 byte planes (low bytes first)."""
    codes = np.ascontiguousarray(((steps << 1) ^ (steps >> 63)).astype("<u4"))
    return np.ascontiguousarray(codes.view(np.uint8).reshape(-1, 4).T).tobytes()


def _track(values: np.ndarray, quantum: float, origin: np.ndarray) -> bytes:
    """(bodies, keys, width) values -> the page's integer steps along time (bodies, width, keys)."""
    counts = np.rint((values - origin) / quantum).astype(np.int64).transpose(0, 2, 1)
    return _zigzag_planes(np.diff(counts, axis=-1, prepend=0))


def _payload(motions: list[Motion], look: Look, stride: int) -> tuple[dict, bytes]:
    meshes: list[dict] = []
    chunks: list[bytes] = []
    index_of: dict[str, int] = {}

    def mesh(triangles: Triangles) -> int:
        arrays = triangle_arrays(triangles)
        key = hashlib.sha1(b"".join(arrays)).hexdigest()  # equal bodies share one mesh
        if key not in index_of:
            chunks.extend(arrays)
            meshes.append({"vertices": len(triangles[0]), "indices": int(np.size(triangles[2]))})
            index_of[key] = len(meshes) - 1
        return index_of[key]

    runs = []
    for r, motion in enumerate(motions):
        bodies = [
            {"name": name, "parts": [mesh(t) for t in look.meshes[r][b]], "colour": _srgb(PALETTE[b % len(PALETTE)])}
            for b, name in enumerate(motion.bodies)
        ]
        ground = [mesh(t) for t in look.ground[r]]
        runs.append((r, motion, bodies, ground))
    data = [b"".join(chunks)]
    headers = []
    for r, motion, bodies, ground in runs:
        keep = np.arange(0, len(motion.times), stride)
        if keep[-1] != len(motion.times) - 1:
            keep = np.r_[keep, len(motion.times) - 1]
        sizes = look.sizes[r]
        origin = 0.5 * (sizes.lo + sizes.hi)
        quantum = max(float(np.max(sizes.hi - sizes.lo)), 1e-6) * 2.0**-24
        moves = _track(motion.translation[:, keep], quantum, origin)
        turns = _track(motion.rotation[:, keep], _TURN_QUANTUM, np.zeros(4))
        data += [np.asarray(motion.times[keep], dtype="<f8").tobytes(), moves, turns]
        # the copy's label (compare) sits above its box
        top = origin + motion.up * float(np.max((sizes.hi - origin) * np.abs(motion.up)))
        headers.append(
            {
                "label": motion.label,
                "keys": len(keep),
                "recorded": len(motion.times),
                "bodies": bodies,
                "ground": ground,
                "offset": [float(x) for x in look.offsets[r]],
                "origin": [float(x) for x in origin],
                "quantum": quantum,
                "turn_quantum": _TURN_QUANTUM,
                "label_at": [float(x) for x in top],
            }
        )
    header = {
        "dimension": motions[0].dimension,
        "root": [float(x) for x in up_rotation(motions[0].up)],
        "box": {"lo": [float(x) for x in look.lo], "hi": [float(x) for x in look.hi]},
        "meshes": meshes,
        "runs": headers,
        "ground_colour": _srgb(GROUND_COLOUR),
    }
    return header, zlib.compress(b"".join(data), 6)


# Characters of JSON text that are escaped inside the page's <script> element: "<" (a name holding
# "</script>" would end the element early, and "<!--<script>" would keep it open past its real
# end: a blank page), and ">" and "&" for good measure, each as its \uXXXX escape, which
# JSON.parse reads back as the character. ensure_ascii escapes the rest that matters (U+2028 and
# U+2029, which older script parsers take for line ends).
_SCRIPT_UNSAFE = re.compile("[<>&]")


def script_json(value: object) -> str:
    """``value`` as JSON text that can sit inside an HTML ``<script>`` element whatever its strings hold."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=True)
    return _SCRIPT_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _describe(motion: Motion) -> str:
    a = motion.attrs
    status = a.get("status", "")
    text = f"{motion.label}: {a.get('method', '')}" + (f" / {a['integrator']}" if a.get("integrator") else "")
    text += f", {status}" + (f" ({a['message']})" if a.get("message") and status != "completed" else "")
    return text


def page(motions: list[Motion], look: Look) -> str:
    """The HTML page of the motions: each run's label, method and status as text, the viewer."""
    template = resources.files("mbsim.output").joinpath("viewer.html").read_text(encoding="utf-8")
    script = resources.files("mbsim.output").joinpath("viewer.js").read_text(encoding="utf-8")
    stride, notes = 1, [note for m in motions for note in m.notes]
    rows = max(len(m.times) for m in motions)
    while True:
        header, packed = _payload(motions, look, stride)
        size = len(template) + len(script) + 4 * len(packed) // 3 + len(json.dumps(header)) + 4096
        if size <= PAGE_BUDGET or stride >= rows:
            break
        stride = max(stride + 1, int(np.ceil(stride * size / PAGE_BUDGET * 1.05)))
    if stride > 1:
        notes.append(
            f"every {stride}th recorded row is shown (the page stays under {PAGE_BUDGET // 1_000_000} MB); "
            "the .glb export keeps every row"
        )
    scene = motions[0].attrs.get("scene_name") or motions[0].label
    runs = "".join(
        f'<li class="{"" if m.attrs.get("status") == "completed" else "failed"}">{html.escape(_describe(m))}</li>'
        for m in motions
    )
    header_text = script_json(header)
    heading = scene if len(motions) == 1 else f"{scene}: {len(motions)} runs side by side"
    values = {
        "TITLE": html.escape(f"{scene} — mbsim"),
        "HEADING": html.escape(heading),
        "RUNS": runs,
        "NOTES": html.escape("; ".join(notes)),
        "HEADER": header_text,
        "DATA": base64.b64encode(packed).decode("ascii"),
        "VIEWER": script,
    }
    # one pass over the template: a scene name holding "__DATA__" stays text
    return re.sub(r"__([A-Z]+)__", lambda m: values.get(m.group(1), m.group(0)), template)


__all__ = ["PAGE_BUDGET", "page", "script_json"]
