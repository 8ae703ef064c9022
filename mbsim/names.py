"""Which names mbsim accepts, and how they are stored in the result file (issue 28 item 5).

The rule, the same for every name a user gives (the scene's name, bodies, joints, shapes,
forces, contacts, couplings, a model's prefix and the link and joint names it imports, and the
actuator and output names to come):

- **Refused** when the scene loads (exit 2, naming the file, line and key): a name that is not
  text, the empty name, a name longer than :data:`MAX_NAME_LENGTH` characters, and a name with
  a control character (U+0000-U+001F, U+007F-U+009F) or a lone surrogate (not Unicode text).
- **Everything else is allowed**, ``/``, ``.``, ``..``, ``%``, spaces, any Unicode and markup
  included: imported models use such names (MuJoCo's attach prefixes give ``left/shoulder``).

In the HDF5 result file a name is one link name (never a path): :func:`hdf5_name` escapes
``%`` as ``%25`` and ``/`` as ``%2F``, and every ``.`` of a name made only of dots as ``%2E``
(HDF5 reads ``.`` as the group itself). :func:`name_from_hdf5` percent-decodes. Readers list a
group's members with :func:`member_names` and find a member with :func:`member`, so users see
and type the original names; a group mbsim creates for a name also carries the exact name as its
attribute ``name``. Names kept in attributes (the column names of /q) are stored as they are.

This module imports nothing of mbsim but the errors: every layer uses it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol
from urllib.parse import unquote

from mbsim.errors import SceneError
from mbsim.errors import shorten as _shorten

MAX_NAME_LENGTH = 200  # characters of a name
NAME_RULE = (
    f"a name is any text of 1 to {MAX_NAME_LENGTH} characters without control characters (U+0000-U+001F, U+007F-U+009F)"
)
_BAD_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_ONLY_DOTS = re.compile(r"\.+")

# entries mbsim itself writes next to user-named groups: /diagnostics/contacts/NAME sits beside
# the all-contacts series of CONTRACT §3, so a contact may not take one of their names
CONTACT_DATASETS = frozenset({"count", "max_penetration", "normal_impulse"})


class _Locates(Protocol):
    """What locates an error: a scene's Context or RawScene (``error(path, reason, hint)``)."""

    def error(self, path: Any, reason: str, hint: str = "") -> SceneError: ...


def shown(name: str, limit: int = 60) -> str:
    """``name`` for a one-line message: cut, control characters and lone surrogates escaped
    (stderr could not encode those)."""
    return _shorten(name, limit).encode("utf-8", "backslashreplace").decode("utf-8")


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, (int, float)):
        return f"the number {_shorten(repr(value))}"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def name_problem(value: object) -> str | None:
    """Why ``value`` cannot be a name (a sentence for an error message), or None when it can."""
    if not isinstance(value, str):
        return f"expected a name (text), got {_kind(value)}"
    if not value:
        return "expected a name, got the empty text"
    if len(value) > MAX_NAME_LENGTH:
        return f"a name of {len(value)} characters ('{shown(value, 40)}'); at most {MAX_NAME_LENGTH} are allowed"
    bad = _BAD_CHARACTER.search(value)
    if bad is not None:
        char = ord(bad.group())
        what = "a lone surrogate (not Unicode text)" if 0xD800 <= char <= 0xDFFF else "a control character"
        return f"the name '{shown(value)}' contains {what}, U+{char:04X} at position {bad.start() + 1}; {NAME_RULE}"
    return None


def check_name(value: object, key_path: Any, where: _Locates, reserved: Iterable[str] = ()) -> str:
    """``value`` as a name, or a SceneError from ``where.error(key_path, ...)`` (exit 2) when the
    rule refuses it or it is one of ``reserved`` (names mbsim itself uses at that place)."""
    problem = name_problem(value)
    if problem is not None:
        raise where.error(key_path, problem)
    assert isinstance(value, str)
    if value in reserved:
        raise where.error(key_path, f"the name '{shown(value)}' is reserved here (mbsim writes its own data under it)")
    return value


