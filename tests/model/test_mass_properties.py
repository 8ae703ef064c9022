"""Mass and inertia derived from ``density`` + shapes, through the compiled model
(``compile_model(load_scene(...))``: ``body_mass``, ``body_inertia`` about the centre of mass in body
axes), against the textbook formulas written out here: solids, the capsule as a cylinder plus two
hemispheres, meshes (a trimesh box, exact, and an icosphere, close to the sphere), composite bodies
by the parallel axis theorem, and the planar circle and rectangle.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import trimesh
import yaml
from scipy.spatial.transform import Rotation

from mbsim.model.compile import compile_model
from mbsim.scene.spec import load_scene

RHO = 780.0  # kg/m^3 (kg/m^2 in 2D)


def compiled(tmp_path: Path, shapes: list[dict], dimension: int = 3, density: float = RHO):
    """(mass, inertia) of one body made of ``shapes`` at ``density``."""
    scene = {
        "mbsim": 1,
        "name": "mass properties",
        "dimension": dimension,
        "time": {"end": 0.01, "step": 0.01},
        "bodies": [{"name": "part", "density": density, "position": [0.0] * dimension, "shapes": shapes}],
    }
    path = tmp_path / "scene.yaml"
    path.write_text(yaml.safe_dump(scene, sort_keys=False), encoding="utf-8")
    model = compile_model(load_scene(str(path)))
    return float(model.body_mass[0]), model.body_inertia[0]


# ----------------------------------------------------------------------------- formulas, density 1


def box(a, b, c):
    m = a * b * c
    return m, m / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])


def sphere(r):
    m = 4 / 3 * np.pi * r**3
    return m, 2 / 5 * m * r * r * np.eye(3)


def cylinder(r, h):
    """Solid cylinder, axis z, about its centre."""
    m = np.pi * r * r * h
    side = m * (3 * r * r + h * h) / 12
    return m, np.diag([side, side, m * r * r / 2])


def capsule(r, h):
    """Cylinder of length h plus two hemispheres (axis z, about the centre). A hemisphere's centre of mass
    is 3r/8 from its flat face; about the face centre its transverse inertia is 2/5 m r^2 (half a sphere),
    so about its own centre of mass 2/5 m r^2 - m (3r/8)^2, then shifted by h/2 + 3r/8."""
    m_cyl, i_cyl = cylinder(r, h)
    m_hemi = 2 / 3 * np.pi * r**3
    hemi_side = 2 / 5 * m_hemi * r * r - m_hemi * (3 * r / 8) ** 2 + m_hemi * (h / 2 + 3 * r / 8) ** 2
    hemi_axial = 2 / 5 * m_hemi * r * r
    return m_cyl + 2 * m_hemi, i_cyl + 2 * np.diag([hemi_side, hemi_side, hemi_axial])


def parallel_axis(parts):
    """Combine (mass, centre, inertia about that centre in common axes): total mass, centre, inertia."""
    mass = sum(m for m, _, _ in parts)
    com = sum(m * np.asarray(c) for m, c, _ in parts) / mass
    inertia = sum(
        i
        + m
        * (
            (np.asarray(c) - com) @ (np.asarray(c) - com) * np.eye(3)
            - np.outer(np.asarray(c) - com, np.asarray(c) - com)
        )
        for m, c, i in parts
    )
    return mass, com, inertia


# ----------------------------------------------------------------------------- single solids


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        pytest.param({"type": "box", "size": [0.3, 0.5, 1.2]}, box(0.3, 0.5, 1.2), id="box"),
        pytest.param({"type": "sphere", "radius": 0.2}, sphere(0.2), id="sphere"),
        pytest.param({"type": "cylinder", "radius": 0.1, "length": 0.8}, cylinder(0.1, 0.8), id="cylinder"),
        pytest.param({"type": "capsule", "radius": 0.15, "length": 0.6}, capsule(0.15, 0.6), id="capsule"),
        pytest.param({"type": "capsule", "radius": 0.4, "length": 0.1}, capsule(0.4, 0.1), id="capsule-stubby"),
    ],
)
def test_solid_mass_and_inertia(tmp_path, shape, expected):
    mass, inertia = compiled(tmp_path, [shape])
    m1, i1 = expected
    assert mass == pytest.approx(RHO * m1, rel=1e-12)
    np.testing.assert_allclose(inertia, RHO * i1, rtol=1e-12, atol=1e-15)


def test_capsule_matches_a_fine_capsule_mesh(tmp_path):
    """The capsule formula against trimesh's integration over a finely tessellated capsule (to 0.1 %)."""
    r, h = 0.15, 0.6
    mesh = trimesh.creation.capsule(height=h, radius=r, count=[128, 128])
    _, i1 = capsule(r, h)
    assert mesh.volume == pytest.approx(capsule(r, h)[0], rel=1e-3)
    np.testing.assert_allclose(mesh.moment_inertia, i1, rtol=2e-3, atol=1e-12 * np.max(i1))


