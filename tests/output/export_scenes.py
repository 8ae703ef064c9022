"""Scenes for the export tests (CONTRACT §7), and a reader of .glb files (fixtures: conftest.py).

The reader decodes accessors with numpy from pygltflib's parsed JSON, independently of the
writer's layout code (mbsim.output.gltf), so a wrong offset, stride or component order shows.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from mbsim.cli.main import cli

# every 3D shape type on tumbling bodies, a mesh file and a generated mesh, ground plane and box
SHAPES_3D = """
mbsim: 1
name: every shape
gravity: [0, 0, -9.81]
time: {end: 0.3, step: 1.0e-3}
solver: {method: lagrange, integrator: rk4}
output: {every: 7}
ground:
  shapes:
    - {type: plane, point: [0, 0, -2], normal: [0, 0, 1]}
    - type: box
      size: [0.4, 0.3, 0.2]
      pose: {position: [3, 0, -1.9], orientation: {axis_angle: {axis: [0, 0, 1], angle: 0.4}}}
bodies:
  - name: brick
    mass: 2.0
    inertia: [0.1, 0.2, 0.25]
    position: [0, 0, 0]
    angular_velocity: [3, -2, 5]
    velocity: [0.5, 0, 1]
    shapes:
      - type: box
        size: [0.5, 0.3, 0.2]
        pose: {position: [0.1, 0.05, 0], orientation: {axis_angle: {axis: [1, 1, 0], angle: 0.7}}}
      - {type: sphere, radius: 0.12, pose: {position: [-0.3, 0, 0.1]}}
      - {type: point, position: [0.2, 0.2, 0.2]}
  - name: roller
    density: 800
    position: [1, 0.5, 0.2]
    angular_velocity: [-4, 1, 2]
    shapes:
      - {type: cylinder, radius: 0.1, length: 0.4}
      - {type: capsule, radius: 0.05, length: 0.3, pose: {position: [0, 0, 0.35]}}
  - name: part
    density: 1000
    position: [-1, 0.2, 0.5]
    angular_velocity: [1, 6, -1]
    shapes:
      - {type: mesh, file: part.stl, scale: 0.5, pose: {position: [0.02, 0, 0]}}
  - name: knot
    density: 1000
    position: [0.5, -1, 0.3]
    angular_velocity: [2, 2, 2]
    shapes:
      - type: mesh
        generate: {kind: convex_hull, points: [[0, 0, 0], [0.2, 0, 0], [0, 0.2, 0], [0, 0, 0.2], [0.15, 0.15, 0.15]]}
  - name: bare
    mass: 1.0
    inertia: [0.02, 0.03, 0.04]
    position: [0, 1, 0]
    angular_velocity: [0, 0, 3]
"""

# every 2D shape type, gravity along -y, a rotating pendulum on a revolute joint
SHAPES_2D = """
mbsim: 1
name: planar shapes
dimension: 2
gravity: [0, -9.81]
time: {end: 0.5, step: 1.0e-3}
solver: {method: lagrange, integrator: rk4}
output: {every: 5}
ground:
  shapes:
    - {type: line, point: [0, -1], normal: [0, 1]}
bodies:
  - name: arm
    mass: 1.0
    inertia: 0.1
    position: [0.5, 0]
    shapes:
      - {type: rectangle, size: [1.0, 0.1], pose: {orientation: 0.2}}
      - {type: point, position: [0.5, 0]}
  - name: disc
    mass: 0.5
    inertia: 0.01
    position: [2, 0.5]
    velocity: [0, 1]
    angular_velocity: 7
    shapes:
      - {type: circle, radius: 0.2, pose: {position: [0.05, 0]}}
joints:
  - {name: pin, type: revolute, body1: ground, body2: arm, point: [0, 0]}
