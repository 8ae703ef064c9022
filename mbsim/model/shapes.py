"""Shape types: their scene keys and their mass properties (density 1).

Each shape type is one entry of ``SHAPE_TYPES``: dimensions it exists in, its field table, and
a function giving (volume, centre of volume, inertia about that centre per unit density) in
the shape's own frame. In 2D "volume" is area (density in kg/m^2). Meshes go through
trimesh's mass properties and must be watertight.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mbsim.errors import did_you_mean
from mbsim.scene.fields import Context, Custom, Field, Name, Number, Raw, Text, Vector, read_mapping
from mbsim.scene.load import KeyPath, not_a_regular_file
from mbsim.scene.readers import read_orientation  # the one orientation reader of the scene

MassProps = tuple[float, np.ndarray, np.ndarray]  # volume, centre, inertia per unit density


def _pose_reader(ctx: Context, path: KeyPath, value: Any) -> dict[str, np.ndarray]:
    got = read_mapping(
        ctx,
        path,
        value,
        {
            "position": Field(Vector("dim"), "shape origin in the body frame", None),
            "orientation": Field(Custom(read_orientation, "orientation"), "shape axes in the body frame", None),
        },
    )
    d = ctx.dimension
    pos = got["position"] if got["position"] is not None else np.zeros(d)
    if d == 3:
        from mbsim.model.spatial import quat_to_matrix

        quat = got["orientation"] if got["orientation"] is not None else np.array([1.0, 0, 0, 0])
        rot = quat_to_matrix(quat)
    else:
        a = float(got["orientation"][0]) if got["orientation"] is not None else 0.0
        rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return {"position": pos, "rotation": rot}


POSE = Field(Custom(_pose_reader, "{position, orientation} in the body frame"), "local pose", None)
SHAPE_NAME = Field(Name(), "optional name, unique on its body (compliant contacts pick shapes by it)", None)


def _box(v):
    a, b, c = v["size"]
    vol = a * b * c
    return vol, np.zeros(3), vol / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])


def _sphere(v):
    r = v["radius"]
    vol = 4.0 / 3.0 * np.pi * r**3
    return vol, np.zeros(3), 0.4 * vol * r * r * np.eye(3)


def _cylinder(v):
    r, h = v["radius"], v["length"]
    vol = np.pi * r * r * h
    side = vol * (3 * r * r + h * h) / 12.0
    return vol, np.zeros(3), np.diag([side, side, 0.5 * vol * r * r])


def _capsule(v):
    r, h = v["radius"], v["length"]  # length: between the hemisphere centres, axis z
    m_cyl = np.pi * r * r * h
    m_hemi = 2.0 / 3.0 * np.pi * r**3
    axial = 0.5 * m_cyl * r * r + 2.0 * m_hemi * 0.4 * r * r
    side = m_cyl * (h * h / 12.0 + r * r / 4.0) + 2.0 * m_hemi * (0.4 * r * r + h * h / 4.0 + 3.0 * h * r / 8.0)
    return m_cyl + 2 * m_hemi, np.zeros(3), np.diag([side, side, axial])


def _circle(v):
    r = v["radius"]
    area = np.pi * r * r
    return area, np.zeros(2), np.array([[0.5 * area * r * r]])


def _rectangle(v):
    w, h = v["size"]
    area = w * h
    return area, np.zeros(2), np.array([[area * (w * w + h * h) / 12.0]])


def _massless(v):
    return 0.0, None, None


MAX_MESH_BYTES = 256 * 1024 * 1024  # a mesh file (or what an archive holds) larger than this is refused
_TEXT_FORMATS = ("obj", "off", "stl_ascii", "dxf")  # trimesh decodes these as UTF-8 text


class MeshFileError(ValueError):
    """A mesh file that cannot be read; the message says why, in a user's words."""


def _mesh_format(file: Path) -> str:
    """trimesh's name of the file's format: its extension (``tar.gz`` and ``tar.bz2`` whole)."""
    name = file.name.lower()
    for special in ("tar.gz", "tar.bz2"):
        if name.endswith("." + special):
            return special
    return name.rsplit(".", 1)[-1] if "." in name else ""


