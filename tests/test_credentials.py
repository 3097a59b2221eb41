"""``charter._credentials``: one credential per request, read the same by every transport."""

from __future__ import annotations

import pytest

from charter._credentials import (
    AmbiguousCredentials,
    check_one_credential,
    credentials_from_headers,
    read_credentials,
)


def test_one_bearer_token_or_one_api_key_is_read_as_sent() -> None:
    assert read_credentials(["Bearer  tok "], []).bearer == "tok"
    assert read_credentials(["bearer tok"], []).bearer == "tok"
    assert read_credentials([], ["key"]).api_key == "key"
    nothing = read_credentials([], [])
    assert (nothing.bearer, nothing.api_key) == (None, None)


def test_another_scheme_is_no_bearer_token() -> None:
    credentials = read_credentials(["Basic YWJj"], ["key"])
    assert (credentials.bearer, credentials.api_key) == (None, "key")


def test_the_same_string_as_bearer_and_api_key_is_passed_on_for_the_authenticator() -> None:
    credentials = read_credentials(["Bearer tok"], ["tok"])
    assert (credentials.bearer, credentials.api_key) == ("tok", "tok")


@pytest.mark.parametrize(
    ("authorization", "api_keys", "says"),
    [
        (["Bearer a", "Bearer b"], [], "2 Authorization headers"),
        (["Bearer a", "Bearer a"], [], "2 Authorization headers"),
        (["Basic x", "Bearer a"], [], "2 Authorization headers"),
        ([], ["a", "b"], "2 X-API-Key headers"),
        (["Bearer a"], ["b"], "a different X-API-Key"),
    ],
)
def test_more_than_one_credential_is_ambiguous(
    authorization: list[str], api_keys: list[str], says: str
) -> None:
    with pytest.raises(AmbiguousCredentials, match=says):
        read_credentials(authorization, api_keys)


def test_raw_asgi_headers_are_read_with_the_same_rule() -> None:
    ok = credentials_from_headers([(b"authorization", b"Bearer tok"), (b"accept", b"*/*")])
    assert ok.bearer == "tok"
    with pytest.raises(AmbiguousCredentials):
        credentials_from_headers([(b"x-api-key", b"a"), (b"x-api-key", b"b")])


@pytest.mark.parametrize(
    ("authorization", "api_keys"),
    [
        ([], []),
        (["Bearer a"], []),
        ([], ["a"]),
        (["Bearer a"], ["a"]),
        (["Basic x"], ["a"]),
        (["Bearer a", "Bearer b"], []),
        (["Bearer a", "Bearer a"], []),
        ([], ["a", "b"]),
        (["Bearer a"], ["b"]),
    ],
)
def test_the_one_credential_check_refuses_exactly_what_reading_refuses(
    authorization: list[str], api_keys: list[str]
) -> None:
    raw = [(b"accept", b"*/*")]
    raw += [(b"authorization", value.encode()) for value in authorization]
    raw += [(b"x-api-key", value.encode()) for value in api_keys]
    try:
        read_credentials(authorization, api_keys)
    except AmbiguousCredentials as refused:
        with pytest.raises(AmbiguousCredentials, match=str(refused)):
            check_one_credential(raw)
    else:
        check_one_credential(raw)
