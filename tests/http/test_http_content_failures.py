"""``/v1/resources`` and ``/v1/prompts`` refusing what a tool call refuses, on a real server.

A prompt's body is read as a tool's arguments are (a lone surrogate is ``422
lone_surrogate``), its arguments are closed like a tool's input, and a handler's text no
UTF-8 can hold is the handler's failure, logged under the error id the caller gets.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from http_support import serve
from tests.unsendable_content import build_host

from charter.http import create_app


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with serve(create_app(build_host(), mcp=False)) as url:
        headers = {"Authorization": "Bearer ada-token", "Content-Type": "application/json"}
        with httpx.Client(base_url=url, headers=headers, timeout=10) as client:
            yield client


def test_a_lone_surrogate_in_a_prompts_arguments_is_refused_as_in_a_tool_call(
    http: httpx.Client,
) -> None:
    escaped = http.post("/v1/prompts/brief:get", content=b'{"topic": "\\ud800"}')
    repeated = http.post("/v1/prompts/brief:get", content=b'{"topic": "a", "topic": "b"}')
    assert escaped.status_code == 422
    assert escaped.json()["code"] == "INVALID_INPUT"
    assert escaped.json()["reason"] == "lone_surrogate"
    # The status a tool call's repeated key gets (failed_problem decides both).
    assert repeated.status_code == 400
    assert repeated.json()["reason"] == "duplicate_key"


def test_a_prompt_refuses_arguments_it_does_not_declare_naming_them(http: httpx.Client) -> None:
    extra = http.post("/v1/prompts/brief:get", json={"topic": "visas", "tonne": "dry"})
    fine = http.post("/v1/prompts/brief:get", json={"topic": "visas", "tone": "dry"})
    assert extra.status_code == 422
    assert extra.json()["reason"] == "invalid_arguments"
    assert "tonne" in extra.json()["detail"]
    assert extra.json()["meta"]["issues"] == [
        {"loc": ["tonne"], "msg": "Extra inputs are not permitted", "type": "extra_forbidden"}
    ]
    assert fine.status_code == 200


def test_unsendable_text_from_a_handler_is_its_failure_logged_under_the_error_id(
    http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="charter")
    read = http.get("/v1/resources/" + quote("text://unsendable", safe=""))
    assert read.status_code == 500
    problem = read.json()
    assert problem["code"] == "PROVIDER_ERROR"
    [logged] = [r for r in caplog.records if problem["error_id"] in r.getMessage()]
    assert "the handler of resource 'unsendable'" in logged.getMessage()


def test_template_variables_with_control_characters_are_refused(http: httpx.Client) -> None:
    nul = http.get("/v1/resources/" + quote("file://%00", safe=""))
    escape = http.get("/v1/resources/" + quote("file://%1B%5B2J", safe=""))
    traversal = http.get("/v1/resources/" + quote("file://a%2F..%2Fetc", safe=""))
    for refused in (nul, escape):
        assert refused.status_code == 422
        assert refused.json()["meta"]["issues"] == [
            {"loc": ["path"], "msg": "control characters are not allowed"}
        ]
    assert traversal.json()["contents"][0]["text"] == "a/../etc"
