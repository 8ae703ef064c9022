"""Which bodies may touch: the scene's rigid contact entries resolved to body pairs.

Each rigid, enabled entry of ``contacts`` allows contact between every shape of a body of its
``body1`` set and every shape of a body of its ``body2`` set. A set is a body name, a list of
names, or a glob pattern (``fnmatch``: ``ball*``, ``*``; ``ground`` is included when it matches
or is named; a body's exact name is that body, even one holding ``*``, ``?`` or ``[``), so
that one entry covers a pile: all unordered pairs between the two sets, never a body with
itself. When two entries cover the same pair the later one wins (its restitution
and friction apply). Disabled entries are skipped as if deleted; compliant entries take no part
here (mbsim.model.contact covers rigid contact only).

Lookup stays cheap for thousands of bodies without an (nbody+1)^2 table: small entries are
listed as sorted pair keys, large ones (``*`` against ``*``) are kept as two membership masks
that are tested per candidate pair (compiled: mbsim.model.contact.pairs_kernels).

Compile-time checks (SceneError with the key path): unknown bodies (with "did you mean"),
patterns that match nothing, bodies without shapes, and shape-type pairs that have no
narrow-phase function yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cached_property
from typing import Any

import numpy as np

from mbsim.errors import did_you_mean
from mbsim.model.contact.narrowphase import pair_function, partners
from mbsim.model.contact.pairs_kernels import entries
from mbsim.scene.fields import Context
from mbsim.scene.load import KeyPath

PATTERN_CHARS = "*?["
LIST_PAIRS_UP_TO = 4096  # entries with at most this many pairs are listed as pair keys


@dataclass
class ContactEntry:
    """One rigid, enabled entry of ``model.contacts`` resolved to body index sets.

    Attributes:
        index: position in ``model.contacts``.
        name: the entry's name.
        bodies1, bodies2: (n1,), (n2,) extended body indices (ground = nbody) with shapes.
    """

    index: int
    name: str
    bodies1: np.ndarray
    bodies2: np.ndarray


@dataclass
class ContactPairs:
    """Allowed body pairs of rigid contact and the entry of ``model.contacts`` that governs each.

    Attributes:
        nbody: number of bodies; the ground is index nbody.
        entries: the rigid, enabled entries, in scene order.
        pair_keys: (p,) int64 sorted keys lo * (nbody+1) + hi of the pairs of small entries.
        pair_entry: (p,) entry index of each key (the latest small entry covering the pair).
        set_entries: large entries as (entry index, in_body1 (nbody+1,) bool, in_body2 (nbody+1,) bool).
        body_active: (nbody+1,) bool, bodies that belong to at least one allowed pair.
    """

    nbody: int
    entries: list[ContactEntry] = field(default_factory=list)
    pair_keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pair_entry: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    set_entries: list[tuple[int, np.ndarray, np.ndarray]] = field(default_factory=list)
    body_active: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.body_active is None:
            self.body_active = np.zeros(self.nbody + 1, dtype=bool)

    @classmethod
    def build(cls, nbody: int, entries: list[ContactEntry]) -> ContactPairs:
        """Index the entries: pair keys for small ones, membership masks for large ones."""
        n1 = nbody + 1
        keys, owner = [], []
        sets = []
        active = np.zeros(n1, dtype=bool)
        for e in entries:
            b1, b2 = e.bodies1, e.bodies2
            if len(b1) * len(b2) <= LIST_PAIRS_UP_TO:
                i, j = (x.ravel() for x in np.meshgrid(b1, b2, indexing="ij"))
                differ = i != j
                i, j = i[differ], j[differ]
                keys.append(np.minimum(i, j) * n1 + np.maximum(i, j))
                owner.append(np.full(len(i), e.index, dtype=np.int64))
                active[i] = active[j] = True
            else:
                in1 = np.zeros(n1, dtype=bool)
                in2 = np.zeros(n1, dtype=bool)
                in1[b1] = in2[b2] = True
                sets.append((e.index, in1, in2))
                active[b1] = active[b2] = True  # a large set always has pairs
        pair_keys = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
        pair_entry = np.concatenate(owner) if owner else np.zeros(0, dtype=np.int64)
        if len(pair_keys):
            # latest entry per key: sort by (key, entry) and keep the last of each key
            order = np.lexsort((pair_entry, pair_keys))
            pair_keys, pair_entry = pair_keys[order], pair_entry[order]
            last = np.append(pair_keys[1:] != pair_keys[:-1], True)
            pair_keys, pair_entry = pair_keys[last], pair_entry[last]
        return cls(nbody, list(entries), pair_keys, pair_entry, sets, active)

    @cached_property
    def lookup(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The arrays of the compiled lookup (pairs_kernels.entry_of): pair_keys, pair_entry, and
        the large entries' indices (s,) and membership masks (s, nbody+1) uint8 of body1, body2."""
        n1 = self.nbody + 1
        index = np.array([e[0] for e in self.set_entries], dtype=np.int64)
        in1 = np.array([e[1] for e in self.set_entries], dtype=np.uint8).reshape(len(index), n1)
        in2 = np.array([e[2] for e in self.set_entries], dtype=np.uint8).reshape(len(index), n1)
        keys = np.ascontiguousarray(self.pair_keys, dtype=np.int64)
        return keys, np.ascontiguousarray(self.pair_entry, dtype=np.int64), index, in1, in2

    def entry(self, body_a: np.ndarray, body_b: np.ndarray) -> np.ndarray:
        """Entry index (into ``model.contacts``) governing each body pair, -1 where none.

        Args:
            body_a, body_b: (k,) extended body indices.
        Returns:
            (k,) int64.
        """
        a = np.ascontiguousarray(body_a, dtype=np.int64)
        b = np.ascontiguousarray(body_b, dtype=np.int64)
        return entries(a, b, *self.lookup, self.nbody)


