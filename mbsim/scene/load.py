"""YAML scene text -> plain data with the file position of every value; ``--set`` overrides.

The YAML is composed (not constructed) so that each value keeps its node mark; the marks
are kept in a dictionary keyed by the value's path (a tuple of keys and list indices).
Only YAML's safe scalar types are accepted (no Python tags).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mbsim.errors import SceneError

KeyPath = tuple[str | int, ...]


def format_path(path: KeyPath) -> str:
    """``("joints", 2, "body2")`` -> ``joints[2].body2``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


@dataclass
class RawScene:
    """Scene data as plain Python values, with marks for error messages.

    Attributes:
        data: the mapping at the top of the file, after ``--set`` overrides.
        file: the scene file name as given by the user.
        marks: path -> (line, column), both 1-based.
        base_dir: directory of the scene file (meshes are relative to it).
        overridden: paths set from the command line.
    """

    data: dict[str, Any]
    file: str
    marks: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)
    base_dir: Path = field(default_factory=Path)
    overridden: set[KeyPath] = field(default_factory=set)

    def error(self, path: KeyPath, reason: str, hint: str = "") -> SceneError:
        """A SceneError located at ``path`` (or at its nearest parent that has a mark)."""
        if path in self.overridden or any(path[:i] in self.overridden for i in range(len(path))):
            return SceneError(reason, file="--set", key_path=format_path(path), hint=hint)
        probe = path
        while probe and probe not in self.marks:
            probe = probe[:-1]
        line, col = self.marks.get(probe, (None, None))
        return SceneError(reason, file=self.file, line=line, column=col, key_path=format_path(path), hint=hint)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.data, sort_keys=False, default_flow_style=None, width=100)


def _construct(node: yaml.Node, path: KeyPath, marks: dict, file: str) -> Any:
    marks[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise SceneError(
                    "mapping keys must be plain names",
                    file=file,
                    line=key_node.start_mark.line + 1,
                    key_path=format_path(path),
                )
            key = key_node.value
            if key in out:
                raise SceneError(
                    f"duplicate key '{key}'",
                    file=file,
                    line=key_node.start_mark.line + 1,
                    column=key_node.start_mark.column + 1,
                    key_path=format_path((*path, key)),
                )
            out[key] = _construct(value_node, (*path, key), marks, file)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(child, (*path, i), marks, file) for i, child in enumerate(node.value)]
    # scalars: let the safe constructor decide the type (int, float, bool, null, str)
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    except yaml.constructor.ConstructorError as exc:
        raise SceneError(
            f"unsupported YAML value: {exc.problem}",
            file=file,
            line=node.start_mark.line + 1,
            key_path=format_path(path),
        ) from None
    finally:
        loader.dispose()


def parse_yaml_text(text: str, file: str) -> tuple[Any, dict[KeyPath, tuple[int, int]]]:
    """Parse YAML text into plain data plus the marks of every value."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise SceneError(
            f"not valid YAML: {exc.problem}",
            file=file,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from None
    except yaml.YAMLError as exc:
        raise SceneError(f"not valid YAML: {exc}", file=file) from None
    marks: dict[KeyPath, tuple[int, int]] = {}
    if root is None:
        return None, marks
    return _construct(root, (), marks, file), marks


_INDEX = re.compile(r"^(?P<key>[^\[\]]*)((\[(?P<idx>-?\d+)\])*)$")


def _split_key(key: str) -> list[str | int]:
    parts: list[str | int] = []
    for piece in key.split("."):
        m = _INDEX.match(piece)
        if not m or piece == "":
            raise SceneError(f"bad key '{key}'; expected a dotted path such as solver.method", file="--set")
        if m.group("key"):
            parts.append(m.group("key"))
        parts.extend(int(i) for i in re.findall(r"\[(-?\d+)\]", piece))
    return [int(p) if isinstance(p, str) and re.fullmatch(r"-?\d+", p) else p for p in parts]


def apply_override(scene: RawScene, assignment: str) -> None:
    """Apply one ``KEY=VALUE`` override: a dotted path, list items by index or by name.

    ``bodies.box1.mass=3``, ``bodies[0].mass=3`` and ``solver.projection.iterations=3`` all
    work; the value is read as a YAML scalar or flow collection (``[1, 2, 3]``).
    """
    if "=" not in assignment:
        raise SceneError(f"--set expects KEY=VALUE, got '{assignment}'", file="--set")
    key, _, text = assignment.partition("=")
    parts = _split_key(key.strip())
    try:
        value = yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError as exc:
        raise SceneError(f"cannot read the value '{text}' of --set {key}: {exc}", file="--set") from None
    node: Any = scene.data
    path: list[str | int] = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if isinstance(part, str):  # look a list item up by its name
                names = [item.get("name") for item in node if isinstance(item, dict)]
                if part not in names:
                    raise SceneError(
                        f"no item named '{part}' in {format_path(tuple(path)) or 'the scene'}",
                        file="--set",
                        key_path=key,
                    )
                part = names.index(part)
            if not -len(node) <= part < len(node):
                raise SceneError(
                    f"index {part} out of range (the list has {len(node)} items)", file="--set", key_path=key
                )
            part = part % len(node)
        elif isinstance(node, dict):
            if isinstance(part, int):
                raise SceneError(f"'{format_path(tuple(path))}' is a mapping, not a list", file="--set", key_path=key)
        else:
            raise SceneError(f"'{format_path(tuple(path))}' is a value, it has no '{part}'", file="--set", key_path=key)
        path.append(part)
        if last:
            node[part] = value
        else:
            if isinstance(node, dict) and part not in node:
                node[part] = {}
            node = node[part]
    scene.overridden.add(tuple(path))


def load_raw_scene(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> RawScene:
    """Read a scene file and apply the ``--set`` overrides."""
    file = str(path)
    p = Path(path)
    if not p.is_file():
        raise SceneError(f"scene file not found: {file}", file=file)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SceneError(f"cannot read the scene file: {exc}", file=file) from None
    data, marks = parse_yaml_text(text, file)
    if not isinstance(data, dict):
        raise SceneError("expected a mapping at the top of the scene file", file=file, line=1)
    scene = RawScene(data=data, file=file, marks=marks, base_dir=p.resolve().parent)
    for assignment in overrides:
        apply_override(scene, assignment)
    return scene