def check_model_names(tree: Any, prefix: str, prefix_error: Callable[[str], SceneError]) -> None:
    """The names a model file brings (``tree``: mbsim.models.tree.ModelTree), each with the
    entry's ``prefix``, by the rule: a name of the file that breaks it is refused naming the model
    file, the element and its line (exit 2); a prefix that breaks it, or makes a name too long,
    through ``prefix_error(reason)`` (the scene's line of ``prefix``)."""
    problem = name_problem(prefix) if prefix else None
    if problem is not None:
        raise prefix_error(problem)
    tag = "body" if tree.format == "mjcf" else "link"
    items = [(tag, link.name, link.line) for link in tree.links.values()]
    items += [(joint.tag, joint.name, joint.line) for joint in tree.joints]
    items += [(c.element, c.name, c.line) for c in (*tree.couplings, *tree.loops) if c.name]
    for element, name, line in items:
        where = element if "'" in element else f"{element} '{shown(name)}'"  # couplings name themselves
        problem = name_problem(name)
        if problem is not None:
            raise SceneError(problem, file=str(tree.file), line=line, key_path=where)
        problem = name_problem(prefix + name)
        if problem is not None:
            raise prefix_error(f"with this prefix, the {where} of {tree.file}: {problem}")


def hdf5_name(name: str) -> str:
    """The HDF5 link name of ``name``: one path component, percent-escaped (``%``, ``/``, and
    the dots of a name made only of dots)."""
    link = name.replace("%", "%25").replace("/", "%2F")
    if _ONLY_DOTS.fullmatch(link):
        link = link.replace(".", "%2E")
    return link


def name_from_hdf5(link: str | bytes) -> str:
    """The name a link of :func:`hdf5_name` stands for (percent-decoding)."""
    if isinstance(link, bytes):
        link = link.decode("utf-8", "replace")
    return unquote(link, errors="replace") if "%" in link else link


def member_names(group: Mapping[str, Any] | Iterable[str] | None) -> list[str]:
    """The decoded names of a group's members (HDF5's order, alphabetical by link)."""
    return [] if group is None else [name_from_hdf5(link) for link in group]


def member(group: Mapping[str, Any], name: str) -> Any:
    """The member of ``group`` stored for ``name``, or None; in a file written before names were
    escaped (stored as they are), the member of that very name."""
    found = group.get(hdf5_name(name))
    if found is None and "/" not in name and not _ONLY_DOTS.fullmatch(name):
        found = group.get(name)
    return found


# the result file's groups whose members are named by the user (CONTRACT §3 and §8)
NAMED_GROUPS = ("bodies", "joints", "geometry", "diagnostics/contacts", "actuators", "outputs", "modes/shape")


def dataset_path(f: Mapping[str, Any], text: str) -> str | None:
    """The HDF5 path of a quantity as a user writes it, with original names: e.g.
    ``bodies/upper/arm/position`` -> ``bodies/upper%2Farm/position``; None when the file has no
    such object. Below a group of :data:`NAMED_GROUPS` the longest stored name that fits is
    taken (a name may hold ``/``); a path as stored (escaped) is found too."""
    text = text.strip("/")
    for head in NAMED_GROUPS:
        rest = text[len(head) + 1 :] if text.startswith(head + "/") else ""
        if not rest or head not in f:
            continue
        parts = rest.split("/")
        for cut in range(len(parts), 0, -1):  # the longest name first
            link = hdf5_name("/".join(parts[:cut]))
            path = "/".join([head, link, *parts[cut:]])
            if link in f[head] and path in f:
                return path
    return text if text and text in f else None


def readable_path(path: str) -> str:
    """An HDF5 path with the user-named component decoded, for people to read
    (``bodies/upper%2Farm/position`` -> ``bodies/upper/arm/position``); :func:`dataset_path`
    finds the dataset from it again."""
    for head in NAMED_GROUPS:
        if path.startswith(head + "/"):
            link, sep, rest = path[len(head) + 1 :].partition("/")
            return f"{head}/{name_from_hdf5(link)}{sep}{rest}"
    return path


__all__ = [
    "CONTACT_DATASETS",
    "MAX_NAME_LENGTH",
    "NAMED_GROUPS",
    "NAME_RULE",
    "check_model_names",
    "check_name",
    "dataset_path",
    "hdf5_name",
    "member",
    "member_names",
    "name_from_hdf5",
    "name_problem",
    "readable_path",
    "shown",
]
