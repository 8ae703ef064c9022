"""Shape types as compiled data (mbsim.model.shapes): each type's world boxes and bounding radii
against its own triangle surface turned at random, the compiled arrays of a scene against its
values (body frame at the centre of mass), the bodies' bounding radii against closed forms (a
mesh's is exact, no longer a guessed 1 m), and that one module holds each type and no module
outside branches on a type's name."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import numpy as np
import pytest
import trimesh
import yaml
from scipy.spatial.transform import Rotation

from mbsim.model.compile import compile_model
from mbsim.model.contact.jacobian import bounding_radii
from mbsim.model.shapes import SHAPE_CODES, SHAPE_TYPES
from mbsim.scene.spec import load_scene

PACKAGE = Path(__file__).resolve().parents[2] / "mbsim"
RNG_SEED = 31

# scene values of one shape per bounded type (a mesh: a rippled torus, off-centre in its frame)
TORUS = trimesh.creation.torus(major_radius=0.3, minor_radius=0.08, major_sections=48, minor_sections=24)
TORUS.apply_translation([0.05, -0.02, 0.1])
VALUES = {
    "box": {"size": np.array([0.4, 0.2, 0.1])},
    "sphere": {"radius": 0.15},
    "cylinder": {"radius": 0.1, "length": 0.5},
    "capsule": {"radius": 0.1, "length": 0.5},
    "mesh": {"_mesh": TORUS},
    "circle": {"radius": 0.15},
    "rectangle": {"size": np.array([0.4, 0.2])},
}


def _points(name: str) -> np.ndarray:
    """Vertices of the type's own triangles (a planar shape's in the plane)."""
    kind, values = SHAPE_TYPES[name], VALUES[name]
    if kind.solid:
        return np.asarray(kind.surface(values, fine=True).vertices)
    return np.asarray(kind.display_mesh(values, 0.0, 0.01).vertices)[:, :2]


def _rotations(d: int, n: int) -> np.ndarray:
    if d == 3:
        return Rotation.random(n, random_state=RNG_SEED).as_matrix()
    a = np.random.default_rng(RNG_SEED).uniform(0, 2 * np.pi, n)
    return np.stack((np.stack((np.cos(a), -np.sin(a)), -1), np.stack((np.sin(a), np.cos(a)), -1)), -2)


@pytest.mark.parametrize("name", sorted(VALUES))
def test_world_box_holds_the_turned_surface_and_is_tight(name):
    """The AABB half extents of 20 random orientations hold every vertex of the type's surface
    turned the same way, and (the primitives, whose box is exact) exceed the vertices' extent by
    no more than the polygon's sag (40 sections, the drawn disc: r (1 - cos(pi/40)) = 3.1e-3 r)."""
    kind = SHAPE_TYPES[name]
    points = _points(name)
    d = points.shape[1]
    rot = _rotations(d, 20)
    pos = np.zeros((20, d))
    param = np.repeat(kind.param(VALUES[name])[None], 20, axis=0)
    half = kind.aabb_half(pos, None if kind.isotropic else rot, param)
    turned = np.abs(np.einsum("nij,kj->nki", rot, points)).max(axis=1)  # (20, d): farthest vertex per axis
    assert np.all(turned <= half + 1e-12)
    if name != "mesh":  # a mesh's box is the turned box of its vertices' box: holds it, not tight
        assert np.all(half <= turned + 3.5e-3 * kind.rbound(VALUES[name]))


@pytest.mark.parametrize("name", sorted(VALUES))
def test_bounding_radius_is_the_farthest_surface_point(name):
    """rbound holds every vertex of the surface, and a vertex lies on it (the sphere's, the
    cylinder's rim, the capsule's poles, the box's corners, the mesh's farthest vertex)."""
    kind = SHAPE_TYPES[name]
    farthest = float(np.linalg.norm(_points(name), axis=1).max())
    assert farthest <= kind.rbound(VALUES[name]) + 1e-12
    assert farthest == pytest.approx(kind.rbound(VALUES[name]), rel=1e-9)


def test_half_spaces_have_their_normal_as_the_last_axis():
    for name, point, normal in (("plane", [1.0, 2.0, 3.0], [0.0, 3.0, 4.0]), ("line", [1.0, 2.0], [3.0, -4.0])):
        kind = SHAPE_TYPES[name]
        pos, rot = kind.local_pose({"point": np.array(point), "normal": np.array(normal)}, len(point))
        np.testing.assert_allclose(pos, point)
        np.testing.assert_allclose(rot[:, -1], np.array(normal) / 5.0, atol=1e-15)
        np.testing.assert_allclose(rot.T @ rot, np.eye(len(point)), atol=1e-15)
        assert np.linalg.det(rot) == pytest.approx(1.0)
        assert kind.unbounded and kind.rbound({}) == np.inf


def _scene(tmp_path: Path, bodies: list, ground: list, name: str = "scene.yaml", **extra) -> Path:
    scene = {
        "mbsim": 1,
        "name": "shapes",
        "gravity": [0, 0, 0],
        "time": {"end": 0.01, "step": 1e-3},
        "ground": {"shapes": ground},
        "bodies": bodies,
        **extra,
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(scene, sort_keys=False), encoding="utf-8")
    return path