"""


def run_scene(folder: Path, text: str, name: str = "scene", extra: tuple[str, ...] = ()) -> Path:
    """Write the scene into ``folder`` (with part.stl), run it, return the result path."""
    import trimesh

    folder.mkdir(parents=True, exist_ok=True)
    trimesh.creation.box(extents=[0.3, 0.2, 0.1]).export(folder / "part.stl")
    scene = folder / f"{name}.yaml"
    scene.write_text(text, encoding="utf-8")
    out = folder / f"{name}.h5"
    result = CliRunner().invoke(cli, ["run", str(scene), "-o", str(out), "-q", *extra], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


class Glb:
    """A parsed .glb: the JSON document (pygltflib) and its accessors as numpy arrays."""

    def __init__(self, path: Path) -> None:
        import pygltflib

        data = path.read_bytes()
        magic, version, length = struct.unpack("<4sII", data[:12])
        assert magic == b"glTF" and version == 2 and length == len(data)
        json_length, json_type = struct.unpack("<I4s", data[12:20])
        assert json_type == b"JSON"
        bin_start = 20 + json_length
        bin_length, bin_type = struct.unpack("<I4s", data[bin_start : bin_start + 8])
        assert bin_type == b"BIN\0"
        self.blob = data[bin_start + 8 : bin_start + 8 + bin_length]
        self.doc = pygltflib.GLTF2.load_binary(str(path))
        assert self.doc.asset.version == "2.0"

    def accessor(self, index: int) -> np.ndarray:
        acc = self.doc.accessors[index]
        view = self.doc.bufferViews[acc.bufferView]
        dtype = {5126: "<f4", 5125: "<u4", 5123: "<u2"}[acc.componentType]
        width = {"SCALAR": 1, "VEC3": 3, "VEC4": 4}[acc.type]
        start = view.byteOffset + (acc.byteOffset or 0)
        size = np.dtype(dtype).itemsize
        assert view.byteStride in (None, 0, size * width)
        assert (acc.byteOffset or 0) + acc.count * width * size <= view.byteLength
        out = np.frombuffer(self.blob, dtype=dtype, count=acc.count * width, offset=start)
        return out.reshape(acc.count, width) if width > 1 else out

    def node(self, name: str, parent: int | None = None) -> int:
        """Index of the node named ``name`` (among ``parent``'s children if given)."""
        candidates = range(len(self.doc.nodes)) if parent is None else self.doc.nodes[parent].children
        found = [i for i in candidates if self.doc.nodes[i].name == name]
        assert len(found) == 1, (name, found)
        return found[0]

    def parent(self, index: int) -> int | None:
        return next((i for i, n in enumerate(self.doc.nodes) if index in (n.children or [])), None)

    def channels(self, node: int) -> dict[str, tuple[np.ndarray, np.ndarray, str]]:
        """path -> (key times, values, interpolation) of the animation channels of ``node``."""
        (animation,) = self.doc.animations
        out = {}
        for channel in animation.channels:
            if channel.target.node == node:
                sampler = animation.samplers[channel.sampler]
                out[channel.target.path] = (
                    self.accessor(sampler.input),
                    self.accessor(sampler.output),
                    sampler.interpolation,
                )
        return out

    def primitives(self, node: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(positions, normals, triangle indices) of the primitives of ``node``'s mesh."""
        mesh = self.doc.meshes[self.doc.nodes[node].mesh]
        return [
            (self.accessor(p.attributes.POSITION), self.accessor(p.attributes.NORMAL), self.accessor(p.indices))
            for p in mesh.primitives
        ]


def rotate(q_xyzw: np.ndarray, v: np.ndarray) -> np.ndarray:
    """v turned by the unit quaternion (x, y, z, w)."""
    x, y, z, w = q_xyzw
    u = np.array([x, y, z])
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


def validator() -> Path | None:
    """Khronos' glTF validator (npm package gltf-validator), where .ci/run installed it."""
    import os

    where = os.environ.get("MBSIM_GLTF_VALIDATOR")
    candidates = [Path(where)] if where else []
    candidates.append(Path(__file__).resolve().parents[2] / ".ci-node" / "node_modules" / "gltf-validator")
    found = next((c for c in candidates if (c / "package.json").is_file()), None)
    return found if found is not None and shutil.which("node") else None
