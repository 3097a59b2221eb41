"""`charter tools` and `charter call`, in process and against a live server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cli_support import TravelFiles, charter, error_line, parse, sqlite, usage_error
from tests.builders import request_id

REGISTRY_WITH_A_PAST_SUNSET = """
from datetime import date

from pydantic import BaseModel

from charter import Alias, Deprecation, Registry, tool


class Query(BaseModel):
    text: str


@tool(
    tier="read",
    name="fares.search",
    capability_version="2.0.0",
    aliases=[
        Alias(
            name="fares.find",
            deprecation=Deprecation(
                since_version="2.0.0",
                message="call fares.search",
                sunset_date=date(2020, 1, 31),
            ),
        )
    ],
)
def search(args: Query) -> Query:
    \"\"\"Search fares.\"\"\"
    return args


registry = Registry()
registry.register(search)
"""


# -- charter tools --------------------------------------------------------------------------


def test_tools_lists_every_tool_with_its_tier_access_and_policy(travel: TravelFiles) -> None:
    result = travel.run("tools")
    assert result.exit_code == 0, result.output
    for name in ("trips.search", "bookings.refund", "memory.update", "catalog.ping"):
        assert name in result.stdout
    assert "alias trips.find" in result.stdout
    refund = next(line for line in result.stdout.splitlines() if "bookings.refund" in line)
    assert "destructive" in refund and "bookings:refund" in refund
    assert "warning" not in result.stdout  # the demo's sunset date is still ahead


def test_tools_json_is_the_manifest(travel: TravelFiles) -> None:
    result = charter("tools", "examples.travel:host", "--db", travel.db, "--json", env=travel.env)
    assert result.exit_code == 0, result.output
    entries = parse(result)
    assert entries[0]["name"] == "trips.search"
    assert {
        e["capabilityVersion"] for e in entries if e["capabilityId"] == "travel.trips.rename"
    } == {
        "1.0.0",
        "2.0.0",
    }


def test_tools_warns_about_an_alias_past_its_sunset_date(
    write_target: Callable[[str], str], tmp_path: Path
) -> None:
    module = write_target(REGISTRY_WITH_A_PAST_SUNSET)
    db = sqlite(tmp_path / "c.db")
    table = charter("tools", f"{module}:registry", "--db", db)
    listed = charter("tools", f"{module}:registry", "--db", db, "--json")
    assert table.exit_code == 0 and listed.exit_code == 0, table.output + listed.output
    assert "warning: alias 'fares.find' of 'fares.search' is deprecated and past its sunset" in (
        " ".join(table.stdout.split())
    )
    (warning,) = parse(listed)[0]["warnings"]
    assert "past its sunset date 2020-01-31 (call fares.search)" in warning


def test_tools_over_url_lists_what_the_key_may_call(notes_url: str) -> None:
    writer = charter("tools", "--url", notes_url, "--key", "writer-token", "--json")
    approver = charter("tools", "--url", notes_url, "--key", "approver-token", "--json")
    assert [e["name"] for e in parse(writer)] == ["notes.echo", "notes.wipe"]
    assert parse(approver) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope.module:host"], "error: cannot import module 'nope.module'"),
        (["examples.travel"], "error: target 'examples.travel' must look like 'module:attribute'"),
        (["examples.travel:nothing"], "error: module 'examples.travel' has no attribute"),
        (["examples.travel:DEMO_PRINCIPALS"], "not a Host, a Registry or a factory of one"),
        (["examples.travel:TravelContext"], "needs arguments charter cannot supply"),
        ([], "error: give TARGET (module:attribute) or --url of a running server"),
    ],
)
def test_tools_with_a_bad_target_prints_one_line_and_exits_2(
    travel: TravelFiles, args: list[str], message: str
) -> None:
    result = charter("tools", *args, "--db", travel.db, env=travel.env)
    assert message in usage_error(result)


def test_tools_with_an_unreachable_database_prints_one_line_and_exits_2(
    travel: TravelFiles,
) -> None:
    result = charter(
        "tools", "examples.travel:host", "--db", "postgresql://nobody@127.0.0.1:1/none"
    )
    line = usage_error(result)
    assert line.startswith("error: cannot open the database postgresql://nobody@127.0.0.1:1/none")
    missing = charter("tools", "examples.travel:host", "--db", "sqlite:////no/such/dir/c.db")
    assert error_line(missing) == (
        "error: cannot open the database sqlite:////no/such/dir/c.db: "
        "the folder /no/such/dir does not exist"
    )


def test_debug_shows_the_traceback() -> None:
    result = charter("tools", "nope.module:host", "--debug")
    assert result.exit_code != 0
    assert isinstance(result.exception, Exception)
    assert "cannot import module 'nope.module'" in str(result.exception)


# -- charter call, in process ---------------------------------------------------------------


def test_call_runs_a_tool_locally_and_prints_its_output(travel: TravelFiles) -> None:
    key = travel.keys()["traveller-agent"]
    result = travel.run("call", "trips.search", "--args", '{"text": "kyoto"}', "--key", key)
    assert result.exit_code == 0, result.output
    assert [t["id"] for t in parse(result)["trips"]] == ["trp_kyoto001"]


def test_call_without_a_key_runs_anonymously(travel: TravelFiles) -> None:
    public = travel.run("call", "catalog.ping")
    private = travel.run("call", "trips.search")
    assert public.exit_code == 0 and parse(public) == {"ok": True, "service": "travel"}
    assert private.exit_code == 1
    assert private.stdout.startswith("[UNAUTHENTICATED]")


def test_call_replays_with_the_same_request_id(travel: TravelFiles) -> None:
    key, rid = travel.keys()["traveller-agent"], request_id()
    body = '{"name": "Retreat", "destination": "Porto", "nights": 2}'
    args = ["trips.create", "--key", key, "--args", body, "--request-id", rid]
    first = travel.run("call", *args)
    again = travel.run("call", *args)
    assert first.exit_code == 0 and again.exit_code == 0, first.output + again.output
    assert parse(first) == parse(again)
    assert "replayed" in again.stderr and "replayed" not in first.stderr


def test_call_makes_up_a_request_id_when_the_tool_needs_one_and_waits_for_confirmation(
    travel: TravelFiles,
) -> None:
    key = travel.keys()["traveller-agent"]
    body = '{"trip_id": "trp_kyoto001", "reason": "Budget"}'
    cancel = ["trips.cancel", "--key", key, "--args", body]
    result = travel.run("call", *cancel)
    assert result.exit_code == 3, result.output
    assert "Allow 'trips.cancel' to run" in result.stdout
    assert "request id" in result.stderr
    rid = result.stderr.split("request id ", 1)[1].split()[0]
    confirmed = travel.run("call", *cancel, "--request-id", rid, "--confirm")
    assert confirmed.exit_code == 0, confirmed.output
    assert parse(confirmed)["status"] == "cancelled"


def test_call_with_a_wrong_key_fails_with_unauthenticated(travel: TravelFiles) -> None:
    result = travel.run("call", "trips.search", "--key", "chk_nope_nope")
    assert result.exit_code == 1
    assert result.stdout.startswith("[UNAUTHENTICATED]")


def test_call_prints_validation_issues_and_exits_1(travel: TravelFiles) -> None:
    key = travel.keys()["traveller-agent"]
    result = travel.run("call", "trips.get", "--args", '{"trip": "x"}', "--key", key)
    assert result.exit_code == 1
    assert result.stdout.startswith("[INVALID_INPUT]")
    assert "trip_id" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--args", "{nope"], "error: --args is not valid JSON: Expecting property name"),
        (["--args", "[1, 2]"], "error: --args must be a JSON object"),
        (["--args", "@/no/such/file.json"], "error: --args: cannot read /no/such/file.json"),
        (["--request-id", "42"], "error: --request-id must be a UUID"),
    ],
)
def test_call_with_bad_input_prints_one_line_and_exits_2(
    travel: TravelFiles, args: list[str], message: str
) -> None:
    result = travel.run("call", "catalog.ping", *args)
    assert usage_error(result).startswith(message)


def test_call_with_a_bad_target_prints_one_line_and_exits_2() -> None:
    result = charter("call", "nope.module:host", "trips.search")
    assert (
        usage_error(result) == "error: cannot import module 'nope.module': No module named 'nope'"
    )


def test_call_needs_a_tool_name() -> None:
    result = charter("call", "examples.travel:host")
    assert "give the tool's NAME after TARGET" in usage_error(result)


# -- charter call --url --------------------------------------------------------------------------


def test_call_over_url_completes_and_replays(notes_url: str) -> None:
    result = charter(
        "call", "--url", notes_url, "notes.echo", "--args", '{"text": "hi"}',
        "--key", "writer-token",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert parse(result) == {"text": "hi"}


def test_call_over_url_walks_an_approval_to_completion(notes_url: str) -> None:
    rid = request_id()
    call = ["call", "--url", notes_url, "notes.wipe", "--args", '{"text": "old"}']
    asked = charter(*call, "--key", "writer-token", "--request-id", rid, "--confirm")
    assert asked.exit_code == 3, asked.output
    approval_id = asked.stdout.split("Approval ", 1)[1].split()[0]
    granted = charter(
        "approvals", "grant", approval_id, "--url", notes_url, "--key", "approver-token"
    )
    assert granted.exit_code == 0, granted.output
    retried = [*call, "--key", "writer-token", "--request-id", rid, "--confirm"]
    done = charter(*retried, "--approval", approval_id)
    again = charter(*retried, "--approval", approval_id, "--json")
    assert done.exit_code == 0 and parse(done) == {"wiped": True}, done.output
    assert parse(again) == {"kind": "completed", "output": {"wiped": True}, "replayed": True}


def test_call_over_url_renders_problems_as_outcomes(notes_url: str) -> None:
    denied = charter("call", "--url", notes_url, "notes.echo", "--key", "approver-token")
    unknown = charter("call", "--url", notes_url, "notes.ecko", "--key", "writer-token")
    bad_key = charter("call", "--url", notes_url, "notes.echo", "--key", "stolen")
    assert denied.exit_code == 1 and denied.stdout.startswith("[AUTHORIZATION_DENIED]")
    assert unknown.exit_code == 1 and unknown.stdout.startswith("[NOT_FOUND]")
    assert 'Did you mean "notes.echo"?' in unknown.stdout
    assert bad_key.exit_code == 1 and bad_key.stdout.startswith("[UNAUTHENTICATED]")


def test_call_over_url_to_nothing_prints_one_line_and_exits_2() -> None:
    result = charter("call", "--url", "http://127.0.0.1:1", "notes.echo")
    assert usage_error(result).startswith("error: cannot reach http://127.0.0.1:1")
    # A password in the URL is never printed.
    with_password = charter("call", "--url", "http://ops:CANARY-pw@127.0.0.1:1", "notes.echo")
    assert usage_error(with_password).startswith("error: cannot reach http://ops:***@127.0.0.1:1")
    assert "CANARY-pw" not in with_password.output
    bad = charter("call", "--url", "ftp://x", "notes.echo")
    assert error_line(bad) == "error: --url must be an http:// or https:// URL, not 'ftp://x'"


TARGET_FORMS = """
from pydantic import BaseModel