def test_compiled_arrays_follow_the_scene_with_the_body_frame_at_the_centre_of_mass(tmp_path):
    """A sphere (r 0.1) at x = +0.3 and a box (0.2 m cube) at x = -0.3, density 1000: the centre
    of mass is at x = 0.3 (V_s - V_b) / (V_s + V_b); the arrays hold the shapes about it."""
    v_s, v_b = 4 / 3 * np.pi * 0.1**3, 0.2**3
    com = 0.3 * (v_s - v_b) / (v_s + v_b)
    quarter = [float(np.cos(np.pi / 8)), 0.0, 0.0, float(np.sin(np.pi / 8))]  # 45 degrees about z
    body = {
        "name": "b",
        "density": 1000.0,
        "position": [0, 0, 1],
        "shapes": [
            {"type": "sphere", "radius": 0.1, "pose": {"position": [0.3, 0, 0]}},
            {
                "type": "box",
                "size": [0.2, 0.2, 0.2],
                "pose": {"position": [-0.3, 0, 0], "orientation": {"quaternion": quarter}},
            },
            {"type": "point", "position": [0, 0.2, 0]},
        ],
    }
    floor = {"type": "plane", "point": [0, 0, -1], "normal": [0, 0, 2]}
    m = compile_model(load_scene(str(_scene(tmp_path, [body], [floor]))))
    assert m.nshape == 4
    np.testing.assert_array_equal(m.shape_type, [SHAPE_CODES[t] for t in ("plane", "sphere", "box", "point")])
    np.testing.assert_array_equal(m.shape_body, [1, 0, 0, 0])  # the ground is body nbody
    np.testing.assert_allclose(m.shape_pos, [[0, 0, -1], [0.3 - com, 0, 0], [-0.3 - com, 0, 0], [-com, 0.2, 0]])
    np.testing.assert_allclose(m.shape_rot[0][:, 2], [0, 0, 1])
    np.testing.assert_allclose(m.shape_rot[2], Rotation.from_euler("z", 45, degrees=True).as_matrix(), atol=1e-15)
    np.testing.assert_allclose(m.shape_param, [[0, 0, 0], [0.1, 0, 0], [0.1, 0.1, 0.1], [0, 0, 0]])
    np.testing.assert_allclose(m.shape_rbound, [np.inf, 0.1, np.sqrt(3) * 0.1, 0.0])
    np.testing.assert_array_equal(m.shape_isotropic, [False, True, False, True])
    np.testing.assert_array_equal(m.shape_rounded, [False, True, False, True])
    np.testing.assert_array_equal(m.shape_solid, [False, True, True, False])
    # the farthest of: the sphere's far side, the box's corner bound (|origin| + half diagonal), the point
    reach = max(0.3 - com + 0.1, 0.3 + com + np.sqrt(3) * 0.1, np.hypot(com, 0.2))
    assert bounding_radii(m)[0] == pytest.approx(reach, rel=1e-12)


def _bar_corners(length: float, width: float) -> list[list[float]]:
    return [[sx * length / 2, sy * width / 2, sz * width / 2] for sx, sy, sz in itertools.product((-1, 1), repeat=3)]


def test_a_mesh_bar_bounding_radius_is_its_half_diagonal(tmp_path):
    """A 3 m mesh bar (0.1 m square section): the half diagonal sqrt(1.5^2 + 2 0.05^2) = 1.50167 m
    (the radius was a guessed 1 m for every mesh)."""
    bar = {
        "name": "bar",
        "density": 1000.0,
        "position": [0, 0, 1],
        "shapes": [{"type": "mesh", "generate": {"kind": "convex_hull", "points": _bar_corners(3.0, 0.1)}}],
    }
    m = compile_model(load_scene(str(_scene(tmp_path, [bar], []))))
    assert bounding_radii(m)[0] == pytest.approx(np.sqrt(1.5**2 + 2 * 0.05**2), rel=1e-9)


def test_each_shape_type_is_one_module():
    """Issue 31: every fact of a shape type in its own module of mbsim/model/shapes (as joints)."""
    for name, kind in SHAPE_TYPES.items():
        assert type(kind).__module__ == f"mbsim.model.shapes.{name}", f"shape type '{name}' lives elsewhere"


# modules that may name shape types: the types themselves, the narrow phase's pair table (keyed by
# type pairs: its job), the importers (translating URDF/MJCF geoms) and the sweep's scene rewriting
ALLOWED = ("model/shapes/", "model/contact/narrowphase.py", "model/contact/mesh_rigid.py", "models/", "sweep/")


def _names_a_type(node: ast.AST, names: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in names
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_type(e, names) for e in node.elts)
    if isinstance(node, ast.Call):  # frozenset({...})
        return any(_names_a_type(a, names) for a in node.args)
    return False


def _is_type_lookup(node: ast.AST) -> bool:
    """``x["type"]`` or ``x.get("type")``."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "type"
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "type"
    )


def test_no_module_branches_on_a_shape_type_name():
    """Detection, Jacobians, event_driven, the compliant contact and the export read the registry
    or the compiled arrays: no ``shape["type"] == "mesh"`` and no set of type names outside."""
    names = set(SHAPE_TYPES)
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel.startswith(ALLOWED) or "verify/problems" in rel:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_is_type_lookup(s) for s in sides) and any(_names_a_type(s, names) for s in sides):
                    found.append(f"{rel}:{node.lineno}")
            elif (
                isinstance(node, (ast.Set, ast.Tuple))
                and sum(isinstance(e, ast.Constant) and e.value in names for e in node.elts) >= 2
            ):
                found.append(f"{rel}:{node.lineno}")
    assert found == [], f"shape type names outside their modules: {found}"
