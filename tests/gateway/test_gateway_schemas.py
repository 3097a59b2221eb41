"""What charter does with an upstream tool's input schema: it fetches nothing, spots every
secret pydantic writes, and checks patterns without backtracking."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, SecretStr, ValidationError

from charter._fingerprint import shown_input
from charter.errors import ConfigurationError
from charter.gateway._schemas import input_model


@pytest.mark.parametrize(
    "ref",
    ["http://169.254.169.254/latest/meta-data", "file:///etc/passwd", "other.json#/x"],
)
def test_a_schema_that_refers_outside_itself_is_refused_at_registration(ref: str) -> None:
    # jsonschema would fetch it on every call, on the event loop, and quote what it read.
    schema = {"type": "object", "properties": {"token": {"$ref": ref}}}
    with pytest.raises(ConfigurationError, match="refers outside itself"):
        input_model("evil.lookup", schema)


def test_a_local_ref_still_validates() -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"$ref": "#/$defs/City"}},
        "$defs": {"City": {"type": "string", "minLength": 2}},
    }
    model = input_model("trips.search", schema)
    assert model.model_validate({"city": "Lisbon"}).sent() == {"city": "Lisbon"}
    with pytest.raises(ValidationError, match="minLength"):
        model.model_validate({"city": "L"})


class ChangePassword(BaseModel):
    user: str
    new_password: SecretStr | None = None
    old_password: SecretStr


def test_an_optional_secret_is_bound_and_masked_like_a_required_one() -> None:
    # pydantic (and so MCPServer) writes an optional SecretStr as anyOf [secret, null].
    schema: dict[str, Any] = ChangePassword.model_json_schema()
    model = input_model("accounts.change_password", schema)
    sent = {"user": "ada", "new_password": "hunter2-new", "old_password": "hunter2-old"}
    validated = model.model_validate(sent)
    assert shown_input(validated) == {
        "user": "ada",
        "new_password": {"$secret": "bound"},
        "old_password": {"$secret": "bound"},
    }
    assert validated.sent() == sent


def test_a_secret_behind_an_escaped_ref_is_still_masked() -> None:
    # A definition name holding "/" or "~" is escaped in its pointer (RFC 6901: ~1, ~0);
    # the walk that marks secrets reads it as jsonschema does when validating.
    schema = {
        "type": "object",
        "properties": {"token": {"$ref": "#/$defs/vault~1token"}, "user": {"type": "string"}},
        "$defs": {"vault/token": {"type": "string", "writeOnly": True}},
    }
    model = input_model("vault.read", schema)
    validated = model.model_validate({"token": "s3cr3t", "user": "ada"})
    assert shown_input(validated) == {"token": {"$secret": "bound"}, "user": "ada"}


def test_a_pattern_is_checked_without_catastrophic_backtracking() -> None:
    # Python's re takes about 2**n steps on this pattern for n characters and a miss; one
    # caller could hold the event loop for hours. Under pytest's timeout, a hang fails.
    schema = {
        "type": "object",
        "properties": {"email": {"type": "string", "pattern": r"^([a-zA-Z0-9]+)*@example\.com$"}},
    }
    model = input_model("mail.send", schema)
    with pytest.raises(ValidationError, match="pattern"):
        model.model_validate({"email": "a" * 60 + "!"})
    assert model.model_validate({"email": "ada@example.com"}).sent() == {"email": "ada@example.com"}
    # A pattern the linear engine cannot run (a lookahead) keeps Python's engine.
    look = input_model(
        "pins.set",
        {"type": "object", "properties": {"pin": {"type": "string", "pattern": r"^(?=.*\d)\w+$"}}},
    )
    assert look.model_validate({"pin": "ab1"}).sent() == {"pin": "ab1"}
    with pytest.raises(ValidationError):
        look.model_validate({"pin": "abc"})
