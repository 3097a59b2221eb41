"""The rules that judge a change to one tool's manifest entry (see docs/versioning.md).

Each rule reads one part of an old and a new entry (camelCase, as in
docs/manifest-format.md) and returns `Finding`s: where, what kind, how severe, why.
Schemas are judged by `_schema_diff`, inputs in the input position, outputs in the output
position. Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TypeAlias

from charter.evolution._schema_diff import Position, Severity, diff_schemas

__all__ = ("Entry", "Finding", "alias_path", "entry_findings", "strings")

Entry: TypeAlias = Mapping[str, object]
"""One manifest entry, as JSON."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One judged difference inside a tool's entry."""

    path: str
    kind: str
    severity: Severity
    detail: str


_TIERS = ("read", "write", "sensitive", "destructive")
_RISKS = ("low", "medium", "high", "critical")
_AUTH = ("public", "identity", "admin")
_APPROVAL = ("never", "conditional", "required")

# Entry keys with their own rule, and keys that never matter to callers.
_RULED = frozenset(
    {
        *("name", "description", "aliases", "deprecation", "capabilityId", "capabilityVersion"),
        *("inputSchema", "outputSchema", "requiredScopes", "audience", "tier", "deploymentRisk"),
        *("riskPolicy", "annotations", "auth", "delegable", "tenantField", "actionPolicy"),
        *("controls", "aliasDeprecations", "modelName"),
        "warnings",  # only in Host.discover output, and it changes with the date
    }
)
_INFORMATIONAL = frozenset({"owner", "contractVersion"})


def strings(value: object) -> tuple[str, ...]:
    """The strings of a JSON array, else none."""
    if not isinstance(value, list | tuple):
        return ()
    return tuple(v for v in value if isinstance(v, str))


def _show(value: object) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def alias_path(alias: str) -> str:
    """The path of a change to one alias: `aliases['trip_rename']`."""
    return f"aliases[{alias!r}]"


def _listed(values: Sequence[str]) -> str:
    return ", ".join(repr(v) for v in values)


def _from_to(label: str, before: object, after: object) -> str:
    """A changed value as the findings show it: ``tier "read" → "write"``."""
    return f"{label} {_show(before)} → {_show(after)}"


def _changed_keys(
    before: Mapping[str, object], after: Mapping[str, object], ruled: AbstractSet[str]
) -> list[str]:
    """The keys whose values differ, sorted, except the ``ruled`` ones judged elsewhere."""
    return [k for k in sorted((set(before) | set(after)) - ruled) if before.get(k) != after.get(k)]


_Judgement: TypeAlias = tuple[str, Severity, str]
"""A finding's kind, severity and detail, for a rule to pick by what changed."""


def _flag_change(
    path: str, was: bool, now: bool, *, gained: _Judgement, lost: _Judgement
) -> list[Finding]:
    """The finding of a yes/no property that became true (gained) or false (lost), if so."""
    if was == now:
        return []
    return [Finding(path, *(gained if now else lost))]


def _list_change(
    path: str,
    before: Sequence[str],
    after: Sequence[str],
    *,
    added: _Judgement,
    removed: _Judgement,
) -> list[Finding]:
    """Findings for the values added to and removed from a list, a breaking one first.

    ``{}`` in each judgement's detail stands for the values.
    """
    findings = []
    for (kind, severity, detail), values in (
        (added, [v for v in after if v not in before]),
        (removed, [v for v in before if v not in after]),
    ):
        if values:
            findings.append(Finding(path, kind, severity, detail.format(_listed(values))))
    return sorted(findings, key=lambda finding: finding.severity != "breaking")


def entry_findings(old: Entry, new: Entry) -> list[Finding]:
    """Judge every difference between two entries of the same tool (or a renamed one)."""
    findings: list[Finding] = []
    for rule in _RULES:
        findings += rule(old, new)
    return findings


Rule: TypeAlias = Callable[[Entry, Entry], list[Finding]]
"""Judges one part of an old and a new entry."""

FieldJudge: TypeAlias = Callable[[object, object], list[Finding]]
"""Judges the old and the new value of one entry field, which differ."""


def _field(key: str, judge: FieldJudge) -> Rule:
    """A rule for the entry field ``key``: ``judge`` sees its two values only when they differ."""

    def rule(old: Entry, new: Entry) -> list[Finding]:
        before, after = old.get(key), new.get(key)
        return [] if before == after else judge(before, after)

    return rule


