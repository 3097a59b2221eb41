"""Findings, and the comparison of the keywords that constrain a single value.

A finding records what a change does to the set of values a schema accepts (its effect);
the position (input or output) turns that into a severity. Structure (objects, arrays,
unions, `$ref`s) is walked by `_schema_diff`; this module judges the leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

from charter.evolution._json_schema import (
    ANNOTATIONS,
    REPORTED_ANNOTATIONS,
    canon,
    covers,
    number,
    show,
    types_of,
    values_of,
)

__all__ = (
    "HANDLED",
    "Effect",
    "Finding",
    "Position",
    "Schema",
    "Severity",
    "compare_annotations",
    "compare_bounds",
    "compare_others",
    "compare_string_rules",
    "compare_types",
    "compare_values",
    "property_added",
    "required_change",
    "worst",
)

Severity: TypeAlias = Literal["breaking", "compatible", "undecidable"]
"""How a change affects callers; `undecidable` means charter cannot tell."""

Position: TypeAlias = Literal["input", "output"]
"""Where a schema sits: `input` (callers send it) or `output` (callers read it)."""

Effect: TypeAlias = Literal["none", "narrower", "wider", "incomparable", "unknown"]
"""What a change does to the set of accepted values."""

SEVERITY_BY_EFFECT: Mapping[Position, Mapping[Effect, Severity]] = {
    "input": {
        "none": "compatible",
        "narrower": "breaking",
        "wider": "compatible",
        "incomparable": "breaking",
        "unknown": "undecidable",
    },
    "output": {
        "none": "compatible",
        "narrower": "compatible",
        "wider": "breaking",
        "incomparable": "breaking",
        "unknown": "undecidable",
    },
}

HANDLED = frozenset(
    {
        *("type", "enum", "const", "properties", "required", "additionalProperties"),
        *("items", "prefixItems", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"),
        *("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"),
        *("multipleOf", "uniqueItems", "pattern", "format"),
    }
)
"""Keywords charter compares. Any other standard keyword that changes is undecidable."""

_STANDARD = frozenset(
    {
        *HANDLED,
        *ANNOTATIONS,
        *("$ref", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "allOf", "anyOf", "oneOf"),
        *("not", "if", "then", "else", "dependentSchemas", "dependentRequired"),
        *("patternProperties", "propertyNames", "unevaluatedProperties", "unevaluatedItems"),
        *("contains", "minContains", "maxContains", "contentSchema"),
    }
)

# format -> the standard formats that accept strictly more strings.
_WIDER_FORMATS: Mapping[str, frozenset[str]] = {
    "uri": frozenset({"uri-reference", "iri", "iri-reference"}),
    "uri-reference": frozenset({"iri-reference"}),
    "iri": frozenset({"iri-reference"}),
    "email": frozenset({"idn-email"}),
    "hostname": frozenset({"idn-hostname"}),
}
_STANDARD_FORMATS = frozenset(
    {
        *("date-time", "date", "time", "duration", "email", "idn-email", "hostname"),
        *("idn-hostname", "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference"),
        *("uuid", "uri-template", "json-pointer", "relative-json-pointer", "regex"),
    }
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One difference between two schemas, judged by its effect on accepted values."""

    path: str
    kind: str
    effect: Effect
    detail: str
    input: Severity | None = None
    """Overrides the severity derived from `effect` in the input position."""
    output: Severity | None = None
    """Overrides the severity derived from `effect` in the output position."""

    def severity(self, position: Position) -> Severity:
        """The severity for callers in `position`."""
        override = self.input if position == "input" else self.output
        return override or SEVERITY_BY_EFFECT[position][self.effect]

    def moved(self, prefix: str) -> Finding:
        """The same finding with `prefix` put before its path."""
        return Finding(
            prefix + self.path, self.kind, self.effect, self.detail, self.input, self.output
        )


_BY_WEIGHT: tuple[Effect, ...] = ("unknown", "incomparable", "narrower", "wider")


def worst(effects: Iterable[Effect]) -> Effect:
    """The most consequential of several effects."""
    found = set(effects)
    return next((effect for effect in _BY_WEIGHT if effect in found), "none")


Schema: TypeAlias = Mapping[str, object]


def compare_annotations(
    old: Schema, new: Schema, path: str, *, titles: bool = True
) -> list[Finding]:
    """Title, description, default and deprecation changes: always compatible."""
    findings = []
    for key in REPORTED_ANNOTATIONS:
        if key == "title" and not titles:
            continue
        if (key in old, canon(old.get(key))) == (key in new, canon(new.get(key))):
            continue
        if key not in new:
            detail = f"{key} removed (was {show(old[key])})"
        elif key not in old:
            detail = f"{key} added: {show(new[key])}"
        else:
            detail = f"{key} changed: {show(old[key])} → {show(new[key])}"
        findings.append(Finding(path, f"{key}-changed", "none", detail))
    return findings