def _check_text(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MeshFileError(
            f"not {what}: the byte 0x{data[exc.start]:02x} at offset {exc.start} is not UTF-8 text"
        ) from None


def _check_stl(data: bytes) -> None:
    """Binary STL: an 80-byte header, a triangle count, 50 bytes per triangle; else ASCII text."""
    if len(data) >= 84:
        count = int.from_bytes(data[80:84], "little")
        if len(data) == 84 + 50 * count:
            return
    try:
        text = _check_text(data, "a valid STL file (neither binary STL nor ASCII text)")
    except MeshFileError:
        if len(data) >= 84:
            raise MeshFileError(
                f"not an STL file: as binary STL its header declares {count} triangles, which take "
                f"{84 + 50 * count} bytes, but the file has {len(data)}; as ASCII STL it is not text"
            ) from None
        raise
    if not text.lstrip().lower().startswith("solid"):
        raise MeshFileError("not an STL file: ASCII STL starts with 'solid'")


def _check_references(file: Path, document: Any) -> None:
    """The files a glTF document reads besides itself (buffers, images): regular files near it,
    within the size limit; data: URIs are inside the file already."""
    from urllib.parse import unquote

    total = 0
    for group in ("buffers", "images"):
        items = document.get(group, []) if isinstance(document, dict) else []
        for item in items if isinstance(items, list) else []:
            uri = item.get("uri") if isinstance(item, dict) else None
            if not isinstance(uri, str) or uri.startswith("data:"):
                continue
            target = (file.parent / unquote(uri)).resolve()
            if not target.is_file():
                raise MeshFileError(f"it refers to '{uri[:200]}', which is not a file next to it")
            total += target.stat().st_size
            if total > MAX_MESH_BYTES:
                raise MeshFileError(f"the files it refers to have more than {MAX_MESH_BYTES} bytes")


def _check_gltf(file: Path, data: bytes, binary: bool) -> None:
    import json

    if binary:  # GLB: 12-byte header, then a JSON chunk (length, type 'JSON', text)
        if len(data) < 20 or data[:4] != b"glTF" or data[16:20] != b"JSON":
            raise MeshFileError("not a GLB file: it does not start with a glTF header and a JSON chunk")
        data = data[20 : 20 + int.from_bytes(data[12:16], "little")]
    try:
        document = json.loads(_check_text(data, "a glTF file"))
    except (ValueError, RecursionError) as exc:
        raise MeshFileError(f"not a glTF file: its JSON cannot be read ({str(exc)[:200]})") from None
    _check_references(file, document)


def _check_archive(file: Path, kind: str) -> None:
    """Archives: what they hold must stay within the size limit (a small file can unpack to
    terabytes). ZIP declares its sizes; gzip and bzip2 streams are unpacked up to the limit."""
    import bz2
    import gzip
    import zipfile

    if kind == "zip":
        try:
            with zipfile.ZipFile(file) as archive:
                total = sum(info.file_size for info in archive.infolist())
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise MeshFileError(f"not a ZIP archive ({exc})") from None
    else:
        opener = gzip.open if kind.endswith("gz") else bz2.open
        total = 0
        try:
            with opener(file, "rb") as stream:
                while total <= MAX_MESH_BYTES:
                    chunk = stream.read(1 << 20)
                    if not chunk:
                        break
                    total += len(chunk)
        except (OSError, EOFError, ValueError) as exc:
            raise MeshFileError(f"not a {kind} archive ({exc})") from None
    if total > MAX_MESH_BYTES:
        raise MeshFileError(f"the archive unpacks to more than {MAX_MESH_BYTES} bytes")


def load_mesh(file: Path, scale: float):
    """A trimesh mesh from any format trimesh reads, scaled.

    The file is checked before trimesh sees it: its size (at most ``MAX_MESH_BYTES``), that a
    text format is UTF-8 text, that an STL file is binary or ASCII STL, that a glTF file only
    refers to regular files next to it, and that an archive does not unpack past the limit.

    Raises:
        MeshFileError: the file is not a mesh trimesh can read; the message says why.
    """
    import trimesh

    size = file.stat().st_size
    if size == 0:
        raise MeshFileError("the file is empty")
    if size > MAX_MESH_BYTES:
        raise MeshFileError(
            f"the file has {size} bytes; at most {MAX_MESH_BYTES} ({MAX_MESH_BYTES >> 20} MiB) are read"
        )
    kind = _mesh_format(file)
    if kind not in trimesh.available_formats():
        raise MeshFileError(
            f"'{kind or file.name}' is not a mesh format trimesh reads "
            f"({', '.join(sorted(trimesh.available_formats()))})"
        )
    if kind in ("zip", "tar.gz", "tar.bz2", "bz2"):
        _check_archive(file, kind)
    else:
        data = file.read_bytes()
        if kind == "stl":
            _check_stl(data)
        elif kind in _TEXT_FORMATS:
            _check_text(data, f"a valid {kind.upper()} file")
        elif kind in ("gltf", "glb"):
            _check_gltf(file, data, binary=kind == "glb")
    try:
        mesh = trimesh.load(str(file), force="mesh")
    except ImportError:  # trimesh guesses the encoding of non-UTF-8 text with an optional package
        raise MeshFileError(f"not a valid {kind.upper()} file (it is not UTF-8 text)") from None
    except Exception as exc:  # trimesh raises many kinds for unreadable files
        raise MeshFileError(
            f"trimesh cannot read it as {kind.upper()}: {str(exc)[:300] or type(exc).__name__}"
        ) from None
    if not isinstance(mesh, trimesh.Trimesh):
        raise MeshFileError(f"it holds no triangle mesh (trimesh read a {type(mesh).__name__})")
    with np.errstate(all="ignore"):  # a huge scale overflows: refused just below
        if scale != 1.0:
            mesh.apply_scale(scale)
        after = ", after scaling" if scale != 1.0 else ""
        if len(mesh.vertices) and not np.all(np.isfinite(mesh.vertices)):
            raise MeshFileError(f"some vertices are not finite numbers (nan or inf{after})")
        if len(mesh.vertices) and not np.isfinite(np.prod(mesh.extents) ** 2):
            raise MeshFileError(f"the mesh is too large{after}: its volume and inertia overflow")
    return mesh


def _mesh(v):
    mesh = v["_mesh"]
    props = mesh.mass_properties
    return float(props["volume"]), np.asarray(props["center_mass"]), np.asarray(props["inertia"])


@dataclass(frozen=True)
class ShapeType:
    name: str
    dimensions: tuple[int, ...]
    fields: dict[str, Field]
    mass: Callable[[dict[str, Any]], MassProps]
    doc: str
    ground_only: bool = False


def _t(name):
    return Field(Text(), name)


SHAPE_TYPES: dict[str, ShapeType] = {
    s.name: s
    for s in (
        ShapeType(
            "box",
            (3,),
            {"type": _t("box"), "size": Field(Vector(3), "edge lengths along x, y, z, m"), "pose": POSE},
            _box,
            "cuboid centred on its frame",
        ),
        ShapeType(
            "sphere",
            (3,),
            {"type": _t("sphere"), "radius": Field(Number(positive=True), "m"), "pose": POSE},
            _sphere,
            "sphere centred on its frame",
        ),
        ShapeType(
            "cylinder",
            (3,),
            {
                "type": _t("cylinder"),
                "radius": Field(Number(positive=True), "m"),
                "length": Field(Number(positive=True), "along local z, m"),
                "pose": POSE,
            },
            _cylinder,
            "solid cylinder, axis local z, centred",
        ),
        ShapeType(
            "capsule",
            (3,),
            {
                "type": _t("capsule"),
                "radius": Field(Number(positive=True), "m"),
                "length": Field(Number(positive=True), "between hemisphere centres, m"),
                "pose": POSE,
            },
            _capsule,
            "cylinder with hemispherical caps, axis local z",
        ),
        ShapeType(
            "mesh",
            (3,),
            {
                "type": _t("mesh"),
                "file": Field(Text(), "relative to the scene file (or give generate)", None),
                "generate": Field(
                    Raw("{kind, ...}"), "a procedural mesh instead of a file (see Mesh generators)", None
                ),
                "scale": Field(Number(positive=True), "scale factor", 1.0),
                "pose": POSE,
            },
            _mesh,
            "triangle mesh (any format trimesh reads); watertight for mass properties",
        ),
        ShapeType(
            "point",
            (2, 3),
            {"type": _t("point"), "position": Field(Vector("dim"), "in the body frame")},
            _massless,
            "a contact point; no mass",
        ),
        ShapeType(
            "plane",
            (3,),
            {
                "type": _t("plane"),
                "point": Field(Vector(3), "a point of the plane"),
                "normal": Field(Vector(3, nonzero=True), "outward normal"),
            },
            _massless,
            "half-space boundary (ground only)",
            ground_only=True,
        ),
        ShapeType(
            "circle",
            (2,),
            {"type": _t("circle"), "radius": Field(Number(positive=True), "m"), "pose": POSE},
            _circle,
            "disc (planar)",
        ),
        ShapeType(
            "rectangle",
            (2,),
            {"type": _t("rectangle"), "size": Field(Vector(2), "width and height, m"), "pose": POSE},
            _rectangle,
            "rectangle centred on its frame (planar)",
        ),
        ShapeType(
            "line",
            (2,),
            {
                "type": _t("line"),
                "point": Field(Vector(2), "a point of the line"),
                "normal": Field(Vector(2, nonzero=True), "outward normal"),
            },
            _massless,
            "half-plane boundary (ground only, planar)",
            ground_only=True,
        ),
    )
}


for _shape_type in SHAPE_TYPES.values():
    _shape_type.fields["name"] = SHAPE_NAME


def read_shape(ctx: Context, path: KeyPath, value: Any, base_dir: Path, on_ground: bool) -> dict[str, Any]:
    """Check one shape entry and load its mesh if any; returns the checked values."""
    if not isinstance(value, dict) or "type" not in value:
        raise ctx.error(path, "expected a mapping with a 'type' key")
    kind = value["type"]
    names = [n for n, s in SHAPE_TYPES.items() if ctx.dimension in s.dimensions and (on_ground or not s.ground_only)]
    if kind not in names:
        raise ctx.error(
            (*path, "type"),
            f"unknown shape type '{kind}' here; expected one of {', '.join(names)}",
            did_you_mean(str(kind), names),
        )
    shape = SHAPE_TYPES[kind]
    got = read_mapping(ctx, path, value, shape.fields)
    if kind == "mesh" and got["generate"] is not None:
        if got["file"] is not None:
            raise ctx.error(path, "give either file or generate, not both")
        from mbsim.model.meshgen import read_generated_mesh

        got["_mesh"] = read_generated_mesh(ctx, (*path, "generate"), got["generate"])
        if got["scale"] != 1.0:
            got["_mesh"].apply_scale(got["scale"])
    elif kind == "mesh":
        if got["file"] is None:
            raise ctx.error(path, "a mesh needs file (any format trimesh reads) or generate")
        file = (base_dir / got["file"]).resolve()
        if not file.is_file():
            what = not_a_regular_file(file)
            raise ctx.error((*path, "file"), f"mesh file not found: {file}" if what is None else what)
        try:
            got["_mesh"] = load_mesh(file, got["scale"])
        except (MeshFileError, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ctx.error((*path, "file"), f"cannot read the mesh {file}: {reason}") from None
        if len(got["_mesh"].faces) == 0:
            raise ctx.error((*path, "file"), f"the mesh {file} has no triangles")
    got["_path"] = path
    return got


def shape_mass_properties(ctx: Context, shape: dict[str, Any], dimension: int) -> MassProps | None:
    """Mass properties (density 1) in the body frame, or None for massless shapes."""
    kind = SHAPE_TYPES[shape["type"]]
    if kind.name == "mesh" and not shape["_mesh"].is_watertight:
        raise ctx.error(
            (*shape["_path"], "file"),
            "the mesh is not watertight, so it has no volume to derive mass from; "
            "give mass and inertia instead or repair the mesh",
        )
    vol, centre, inertia = kind.mass(shape)
    if vol == 0.0:
        return None
    if vol < 0:
        raise ctx.error((*shape["_path"], "file"), "the mesh has negative volume (inverted normals)")
    pose = shape.get("pose") or {"position": np.zeros(dimension), "rotation": np.eye(dimension)}
    rot = pose["rotation"]
    centre_body = pose["position"] + rot @ centre
    if dimension == 3:
        inertia = rot @ inertia @ rot.T
    return vol, centre_body, inertia


def composite_mass_properties(
    ctx: Context, path: KeyPath, shapes: list[dict[str, Any]], density: float, dimension: int
) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass, centre of mass (body frame) and inertia about it of shapes of one density."""
    parts = [p for p in (shape_mass_properties(ctx, s, dimension) for s in shapes) if p is not None]
    if not parts:
        raise ctx.error(
            path,
            "density needs at least one shape with volume (box, sphere, cylinder, capsule, "
            "mesh; circle or rectangle in 2D)",
        )
    volume = sum(p[0] for p in parts)
    com = sum(p[0] * p[1] for p in parts) / volume
    inertia = np.zeros((3, 3)) if dimension == 3 else np.zeros((1, 1))
    for vol, centre, inert in parts:
        d = centre - com
        if dimension == 3:
            inertia += inert + vol * (d @ d * np.eye(3) - np.outer(d, d))
        else:
            inertia += inert + vol * (d @ d)
    return density * volume, com, density * inertia