def _description(before: object, after: object) -> list[Finding]:
    return [Finding("description", "description-changed", "compatible", "description changed")]


def _aliases(old: Entry, new: Entry) -> list[Finding]:
    # Names a caller could use before, and can use now.
    old_names = {old.get("name"), *strings(old.get("aliases"))}
    new_names = {new.get("name"), *strings(new.get("aliases"))}
    findings = []
    for alias in strings(old.get("aliases")):
        if alias not in new_names:
            detail = f"alias {alias!r} removed; callers using it get NOT_FOUND"
            findings.append(Finding(alias_path(alias), "alias-removed", "breaking", detail))
    for alias in strings(new.get("aliases")):
        if alias not in old_names:
            findings.append(
                Finding("aliases", "alias-added", "compatible", f"alias {alias!r} added")
            )
    return findings


def _model_name(before: object, after: object) -> list[Finding]:
    # Only model-facing exports (providers, harness, bridges) use it; MCP and HTTP callers
    # keep the canonical name. A model whose transcript has the old name is told the new one.
    was = _show(before) if before is not None else "derived"
    now = _show(after) if after is not None else "derived"
    detail = f"model-facing name {was} → {now}; models see the tool under the new name"
    return [Finding("modelName", "model-name-changed", "compatible", detail)]


def _deprecation(before: object, after: object) -> list[Finding]:
    if before is None:
        detail = "deprecated"
        if isinstance(after, Mapping):
            if isinstance(message := after.get("message"), str):
                detail += f": {message}"
            if isinstance(sunset := after.get("sunsetDate"), str):
                detail += f" (sunset {sunset})"
        return [Finding("deprecation", "deprecation-added", "compatible", detail)]
    if after is None:
        return [Finding("deprecation", "deprecation-removed", "compatible", "no longer deprecated")]
    detail = f"deprecation changed: {_show(before)} → {_show(after)}"
    return [Finding("deprecation", "deprecation-changed", "compatible", detail)]


def _alias_deprecations(old: Entry, new: Entry) -> list[Finding]:
    before, after = _mapping(old.get("aliasDeprecations")), _mapping(new.get("aliasDeprecations"))
    findings = []
    for alias in sorted(set(before) | set(after)):
        was, now = before.get(alias), after.get(alias)
        if was == now:
            continue
        if was is None:
            kind, detail = "alias-deprecated", f"alias {alias!r} deprecated"
            message = _mapping(now).get("message")
            detail += f": {message}" if isinstance(message, str) else ""
        elif now is None:
            kind, detail = "alias-deprecation-removed", f"alias {alias!r} no longer deprecated"
        else:
            kind, detail = (
                "alias-deprecation-changed",
                f"alias {alias!r}: {_show(was)} → {_show(now)}",
            )
        findings.append(Finding(alias_path(alias), kind, "compatible", detail))
    return findings


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _identity(old: Entry, new: Entry) -> list[Finding]:
    findings = []
    if old.get("capabilityId") != new.get("capabilityId"):
        # Callers address tools by name; the capability id is the registry's identity
        # (lookups, ledger fingerprints), so its change is reported but not breaking.
        moved = _from_to("capabilityId", old.get("capabilityId"), new.get("capabilityId"))
        detail = f"{moved}; lookups by capability and ledger fingerprints change"
        findings.append(Finding("capabilityId", "capability-id-changed", "compatible", detail))
    for key in _changed_keys(old, new, _RULED):
        detail = _from_to(key, old.get(key), new.get(key))
        kind = "field-changed" if key not in _INFORMATIONAL else f"{key}-changed"
        findings.append(Finding(key, kind, "compatible", detail))
    return findings


def _scopes(old: Entry, new: Entry) -> list[Finding]:
    return _list_change(
        "requiredScopes",
        strings(old.get("requiredScopes")),
        strings(new.get("requiredScopes")),
        added=(
            "scopes-added",
            "breaking",
            "required scopes added: {}; callers without them are denied",
        ),
        removed=("scopes-removed", "compatible", "required scopes removed: {}"),
    )


def _audience(before: object, after: object) -> list[Finding]:
    # An absent audience means every audience may see the tool.
    if after is None:
        detail = "audience restriction removed; every audience sees the tool"
        return [Finding("audience", "audience-widened", "compatible", detail)]
    if before is None:
        detail = f"now visible only to {_listed(strings(after))}"
        return [Finding("audience", "audience-narrowed", "breaking", detail)]
    return _list_change(
        "audience",
        strings(before),
        strings(after),
        added=("audience-widened", "compatible", "now also visible to {}"),
        removed=("audience-narrowed", "breaking", "no longer visible to {}"),
    )


