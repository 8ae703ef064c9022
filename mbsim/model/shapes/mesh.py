"""Mesh: a triangle mesh from a file (any format trimesh reads, checked before trimesh sees it) or
a procedural generator (mbsim.model.meshgen), scaled; watertight for mass properties and contact.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mbsim.model.shapes.base import AABB_BOX, POSE, MassProps, ShapeType, type_field
from mbsim.scene.fields import Context, Field, Number, Raw, Text
from mbsim.scene.load import KeyPath, not_a_regular_file

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


def _vertices(values: dict[str, Any]) -> np.ndarray:
    """The vertices of scene values (a trimesh under ``_mesh``) or of stored ones (``vertices``)."""
    if "_mesh" in values:
        return np.asarray(values["_mesh"].vertices, dtype=float)
    return np.asarray(values["vertices"], dtype=float)


class Mesh(ShapeType):
    name = "mesh"
    dimensions = (3,)
    fields = {
        "type": type_field("mesh"),
        "file": Field(Text(), "relative to the scene file (or give generate)", None),
        "generate": Field(Raw("{kind, ...}"), "a procedural mesh instead of a file (see Mesh generators)", None),
        "scale": Field(Number(positive=True), "scale factor", 1.0),
        "pose": POSE,
    }
    doc = "triangle mesh (any format trimesh reads); watertight for mass properties"
    aabb_kernel = AABB_BOX
    solid = True
    narrow_sdf = True
    many_contact_points = True
    stored_triangles = True

    def load(self, ctx: Context, path: KeyPath, got: dict[str, Any], base_dir: Path) -> None:
        if got["generate"] is not None:
            if got["file"] is not None:
                raise ctx.error(path, "give either file or generate, not both")
            from mbsim.model.meshgen import read_generated_mesh

            got["_mesh"] = read_generated_mesh(ctx, (*path, "generate"), got["generate"])
            if got["scale"] != 1.0:
                got["_mesh"].apply_scale(got["scale"])
            return
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

    def mass(self, values: dict[str, Any]) -> MassProps:
        props = values["_mesh"].mass_properties
        return float(props["volume"]), np.asarray(props["center_mass"]), np.asarray(props["inertia"])

    def check_mass(self, ctx: Context, values: dict[str, Any]) -> None:
        if not values["_mesh"].is_watertight:
            raise ctx.error(
                (*values["_path"], "file"),
                "the mesh is not watertight, so it has no volume to derive mass from; "
                "give mass and inertia instead or repair the mesh",
            )

    def check_contact(self, ctx: Context, values: dict[str, Any]) -> None:
        # rigid contact looks meshes up in their signed distance fields: closed ones only
        if not values["_mesh"].is_watertight:
            raise ctx.error(
                (*values["_path"], "file"),
                "the mesh is not watertight (closed and consistently wound), so it has no signed distance "
                "field for contact; repair it (trimesh: fill_holes, fix_normals) or leave the body out",
            )

    def param(self, values: dict[str, Any]) -> np.ndarray:
        # half extents of a box about the shape origin that holds the mesh
        return np.abs(_vertices(values)).max(axis=0)

    def rbound(self, values: dict[str, Any]) -> float:
        # exact: the farthest vertex from the shape origin
        return float(np.linalg.norm(_vertices(values), axis=1).max())

    def surface(self, values: dict[str, Any], fine: bool = True):
        if "_mesh" in values:
            return values["_mesh"]
        import trimesh

        return trimesh.Trimesh(values["vertices"], values["faces"], process=False)

    def triangles(self, values: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        mesh = values["_mesh"]
        return np.asarray(mesh.vertices), np.asarray(mesh.faces)


MESH = Mesh()
