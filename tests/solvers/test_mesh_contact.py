"""Triangle meshes in contact (papers/sdf-octree-contact-dynamics.txt): rigid contacts of meshes
through their signed distance fields under method timestepping, the undamped Hertz impact of a
mesh sphere against its single-point analytic solution, the paper's step control, the blocks'
error against the step (its figure 8a), and the mesh_on_box scene."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import trimesh
from scipy.signal import argrelmax

SCENES = Path(__file__).resolve().parents[2] / "scenes"
CUBE = [[x, y, z] for x in (-0.1, 0.1) for y in (-0.1, 0.1) for z in (-0.1, 0.1)]


def _slab(half: float = 1.0, depth: float = 0.2) -> list[list[float]]:
    return [[x, y, z] for x in (-half, half) for y in (-half, half) for z in (-depth, 0.0)]


def test_ball_bounces_on_a_mesh_slab_as_on_a_plane(run_scene):
    """Newton restitution 0.8 on the ground's mesh: apex k at 0.8^(2k) of the 1 m drop, as on a plane
    (two bounces: the second apex comes at t = 1.46 s)."""
    scene = {
        "mbsim": 1,
        "name": "ball on mesh",
        "gravity": [0, 0, -9.81],
        "time": {"end": 1.6, "step": 2e-4},
        "solver": {"method": "timestepping"},
        "output": {"every": 5},
        "ground": {"shapes": [{"type": "mesh", "generate": {"kind": "convex_hull", "points": _slab()}}]},
        "bodies": [
            {
                "name": "ball",
                "mass": 1.0,
                "inertia": [0.004] * 3,
                "position": [0.1, 0.2, 1.1],
                "shapes": [{"type": "sphere", "radius": 0.1}],
            },
        ],  # fmt: skip
        "contacts": [{"type": "rigid", "body1": "ground", "body2": "ball", "restitution": 0.8}],
    }
    _, res = run_scene(scene)
    z = res["bodies/ball/position"][:, 2] - 0.1
    apex = z[argrelmax(z)[0]]
    np.testing.assert_allclose(apex, [0.8**2, 0.8**4], rtol=3e-3)
    xy = res["bodies/ball/position"][:, :2]
    assert np.abs(xy - [0.1, 0.2]).max() < 1e-9  # the slab's normal is exactly vertical


@pytest.mark.slow
def test_mesh_cube_lands_and_rests_like_a_box(run_scene):
    """A cube given as a mesh (convex hull of its corners) tumbling onto a plane comes to rest on a
    face at its half size, as the box primitive does, without sinking."""
    results = {}
    for kind in ("mesh", "box"):
        shape = (
            {"type": "mesh", "generate": {"kind": "convex_hull", "points": CUBE}}
            if kind == "mesh"
            else {"type": "box", "size": [0.2, 0.2, 0.2]}
        )
        scene = {
            "mbsim": 1,
            "name": f"{kind} cube",
            "gravity": [0, 0, -9.81],
            "time": {"end": 1.5, "step": 1e-3},
            "solver": {"method": "timestepping"},
            "ground": {"shapes": [{"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]}]},
            "bodies": [
                {
                    "name": "cube",
                    "density": 1000,
                    "position": [0, 0, 0.3],
                    "orientation": {"axis_angle": {"axis": [1, 1, 0], "angle": 0.4}},
                    "shapes": [shape],
                },
            ],  # fmt: skip
            "contacts": [{"type": "rigid", "body1": "ground", "body2": "cube", "friction": 0.5}],
        }
        _, results[kind] = run_scene(scene)
    for kind, res in results.items():
        assert res["bodies/cube/position"][-1, 2] == pytest.approx(0.1, abs=1e-6), kind
        assert np.abs(res["bodies/cube/velocity"][-1]).max() < 1e-6, kind
        assert res["diagnostics/contacts/max_penetration"].max() < 2e-3, kind
    # resting on a face: the body's z axis (or x or y) is vertical
    q = results["mesh"]["bodies/cube/orientation"][-1]
    R = trimesh.transformations.quaternion_matrix(q)[:3, :3]
    assert np.abs(R[2]).max() == pytest.approx(1.0, abs=1e-6)


@pytest.mark.slow  # ~3 s; the quick loop keeps the ball on a mesh slab
def test_mesh_on_mesh_rests_at_the_lowest_vertex(run_scene):
    """A rippled torus mesh dropped flat on a mesh slab rests on its lowest vertices (both
    directions of the mesh-mesh test at work)."""
    torus = {"kind": "rippled_torus", "major": 0.1, "minor": 0.03, "ripple": 0.1, "waves": 6, "segments": [48, 24]}
    scene = {
        "mbsim": 1,
        "name": "torus on slab",
        "gravity": [0, 0, -9.81],
        "time": {"end": 0.8, "step": 1e-3},
        "solver": {"method": "timestepping"},
        "ground": {"shapes": [{"type": "mesh", "generate": {"kind": "convex_hull", "points": _slab(0.5)}}]},
        "bodies": [
            {
                "name": "torus",
                "mass": 1.0,
                "inertia": [0.003, 0.003, 0.006],
                "position": [0, 0, 0.05],
                "shapes": [{"type": "mesh", "generate": torus}],
            },
        ],  # fmt: skip
        "contacts": [{"type": "rigid", "body1": "ground", "body2": "torus", "friction": 0.5}],
    }
    _, res = run_scene(scene)
    from mbsim.model.meshgen import rippled_torus

    lowest = -rippled_torus(0.1, 0.03, 0.1, 6, (48, 24)).vertices[:, 2].min()
    z = res["bodies/torus/position"][-1, 2]
    # it settles on its lowest vertices (it may tilt onto neighbours of them: within one ripple)
    assert lowest - 1e-6 <= z <= lowest + 0.03 * 0.1
    assert np.abs(res["bodies/torus/velocity"][-1]).max() < 1e-5


def test_undamped_hertz_impact_of_a_mesh_sphere(run_scene):
    """A mesh sphere (icosphere, a vertex pointing down) meets a box face at v0: one sample point
    in contact, so the single-point Hertz solution holds: rebound speed = v0 and contact time
    t_c = 2.9432 delta_max / v0 with delta_max = (5 m v0^2 / (4 k))^(2/5)."""
    m, v0, k, r = 1.0, 0.1, 1.0e9, 0.05
    sphere = trimesh.creation.icosphere(subdivisions=3, radius=r)
    vertex = sphere.vertices[0] / np.linalg.norm(sphere.vertices[0])
    # the rotation taking that vertex to -z
    axis = np.cross(vertex, [0, 0, -1.0])
    angle = np.arccos(np.clip(-vertex[2], -1, 1))
    scene = {
        "mbsim": 1,
        "name": "hertz sphere",
        "time": {"end": 3.0e-3, "step": 1e-5},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": [
            {
                "name": "ball",
                "mass": m,
                "inertia": [0.4 * m * r * r] * 3,
                "position": [0, 0, r + 2e-5],
                "orientation": {"axis_angle": {"axis": axis.tolist(), "angle": float(angle)}},
                "velocity": [0, 0, -v0],
                "shapes": [{"type": "mesh", "generate": {"kind": "convex_hull", "points": sphere.vertices.tolist()}}],
            },
            {
                "name": "block",
                "mass": 1.0e9,
                "inertia": [1e9] * 3,
                "position": [0, 0, -0.05],
                "shapes": [{"type": "box", "size": [0.2, 0.2, 0.1]}],
            },
        ],  # fmt: skip
        "contacts": [
            {
                "name": "hit",
                "type": "compliant",
                "body1": "block",
                "body2": "ball",
                "stiffness": k,
                "exponent": 1.5,
                "sdf": {"cell": 0.004, "padding": 0.01},
            },
        ],  # fmt: skip
    }
    _, res = run_scene(scene)
    t = res.time
    count = res["diagnostics/contacts/count"]
    assert count.max() == 1  # single point
    touching = t[count > 0]
    contact_time = touching[-1] - touching[0] + (t[1] - t[0])
    delta = (5 * m * v0**2 / (4 * k)) ** 0.4
    expected = 2.9432 * delta / v0
    assert contact_time == pytest.approx(expected, rel=0.03)
    assert res["bodies/ball/velocity"][-1, 2] == pytest.approx(v0, rel=0.01)
    assert res["diagnostics/contacts/max_penetration"].max() == pytest.approx(delta, rel=0.01)


@pytest.mark.slow  # ~2 s: a convergence study (several runs)
def test_blocks_error_shrinks_with_the_step(run_scene):
    """The paper's figure 8a: the velocity error after impact against the step; all within 0.5%
    and smaller for smaller steps."""
    errors = []
    for step in (4e-5, 2e-5, 1e-5):
        _, res = run_scene(SCENES / "blocks_elastic.yaml", [f"time.step={step}", "output.every=1"])
        v1, v2 = res["bodies/block1/velocity"][-1, 0], res["bodies/block2/velocity"][-1, 0]
        errors.append(max(abs(v1 - 3.0) / 3.0, abs(v2 + 2.0) / 2.0))
    assert max(errors) < 5e-3
    assert errors[2] < errors[0]


def test_step_control_uses_the_small_step_only_near_contact(run_scene):
    """time.contact_step: large steps while the blocks' bounding boxes are apart, small ones
    from just before the impact on; the outcome is that of the small step throughout."""
    overrides = ["time.step=1e-3", "time.contact_step=1e-5", "time.end=0.03", "output.every=1"]
    summary, res = run_scene(SCENES / "blocks_elastic.yaml", overrides)
    h = np.diff(res.time)
    assert h.max() == pytest.approx(1e-3) and h.min() == pytest.approx(1e-5)
    assert summary.steps < 0.5 * 0.03 / 1e-5
    assert res["bodies/block1/velocity"][-1, 0] == pytest.approx(3.0, rel=5e-3)
    # every step with a contact force was a small one
    touching = res["diagnostics/contacts/count"][1:] > 0
    assert np.all(h[touching] <= 1e-5 * (1 + 1e-9))


@pytest.mark.slow
def test_mesh_on_box_lands_and_conserves_energy_when_undamped(run_scene):
    """The 230,400-triangle rippled torus falls onto the box; without damping and friction the
    energy error is that of the integrator at the small step (no loss or gain from the model:
    the elastic force is the gradient of its potential)."""
    overrides = [
        "time.end=0.12",
        "contacts.landing.damping=0",
        "contacts.landing.friction.static=0",
        "contacts.landing.friction.dynamic=0",
        "time.contact_step=2e-5",
    ]
    summary, res = run_scene(SCENES / "mesh_on_box.yaml", overrides)
    assert res["diagnostics/contacts/count"].max() > 0  # it landed
    assert summary.energy_drift < 5e-5
    assert res["diagnostics/contacts/max_penetration"].max() < 2e-3


def test_an_open_mesh_in_rigid_contact_is_a_scene_error(tmp_path):
    """A mesh with a hole has no signed distance field: exit 2 naming the shape's file key."""
    from mbsim.errors import SceneError
    from mbsim.model.compile import compile_model
    from mbsim.scene.spec import load_scene

    open_box = trimesh.creation.box(extents=[0.2, 0.2, 0.2])
    open_box.update_faces(np.arange(len(open_box.faces)) != 0)  # one triangle missing
    open_box.export(tmp_path / "open.stl")
    scene = (
        "mbsim: 1\nname: open mesh\ntime: {end: 0.1, step: 0.001}\nsolver: {method: timestepping}\n"
        "ground: {shapes: [{type: plane, point: [0, 0, 0], normal: [0, 0, 1]}]}\n"
        "bodies:\n  - {name: rock, mass: 1, inertia: [0.01, 0.01, 0.01], position: [0, 0, 0.2],\n"
        "     shapes: [{type: mesh, file: open.stl}]}\n"
        "contacts: [{type: rigid, body1: ground, body2: rock}]\n"
    )
    (tmp_path / "open.yaml").write_text(scene)
    with pytest.raises(SceneError) as info:
        compile_model(load_scene(str(tmp_path / "open.yaml")))
    message = str(info.value)
    assert "not watertight" in message and "bodies[0].shapes[0].file" in message and "open.yaml:" in message