def _ranked(
    path: str, name: str, order: Sequence[str], before: object, after: object, why: str
) -> list[Finding]:
    """A change on an ordered scale: up is breaking, down compatible, unknown undecidable."""
    if before == after:
        return []
    detail = _from_to(name, before, after)
    if before not in order or after not in order:
        detail += f"; charter does not know how to order these (expected {', '.join(order)})"
        return [Finding(path, f"{name}-changed", "undecidable", detail)]
    if order.index(str(after)) > order.index(str(before)):
        return [Finding(path, f"{name}-raised", "breaking", f"{detail}; {why}")]
    return [Finding(path, f"{name}-lowered", "compatible", detail)]


def _risk(old: Entry, new: Entry) -> list[Finding]:
    return [
        *_ranked(
            "tier",
            "tier",
            _TIERS,
            old.get("tier"),
            new.get("tier"),
            "calls may now need a request id, confirmation or approval",
        ),
        *_ranked(
            "deploymentRisk",
            "deployment-risk",
            _RISKS,
            old.get("deploymentRisk"),
            new.get("deploymentRisk"),
            "policies keyed on risk may now stop callers",
        ),
        *_ranked(
            "auth",
            "auth",
            _AUTH,
            old.get("auth"),
            new.get("auth"),
            "callers that were allowed may now be refused",
        ),
        *_risk_policy(old, new),
    ]


def _risk_policy(old: Entry, new: Entry) -> list[Finding]:
    before, after = _mapping(old.get("riskPolicy")), _mapping(new.get("riskPolicy"))
    findings = _flag_change(
        "riskPolicy",
        before.get("confirmationRequired") is True,
        after.get("confirmationRequired") is True,
        gained=(
            "confirmation-required",
            "breaking",
            "riskPolicy now requires confirmation; calls without `confirmed: true` stop",
        ),
        lost=("confirmation-dropped", "compatible", "riskPolicy no longer requires confirmation"),
    )
    for key in _changed_keys(before, after, {"confirmationRequired"}):
        detail = _from_to(f"riskPolicy.{key}", before.get(key), after.get(key))
        findings.append(Finding("riskPolicy", "risk-policy-changed", "compatible", detail))
    return findings


def _annotations(old: Entry, new: Entry) -> list[Finding]:
    if old.get("annotations") == new.get("annotations"):
        return []
    detail = _from_to("annotations", old.get("annotations"), new.get("annotations"))
    return [Finding("annotations", "annotations-changed", "compatible", detail)]


def _delegation(old: Entry, new: Entry) -> list[Finding]:
    was = old.get("delegable") is True
    findings = _flag_change(
        "delegable",
        was,
        new.get("delegable") is True,
        gained=("delegation-added", "compatible", "now delegable"),
        lost=(
            "delegation-removed",
            "breaking",
            "no longer delegable; admin calls on behalf of another tenant are denied",
        ),
    )
    before, after = old.get("tenantField"), new.get("tenantField")
    if before != after:
        detail = _from_to("tenantField", before, after)
        # Only delegated callers name a tenant; for them a moved field is breaking.
        severity: Severity = "breaking" if was and before is not None else "compatible"
        findings.append(Finding("tenantField", "tenant-field-changed", severity, detail))
    return findings


def _controls_of(entry: Entry) -> Mapping[str, object]:
    """An entry's `controls` (top level; older manifests nested them in `actionPolicy`)."""
    controls = entry.get("controls")
    if isinstance(controls, Mapping):
        return controls
    return _mapping(_mapping(entry.get("actionPolicy")).get("controls"))


