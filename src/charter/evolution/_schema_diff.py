"""Structural comparison of two JSON Schemas (draft 2020-12, as pydantic v2 emits them).

Each difference is a finding with an *effect* on the set of values the schema accepts
(narrower, wider, incomparable, none, unknown). The position turns an effect into a
severity: in the input position (what callers send) a narrower schema is breaking; in the
output position (what callers read) a wider one is. A few changes are judged by convention
rather than by set algebra, because callers do not send fields they do not know and ignore
fields they do not read: an optional property added is compatible in both positions, and a
property removed from an output is breaking even though the set of documents grows.

`$ref`s resolve against each document's own `$defs`; a pair of definitions met again while
it is being compared counts as equal, which is what lets recursive models terminate. Two
subschemas with the same text are equal only when every definition they reach through
`$ref`s (`items`, `anyOf` members, `additionalProperties`, ...) has the same text too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from charter._json_schema import iter_refs, resolve_pointer
from charter.evolution._json_schema import (
    Resolved,
    branches,
    canon,
    covers,
    label,
    mapping,
    names,
    resolve,
    types_of,
)
from charter.evolution._schema_keywords import (
    Effect,
    Finding,
    Position,
    Severity,
    compare_annotations,
    compare_bounds,
    compare_others,
    compare_string_rules,
    compare_types,
    compare_values,
    property_added,
    required_change,
    worst,
)

__all__ = (
    "Position",
    "Relation",
    "SchemaChange",
    "SchemaComparison",
    "Severity",
    "compare_schemas",
    "diff_schemas",
)

Relation: TypeAlias = Literal["same", "subset", "superset", "incomparable", "undecidable"]
"""What the new schema accepts compared with the old one."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SchemaChange:
    """One difference between two schemas, judged for one position."""

    path: str
    """Where in the value it applies: `$` is the root, `$.name` a property, `$.tags[*]` every
    array item, `$.pair[0]` a tuple position, `$.*` additional properties, `$.pet<Dog>` one
    member of a union."""
    kind: str
    """A stable identifier such as `enum-values-removed` or `property-now-required`."""
    severity: Severity
    """`breaking`, `compatible` or `undecidable`, for the position asked about."""
    detail: str
    """A sentence for people."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SchemaComparison:
    """The differences between an old and a new schema, judged in either position."""

    findings: tuple[Finding, ...]

    @property
    def relation(self) -> Relation:
        """What the new schema accepts compared with the old one.

        An optional property added counts as accepting more (see the module docstring).
        """
        effects = {finding.effect for finding in self.findings}
        if "unknown" in effects:
            return "undecidable"
        if "incomparable" in effects or {"narrower", "wider"} <= effects:
            return "incomparable"
        if "narrower" in effects:
            return "subset"
        if "wider" in effects:
            return "superset"
        return "same"

    def changes(self, position: Position) -> tuple[SchemaChange, ...]:
        """Every difference, judged for callers in `position`."""
        return tuple(
            SchemaChange(
                path=finding.path,
                kind=finding.kind,
                severity=finding.severity(position),
                detail=finding.detail,
            )
            for finding in self.findings
        )


def compare_schemas(old: object, new: object) -> SchemaComparison:
    """Compare two JSON Schema documents structurally.

    Args:
        old: The schema callers know (a JSON object or a boolean schema).
        new: The schema that replaces it.

    Returns:
        The comparison: ask it for `changes(position)` or its `relation`.
    """
    return SchemaComparison(findings=tuple(_Comparator(old, new).compare(old, new, "$")))


def diff_schemas(old: object, new: object, *, position: Position) -> tuple[SchemaChange, ...]:
    """Return every difference between two schemas, judged for callers in `position`."""
    return compare_schemas(old, new).changes(position)


_Key: TypeAlias = tuple[str, str, str, str]
_Schema: TypeAlias = Mapping[str, object]


class _Comparator:
    """Walks two schema documents side by side."""

    def __init__(self, old_root: object, new_root: object) -> None:
        self._old_root = old_root
        self._new_root = new_root
        self._cache: dict[_Key, list[Finding]] = {}
        self._active: set[_Key] = set()
        self._reverse: _Comparator | None = None
        self._same_target: dict[str, bool] = {}
        self._refs_of_target: dict[str, set[str]] = {}

    def unchanged(self, old: object, new: object) -> bool:
        """Whether two subschemas are equal, the definitions they refer to included.

        The text alone is not enough: `{"items": {"$ref": "#/$defs/Trip"}}` reads the same
        in both documents while `Trip` itself may have changed.
        """
        if canon(old) != canon(new):
            return False
        pending, seen = set(iter_refs(old)), set[str]()
        while pending:  # a worklist, so self-referencing definitions terminate
            ref = pending.pop()
            if ref in seen:
                continue
            seen.add(ref)
            if not self._target_unchanged(ref):
                return False
            pending |= self._refs_of_target[ref]
        return True

    def _target_unchanged(self, ref: str) -> bool:
        """Whether `ref` points at the same text in both documents (both absent included)."""
        if ref not in self._same_target:
            before = resolve_pointer(self._old_root, ref)
            after = resolve_pointer(self._new_root, ref)
            self._same_target[ref] = canon(before) == canon(after)
            self._refs_of_target[ref] = set(iter_refs(before))
        return self._same_target[ref]

    def compare(self, old: object, new: object, path: str) -> list[Finding]:
        """Compare a schema of the old document with one of the new document."""
        ro, rn = resolve(old, self._old_root), resolve(new, self._new_root)
        if ro.error or rn.error:
            if self.unchanged(old, new):
                return []
            return [Finding(path, "unresolvable-ref", "unknown", str(ro.error or rn.error))]
        if ro.ref is None and rn.ref is None:
            return self._compare_resolved(ro, rn, path)
        # A definition is involved: compare the pair once, with paths relative to here.
        key = (ro.ref or canon(ro.schema), rn.ref or canon(rn.schema), ro.site, rn.site)
        if key in self._active:
            return []
        if key not in self._cache:
            self._active.add(key)
            try:
                self._cache[key] = self._compare_resolved(ro, rn, "")
            finally:
                self._active.discard(key)
        return [finding.moved(path) for finding in self._cache[key]]

    def _compare_resolved(self, ro: Resolved, rn: Resolved, path: str) -> list[Finding]:
        old, new = ro.schema, rn.schema
        if self.unchanged(old, new):
            return []
        if new is False:
            return [
                Finding(path, "schema-closed", "narrower", "the schema now rejects every value")
            ]
        if old is False:
            return [
                Finding(path, "schema-opened", "wider", "the schema used to reject every value")
            ]
        old_map: _Schema = {} if old is True else old
        new_map: _Schema = {} if new is True else new
        old_members, new_members = branches(old_map), branches(new_map)
        if len(old_members) == 1 and len(new_members) == 1:
            findings = compare_annotations(old_map, new_map, path)
            old_one, new_one = old_members[0], new_members[0]
            if isinstance(old_one, Mapping) and isinstance(new_one, Mapping):
                if "$ref" not in old_one and "$ref" not in new_one:
                    return findings + self._compare_plain(old_one, new_one, path)
            return findings + self.compare(old_one, new_one, path)
        # A union on one side only: the plain side's title names a model or a field, the
        # union's names the field, so titles are not compared; and a plain side that came
        # from a definition keeps its `$ref`, so it pairs with the same definition.
        findings = compare_annotations(old_map, new_map, path, titles=False)
        if len(old_members) == 1 and ro.ref is not None:
            old_members = [{"$ref": ro.ref}]
        if len(new_members) == 1 and rn.ref is not None:
            new_members = [{"$ref": rn.ref}]
        return findings + self._compare_union(old_members, new_members, path)

    def _compare_union(
        self, old: Sequence[object], new: Sequence[object], path: str
    ) -> list[Finding]:
        old_resolved = [resolve(member, self._old_root) for member in old]
        new_resolved = [resolve(member, self._new_root) for member in new]
        pairs = _match_members(old_resolved, new_resolved)
        findings: list[Finding] = []
        for i, j in pairs:
            findings += self.compare(old[i], new[j], f"{path}<{label(new_resolved[j])}>")
        matched_old = {i for i, _ in pairs}
        matched_new = {j for _, j in pairs}
        for i, member in enumerate(old):
            if i in matched_old:
                continue
            name = label(old_resolved[i])
            if any(self._accepts_all(member, candidate) for candidate in new):
                detail = f"union member {name!r} removed; another member accepts its values"
                findings.append(Finding(path, "union-member-merged", "none", detail))
            else:
                detail = f"no longer accepts {name!r} (removed from the union)"
                findings.append(Finding(path, "union-member-removed", "narrower", detail))
        for j, member in enumerate(new):
            if j in matched_new or any(self._covered_by_old(member, c) for c in old):
                continue
            detail = f"now also accepts {label(new_resolved[j])!r} (added to the union)"
            findings.append(Finding(path, "union-member-added", "wider", detail))
        return findings

    def _accepts_all(self, old: object, new: object) -> bool:
        """Whether `new` (of the new document) accepts every value `old` accepts."""
        return all(f.effect in ("none", "wider") for f in self.compare(old, new, ""))

    def _covered_by_old(self, new: object, old: object) -> bool:
        """Whether `old` (of the old document) accepts every value `new` accepts."""
        if self._reverse is None:
            self._reverse = _Comparator(self._new_root, self._old_root)
        return all(f.effect in ("none", "wider") for f in self._reverse.compare(new, old, ""))

    def _compare_plain(self, old: _Schema, new: _Schema, path: str) -> list[Finding]:
        type_findings, disjoint = compare_types(old, new, path)
        if disjoint:
            return type_findings
        return [
            *type_findings,
            *compare_values(old, new, path),
            *compare_bounds(old, new, path),
            *compare_string_rules(old, new, path),
            *self._compare_object(old, new, path),
            *self._compare_array(old, new, path),
            *compare_others(old, new, path, same=self.unchanged),
        ]

    def _compare_object(self, old: _Schema, new: _Schema, path: str) -> list[Finding]:
        old_props, new_props = mapping(old.get("properties")), mapping(new.get("properties"))
        old_required, new_required = names(old.get("required")), names(new.get("required"))
        old_extra = old.get("additionalProperties", True)
        new_extra = new.get("additionalProperties", True)
        only_required = sorted((old_required | new_required) - set(old_props) - set(new_props))
        findings: list[Finding] = []
        for name in dict.fromkeys([*old_props, *new_props, *only_required]):
            at = path + _segment(name)
            if name in old_props and name in new_props:
                findings += required_change(name, old_required, new_required, at)
                findings += self.compare(old_props[name], new_props[name], at)
            elif name in old_props:
                was_required = name in old_required
                findings.append(
                    self._property_removed(old_props[name], new_extra, was_required, at)
                )
            elif name in new_props:
                findings.append(property_added(name in new_required, at))
            else:
                findings += required_change(name, old_required, new_required, at)
        return findings + self._compare_extra(old_extra, new_extra, path)

    def _property_removed(
        self, old_schema: object, new_extra: object, was_required: bool, path: str
    ) -> Finding:
        """Callers reading it lose it; callers sending it depend on `additionalProperties`."""
        effect: Effect
        if new_extra is False:
            effect = "narrower"
            why = "additionalProperties is closed, so callers that send it are rejected"
        elif new_extra is True or new_extra == {}:
            effect = "wider"
            why = "it is still accepted as an additional property"
        else:
            effect = worst(f.effect for f in self.compare(old_schema, new_extra, path))
            why = f"its values now have to match additionalProperties ({effect})"
        if was_required:
            # Objects without it are newly accepted, whatever happens to objects with it.
            effect = "incomparable" if effect == "narrower" else worst([effect, "wider"])
        return Finding(
            path, "property-removed", effect, f"property removed; {why}", None, "breaking"
        )

    def _compare_extra(self, old: object, new: object, path: str) -> list[Finding]:
        old_open, new_open = old is True or old == {}, new is True or new == {}
        if self.unchanged(old, new) or (old_open and new_open):
            return []
        if old_open and new is False:
            detail = "additionalProperties closed: unknown properties are now rejected"
            return [Finding(path, "additional-properties-closed", "narrower", detail)]
        if old is False and new_open:
            # Callers ignore fields they do not read, so opening an output is compatible.
            detail = "additionalProperties opened: unknown properties are now accepted"
            return [
                Finding(path, "additional-properties-opened", "wider", detail, None, "compatible")
            ]
        return self.compare(old, new, path + ".*")

    def _compare_array(self, old: _Schema, new: _Schema, path: str) -> list[Finding]:
        old_prefix, new_prefix = old.get("prefixItems"), new.get("prefixItems")
        old_prefix = old_prefix if isinstance(old_prefix, list) else []
        new_prefix = new_prefix if isinstance(new_prefix, list) else []
        old_items, new_items = old.get("items", True), new.get("items", True)
        findings: list[Finding] = []
        for index in range(max(len(old_prefix), len(new_prefix))):
            before = old_prefix[index] if index < len(old_prefix) else old_items
            after = new_prefix[index] if index < len(new_prefix) else new_items
            findings += self.compare(before, after, f"{path}[{index}]")
        if "items" in old or "items" in new:
            findings += self.compare(old_items, new_items, path + "[*]")
        return findings


def _segment(name: str) -> str:
    return "." + name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name) else f"[{name!r}]"


def _match_members(old: Sequence[Resolved], new: Sequence[Resolved]) -> list[tuple[int, int]]:
    """Pair union members, strongest evidence first.

    Equal schemas, then the same `$defs` name, the same title, a shared discriminating
    `const`, the same types, and last overlapping types.
    """
    tiers: tuple[Callable[[Resolved, Resolved], bool], ...] = (
        lambda a, b: canon(a.schema) == canon(b.schema),
        lambda a, b: a.ref is not None and a.ref == b.ref,
        lambda a, b: _title(a) is not None and _title(a) == _title(b),
        lambda a, b: bool(_discriminators(a) & _discriminators(b)),
        lambda a, b: _types(a) is not None and _types(a) == _types(b),
        lambda a, b: _types_overlap(_types(a), _types(b)),
    )
    pairs: list[tuple[int, int]] = []
    free_old, free_new = list(range(len(old))), list(range(len(new)))
    for matches in tiers:
        for i in list(free_old):
            j = next((j for j in free_new if matches(old[i], new[j])), None)
            if j is not None:
                pairs.append((i, j))
                free_old.remove(i)
                free_new.remove(j)
    return sorted(pairs)


def _title(resolved: Resolved) -> object:
    return mapping(resolved.schema).get("title")


def _types(resolved: Resolved) -> frozenset[str] | None:
    return types_of(mapping(resolved.schema))


def _types_overlap(a: frozenset[str] | None, b: frozenset[str] | None) -> bool:
    if a is None or b is None:
        return False
    return any(covers(b, t) for t in a) or any(covers(a, t) for t in b)


def _discriminators(resolved: Resolved) -> frozenset[tuple[str, str]]:
    props = mapping(mapping(resolved.schema).get("properties"))
    return frozenset(
        (name, canon(prop["const"]))
        for name, prop in props.items()
        if isinstance(prop, Mapping) and "const" in prop
    )
