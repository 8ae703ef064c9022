"""The scene reference in docs/ is generated from the field tables: it must be up to date."""

from pathlib import Path

from mbsim.docs import scene_reference

ROOT = Path(__file__).resolve().parents[1]


def test_scene_reference_is_generated_from_the_code():
    committed = (ROOT / "docs" / "scene-reference.md").read_text(encoding="utf-8")
    assert committed == scene_reference() + "\n", "run: python -m mbsim.docs > docs/scene-reference.md"


def test_every_scene_in_scenes_validates():
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare

    scenes = sorted((ROOT / "scenes").glob("*.yaml"))
    assert len(scenes) >= 4
    for path in scenes:
        model, _ = prepare(load_scene(str(path)))
        assert model.nbody >= 1
        text = path.read_text(encoding="utf-8")
        assert text.startswith("#"), f"{path.name} must open with a comment block saying what it shows"
