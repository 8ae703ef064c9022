"""YAML scene text -> plain data with the file position of every value; ``--set`` overrides.

The YAML is read as pyyaml's event stream (libyaml's parser when installed, iterative either
way) and built into plain data here, so that each value keeps the mark (line, column) where it
was written; the marks are kept in a dictionary keyed by the value's path (a tuple of keys and
list indices). Only YAML's safe scalar types are accepted (no Python tags). Aliases are expanded
into copies that keep the marks of the anchored text, and merge keys (``<<: *base``) are
honoured: explicit keys override merged ones, and earlier mappings of a merged list override
later ones, as YAML specifies.

Hostile input is refused with a SceneError (exit 2), never a hang or a crash; the limits:

- :data:`MAX_SCENE_BYTES`: size of a scene file, checked before it is parsed;
- :data:`MAX_VALUES`: values the scene expands to (aliases of aliases multiply, a "billion
  laughs" document of 1 KB would expand to 10^9 values);
- :data:`MAX_DEPTH`: nesting of lists and mappings;
- :data:`MAX_TEXT_LENGTH`, :data:`MAX_KEY_LENGTH`: characters of one text value, of one key;
- :data:`MAX_NUMBER_LENGTH`: characters of one number literal (Python's integer conversion
  is quadratic in the digits).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mbsim.errors import SceneError, plural
from mbsim.errors import shorten as _short

KeyPath = tuple[str | int, ...]

MAX_SCENE_BYTES = 16 * 1024 * 1024  # a scene file larger than this is refused before parsing
MAX_VALUES = 1_000_000  # values (scalars, lists, mappings) the scene may expand to, aliases included
MAX_DEPTH = 100  # nesting of lists and mappings
MAX_TEXT_LENGTH = 1_000_000  # characters of one text value
MAX_KEY_LENGTH = 1000  # characters of one mapping key
MAX_NUMBER_LENGTH = 1000  # characters of one number literal
MAX_INDEX_DIGITS = 18  # digits of a list index in a --set key

# characters YAML 1.1 allows in a stream (pyyaml's reader); anything else is refused with its line
_NON_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_TAG = "tag:yaml.org,2002:"
_STR, _NULL, _INT, _FLOAT = _TAG + "str", _TAG + "null", _TAG + "int", _TAG + "float"
_SCALAR_TAGS = {_STR, _NULL, _TAG + "bool", _INT, _FLOAT, _TAG + "timestamp"}
_PARSER_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser is ~20x faster
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # the same text, faster


def format_path(path: KeyPath) -> str:
    """``("joints", 2, "body2")`` -> ``joints[2].body2``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _tag_name(tag: str) -> str:
    """``tag:yaml.org,2002:python/object:os.system`` -> ``!!python/object:os.system``."""
    return _short("!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag)


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (an empty document)"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, str):
        return f"the text '{_short(value)}'"
    return f"the {type(value).__name__} {value!r}"


@dataclass
class RawScene:
    """Scene data as plain Python values, with marks for error messages.

    Attributes:
        data: the mapping at the top of the file, after ``--set`` overrides.
        file: the scene file name as given by the user.
        marks: path -> (line, column), both 1-based.
        base_dir: directory of the scene file (meshes are relative to it).
        overridden: paths set from the command line.
        created: paths that ``--set`` created (the file did not have them): the set path itself
            and the mappings made on the way to it.
    """

    data: dict[str, Any]
    file: str
    marks: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)
    base_dir: Path = field(default_factory=Path)
    overridden: set[KeyPath] = field(default_factory=set)
    created: set[KeyPath] = field(default_factory=set)

    def error(self, path: KeyPath, reason: str, hint: str = "") -> SceneError:
        """A SceneError located at ``path`` (or at its nearest parent that has a mark).

        A path that ``--set`` wrote, or one inside it, is blamed on ``--set``; so is a path that
        only exists because ``--set`` created it (``--set nonexistent.path=1`` is refused as
        ``--set: nonexistent.path: unknown key 'nonexistent'``), never a line of the file.
        """
        if any(path[:i] in self.overridden for i in range(len(path) + 1)):
            return SceneError(reason, file="--set", key_path=format_path(path), hint=hint)
        if path in self.created:
            below = sorted(format_path(p) for p in self.overridden if p[: len(path)] == path)
            return SceneError(reason, file="--set", key_path=below[0] if below else format_path(path), hint=hint)
        probe = path
        while probe and probe not in self.marks:
            probe = probe[:-1]
        line, col = self.marks.get(probe, (None, None))
        return SceneError(reason, file=self.file, line=line, column=col, key_path=format_path(path), hint=hint)

    def to_yaml(self) -> str:
        """The scene as loaded (after ``--set``) as YAML text; aliases come out expanded."""
        return yaml.dump(self.data, Dumper=_DUMPER, sort_keys=False, default_flow_style=None, width=100)


