"""The canonical form of a validated tool input: every value a command fingerprint binds.

A command fingerprint (`charter.policy.command_fingerprint`) is SHA-256 over RFC 8785
canonical JSON of capability, tenant, target and the *input*, and the input is not a
``model_dump``: serializers hide values (``SecretStr`` dumps as ``"**********"``,
``Field(exclude=True)`` drops its field, a ``@field_serializer``, ``PlainSerializer`` or
``model_serializer`` may return anything) or randomise them (a ``set`` dumps in hash
order, which ``PYTHONHASHSEED`` changes per process). This module walks the validated
model itself, field by field, and never calls a serializer.

The form is persistent. The ledger and approvals compare fingerprints across processes,
replicas and releases: changing how a value maps would turn every retry in flight into
``IDEMPOTENCY_CONFLICT`` and every pending approval into ``fingerprint_mismatch``.
``tests/test_fingerprint.py`` pins it with golden values. A type refused today may be
given a form later without changing any stored fingerprint.

**Form 1.** Each validated Python value maps to JSON by the first rule that matches:

- ``None``, ``bool``: ``null``, ``true``, ``false``.
- ``str``, including subclasses (``StrEnum`` members): the string's characters.
- ``int``, including subclasses (``IntEnum`` members): within ``-(2**53)..2**53`` the
  number; beyond it ``{"$int": "<decimal digits>"}``, so no two integers share a form.
- ``float``: the number as RFC 8785 writes it (so ``-0.0`` is ``0`` and ``1.0`` is ``1``);
  NaN and the infinities are refused.
- A secret (``SecretStr``, ``SecretBytes``, ``Secret[T]``): ``{"$secret": <form of the
  secret value>}``. It is hashed, never shown: the approver's view (`shown_input`) has
  ``{"$secret": "bound"}`` in its place.
- Any other ``Enum`` member: ``{"$enum": <form of its value>}``.
- A ``RootModel``: the form of its root.
- A ``BaseModel``: an object of every declared field, by its Python name (never its
  alias), whatever its ``exclude``, ``repr`` or serializer, plus any extra fields;
  computed fields and private attributes are derived, so they are left out. An extra
  field named like a declared one (sent under the field's name beside its alias) goes
  into an object under ``"$extra"``, so it never replaces the declared field's value.
- A dataclass: an object of its ``init`` fields, by name, plus the extra fields a pydantic
  dataclass with ``extra="allow"`` keeps on the instance.
- A mapping whose keys are all ``str``: an object. Here and in models, a key starting
  with ``$`` gets one more ``$`` (``"$x"`` is written ``"$$x"``), so data never reads as
  one of these tags.
- Any other mapping: ``{"$map": [[<key>, <value>], ...]}``, the pairs sorted by their
  canonical JSON text (compared by code point).
- ``set``, ``frozenset``: ``{"$set": [...]}``, the items sorted by their canonical JSON
  text (compared by code point).
- ``bytes``, ``bytearray``: ``{"$bytes": "<base64, standard alphabet, padded>"}``.
- ``list``, ``tuple`` (named tuples too), ``deque``: an array, in order.
- ``datetime``, ``date``, ``time``: ``{"$datetime" | "$date" | "$time": <isoformat()>}``,
  as Python writes it (the offset as given, microseconds only when not zero).
- ``timedelta``: ``{"$timedelta": [days, seconds, microseconds]}``, normalised as Python
  stores it.
- ``Decimal`` (finite): ``{"$decimal": str(value)}``, exact, so ``1.5`` and ``1.50``
  differ.
- ``UUID``: ``{"$uuid": "<lower-case, hyphenated>"}``.
- A URL (``AnyUrl`` and its subclasses, ``pydantic_core.Url``): ``{"$url": str(value)}``.
- A path (``PurePath``): ``{"$path": str(value)}``.
- An IP address, interface or network: ``{"$ipaddress" | "$ipinterface" | "$ipnetwork":
  str(value)}``.
- Anything else (an iterator, a callable, an arbitrary class, a multi-host DSN, a
  ``Pattern``, a ``complex``, a ``Fraction``) is refused with `NonCanonicalValueError`
  naming where it is, never what it is; so are a value that contains itself (or nests
  deeper than the interpreter's recursion limit) and strings with unpaired surrogates.

JSON types map to themselves, so a plain model (strings, numbers, booleans, lists,
nested models, dicts whose keys do not start with ``$``) has the form
``model_dump(mode="json")`` gave it before form 1 existed, and fingerprints from then
still match.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import ipaddress
import math
from collections import deque
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from pathlib import PurePath
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final
from uuid import UUID

from pydantic import AnyUrl, BaseModel, RootModel, Secret, SecretBytes, SecretStr
from pydantic_core import Url

from ._canonical import NonCanonicalValueError, canonical_json

if TYPE_CHECKING:
    from pydantic import JsonValue

__all__ = ("MASKED_SECRET", "canonical_input", "shown_input")

MASKED_SECRET: Final[Mapping[str, str]] = MappingProxyType({"$secret": "bound"})
"""What the approver's view shows in place of a secret: bound by the fingerprint, hidden."""