def test_shape_pose_rotates_and_offsets_the_inertia(tmp_path):
    """A cylinder turned 90 degrees about x (axis along -y) and moved off the origin: the body frame is
    put at the centre of mass, so the offset disappears and only the rotation remains."""
    shape = {
        "type": "cylinder",
        "radius": 0.1,
        "length": 0.8,
        "pose": {
            "position": [0.3, -0.2, 0.5],
            "orientation": {"axis_angle": {"axis": [1, 0, 0], "angle": float(np.pi / 2)}},
        },
    }
    mass, inertia = compiled(tmp_path, [shape])
    m1, i1 = cylinder(0.1, 0.8)
    assert mass == pytest.approx(RHO * m1, rel=1e-12)
    side, axial = i1[0, 0], i1[2, 2]
    np.testing.assert_allclose(inertia, RHO * np.diag([side, axial, side]), rtol=1e-12, atol=1e-12 * RHO * side)


# ----------------------------------------------------------------------------- meshes


def test_box_mesh_in_an_stl_file(tmp_path):
    """A trimesh box (exact for a polyhedron), turned and moved, written to STL and read with scale 2."""
    extents = np.array([0.3, 0.5, 0.7])
    turn = Rotation.from_rotvec([0.4, -0.3, 0.9])
    transform = np.eye(4)
    transform[:3, :3] = turn.as_matrix()
    transform[:3, 3] = [0.2, 0.1, -0.3]
    trimesh.creation.box(extents=extents, transform=transform).export(tmp_path / "brick.stl")
    mass, inertia = compiled(tmp_path, [{"type": "mesh", "file": "brick.stl", "scale": 2.0}])
    m1, i1 = box(*(2 * extents))
    R = turn.as_matrix()
    # STL stores float32 vertices (relative rounding 6e-8): measured mass error 1.5e-8 relative
    assert mass == pytest.approx(RHO * m1, rel=1e-6)
    np.testing.assert_allclose(inertia, RHO * R @ i1 @ R.T, rtol=1e-6, atol=1e-6 * RHO * np.max(i1))


def test_icosphere_mesh_is_close_to_the_sphere(tmp_path):
    """An icosphere (4 subdivisions, 2562 vertices on the sphere) is slightly smaller than the sphere it
    is inscribed in: its mass and inertia are below the sphere's by well under 1 %, isotropic."""
    r = 0.25
    trimesh.creation.icosphere(subdivisions=4, radius=r).export(tmp_path / "ball.stl")
    mass, inertia = compiled(tmp_path, [{"type": "mesh", "file": "ball.stl"}])
    m1, i1 = sphere(r)
    assert 0.99 * RHO * m1 < mass < RHO * m1
    assert np.all(np.diag(inertia) < RHO * i1[0, 0])
    np.testing.assert_allclose(inertia, RHO * i1, rtol=1e-2, atol=1e-3 * RHO * i1[0, 0])


# ----------------------------------------------------------------------------- composite bodies


