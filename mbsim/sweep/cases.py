"""The cases of a sweep: checked on the client before anything runs, then derived one at a time.

Each case is the scene with the sweep's ``--set`` overrides and then the case's parameter
values applied as ``--set`` overrides (parameters win). A sweep may have 100,000 cases, so
:func:`plan_sweep` does not build them all: it checks

- the scene with the ``--set`` overrides;
- that no two ``--param`` set the same scene value (``bodies.bob.mass`` and ``bodies[0].mass``,
  or a mapping and a key inside it);
- every value of every parameter inside a real case of the sweep (the case that has that value
  and the first value of every other parameter; with ``--zip`` the case of that position):
  each value of a list (the first :data:`LIST_CHECKS` distinct ones of a longer list) and the
  first and last value of a range (the values between are numbers of the same kind). Each such
  case is loaded and its generic keys checked, every mesh file it names must exist, and the
  first :data:`PREPARE_CHECKS` of them with a distinct solver section are also compiled and
  assembled as ``mbsim validate`` does (an unknown method, a bad solver option);

and computes every case's file name. A problem is exit 2 naming the ``--param`` or ``--set``
it came from. The remaining cases are derived when they are about to run
(:meth:`SweepPlan.case`, about half a millisecond each); a problem only such a case (or the
compile step on its worker) has comes back as that case's failure, not retried.

The case hash is the sha256 of the scene as loaded (the YAML text after every override, as
``/scene`` of the result file holds it), the sha256 of every mesh file the case names, and
``--strict``. A result file in OUTDIR with status ``completed`` and the same hash is the
case's result: the case is not run again.

A scene with ``models:`` (URDF, MJCF) is expanded on the client, where its model files are:
the case ships the scene as loaded, every body and joint of the models spelled out (the text
that ``/scene`` of a run of it holds anyway), and no overrides, so that a worker on another
machine needs neither the model files nor what they include (meshes, MJCF includes and assets,
``package://`` folders); the mesh files of imported collision shapes are shipped like any
other mesh. Its hash is that of the expanded scene, so an edited model file is run again.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, overload

from mbsim import interrupts
from mbsim.errors import SceneError, UsageError
from mbsim.scene.load import RawScene, apply_override, format_path, load_raw_scene
from mbsim.scene.spec import SceneSpec, build_spec
from mbsim.simulate import prepare
from mbsim.sweep.params import (
    Assignment,
    SweepParam,
    case_at,
    case_index,
    case_stems,
    count_cases,
    iter_cases,
)
from mbsim.sweep.worker import CasePayload

HASH_VERSION = "mbsim-sweep-case/1"
LIST_CHECKS = 256  # distinct values of one list parameter checked before anything runs
PREPARE_CHECKS = 8  # distinct solver sections compiled and assembled before anything runs


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
        expanded: the scene with its ``models:`` expanded and every override applied, as YAML
            (None when it has no models: the scene file and the overrides are shipped).
    """

    index: int
    assignments: tuple[Assignment, ...]
    stem: str
    overrides: tuple[str, ...]
    case_hash: str
    meshes: tuple[tuple[str, str], ...] = ()
    scene_dir: str = "."
    rewrites: tuple[str, ...] = ()
    expanded: bytes | None = field(default=None, repr=False)

    @property
    def parameters(self) -> dict[str, Any]:
        return {key: value for key, _, value in self.assignments}

    @property
    def label(self) -> str:
        return " ".join(f"{key}={text}" for key, text, _ in self.assignments)