def required_change(
    name: str, old: frozenset[str], new: frozenset[str], path: str
) -> list[Finding]:
    """A property that stays but becomes required or optional."""
    if (name in old) == (name in new):
        return []
    if name in new:
        return [Finding(path, "property-now-required", "narrower", "property is now required")]
    detail = "property is no longer required, so it may be missing"
    return [Finding(path, "property-now-optional", "wider", detail)]


def property_added(required: bool, path: str) -> Finding:
    """A new property; callers never sent it and never read it, so only `required` matters."""
    if required:
        detail = "new required property; callers that do not send it are rejected"
        return Finding(path, "required-property-added", "narrower", detail, output="compatible")
    return Finding(path, "property-added", "wider", "new optional property", output="compatible")


def compare_types(old: Schema, new: Schema, path: str) -> tuple[list[Finding], bool]:
    """Compare the types admitted; the flag says they share none (compare nothing else)."""
    before, after = types_of(old), types_of(new)
    if before == after:
        return [], False
    detail = f"type {_show_types(before)} → {_show_types(after)}"
    if before is None:
        return [Finding(path, "type-narrowed", "narrower", detail)], False
    if after is None:
        return [Finding(path, "type-widened", "wider", detail)], False
    kept = [t for t in before if covers(after, t)]
    gained = any(not covers(before, t) for t in after)
    if len(kept) < len(before) and gained:
        disjoint = not kept and not any(covers(before, t) for t in after)
        return [Finding(path, "type-changed", "incomparable", detail)], disjoint
    if gained:
        return [Finding(path, "type-widened", "wider", detail)], False
    return [Finding(path, "type-narrowed", "narrower", detail)], False


def _show_types(types: frozenset[str] | None) -> str:
    return "any" if types is None else "|".join(sorted(types))


def compare_values(old: Schema, new: Schema, path: str) -> list[Finding]:
    """Compare `enum`/`const` (a `const` is an enum of one)."""
    before, after = values_of(old), values_of(new)
    if before is None and after is None:
        return []
    if before is None:
        return [Finding(path, "enum-added", "narrower", f"now limited to {show(after)}")]
    if after is None:
        return [Finding(path, "enum-removed", "wider", f"no longer limited to {show(before)}")]
    before_keys = {canon(v): v for v in before}
    after_keys = {canon(v): v for v in after}
    removed = [v for k, v in before_keys.items() if k not in after_keys]
    added = [v for k, v in after_keys.items() if k not in before_keys]
    findings = []
    if removed:
        detail = "values removed: " + ", ".join(show(v) for v in removed)
        findings.append(Finding(path, "enum-values-removed", "narrower", detail))
    if added:
        detail = "values added: " + ", ".join(show(v) for v in added)
        findings.append(Finding(path, "enum-values-added", "wider", detail))
    return findings


def _bound(path: str, keyword: str, tighter: bool, before: object, after: object) -> Finding:
    if before is None:
        detail = f"{keyword} added: {after}"
    elif after is None:
        detail = f"{keyword} removed (was {before})"
    else:
        detail = f"{keyword} {before} → {after}"
    if tighter:
        return Finding(path, "bound-tightened", "narrower", detail)
    return Finding(path, "bound-relaxed", "wider", detail)


_Bound: TypeAlias = tuple[float, bool]
"""An effective numeric bound: (value, exclusive)."""


def _numeric_bound(schema: Schema, lower: bool) -> _Bound | None:
    """The tighter of `minimum`/`exclusiveMinimum` (or of the maximum pair)."""
    names = ("minimum", "exclusiveMinimum") if lower else ("maximum", "exclusiveMaximum")
    candidates: list[_Bound] = []
    for keyword, exclusive in zip(names, (False, True), strict=True):
        if (value := number(schema.get(keyword))) is not None:
            candidates.append((value, exclusive))
    if not candidates:
        return None
    if lower:
        return max(candidates)
    return min(candidates, key=lambda c: (c[0], not c[1]))


def _numeric_tighter(before: _Bound | None, after: _Bound | None, lower: bool) -> bool:
    if before is None or after is None:
        return before is None
    if lower:
        return after > before
    return (after[0], not after[1]) < (before[0], not before[1])


def _show_bound(bound: _Bound | None, lower: bool) -> str | None:
    if bound is None:
        return None
    value, exclusive = bound
    sign = (">" if lower else "<") if exclusive else ("≥" if lower else "≤")
    return f"{sign} {int(value) if value.is_integer() else value}"