def test_composite_body_by_the_parallel_axis_theorem(tmp_path):
    """A box at the origin, a sphere off to one side, a turned cylinder and a massless point: mass adds,
    the centre of mass is the mass-weighted mean (the compiled body frame sits there), and the inertia
    about it is the sum of the parts' inertias shifted by the parallel axis theorem."""
    turn = Rotation.from_rotvec([0.0, 0.5, 0.3])
    quat = turn.as_quat()  # x, y, z, w
    shapes = [
        {"type": "box", "size": [0.4, 0.2, 0.1]},
        {"type": "sphere", "radius": 0.1, "pose": {"position": [0.5, 0.1, 0.0]}},
        {
            "type": "cylinder",
            "radius": 0.05,
            "length": 0.3,
            "pose": {
                "position": [-0.2, 0.0, 0.25],
                "orientation": {"quaternion": [float(quat[3]), float(quat[0]), float(quat[1]), float(quat[2])]},
            },
        },
        {"type": "point", "position": [1.0, 1.0, 1.0]},
    ]
    mass, inertia = compiled(tmp_path, shapes)
    R = turn.as_matrix()
    mb, ib = box(0.4, 0.2, 0.1)
    ms, i_s = sphere(0.1)
    mc, ic = cylinder(0.05, 0.3)
    m1, com, i1 = parallel_axis([(mb, [0, 0, 0], ib), (ms, [0.5, 0.1, 0.0], i_s), (mc, [-0.2, 0, 0.25], R @ ic @ R.T)])
    assert mass == pytest.approx(RHO * m1, rel=1e-12)
    np.testing.assert_allclose(inertia, RHO * i1, rtol=1e-12, atol=1e-12 * RHO * np.max(i1))
    # the centre of mass really is off the origin, so the shift terms mattered
    assert np.linalg.norm(com) > 0.05
    assert np.max(np.abs(inertia - RHO * (ib + i_s + R @ ic @ R.T))) > 0.1 * np.max(np.abs(inertia))


def test_two_spheres_on_a_dumbbell(tmp_path):
    """Two equal spheres a distance d apart: I_axial = 2 (2/5 m r^2), I_transverse = that + 2 m (d/2)^2."""
    r, d = 0.1, 0.6
    shapes = [
        {"type": "sphere", "radius": r, "pose": {"position": [0.0, 0.0, -d / 2]}},
        {"type": "sphere", "radius": r, "pose": {"position": [0.0, 0.0, d / 2]}},
    ]
    mass, inertia = compiled(tmp_path, shapes)
    m = RHO * 4 / 3 * np.pi * r**3
    axial = 2 * 2 / 5 * m * r * r
    np.testing.assert_allclose(inertia, np.diag([axial + 2 * m * (d / 2) ** 2] * 2 + [axial]), rtol=1e-12)
    assert mass == pytest.approx(2 * m, rel=1e-12)


# ----------------------------------------------------------------------------- planar


@pytest.mark.parametrize(
    ("shapes", "mass_expected", "inertia_expected"),
    [
        pytest.param([{"type": "circle", "radius": 0.3}], np.pi * 0.09, 0.5 * np.pi * 0.09 * 0.09, id="circle"),
        pytest.param([{"type": "rectangle", "size": [0.4, 1.0]}], 0.4, 0.4 * (0.16 + 1.0) / 12, id="rectangle"),
        # rectangle at the origin and a circle at (0.6, 0.2): centre of mass at (0.6 mc/(mr+mc), 0.2 mc/(mr+mc))
        pytest.param(
            [
                {"type": "rectangle", "size": [0.4, 1.0]},
                {"type": "circle", "radius": 0.1, "pose": {"position": [0.6, 0.2]}},
            ],
            0.4 + np.pi * 0.01,
            0.4 * 1.16 / 12
            + 0.5 * np.pi * 0.01 * 0.01
            + 0.4 * np.pi * 0.01 / (0.4 + np.pi * 0.01) * (0.6**2 + 0.2**2),  # reduced mass x distance^2
            id="rectangle+circle",
        ),
    ],
)
def test_planar_mass_and_inertia(tmp_path, shapes, mass_expected, inertia_expected):
    mass, inertia = compiled(tmp_path, shapes, dimension=2)
    assert mass == pytest.approx(RHO * mass_expected, rel=1e-12)
    assert inertia.shape == (1, 1)
    assert inertia[0, 0] == pytest.approx(RHO * inertia_expected, rel=1e-12)