class CaseList(Sequence):
    """The cases of a plan as a sequence; each is derived when it is asked for (not kept)."""

    def __init__(self, plan: SweepPlan) -> None:
        self._plan = plan

    def __len__(self) -> int:
        return len(self._plan.stems)

    @overload
    def __getitem__(self, index: int) -> Case: ...
    @overload
    def __getitem__(self, index: slice) -> list[Case]: ...
    def __getitem__(self, index: int | slice) -> Case | list[Case]:
        if isinstance(index, slice):
            return [self._plan.case(k) for k in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._plan.case(index)

    def __iter__(self) -> Iterator[Case]:
        return (self._plan.case(k) for k in range(len(self)))


@dataclass
class SweepPlan:
    """The checked sweep: the scene, its parameters, every case's file name; cases on demand.

    Attributes:
        base: the scene with the sweep's ``--set`` overrides (never changed: cases copy it).
        stems: the file-name stem of every case, in sweep order.
        owners: the scene key path each parameter sets (as formatted), for messages.
        checked: how many cases were checked before anything ran.
    """

    scene_file: str
    scene_name: str
    scene_bytes: bytes
    overrides: tuple[str, ...]
    params: list[SweepParam]
    zipped: bool
    strict: bool
    base: RawScene
    stems: list[str] = field(default_factory=list)
    assembly_report: list[dict] = field(default_factory=list)
    owners: list[str] = field(default_factory=list)
    checked: int = 0
    _digests: dict[str, str] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.stems)

    @property
    def cases(self) -> CaseList:
        """Every case, derived one by one as it is read (``plan.cases[k]``, iteration)."""
        return CaseList(self)

    def assignments(self, index: int) -> tuple[Assignment, ...]:
        return case_at(self.params, self.zipped, index)

    def parameters(self, index: int) -> dict[str, Any]:
        """key -> value of case ``index`` (without deriving the case)."""
        return {key: value for key, _, value in self.assignments(index)}

    def case(self, index: int) -> Case:
        """Case ``index`` (0-based), derived now.

        Raises:
            SceneError: the case's scene is wrong, naming the ``--param`` it comes from.
        """
        return self._derive(index)[0]

    def _derive(self, index: int) -> tuple[Case, RawScene, SceneSpec]:
        assignments = self.assignments(index)
        raw = _fork(self.base)
        case_overrides = tuple(f"{key}={text}" for key, text, _ in assignments)
        owners = []  # the key path each parameter set, to name it in errors
        seen = raw.overridden
        for param, assignment, (_, text, _) in zip(self.params, case_overrides, assignments, strict=True):
            raw.overridden = set()  # only the path this parameter sets
            try:
                apply_override(raw, assignment)
            except SceneError as exc:
                raise SceneError(exc.reason, file=param.where, key_path=exc.key_path, hint=exc.hint) from None
            owners += [(format_path(path), param, text) for path in raw.overridden]
            seen |= raw.overridden
        raw.overridden = seen
        try:
            spec = build_spec(raw)
            # with models: the expanded scene (spec.raw) is what travels (module docstring)
            shipped = spec.raw if raw.data.get("models") is not None else raw
            scene_dir, meshes, rewrites = _layout(shipped)
        except SceneError as exc:
            raise _relocate(exc, owners) from None
        case = Case(
            index=index,
            assignments=assignments,
            stem=self.stems[index],
            overrides=tuple(self.overrides) + case_overrides,
            case_hash=case_hash(shipped, meshes, self.strict, self._digests),
            meshes=meshes,
            scene_dir=scene_dir,
            rewrites=rewrites,
            expanded=shipped.to_yaml().encode("utf-8") if shipped is not raw else None,
        )
        return case, raw, spec

    def payload(
        self, case: Case, attempt: int, topic: str = "", cache: dict | None = None, scratch: str = ""
    ) -> CasePayload:
        """The task of one attempt of ``case``; ``cache`` keeps mesh bytes read once per sweep;
        ``scratch``: where the worker makes its temporary directory ('' for the system's)."""
        cache = {} if cache is None else cache
        files = []
        for rel, absolute in case.meshes:
            if absolute not in cache:
                cache[absolute] = Path(absolute).read_bytes()
            files.append((rel, cache[absolute]))
        expanded = case.expanded is not None
        return CasePayload(
            index=case.index,
            attempt=attempt,
            scene_name=Path(self.scene_file).name,
            scene_dir=case.scene_dir,
            scene_bytes=case.expanded if expanded else self.scene_bytes,
            files=tuple(files),
            overrides=(() if expanded else case.overrides) + case.rewrites,
            strict=self.strict,
            case_hash=case.case_hash,
            parameters=tuple((key, value) for key, _, value in case.assignments),
            # lines of the expanded text are not lines of the user's file: say which text it is
            display_file=f"{self.scene_file} (its models: expanded)" if expanded else self.scene_file,
            topic=topic,
            scratch=scratch,
        )


def _copy_data(value: Any) -> Any:
    """A copy of plain scene data (dicts, lists, immutable scalars): 15 times deepcopy's speed."""
    if isinstance(value, dict):
        return {k: _copy_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_data(v) for v in value]
    return value