def _action_policy(old: Entry, new: Entry) -> list[Finding]:
    before, after = old.get("actionPolicy"), new.get("actionPolicy")
    if before == after:
        return []
    if not isinstance(after, Mapping):
        detail = "action policy removed; calls need no controls"
        return [Finding("actionPolicy", "action-policy-removed", "compatible", detail)]
    if not isinstance(before, Mapping):
        required = strings(_controls_of(new).get("required"))
        if required or after.get("approval") in ("conditional", "required"):
            detail = (
                f"action policy added (approval {_show(after.get('approval'))}, "
                f"required controls: {_listed(required) or 'none'})"
            )
            return [Finding("actionPolicy", "action-policy-added", "breaking", detail)]
        detail = "action policy added; it requires nothing of callers"
        return [Finding("actionPolicy", "action-policy-added", "compatible", detail)]
    return [
        *_ranked(
            "actionPolicy.approval",
            "approval",
            _APPROVAL,
            before.get("approval"),
            after.get("approval"),
            "calls may now wait for a human approval",
        ),
        *_ranked(
            "actionPolicy.risk",
            "action-risk",
            _RISKS,
            before.get("risk"),
            after.get("risk"),
            "policies keyed on risk may now stop callers",
        ),
        *_confirmation(before, after),
        *_actor_types(before, after),
        *_policy_details(before, after),
    ]


def _confirmation(before: Mapping[str, object], after: Mapping[str, object]) -> list[Finding]:
    was, now = before.get("confirmation"), after.get("confirmation")
    if was == now or now is None:
        return []
    path = "actionPolicy.confirmation"
    if now == "required":
        detail = "action policy now requires confirmation"
        return [Finding(path, "confirmation-required", "breaking", detail)]
    return [Finding(path, "confirmation-dropped", "compatible", f"confirmation {was} → {now}")]


def _controls(old: Entry, new: Entry) -> list[Finding]:
    old_c, new_c = _controls_of(old), _controls_of(new)
    old_required, new_required = strings(old_c.get("required")), strings(new_c.get("required"))
    old_accepted = {*old_required, *strings(old_c.get("optional"))}
    new_accepted = {*new_required, *strings(new_c.get("optional"))}
    findings = []
    for name in new_required:
        if name not in old_required:
            detail = f"control {name!r} is now required; calls without it stop"
            findings.append(Finding("controls", "control-required", "breaking", detail))
    for name in old_required:
        if name not in new_required:
            detail = f"control {name!r} is no longer required"
            findings.append(Finding("controls", "control-no-longer-required", "compatible", detail))
    for name in sorted(old_accepted - new_accepted):
        detail = f"control {name!r} is no longer listed as accepted"
        findings.append(Finding("controls", "control-dropped", "compatible", detail))
    for name in sorted(new_accepted - old_accepted - set(new_required)):
        detail = f"control {name!r} is now accepted"
        findings.append(Finding("controls", "control-accepted", "compatible", detail))
    return findings


def _actor_types(before: Mapping[str, object], after: Mapping[str, object]) -> list[Finding]:
    # An empty list allows every actor type.
    was, now = strings(before.get("allowedActorTypes")), strings(after.get("allowedActorTypes"))
    if was == now:
        return []
    path = "actionPolicy.allowedActorTypes"
    removed = [a for a in was if a not in now]
    if now and (not was or removed):
        detail = f"allowed actor types {_listed(was) or 'any'} → {_listed(now)}"
        return [Finding(path, "actor-types-narrowed", "breaking", detail)]
    detail = f"allowed actor types {_listed(was) or 'any'} → {_listed(now) or 'any'}"
    return [Finding(path, "actor-types-widened", "compatible", detail)]


def _policy_details(before: Mapping[str, object], after: Mapping[str, object]) -> list[Finding]:
    ruled = {"approval", "risk", "confirmation", "controls", "allowedActorTypes"}
    # (`controls` sat here in older manifests; `_controls` judges it wherever it is.)
    findings = []
    for key in _changed_keys(before, after, ruled):
        path = f"actionPolicy.{key}"
        detail = _from_to(path, before.get(key), after.get(key))
        findings.append(Finding(path, "action-policy-changed", "compatible", detail))
    return findings


_SCHEMA_POSITIONS: tuple[tuple[str, Position], ...] = (
    ("inputSchema", "input"),
    ("outputSchema", "output"),
)


def _schemas(old: Entry, new: Entry) -> list[Finding]:
    findings = []
    for key, position in _SCHEMA_POSITIONS:
        before, after = old.get(key, True), new.get(key, True)
        for change in diff_schemas(before, after, position=position):
            path = key + change.path[1:]
            findings.append(Finding(path, change.kind, change.severity, change.detail))
    return findings


_RULES: tuple[Rule, ...] = (
    _aliases,
    _identity,
    _scopes,
    _field("audience", _audience),
    _risk,
    _delegation,
    _action_policy,
    _controls,
    _field("description", _description),
    _field("modelName", _model_name),
    _field("deprecation", _deprecation),
    _alias_deprecations,
    _annotations,
    _schemas,
)
