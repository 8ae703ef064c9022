"""Motions as a glTF 2.0 binary (.glb, CONTRACT §7), built with pygltflib.

pygltflib is a maintained glTF 2.0 model (dataclasses for every glTF object, the GLB container
with its chunk alignment), so this module only lays out the arrays: one buffer, a buffer view per
kind of data (vertex positions, normals, indices, key times, translations, rotations), accessors
into them with the min/max glTF asks for. trimesh's own glTF export has no animations.

Layout: node 0 is the root, a pure rotation taking the scene's up to glTF's +Y. One motion:
its children are a node per body (named as the body, its mesh one primitive per shape, its
transform the body's world pose) and ``ground``. Several motions (``mbsim compare``): the root's
children are one node per run, named by its label and translated by its offset, each holding that
run's body and ground nodes. One animation: per body a LINEAR translation and a LINEAR rotation
channel, keyed at its run's times (float32 seconds; rotations x, y, z, w).
"""

from __future__ import annotations

import hashlib

import numpy as np

from mbsim.output.geometry import Triangles, triangle_arrays
from mbsim.output.motion import Look, Motion, up_rotation

# body colours (glTF base colours, linear RGB): distinguishable, not garish
PALETTE = (
    (0.12, 0.33, 0.62),
    (0.80, 0.35, 0.08),
    (0.20, 0.52, 0.20),
    (0.65, 0.12, 0.14),
    (0.45, 0.30, 0.62),
    (0.50, 0.34, 0.25),
    (0.75, 0.40, 0.60),
    (0.40, 0.40, 0.40),
    (0.62, 0.62, 0.10),
    (0.09, 0.60, 0.65),
)
GROUND_COLOUR = (0.55, 0.55, 0.52)

ARRAY_BUFFER, ELEMENT_ARRAY_BUFFER = 34962, 34963
FLOAT, UNSIGNED_INT = 5126, 5125


class _Blob:
    """The binary buffer: byte chunks, each 4-aligned, and the glTF objects that point into it."""

    def __init__(self) -> None:
        import pygltflib as g

        self.g = g
        self.chunks: list[bytes] = []
        self.size = 0
        self.views: list = []
        self.accessors: list = []

    def view(self, data: bytes, target: int | None = None) -> int:
        pad = -self.size % 4
        if pad:
            self.chunks.append(b"\0" * pad)
            self.size += pad
        self.views.append(self.g.BufferView(buffer=0, byteOffset=self.size, byteLength=len(data), target=target))
        self.chunks.append(data)
        self.size += len(data)
        return len(self.views) - 1

    def accessor(self, view: int, offset: int, count: int, kind: str, component: int, lo=None, hi=None) -> int:
        self.accessors.append(
            self.g.Accessor(
                bufferView=view, byteOffset=offset, componentType=component, count=count, type=kind, min=lo, max=hi
            )
        )
        return len(self.accessors) - 1

    def array(self, values: np.ndarray, kind: str, target: int | None = None, bounds: bool = False) -> int:
        """An accessor over its own buffer view (float32 or uint32 by the array's dtype)."""
        component = UNSIGNED_INT if values.dtype == np.uint32 else FLOAT
        lo = hi = None
        if bounds:
            flat = values.reshape(len(values), -1)
            lo = [float(x) for x in flat.min(axis=0)]
            hi = [float(x) for x in flat.max(axis=0)]
        view = self.view(np.ascontiguousarray(values).tobytes(), target)
        return self.accessor(view, 0, len(values), kind, component, lo, hi)