def _fork(base: RawScene) -> RawScene:
    """A copy of ``base`` that overrides may change: the data and the sets copied, the marks
    (read only) shared."""
    raw = copy.copy(base)
    raw.data = _copy_data(base.data)
    for f in dataclasses.fields(raw):
        value = getattr(raw, f.name)
        if isinstance(value, set):
            setattr(raw, f.name, set(value))
    return raw


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


def _key_paths(base: RawScene, params: list[SweepParam]) -> list[str]:
    """The scene path each parameter sets (``bodies.bob.mass`` -> ``bodies[0].mass``), found by
    applying its first value to the scene ('' when that fails: the check of the cases says why).

    Raises:
        UsageError: two parameters set the same value, or one sets a mapping another sets a key of.
    """
    paths: list[tuple] = []
    for param in params:
        raw = _fork(base)
        raw.overridden = set()
        try:
            apply_override(raw, f"{param.key}={param.texts[0]}")
        except SceneError:
            paths.append(())
            continue
        paths.append(next(iter(raw.overridden), ()))
    for i, (a, pa) in enumerate(zip(paths, params, strict=True)):
        for b, pb in zip(paths[:i], params[:i], strict=True):
            if a and b and (a[: len(b)] == b or b[: len(a)] == a):
                if a == b:
                    what = f"the same scene value ({format_path(a)})"
                else:
                    what = f"{format_path(b)} and {format_path(a)}, one inside the other"
                raise UsageError(f"this and {pb.where} set {what}", file=pa.where)
    return [format_path(p) for p in paths]


def _checked_cases(params: list[SweepParam], zipped: bool, total: int) -> list[int]:
    """The cases checked before anything runs (see the module docstring), in sweep order."""
    indices = {0}
    for position, param in enumerate(params):
        if param.is_range:
            ks = {0, len(param.texts) - 1}
        else:
            first: dict[str, int] = {}
            for k, text in enumerate(param.texts):
                if len(first) >= LIST_CHECKS:
                    break
                first.setdefault(text, k)
            ks = set(first.values())
        for k in ks:
            if zipped:
                indices.add(k)
            else:
                digits = [0] * len(params)
                digits[position] = k
                indices.add(case_index(params, zipped, tuple(digits)))
    return sorted(i for i in indices if i < total)


def plan_sweep(
    scene_file: str,
    params: list[SweepParam],
    zipped: bool = False,
    overrides: tuple[str, ...] | list[str] = (),
    strict: bool = False,
) -> SweepPlan:
    """Check the scene, the parameters and a case per value (module docstring); nothing runs and
    nothing is written. Polls the signal flag (mbsim.interrupts) as it goes.

    Raises:
        SceneError: the scene, an override or a parameter value is wrong (exit 2).
        UsageError: the parameters make no sense together (exit 2).
        Interrupted: SIGINT, SIGTERM or SIGHUP came.
    """
    interrupts.check()
    base = load_raw_scene(scene_file, tuple(overrides))
    build_spec(_fork(base))  # the scene itself (with --set), before any parameter
    total = count_cases(params, zipped)
    interrupts.check()
    plan = SweepPlan(
        scene_file=str(scene_file),
        scene_name="",
        scene_bytes=Path(scene_file).read_bytes(),
        overrides=tuple(overrides),
        params=params,
        zipped=zipped,
        strict=strict,
        base=base,
    )
    plan.owners = _key_paths(base, params)
    plan.stems = case_stems(iter_cases(params, zipped))
    prepared: set[str] = set()
    checked = _checked_cases(params, zipped, total)
    for index in checked:
        interrupts.check()
        case, raw, spec = plan._derive(index)
        solver_key = json.dumps(raw.data.get("solver"), sort_keys=True, default=str)
        if solver_key in prepared or len(prepared) >= PREPARE_CHECKS:
            continue
        prepared.add(solver_key)  # one full check per solver section (a misspelt method)
        owners = [(path, p, t) for path, p, (_, t, _) in zip(plan.owners, params, case.assignments, strict=True)]
        try:
            model, _ = prepare(spec, strict=strict, initial="given")  # each case's run finds its equilibrium
        except SceneError as exc:
            raise _relocate(exc, owners) from None
        if index == 0:
            plan.scene_name = spec.name
            plan.assembly_report = list(model.assembly_report)
    plan.checked = len(checked)
    return plan


__all__ = ["Case", "CaseList", "SweepPlan", "case_hash", "plan_sweep"]