def _stepped(scene: dict, tmp_path: Path, end: float, h: float = 1e-3):
    """The final state of ``scene`` stepped by its timestepping solver, which must be the compiled
    one (step_kernels.FreeStep) for every step."""
    from conftest import write_yaml_scene

    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare

    _, solver = prepare(load_scene(str(write_yaml_scene(scene, tmp_path / "stepped.yaml"))))
    assert solver.compiled and solver.compiled_reason == "", solver.compiled_reason
    state = solver.initial_state()
    while state.t < end - 1e-9:
        state, _, _ = solver.step(state, h)
    assert solver.python_steps == 0
    return state


_GROUNDS = {
    "plane": {"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]},
    "mesh slab": {"type": "mesh", "generate": {"kind": "convex_hull", "points": _slab()}},
}


@pytest.mark.parametrize("ground", list(_GROUNDS))
def test_mesh_contacts_take_the_compiled_step_and_meet_closed_forms(tmp_path, ground):
    """Rigid mesh contact in the compiled step (no Python step), on the ground plane (PLANE_MESH: the
    vertices' exact heights) and on a mesh slab (MESH_MESH: the vertices in the slab's field, which is
    linear, so exact, near the middle of its top face; the slab's cell is 4.4 cm, the blocks stay
    more than 4 cells from its edges): a mesh cube dropped flat from 5 cm comes to rest at its half
    height (1e-6 m: the stabilisation's residue), and a 0.2 x 0.2 x 0.1 m mesh block sliding at 2 m/s
    with mu = 0.5 stops after v^2 / (2 mu g) along its initial direction (0.5 %; 1e-9 m sideways)."""
    g, v, angle, mu = 9.81, 2.0, 0.4, 0.5
    block = [[x, y, z] for x in (-0.1, 0.1) for y in (-0.1, 0.1) for z in (-0.05, 0.05)]

    def scene(points, position, velocity):
        return {
            "mbsim": 1, "name": "mesh block", "gravity": [0, 0, -g], "time": {"end": 0.5, "step": 1e-3},
            "solver": {"method": "timestepping"},
            "ground": {"shapes": [_GROUNDS[ground]]},
            "bodies": [{"name": "block", "density": 500, "position": position, "velocity": velocity,
                        "shapes": [{"type": "mesh", "generate": {"kind": "convex_hull", "points": points}}]}],
            "contacts": [{"type": "rigid", "body1": "ground", "body2": "block", "friction": mu}],
        }  # fmt: skip

    rest = _stepped(scene(CUBE, [0.0, 0.0, 0.15], [0.0, 0.0, 0.0]), tmp_path, 0.5)
    assert rest.q[2] == pytest.approx(0.1, abs=1e-6)
    assert np.abs(rest.v).max() < 1e-6
    direction = np.array([np.cos(angle), np.sin(angle)])
    slide = _stepped(scene(block, [0.0, 0.0, 0.05], [*(v * direction).tolist(), 0.0]), tmp_path, 0.45)
    assert slide.q[:2] @ direction == pytest.approx(v**2 / (2 * mu * g), rel=5e-3)
    assert abs(slide.q[:2] @ np.array([-direction[1], direction[0]])) < 1e-9
    assert np.linalg.norm(slide.v) < 1e-9