def compare_bounds(old: Schema, new: Schema, path: str) -> list[Finding]:
    """Compare numeric, length, count, `multipleOf` and `uniqueItems` limits."""
    findings = []
    for lower, name in ((True, "minimum"), (False, "maximum")):
        before, after = _numeric_bound(old, lower), _numeric_bound(new, lower)
        if before != after:
            tighter = _numeric_tighter(before, after, lower)
            shown = (_show_bound(before, lower), _show_bound(after, lower))
            findings.append(_bound(path, name, tighter, *shown))
    for keyword, lower in (
        *(("minLength", True), ("minItems", True), ("minProperties", True)),
        *(("maxLength", False), ("maxItems", False), ("maxProperties", False)),
    ):
        before_n, after_n = number(old.get(keyword)), number(new.get(keyword))
        if before_n == after_n:
            continue
        if before_n is None or after_n is None:
            tighter = before_n is None
        else:
            tighter = after_n > before_n if lower else after_n < before_n
        findings.append(_bound(path, keyword, tighter, old.get(keyword), new.get(keyword)))
    findings += _compare_multiple_of(old, new, path)
    unique_before, unique_after = bool(old.get("uniqueItems")), bool(new.get("uniqueItems"))
    if unique_before != unique_after:
        shown = ("true", "false") if unique_before else ("false", "true")
        findings.append(_bound(path, "uniqueItems", unique_after, *shown))
    return findings


def _compare_multiple_of(old: Schema, new: Schema, path: str) -> list[Finding]:
    before, after = number(old.get("multipleOf")), number(new.get("multipleOf"))
    if before == after:
        return []
    if before is None or after is None:
        return [
            _bound(path, "multipleOf", before is None, old.get("multipleOf"), new.get("multipleOf"))
        ]
    if (after / before).is_integer():
        return [_bound(path, "multipleOf", True, f"{before:g}", f"{after:g}")]
    if (before / after).is_integer():
        return [_bound(path, "multipleOf", False, f"{before:g}", f"{after:g}")]
    detail = f"multipleOf {before:g} → {after:g}: each accepts numbers the other rejects"
    return [Finding(path, "multiple-of-changed", "incomparable", detail)]


def compare_string_rules(old: Schema, new: Schema, path: str) -> list[Finding]:
    """``pattern`` and ``format``: added narrows, removed widens; two values per keyword rule."""
    findings: list[Finding] = []
    for keyword, judge in _STRING_RULES:
        before, after = old.get(keyword), new.get(keyword)
        if before == after:
            continue
        if before is None:
            detail = f"{keyword} added: {show(after)}"
            findings.append(Finding(path, f"{keyword}-added", "narrower", detail))
        elif after is None:
            detail = f"{keyword} removed (was {show(before)})"
            findings.append(Finding(path, f"{keyword}-removed", "wider", detail))
        else:
            findings.append(judge(path, before, after))
    return findings


def _patterns_changed(path: str, before: object, after: object) -> Finding:
    """Two different patterns cannot be compared."""
    detail = f"pattern {show(before)} → {show(after)}; charter cannot compare regular expressions"
    return Finding(path, "pattern-changed", "unknown", detail)


def _formats_changed(path: str, before: object, after: object) -> Finding:
    """A few standard formats nest; other standard ones exclude each other."""
    detail = f"format {show(before)} → {show(after)}"
    if isinstance(before, str) and after in _WIDER_FORMATS.get(before, ()):
        return Finding(path, "format-widened", "wider", detail)
    if isinstance(after, str) and before in _WIDER_FORMATS.get(after, ()):
        return Finding(path, "format-narrowed", "narrower", detail)
    if before in _STANDARD_FORMATS and after in _STANDARD_FORMATS:
        return Finding(path, "format-changed", "incomparable", detail)
    detail += "; charter does not know how these formats relate"
    return Finding(path, "format-changed", "unknown", detail)


_STRING_RULES: tuple[tuple[str, Callable[[str, object, object], Finding]], ...] = (
    ("pattern", _patterns_changed),
    ("format", _formats_changed),
)
"""The string keywords and how each judges two different values."""


def compare_others(
    old: Schema, new: Schema, path: str, *, same: Callable[[object, object], bool]
) -> list[Finding]:
    """Keywords charter does not reason about: undecidable when a standard one changes.

    `same` says whether two values are equal, the definitions they refer to included.
    """
    findings = []
    for key in sorted((set(old) | set(new)) - HANDLED - ANNOTATIONS):
        if same(old.get(key), new.get(key)):
            continue
        if key in _STANDARD:
            detail = f"{key!r} changed; charter cannot decide what that does to accepted values"
            findings.append(Finding(path, "unsupported-keyword", "unknown", detail))
        else:
            detail = f"non-standard keyword {key!r} changed (an annotation)"
            findings.append(Finding(path, "annotation-changed", "none", detail))
    return findings