_MAX_EXACT_INTEGER = 2**53
_SECRETS = (SecretStr, SecretBytes, Secret)
_URLS = (AnyUrl, Url)
_IP_KINDS: tuple[tuple[type, str], ...] = (
    # Interfaces subclass addresses, so they are tested first.
    (ipaddress.IPv4Interface, "$ipinterface"),
    (ipaddress.IPv6Interface, "$ipinterface"),
    (ipaddress.IPv4Address, "$ipaddress"),
    (ipaddress.IPv6Address, "$ipaddress"),
    (ipaddress.IPv4Network, "$ipnetwork"),
    (ipaddress.IPv6Network, "$ipnetwork"),
)


def canonical_input(model: BaseModel) -> dict[str, JsonValue]:
    """Return the canonical form of every validated value of ``model``, secrets in clear.

    This is what a command fingerprint hashes. It holds secret values, so it must never
    be shown, logged or stored; show `shown_input` instead.

    Args:
        model: A validated tool input.

    Returns:
        The model's form 1 (see the module docstring) as JSON data.

    Raises:
        NonCanonicalValueError: A value has no canonical form (NaN, an unknown type, a
            circular reference).
    """
    return _walk(model, reveal=True)


def shown_input(model: BaseModel) -> dict[str, JsonValue]:
    """Return the approver's view of ``model``: its canonical form with secrets masked.

    Identical to `canonical_input` except that each ``{"$secret": <value>}`` is
    `MASKED_SECRET`, so an approver sees every bound value and which ones are secrets.

    Args:
        model: A validated tool input.

    Returns:
        The view as JSON data.

    Raises:
        NonCanonicalValueError: A value has no canonical form.
    """
    return _walk(model, reveal=False)


