"""The cases of a sweep, checked on the client before anything runs.

Each case is the scene with the sweep's ``--set`` overrides and then the case's parameter
values applied as ``--set`` overrides (parameters win). Every case is loaded and its generic
keys checked (cheap), every mesh file it names must exist, and the first case of each distinct
solver section is also compiled and assembled as ``mbsim validate`` does, which catches an
unknown method, a bad solver option and the problems every case shares before a cluster is
started. A problem is exit 2 naming the ``--param`` or ``--set`` it came
from. Problems only the compile step of one case finds (say a negative stiffness in its
values) come back from the worker as that case's failure.

The case hash is the sha256 of the scene as loaded (the YAML text after every override, as
``/scene`` of the result file holds it), the sha256 of every mesh file the case names, and
``--strict``. A result file in OUTDIR with status ``completed`` and the same hash is the
case's result: the case is not run again.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from mbsim.errors import SceneError
from mbsim.scene.load import RawScene, apply_override, format_path, load_raw_scene
from mbsim.scene.spec import build_spec
from mbsim.simulate import prepare
from mbsim.sweep.params import Assignment, SweepParam, case_stems, expand
from mbsim.sweep.worker import CasePayload

HASH_VERSION = "mbsim-sweep-case/1"


@dataclass
class Case:
    """One case of the sweep.

    Attributes:
        index: 0-based position in the sweep.
        assignments: (key, YAML text, value) per parameter.
        stem: file-name stem; the result file is ``OUTDIR/<stem>.h5``.
        overrides: the ``--set`` assignments (the sweep's, then the parameters').
        case_hash: see the module docstring.
        meshes: (path below the worker's root, absolute path on the client) of each mesh file.
        scene_dir: the scene's directory below the worker's root.
        rewrites: overrides that point absolute mesh paths at the shipped copies.
    """

    index: int
    assignments: tuple[Assignment, ...]
    stem: str
    overrides: tuple[str, ...]
    case_hash: str
    meshes: tuple[tuple[str, str], ...] = ()
    scene_dir: str = "."
    rewrites: tuple[str, ...] = ()

    @property
    def parameters(self) -> dict[str, Any]:
        return {key: value for key, _, value in self.assignments}

    @property
    def label(self) -> str:
        return " ".join(f"{key}={text}" for key, text, _ in self.assignments)


@dataclass
class SweepPlan:
    """The checked sweep: the scene, its cases and the files they need."""

    scene_file: str
    scene_name: str
    scene_bytes: bytes
    overrides: tuple[str, ...]
    params: list[SweepParam]
    zipped: bool
    strict: bool
    cases: list[Case] = field(default_factory=list)
    assembly_report: list[dict] = field(default_factory=list)

    def payload(self, case: Case, attempt: int, topic: str = "", cache: dict | None = None) -> CasePayload:
        """The task of one attempt of ``case``; ``cache`` keeps mesh bytes read once per sweep."""
        cache = {} if cache is None else cache
        files = []
        for rel, absolute in case.meshes:
            if absolute not in cache:
                cache[absolute] = Path(absolute).read_bytes()
            files.append((rel, cache[absolute]))
        return CasePayload(
            index=case.index,
            attempt=attempt,
            scene_name=Path(self.scene_file).name,
            scene_dir=case.scene_dir,
            scene_bytes=self.scene_bytes,
            files=tuple(files),
            overrides=case.overrides + case.rewrites,
            strict=self.strict,
            case_hash=case.case_hash,
            parameters=tuple((key, value) for key, _, value in case.assignments),
            display_file=self.scene_file,
            topic=topic,
        )


def _mesh_files(raw: RawScene) -> list[tuple[tuple, str]]:
    """(key path of the ``file`` key, its text) of every mesh shape of the scene."""
    out = []
    groups = [(("ground", "shapes"), (raw.data.get("ground") or {}).get("shapes"))]
    for i, body in enumerate(raw.data.get("bodies") or []):
        if isinstance(body, dict):
            groups.append((("bodies", i, "shapes"), body.get("shapes")))
    for base, shapes in groups:
        for k, shape in enumerate(shapes if isinstance(shapes, list) else []):
            if isinstance(shape, dict) and shape.get("type") == "mesh" and isinstance(shape.get("file"), str):
                out.append(((*base, k, "file"), shape["file"]))
    return out


def _layout(raw: RawScene) -> tuple[str, tuple[tuple[str, str], ...], tuple[str, ...]]:
    """Where the scene and its meshes go below the worker's root.

    The root stands for the scene's directory or, when a mesh path climbs out of it (``../``),
    for the ancestor it climbs to, so relative paths in the scene resolve on the worker as on
    the client. A mesh given by an absolute path is shipped into ``_abs/<k>/`` and the scene's
    key rewritten to point at it (the result's ``/scene`` then shows the relative path).

    Returns:
        (scene directory below the root, (path below the root, client path) per mesh, rewrite
        overrides)

    Raises:
        SceneError: a mesh file that does not exist, at its key.
    """
    scene_dir = Path(os.path.normpath(raw.base_dir))
    entries = _mesh_files(raw)
    relative = [(path, text) for path, text in entries if not os.path.isabs(text)]
    climbs = 0
    for _, text in relative:
        rel = os.path.relpath(os.path.normpath(scene_dir / text), scene_dir)
        parts = Path(rel).parts
        climbs = max(climbs, next((i for i, p in enumerate(parts) if p != ".."), len(parts)))
    anchor = scene_dir
    for _ in range(climbs):
        anchor = anchor.parent
    below = PurePosixPath(*Path(os.path.relpath(scene_dir, anchor)).parts) if climbs else PurePosixPath(".")
    meshes, rewrites, seen = [], [], set()
    for path, text in entries:
        client = os.path.normpath(scene_dir / text)
        if not os.path.isfile(client):
            raise raw.error(path, f"mesh file not found: {client}")
        if os.path.isabs(text):
            rel = PurePosixPath("_abs", str(len(rewrites)), Path(text).name)
            climb = "/".join([".."] * len(below.parts)) if str(below) != "." else ""
            rewrites.append(f"{format_path(path)}={(climb + '/' if climb else '')}{rel}")
        else:
            rel = PurePosixPath(*Path(os.path.relpath(client, anchor)).parts)
        if (str(rel), client) not in seen:
            seen.add((str(rel), client))
            meshes.append((str(rel), client))
    return str(below), tuple(meshes), tuple(rewrites)


def case_hash(raw: RawScene, meshes: tuple[tuple[str, str], ...], strict: bool, digests: dict[str, str]) -> str:
    """sha256 of the scene as loaded, its mesh files' contents and ``--strict`` (hex)."""
    mesh_digests = []
    for rel, client in meshes:
        if client not in digests:
            try:
                digests[client] = hashlib.sha256(Path(client).read_bytes()).hexdigest()
            except OSError:
                digests[client] = "missing"
        mesh_digests.append([rel, digests[client]])
    text = json.dumps(
        {"version": HASH_VERSION, "scene": raw.to_yaml(), "meshes": sorted(mesh_digests), "strict": bool(strict)},
        sort_keys=True,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _relocate(exc: SceneError, owners: list[tuple[str, SweepParam, str]]) -> SceneError:
    """Name the ``--param`` whose value a scene error of a case comes from.

    ``owners`` holds (key path the parameter set, as formatted, the parameter, its value text).
    """
    if exc.file != "--set" or not exc.key_path:
        return exc
    for path, param, text in owners:
        if exc.key_path == path or exc.key_path.startswith((path + ".", path + "[")):
            return SceneError(f"value {text}: {exc.reason}", file=param.where, key_path=exc.key_path, hint=exc.hint)
    return exc  # the user's own --set: it names itself


def plan_sweep(
    scene_file: str,
    params: list[SweepParam],
    zipped: bool = False,
    overrides: tuple[str, ...] | list[str] = (),
    strict: bool = False,
) -> SweepPlan:
    """Check the scene and every case; nothing runs and nothing is written.

    Raises:
        SceneError: the scene, an override or a parameter value is wrong (exit 2).
    """
    base = load_raw_scene(scene_file, tuple(overrides))
    build_spec(copy.deepcopy(base))  # the scene itself (with --set), before any parameter
    assignments = expand(params, zipped)
    stems = case_stems(assignments)
    plan = SweepPlan(
        scene_file=str(scene_file),
        scene_name="",
        scene_bytes=Path(scene_file).read_bytes(),
        overrides=tuple(overrides),
        params=params,
        zipped=zipped,
        strict=strict,
    )
    digests: dict[str, str] = {}
    prepared: set[str] = set()
    for index, (case_assignments, stem) in enumerate(zip(assignments, stems, strict=True)):
        raw = copy.deepcopy(base)
        case_overrides = tuple(f"{key}={text}" for key, text, _ in case_assignments)
        owners = []  # the key path each parameter set, to name it in errors
        for param, assignment, (_, text, _) in zip(params, case_overrides, case_assignments, strict=True):
            before = set(raw.overridden)
            try:
                apply_override(raw, assignment)
            except SceneError as exc:
                raise SceneError(exc.reason, file=param.where, key_path=exc.key_path, hint=exc.hint) from None
            owners += [(format_path(path), param, text) for path in raw.overridden - before]
        try:
            spec = build_spec(raw)
            scene_dir, meshes, rewrites = _layout(raw)
            solver_key = json.dumps(raw.data.get("solver"), sort_keys=True, default=str)
            if solver_key not in prepared:  # one full check per solver section (a misspelt method)
                prepared.add(solver_key)
                model, _ = prepare(spec, strict=strict)
                if index == 0:
                    plan.scene_name = spec.name
                    plan.assembly_report = list(model.assembly_report)
        except SceneError as exc:
            raise _relocate(exc, owners) from None
        plan.cases.append(
            Case(
                index=index,
                assignments=case_assignments,
                stem=stem,
                overrides=tuple(overrides) + case_overrides,
                case_hash=case_hash(raw, meshes, strict, digests),
                meshes=meshes,
                scene_dir=scene_dir,
                rewrites=rewrites,
            )
        )
    return plan


__all__ = ["Case", "SweepPlan", "case_hash", "plan_sweep"]