from charter import Host, Registry, tool
from charter.store import ApiKeyAuthenticator, SqlStore


class Empty(BaseModel):
    pass


class Where(BaseModel):
    store: str


@tool(tier="read", auth="public")
def where(args: Empty) -> Where:
    \"\"\"Say which host answered.\"\"\"
    return Where(store="?")


registry = Registry()
registry.register(where)
host = Host(registry)


def make_registry() -> Registry:
    return registry


async def make_host(store: SqlStore) -> Host:
    return Host(registry, store=store, authenticator=ApiKeyAuthenticator(store))


def needs_more(store: SqlStore, region: str) -> Host:
    raise AssertionError("never called")
"""


@pytest.mark.parametrize("attribute", ["registry", "host", "make_registry", "make_host"])
def test_a_target_may_be_a_host_a_registry_or_a_sync_or_async_factory(
    write_target: Callable[[str], str], tmp_path: Path, attribute: str
) -> None:
    module = write_target(TARGET_FORMS)
    result = charter("call", f"{module}:{attribute}", "where", "--db", sqlite(tmp_path / "c.db"))
    assert result.exit_code == 0, result.output
    assert parse(result) == {"store": "?"}
    # A Host brings its own store; the command says so rather than ignore --db silently.
    assert ("--db is not used" in result.stderr) is (attribute == "host")


def test_a_factory_needing_more_than_the_store_is_refused(
    write_target: Callable[[str], str],
) -> None:
    module = write_target(TARGET_FORMS)
    result = charter("tools", f"{module}:needs_more")
    assert "needs arguments charter cannot supply (region)" in usage_error(result)


FAILING_TARGET = """
from pydantic import BaseModel

from charter import ErrorCode, Host, Registry, ToolError, tool


class Empty(BaseModel):
    pass


@tool(tier="read", auth="public")
def connect(args: Empty) -> Empty:
    \"\"\"Fail the way a careless handler does.\"\"\"
    raise ToolError(ErrorCode.PROVIDER_ERROR, "cannot reach postgresql://app:CANARY-c11@db")


registry = Registry()
registry.register(connect)
host = Host(registry)
"""


@pytest.mark.parametrize("json_output", [False, True])
def test_call_shows_a_server_fault_as_its_code_and_error_id_like_a_server_would(
    write_target: Callable[[str], str], json_output: bool
) -> None:
    module = write_target(FAILING_TARGET)
    result = charter("call", f"{module}:host", "connect", *(["--json"] if json_output else []))
    assert result.exit_code == 1
    assert "PROVIDER_ERROR" in result.stdout and "err_" in result.stdout
    assert "CANARY-c11" not in result.stdout