class _Refused(Exception):
    """A value without a form; the containers it was in add their path segments."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.segments: list[str] = []

    def within(self, segment: str) -> _Refused:
        self.segments.append(segment)
        return self


def _walk(model: BaseModel, *, reveal: bool) -> dict[str, JsonValue]:
    try:
        form = _Form(reveal=reveal).value(model)
    except _Refused as exc:
        # The path says where, never what: the value may be a secret.
        where = "input" + "".join(reversed(exc.segments))
        raise NonCanonicalValueError(f"{where}: {exc.problem}") from None
    except RecursionError:
        raise NonCanonicalValueError(
            "input: the value is nested too deeply or contains itself"
        ) from None
    if not isinstance(form, dict):  # a RootModel whose root is not an object
        raise NonCanonicalValueError("input: a tool input must be a JSON object")
    return form


@functools.lru_cache(maxsize=1024)
def _field_names(model: type[BaseModel]) -> tuple[str, ...]:
    """The declared fields of a model class, in order (read once per class)."""
    return tuple(model.model_fields)


def _sorted_by_text(items: list[JsonValue]) -> list[JsonValue]:
    return sorted(items, key=canonical_json)


class _Form:
    """Builds form 1 of a validated value, or (``reveal=False``) the approver's view."""

    def __init__(self, *, reveal: bool) -> None:
        self.reveal = reveal

    def value(self, value: object) -> JsonValue:
        # The exact JSON types first: they are most values, and the cheapest to test.
        if value is None or type(value) is str or type(value) is bool:
            return value
        if type(value) is int:
            return _integer(value)
        if type(value) is list:
            return self.items(value)
        if type(value) is dict:
            return self.mapping(value)
        if isinstance(value, BaseModel):
            return self.model(value)
        return self.other(value)

    def other(self, value: object) -> JsonValue:
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            return str.__str__(value)
        if isinstance(value, int):
            return _integer(value)
        if isinstance(value, float):
            return _number(value)
        if isinstance(value, _SECRETS):
            return self.secret(value)
        if isinstance(value, Enum):
            return self.tagged("$enum", value.value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self.dataclass(value)
        if isinstance(value, Mapping):
            return self.mapping(value)
        if isinstance(value, AbstractSet):
            return {"$set": _sorted_by_text(self.items(value))}
        if isinstance(value, bytes | bytearray):
            return {"$bytes": base64.b64encode(value).decode("ascii")}
        if isinstance(value, list | tuple | deque):
            return self.items(value)
        return _scalar(value)

    def secret(self, value: SecretStr | SecretBytes | Secret[Any]) -> JsonValue:
        # Walked in both modes, so the view refuses exactly what the fingerprint refuses.
        form = self.tagged("$secret", value.get_secret_value())
        return form if self.reveal else dict(MASKED_SECRET)

    def tagged(self, tag: str, inner: object) -> JsonValue:
        try:
            return {tag: self.value(inner)}
        except _Refused as exc:
            raise exc.within("." + tag) from None

    def model(self, model: BaseModel) -> JsonValue:
        if isinstance(model, RootModel):
            try:
                return self.value(model.root)
            except _Refused as exc:
                raise exc.within(".root") from None
        # The stored values, not attributes: no property or __getattr__ in between.
        stored = model.__dict__
        declared = type(model).model_fields
        fields = [(name, stored[name]) for name in _field_names(type(model))]
        extra = model.__pydantic_extra__
        if not extra:
            return self.members(fields)
        # A field sent under its alias *and* its name keeps the alias's value and the
        # name's as an extra. Under one key the extra would replace what the handler gets.
        fields.extend((name, member) for name, member in extra.items() if name not in declared)
        form = self.members(fields)
        clashing = [(name, member) for name, member in extra.items() if name in declared]
        if clashing:
            form["$extra"] = self.members(clashing)
        return form

    def dataclass(self, value: object) -> dict[str, JsonValue]:
        fields = dataclasses.fields(value)  # type: ignore[arg-type]
        members = [(f.name, getattr(value, f.name)) for f in fields if f.init]
        config = getattr(value, "__pydantic_config__", None)
        if config is not None and config.get("extra") == "allow":
            # A pydantic dataclass keeps extra fields as attributes of the instance.
            names = {f.name for f in fields}
            stored: dict[str, object] = getattr(value, "__dict__", {})
            members.extend((name, member) for name, member in stored.items() if name not in names)
        return self.members(members)

    def members(self, fields: Iterable[tuple[str, object]]) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {}
        for name, member in fields:
            key = name if type(name) is str else str.__str__(name)
            if key.startswith("$"):  # so that data never reads as a tag
                key = "$" + key
            try:
                out[key] = self.value(member)
            except _Refused as exc:
                raise exc.within(f".{name}") from None
        return out

    def mapping(self, value: Mapping[Any, object]) -> JsonValue:
        if all(isinstance(key, str) for key in value):
            return self.members(value.items())
        pairs: list[JsonValue] = []
        for index, (key, member) in enumerate(value.items()):
            try:
                pairs.append([self.value(key), self.value(member)])
            except _Refused as exc:
                raise exc.within(f"[{index}]") from None
        return {"$map": _sorted_by_text(pairs)}

    def items(self, values: Iterable[object]) -> list[JsonValue]:
        out: list[JsonValue] = []
        for index, item in enumerate(values):
            try:
                out.append(self.value(item))
            except _Refused as exc:
                raise exc.within(f"[{index}]") from None
        return out


def _integer(value: int) -> JsonValue:
    number = int(value)  # an IntEnum member becomes its plain value
    if -_MAX_EXACT_INTEGER <= number <= _MAX_EXACT_INTEGER:
        return number
    try:
        return {"$int": str(number)}
    except ValueError:  # more digits than sys.get_int_max_str_digits() allows
        raise _Refused("the integer has too many digits") from None


def _number(value: float) -> JsonValue:
    number = float(value)
    if not math.isfinite(number):
        raise _Refused("a float NaN or infinity has no canonical form")
    return number + 0.0  # -0.0 + 0.0 is 0.0: the view agrees with RFC 8785's "0"


def _scalar(value: object) -> JsonValue:
    if isinstance(value, datetime):  # before date: a datetime is a date
        return {"$datetime": value.isoformat()}
    if isinstance(value, date):
        return {"$date": value.isoformat()}
    if isinstance(value, time):
        return {"$time": value.isoformat()}
    if isinstance(value, timedelta):
        return {"$timedelta": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise _Refused("a Decimal NaN or infinity has no canonical form")
        return {"$decimal": str(value)}
    if isinstance(value, UUID):
        return {"$uuid": str(value)}
    if isinstance(value, _URLS):
        return {"$url": str(value)}
    if isinstance(value, PurePath):
        return {"$path": str(value)}
    for kind, tag in _IP_KINDS:
        if isinstance(value, kind):
            return {tag: str(value)}
    raise _Refused(f"a value of type {type(value).__qualname__} has no canonical form")