# ----------------------------------------------------------------------------- resolving the scene


def _listing(names: list[str], limit: int = 8) -> str:
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f", ... ({len(names)} in all)"


def _resolve_set(
    ctx: Context,
    path: KeyPath,
    value: Any,
    body_index: dict[str, int],
    shapes: dict[str, list[dict[str, Any]]],
    need_shapes: bool,
) -> list[str]:
    """Body names of one ``body1``/``body2`` value (name, list of names, or pattern)."""
    items = value if isinstance(value, list) else [value]
    names: list[str] = []
    for k, text in enumerate(items):
        where = (*path, k) if isinstance(value, list) else path
        if text not in body_index and any(c in text for c in PATTERN_CHARS):  # a body's own name wins
            matched = [n for n in body_index if fnmatchcase(n, text)]
            if not matched:
                raise ctx.error(where, f"pattern '{text}' matches no body; bodies are {_listing(list(body_index))}")
            usable = [n for n in matched if shapes.get(n)] if need_shapes else matched
            if not usable:
                raise ctx.error(
                    where,
                    f"pattern '{text}' matches {_listing(matched)}, but none of them has shapes to touch with",
                )
            names += usable
        else:
            if text not in body_index:
                raise ctx.error(
                    where,
                    f"unknown body '{text}'; expected one of {_listing(list(body_index))}",
                    did_you_mean(text, body_index),
                )
            if need_shapes and not shapes.get(text):
                where_shapes = "ground.shapes" if text == "ground" else f"'{text}' shapes"
                raise ctx.error(
                    where,
                    f"body '{text}' has no shapes, so it cannot touch anything; give {where_shapes} "
                    "or leave it out of the contact",
                )
            names.append(text)
    return list(dict.fromkeys(names))


def _check_shape_types(ctx: Context, path: KeyPath, names1, names2, shapes) -> None:
    """Every shape-type pair the entry can bring together must have a narrow-phase function."""
    by_types1: dict[frozenset, list[str]] = {}
    by_types2: dict[frozenset, list[str]] = {}
    for names, groups in ((names1, by_types1), (names2, by_types2)):
        for n in names:
            groups.setdefault(frozenset(s["type"] for s in shapes[n]), []).append(n)
    for types1, group1 in by_types1.items():
        for types2, group2 in by_types2.items():
            pair = next(((x, y) for x in group1 for y in group2 if x != y), None)
            if pair is None:  # the same single body on both sides: no pair
                continue
            for t1 in sorted(types1):
                for t2 in sorted(types2):
                    try:
                        pair_function(t1, t2)
                    except KeyError:
                        known = partners(t1)
                        touches = f"touches {', '.join(known)}" if known else "has no rigid contact yet"
                        raise ctx.error(
                            path,
                            f"no rigid contact between '{t1}' and '{t2}' yet (bodies '{pair[0]}' and "
                            f"'{pair[1]}'); '{t1}' {touches}",
                        ) from None


# the keys of a rigid contact entry (CONTACT_FIELDS' others belong to compliant contacts and their laws)
RIGID_KEYS = frozenset({"name", "type", "body1", "body2", "restitution", "friction", "enabled"})


def resolve_contact_pairs(
    ctx: Context, contacts: list, body_index: dict[str, int], shapes: dict[str, list[dict[str, Any]]]
) -> ContactPairs:
    """Resolve and check the body sets of every contact entry; index the rigid, enabled ones.

    Args:
        ctx: scene context (errors with file, line and key path).
        contacts: the scene's contact ItemSpecs (``values`` checked by CONTACT_FIELDS).
        body_index: body name -> extended index, "ground" -> nbody.
        shapes: body name -> checked shape dicts ("ground" included).
    Returns:
        ContactPairs of the rigid, enabled entries.
    """
    nbody = body_index["ground"]
    entries = []
    for index, item in enumerate(contacts):
        values = item.values
        rigid = values.get("type") == "rigid" and values.get("enabled", True)
        names1 = _resolve_set(ctx, (*item.path, "body1"), values["body1"], body_index, shapes, rigid)
        names2 = _resolve_set(ctx, (*item.path, "body2"), values["body2"], body_index, shapes, rigid)
        if not rigid:
            continue
        foreign = [key for key in item.raw if key not in RIGID_KEYS]
        if foreign:
            raise ctx.error(
                (*item.path, foreign[0]),
                f"'{foreign[0]}' is a compliant contact's key; a rigid contact (Newton's restitution, Coulomb's "
                f"friction) takes {', '.join(sorted(RIGID_KEYS))}",
                "remove it, or make the contact type: compliant",
            )
        if len(names1) == 1 and names1 == names2:
            raise ctx.error(
                (*item.path, "body2"), f"body1 and body2 are both just '{names1[0]}'; a body cannot touch itself"
            )
        _check_shape_types(ctx, item.path, names1, names2, shapes)
        entries.append(
            ContactEntry(
                index,
                item.name,
                np.array([body_index[n] for n in names1], dtype=np.int64),
                np.array([body_index[n] for n in names2], dtype=np.int64),
            )
        )
    return ContactPairs.build(nbody, entries)