@dataclass
class _Anchor:
    """A finished anchored value: where its marks live, how many values and levels it holds."""

    value: Any
    path: KeyPath
    size: int
    height: int


@dataclass
class _Frame:
    """A list or mapping being built. For a mapping, ``key`` is the key whose value comes next
    (``_NO_KEY`` while a key is expected) and ``merges`` the values of its ``<<`` keys."""

    path: KeyPath
    mark: tuple[int, int]
    anchor: str | None
    items: Any
    first: int  # the value count when the frame opened (its size is the count at its end minus this)
    height: int = 1
    key: Any = None
    key_mark: tuple[int, int] = (0, 0)
    merges: list[tuple[Any, KeyPath, tuple[int, int]]] = field(default_factory=list)


_NO_KEY = object()
_MERGE = object()  # the key of a merge (a plain ``<<``)


def _mark(event: yaml.Event) -> tuple[int, int]:
    return event.start_mark.line + 1, event.start_mark.column + 1


class _Builder:
    """Builds plain data and marks from pyyaml's event stream, within the limits above."""

    def __init__(self, file: str, marks: dict[KeyPath, tuple[int, int]], with_lines: bool = True) -> None:
        self.file = file
        self.marks = marks
        self.with_lines = with_lines
        self.loader = yaml.SafeLoader("")  # one resolver and scalar constructor for every scalar
        self.anchors: dict[str, _Anchor] = {}
        self.open_anchors: set[str] = set()
        self.stack: list[_Frame] = []
        self.count = 0
        self.documents = 0
        self.root: Any = None

    def error(self, reason: str, mark: tuple[int, int] | None, path: KeyPath = ()) -> SceneError:
        line, col = mark if (mark and self.with_lines) else (None, None)
        shown = format_path(path) if len(path) <= 12 else f"{format_path(path[:10])}... ({len(path)} levels)"
        return SceneError(reason, file=self.file, line=line, column=col, key_path=shown)

    # ------------------------------------------------------------------ events

    def feed(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                raise self.error("expected one YAML document, found a second one ('---')", _mark(event))
            return
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            self._close()
            return
        if not isinstance(event, yaml.NodeEvent):
            return  # stream start and end, document end
        top = self.stack[-1] if self.stack else None
        if isinstance(top, _Frame) and isinstance(top.items, dict) and top.key is _NO_KEY:
            self._key(top, event)
            return
        if top is None:
            path: KeyPath = ()
        elif isinstance(top.items, list):
            path = (*top.path, len(top.items))
        else:
            path = (*top.path, "<<" if top.key is _MERGE else top.key)
        mark = _mark(event)
        if isinstance(event, yaml.AliasEvent):
            value, source, height = self._alias(event, path)
            self._place(value, path, source, height)
            self.marks[path] = mark  # the alias itself is here; what it holds keeps its own marks
            return
        self._count(mark, path)
        self.marks[path] = mark
        if isinstance(event, yaml.ScalarEvent):
            value = self._scalar(event, path)
            if event.anchor is not None:
                self.anchors[event.anchor] = _Anchor(value, path, 1, 1)
            self._place(value, path, None, 1)
            return
        # a list or mapping opens
        is_map = isinstance(event, yaml.MappingStartEvent)
        default = _TAG + ("map" if is_map else "seq")
        if event.tag not in (None, "!", default):
            raise self.error(
                f"unsupported YAML tag '{_tag_name(event.tag)}' (only plain lists and mappings are read)", mark, path
            )
        if len(self.stack) >= MAX_DEPTH:
            raise self.error(f"lists and mappings nested more than {MAX_DEPTH} levels deep", mark, path)
        if event.anchor is not None:
            self.open_anchors.add(event.anchor)
        items: Any = {} if is_map else []
        self.stack.append(_Frame(path, mark, event.anchor, items, self.count - 1, key=_NO_KEY))

    def _key(self, frame: _Frame, event: yaml.Event) -> None:
        """A key of the mapping ``frame``: plain text (or ``<<``, a merge)."""
        mark = _mark(event)
        if isinstance(event, yaml.ScalarEvent) and event.tag in (None, "!", _STR):
            if len(event.value) > MAX_KEY_LENGTH:
                raise self.error(
                    f"a key of {len(event.value)} characters ('{_short(event.value)}'); "
                    f"at most {MAX_KEY_LENGTH} are read",
                    mark,
                    frame.path,
                )
            merge = event.value == "<<" and event.tag is None and event.implicit[0]
            key: Any = _MERGE if merge else event.value
            if event.anchor is not None:
                self.anchors[event.anchor] = _Anchor(event.value, (*frame.path, event.value), 1, 1)
        elif isinstance(event, yaml.AliasEvent) and isinstance(
            getattr(self.anchors.get(event.anchor), "value", None), str
        ):
            key = self.anchors[event.anchor].value
        else:
            if isinstance(event, yaml.MappingStartEvent):
                what = "a mapping"
            elif isinstance(event, yaml.SequenceStartEvent):
                what = "a list"
            elif isinstance(event, yaml.AliasEvent):
                what = f"the alias *{_short(event.anchor)}"
            else:
                what = f"a key with the tag '{_tag_name(event.tag)}'"
            raise self.error(f"mapping keys must be plain names, got {what}", mark, frame.path)
        shown = "<<" if key is _MERGE else key
        if key in frame.items or (key is _MERGE and frame.merges):
            raise self.error(f"duplicate key '{_short(shown)}'", mark, (*frame.path, shown))
        frame.key, frame.key_mark = key, mark

    def _count(self, mark: tuple[int, int], path: KeyPath, n: int = 1) -> None:
        if self.count + n > MAX_VALUES:
            raise self.error(
                f"the scene expands to more than {MAX_VALUES} values (YAML aliases nested too deep?)", mark, path
            )
        self.count += n

    def _scalar(self, event: yaml.ScalarEvent, path: KeyPath) -> Any:
        text, tag, mark = event.value, event.tag, _mark(event)
        if tag is None:
            tag = self.loader.resolve(yaml.ScalarNode, text, event.implicit)
        elif tag == "!":  # the non-specific tag: a string
            tag = _STR
        if tag not in _SCALAR_TAGS:
            raise self.error(
                f"unsupported YAML value: the tag '{_tag_name(tag)}' (only null, true/false, numbers, text "
                "and dates are read)",
                mark,
                path,
            )
        if len(text) > MAX_TEXT_LENGTH:
            raise self.error(f"a text of {len(text)} characters; at most {MAX_TEXT_LENGTH} are read", mark, path)
        if tag == _STR:
            return text
        if tag in (_INT, _FLOAT) and len(text) > MAX_NUMBER_LENGTH:
            raise self.error(
                f"a number written with {len(text)} characters; at most {MAX_NUMBER_LENGTH} are read", mark, path
            )
        node = yaml.ScalarNode(tag, text, event.start_mark, event.end_mark, event.style)
        try:
            return self.loader.yaml_constructors[tag](self.loader, node)
        except (yaml.YAMLError, ValueError, OverflowError, TypeError) as exc:
            kind = tag.rsplit(":", 1)[-1]
            raise self.error(f"cannot read '{_short(text)}' as {kind}: {exc}", mark, path) from None

    def _alias(self, event: yaml.AliasEvent, path: KeyPath) -> tuple[Any, KeyPath, int]:
        """A fresh copy of an anchored value (later edits by --set must not reach the others)."""
        mark = _mark(event)
        name = event.anchor
        anchor = self.anchors.get(name)
        if anchor is None:
            if name in self.open_anchors:
                raise self.error(f"the alias *{_short(name)} refers to a value that contains it", mark, path)
            raise self.error(f"the alias *{_short(name)} has no anchor &{_short(name)} before it", mark, path)
        if len(self.stack) + anchor.height > MAX_DEPTH:
            raise self.error(
                f"lists and mappings nested more than {MAX_DEPTH} levels deep (through *{_short(name)})", mark, path
            )
        self._count(mark, path, anchor.size)
        return _copy(anchor.value), anchor.path, anchor.height

    def _place(self, value: Any, path: KeyPath, source: KeyPath | None, height: int) -> None:
        """Put a finished value into its parent; ``source`` is where its marks are (an alias)."""
        if source is not None and source != path:
            self._copy_marks(value, source, path)
        if not self.stack:
            self.root = value
            return
        top = self.stack[-1]
        top.height = max(top.height, height + 1)
        if isinstance(top.items, list):
            top.items.append(value)
        elif top.key is _MERGE:
            top.merges.append((value, path, top.key_mark))
            top.key = _NO_KEY
        else:
            top.items[top.key] = value
            top.key = _NO_KEY

    def _copy_marks(self, value: Any, source: KeyPath, target: KeyPath) -> None:
        mark = self.marks.get(source)
        if mark is not None:
            self.marks[target] = mark
        if isinstance(value, dict):
            for key, item in value.items():
                self._copy_marks(item, (*source, key), (*target, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self._copy_marks(item, (*source, i), (*target, i))

    def _close(self) -> None:
        frame = self.stack.pop()
        value = frame.items
        if isinstance(value, dict) and frame.merges:
            value = self._merge(frame)
        if frame.anchor is not None:
            self.open_anchors.discard(frame.anchor)
            self.anchors[frame.anchor] = _Anchor(value, frame.path, self.count - frame.first, frame.height)
        self._place(value, frame.path, None, frame.height)

    def _merge(self, frame: _Frame) -> dict[str, Any]:
        """The mapping with its ``<<`` mappings merged in (YAML's merge key type)."""
        merged: dict[str, tuple[Any, KeyPath]] = {}
        for value, source, mark in frame.merges:
            if isinstance(value, dict):
                sources = [(value, source)]
            elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                sources = [(v, (*source, i)) for i, v in enumerate(value)]
            else:
                raise self.error(
                    f"a merge key '<<' expects a mapping or a list of mappings, got {_describe(value)}",
                    mark,
                    (*frame.path, "<<"),
                )
            for mapping, where in sources:  # the first mapping that has a key gives its value
                for key, item in mapping.items():
                    merged.setdefault(key, (item, (*where, key)))
        out: dict[str, Any] = {}
        for key, (item, where) in merged.items():
            if key not in frame.items:  # explicit keys override merged ones
                out[key] = item
                self._copy_marks(item, where, (*frame.path, key))
        out.update(frame.items)
        return out


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value  # scalars are immutable


def _check_characters(text: str, file: str, with_lines: bool) -> None:
    bad = _NON_PRINTABLE.search(text)
    if bad is None:
        return
    line = text.count("\n", 0, bad.start()) + 1
    column = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
    raise SceneError(
        f"not valid YAML: the character U+{ord(bad.group()):04X} is not allowed in a YAML file",
        file=file,
        line=line if with_lines else None,
        column=column if with_lines else None,
    )


def parse_yaml_text(text: str, file: str, with_lines: bool = True) -> tuple[Any, dict[KeyPath, tuple[int, int]]]:
    """Parse YAML text into plain data plus the marks of every value.

    Args:
        text: the YAML document.
        file: its name for messages (``--set`` for a value of the command line).
        with_lines: put line and column into messages (not for a one-line ``--set`` value).

    Raises:
        SceneError: not YAML, more than one document, a tag other than the safe scalar types,
            or past one of the limits of this module.
    """
    _check_characters(text, file, with_lines)
    try:
        return _build(text, file, with_lines, _PARSER_LOADER)
    except _LibyamlDepthLimit:
        # libyaml >= 0.2.6 (PyYAML 6.0.4's wheels) stops scanning at 1000 flow levels, before its
        # parser hands us an event to count: PyYAML's own parser streams them, and the builder
        # refuses the 101st level with the key path, as for every other deep document
        return _build(text, file, with_lines, yaml.SafeLoader)


class _LibyamlDepthLimit(Exception):
    """libyaml refused a document for its own nesting limit."""


def _build(text: str, file: str, with_lines: bool, loader) -> tuple[Any, dict[KeyPath, tuple[int, int]]]:
    marks: dict[KeyPath, tuple[int, int]] = {}
    builder = _Builder(file, marks, with_lines)
    try:
        for event in yaml.parse(text, Loader=loader):
            builder.feed(event)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "malformed"
        if "nesting depth" in problem and loader is not yaml.SafeLoader:
            raise _LibyamlDepthLimit from None
        raise builder.error(f"not valid YAML: {problem}", (mark.line + 1, mark.column + 1) if mark else None) from None
    except yaml.YAMLError as exc:
        raise SceneError(f"not valid YAML: {str(exc).splitlines()[0]}", file=file) from None
    return builder.root, marks


_INDEX = re.compile(r"^(?P<key>[^\[\]]*)((\[(?P<idx>-?\d+)\])*)$")


def _split_key(key: str) -> list[str | int]:
    parts: list[str | int] = []
    for piece in key.split("."):
        m = _INDEX.match(piece)
        if not m or piece == "":
            raise SceneError(f"bad key '{_short(key)}'; expected a dotted path such as solver.method", file="--set")
        if m.group("key"):
            parts.append(m.group("key"))
        for index in re.findall(r"\[(-?\d+)\]", piece):
            if len(index.lstrip("-")) > MAX_INDEX_DIGITS:
                raise SceneError(f"bad key '{_short(key)}': the index {_short(index, 20)} is too large", file="--set")
            parts.append(int(index))
    out: list[str | int] = []
    for p in parts:
        if isinstance(p, str) and re.fullmatch(r"-?\d+", p):
            if len(p.lstrip("-")) > MAX_INDEX_DIGITS:
                raise SceneError(f"bad key '{_short(key)}': the index {_short(p, 20)} is too large", file="--set")
            p = int(p)
        out.append(p)
    return out


def apply_override(scene: RawScene, assignment: str) -> None:
    """Apply one ``KEY=VALUE`` override: a dotted path, list items by index or by name.

    ``bodies.box1.mass=3``, ``bodies[0].mass=3`` and ``solver.projection.iterations=3`` all
    work; the value is read as YAML (a scalar or a flow collection such as ``[1, 2, 3]``) with
    the limits of a scene file.
    """
    if "=" not in assignment:
        raise SceneError(f"--set expects KEY=VALUE, got '{_short(assignment)}'", file="--set")
    key, _, text = assignment.partition("=")
    key = key.strip()
    parts = _split_key(key)
    shown = _short(key)
    if text.strip():
        try:
            value, _ = parse_yaml_text(text, "--set", with_lines=False)
        except SceneError as exc:
            raise SceneError(
                f"cannot read the value '{_short(text)}' of --set {shown}: {exc.reason}", file="--set", key_path=shown
            ) from None
    else:
        value = ""
    node: Any = scene.data
    path: list[str | int] = []
    created: list[KeyPath] = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if isinstance(part, str):  # look a list item up by its name
                names = [item.get("name") for item in node if isinstance(item, dict)]
                if part not in names:
                    raise SceneError(
                        f"no item named '{_short(part)}' in {format_path(tuple(path)) or 'the scene'}",
                        file="--set",
                        key_path=shown,
                    )
                part = names.index(part)
            if not -len(node) <= part < len(node):
                raise SceneError(
                    f"index {part} out of range (the list has {plural(len(node), 'item')})",
                    file="--set",
                    key_path=shown,
                )
            part = part % len(node)
        elif isinstance(node, dict):
            if isinstance(part, int):
                raise SceneError(f"'{format_path(tuple(path))}' is a mapping, not a list", file="--set", key_path=shown)
        else:
            raise SceneError(
                f"'{format_path(tuple(path))}' is a value, it has no '{_short(str(part))}'",
                file="--set",
                key_path=shown,
            )
        path.append(part)
        if isinstance(node, dict) and part not in node:
            created.append(tuple(path))
        if last:
            node[part] = value
        else:
            if isinstance(node, dict) and part not in node:
                node[part] = {}
            node = node[part]
    scene.overridden.add(tuple(path))
    scene.created.update(created)


def not_a_regular_file(path: Path) -> str | None:
    """What ``path`` is when it exists but is no regular file (a directory, a device, a FIFO, ...);
    None when nothing is there."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    for test, what in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return f"{path} is {what}, not a regular file"
    return f"{path} is not a regular file"


def _read_at_most(path: Path, limit: int) -> bytes:
    """The first ``limit`` bytes of a file, read in chunks (a size of 0 may hide a longer file)."""
    chunks, total = [], 0
    with path.open("rb") as stream:
        while total < limit:
            chunk = stream.read(min(1 << 20, limit - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    return b"".join(chunks)


def load_raw_scene(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> RawScene:
    """Read a scene file (at most :data:`MAX_SCENE_BYTES`, UTF-8) and apply the ``--set`` overrides."""
    file = str(path)
    p = Path(path)
    if not p.is_file():
        what = not_a_regular_file(p)
        raise SceneError(
            f"scene file not found: {file}" if what is None else f"{what}; expected a scene file", file=file
        )
    try:
        size = p.stat().st_size
        if size <= MAX_SCENE_BYTES:
            raw = _read_at_most(p, MAX_SCENE_BYTES + 1)  # the file may grow while it is read
            size = max(size, len(raw))
    except OSError as exc:
        raise SceneError(f"cannot read the scene file: {exc.strerror or exc}", file=file) from None
    if size > MAX_SCENE_BYTES:
        raise SceneError(
            f"the scene file has {size} bytes ({size / 2**20:.1f} MiB); at most {MAX_SCENE_BYTES} "
            f"({MAX_SCENE_BYTES // 2**20} MiB) are read",
            file=file,
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SceneError(
            f"not UTF-8 text: the byte 0x{raw[exc.start]:02x} cannot be decoded (save the scene as UTF-8)",
            file=file,
            line=line,
            column=column,
        ) from None
    data, marks = parse_yaml_text(text, file)
    if not isinstance(data, dict):
        raise SceneError(f"expected a mapping at the top of the scene file, got {_describe(data)}", file=file, line=1)
    scene = RawScene(data=data, file=file, marks=marks, base_dir=p.resolve().parent)
    for assignment in overrides:
        apply_override(scene, assignment)
    return scene


def plain_data(value: Any, file: str, path: KeyPath = (), count: list[int] | None = None) -> Any:
    """``value`` as the plain data a YAML file holds (dicts with text keys, lists, text, numbers,
    booleans, None): tuples become lists and numpy arrays and scalars their Python values.
    ``count``: the values converted so far (a one-item list, shared by the recursion).

    Raises:
        SceneError: a value no scene file can hold (an object, a key that is not text), more
            than :data:`MAX_VALUES` values (counted before any YAML is written), or nesting past
            :data:`MAX_DEPTH` (a mapping that contains itself).
    """
    count = [0] if count is None else count
    count[0] += 1
    if count[0] > MAX_VALUES:
        raise SceneError(f"the scene has more than {MAX_VALUES} values", file=file, key_path=format_path(path))
    if len(path) > MAX_DEPTH:
        raise SceneError(
            f"lists and mappings nested more than {MAX_DEPTH} levels deep",
            file=file,
            key_path=format_path(path[:10]) + "...",
        )
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # numpy arrays and scalars
        if getattr(value, "size", 1) > MAX_VALUES:  # before its list is made
            raise SceneError(f"the scene has more than {MAX_VALUES} values", file=file, key_path=format_path(path))
        value = value.tolist()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise SceneError(
                    f"expected text keys, got the key {_describe(key)}", file=file, key_path=format_path(path)
                )
            out[key] = plain_data(item, file, (*path, key), count)
        return out
    if isinstance(value, (list, tuple)):
        return [plain_data(item, file, (*path, i), count) for i, item in enumerate(value)]
    raise SceneError(
        f"expected a number, text, boolean, list or mapping, got a {type(value).__name__}",
        file=file,
        key_path=format_path(path),
    )


def yaml_text(value: Any) -> str:
    """Plain data (:func:`plain_data`) as YAML text, on one line for a scalar or a flow collection."""
    return yaml.dump(value, Dumper=_DUMPER, sort_keys=False, default_flow_style=True, width=2**30)


def raw_scene_from_data(
    data: Any, overrides: list[str] | tuple[str, ...] = (), file: str = "<dict>", base_dir: Path | None = None
) -> RawScene:
    """A scene given as Python data (``mbsim.load(dict)``), checked as the text of a scene file is:
    it goes through YAML text and :func:`parse_yaml_text` with that file's limits. Messages name
    ``file`` and the key path (no line: the data has none). Mesh files are relative to
    ``base_dir`` (default the working directory)."""
    if not isinstance(data, dict):
        raise SceneError(f"expected a mapping at the top of the scene, got {_describe(data)}", file=file)
    text = yaml_text(plain_data(data, file))
    if len(text.encode("utf-8")) > MAX_SCENE_BYTES:
        raise SceneError(f"the scene has more than {MAX_SCENE_BYTES} bytes as YAML text", file=file)
    parsed, _ = parse_yaml_text(text, file, with_lines=False)
    scene = RawScene(data=parsed, file=file, base_dir=base_dir or Path.cwd())
    for assignment in overrides:
        apply_override(scene, assignment)
    return scene