def _mesh_primitives(blob: _Blob, triangles: Triangles, cache: dict[str, tuple[int, int, int]]) -> tuple[int, int, int]:
    """(POSITION, NORMAL, indices) accessors of one triangle set; equal sets share them."""
    vertices, normals, indices = triangle_arrays(triangles)
    key = hashlib.sha1(vertices + normals + indices).hexdigest()
    if key not in cache:
        v32 = np.frombuffer(vertices, dtype="<f4").reshape(-1, 3)
        count = len(v32)
        position = blob.view(vertices, ARRAY_BUFFER)
        lo, hi = [float(x) for x in v32.min(axis=0)], [float(x) for x in v32.max(axis=0)]
        cache[key] = (
            blob.accessor(position, 0, count, "VEC3", FLOAT, lo, hi),
            blob.accessor(blob.view(normals, ARRAY_BUFFER), 0, count, "VEC3", FLOAT),
            blob.accessor(blob.view(indices, ELEMENT_ARRAY_BUFFER), 0, len(indices) // 4, "SCALAR", UNSIGNED_INT),
        )
    return cache[key]


def gltf_document(motions: list[Motion], look: Look):
    """The pygltflib.GLTF2 of the motions (its binary blob set), laid out by ``look``."""
    import pygltflib as g

    blob = _Blob()
    nodes: list = [g.Node(name="mbsim root", rotation=[float(x) for x in up_rotation(motions[0].up)], children=[])]
    meshes: list = []
    materials: list = []
    material_of: dict[int, int] = {}  # palette entry (len(PALETTE): the ground) -> material index

    def material(entry: int) -> int:
        if entry not in material_of:
            ground = entry == len(PALETTE)
            colour = GROUND_COLOUR if ground else PALETTE[entry]
            pbr = g.PbrMetallicRoughness(
                baseColorFactor=[*colour, 1.0], metallicFactor=0.0, roughnessFactor=0.9 if ground else 0.6
            )
            materials.append(g.Material(name="ground" if ground else f"body{entry}", pbrMetallicRoughness=pbr))
            material_of[entry] = len(materials) - 1
        return material_of[entry]

    cache: dict[str, tuple[int, int, int]] = {}

    def mesh(name: str, parts: list[Triangles], colour: int) -> int | None:
        if not parts:
            return None
        primitives = []
        for part in parts:
            position, normal, indices = _mesh_primitives(blob, part, cache)
            primitives.append(
                g.Primitive(
                    attributes=g.Attributes(POSITION=position, NORMAL=normal),
                    indices=indices,
                    material=material(colour),
                )
            )
        meshes.append(g.Mesh(name=name, primitives=primitives))
        return len(meshes) - 1

    samplers: list = []
    channels: list = []
    several = len(motions) > 1
    for r, motion in enumerate(motions):
        parent = nodes[0]
        if several:
            nodes.append(g.Node(name=motion.label, translation=[float(x) for x in look.offsets[r]], children=[]))
            nodes[0].children.append(len(nodes) - 1)
            parent = nodes[-1]
        times = motion.times.astype(np.float32)
        time_accessor = blob.array(times, "SCALAR", bounds=True)
        k = len(times)
        # all bodies' keys in two buffer views, one accessor per body into them
        moves = blob.view(np.ascontiguousarray(motion.translation, dtype=np.float32).tobytes())
        turns = blob.view(np.ascontiguousarray(motion.rotation, dtype=np.float32).tobytes())
        for b, name in enumerate(motion.bodies):
            first_t = motion.translation[b, 0].astype(np.float32)
            first_r = motion.rotation[b, 0].astype(np.float32)
            node = g.Node(
                name=name,
                mesh=mesh(name, look.meshes[r][b], b % len(PALETTE)),
                translation=[float(x) for x in first_t],
                rotation=[float(x) for x in first_r],
            )
            nodes.append(node)
            parent.children.append(len(nodes) - 1)
            index = len(nodes) - 1
            t_acc = blob.accessor(moves, b * k * 12, k, "VEC3", FLOAT)
            r_acc = blob.accessor(turns, b * k * 16, k, "VEC4", FLOAT)
            for accessor, path in ((t_acc, "translation"), (r_acc, "rotation")):
                samplers.append(g.AnimationSampler(input=time_accessor, output=accessor, interpolation="LINEAR"))
                channels.append(
                    g.AnimationChannel(
                        sampler=len(samplers) - 1, target=g.AnimationChannelTarget(node=index, path=path)
                    )
                )
        nodes.append(g.Node(name="ground", mesh=mesh("ground", look.ground[r], len(PALETTE))))
        parent.children.append(len(nodes) - 1)
    document = g.GLTF2(
        asset=g.Asset(version="2.0", generator="mbsim export"),
        scene=0,
        scenes=[g.Scene(name="mbsim", nodes=[0])],
        nodes=nodes,
        meshes=meshes,
        materials=materials,
        accessors=blob.accessors,
        bufferViews=blob.views,
        buffers=[g.Buffer(byteLength=blob.size)],
        animations=[g.Animation(name="motion", samplers=samplers, channels=channels)] if channels else [],
    )
    document.set_binary_blob(b"".join(blob.chunks))
    return document


def glb_bytes(motions: list[Motion], look: Look) -> bytes:
    """The .glb file's bytes."""
    return b"".join(gltf_document(motions, look).save_to_bytes())


__all__ = ["GROUND_COLOUR", "PALETTE", "gltf_document", "glb_bytes"]
