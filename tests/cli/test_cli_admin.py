"""`charter approvals`, `charter keys` and `charter db`, on a SQLite file in tmp_path."""

from __future__ import annotations

import sqlite3
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cli_support import TravelFiles, charter, error_line, parse, sqlite, usage_error
from tests.builders import request_id


def pending_refund(travel: TravelFiles, rid: str | None = None) -> str:
    """Ask for a refund as the traveller agent; returns the approval id it waits for."""
    key = travel.keys()["traveller-agent"]
    asked = travel.run(
        "call", "bookings.refund", "--key", key,
        "--args", '{"booking_id": "bkg_hotel001", "amount_cents": 1500}',
        "--request-id", rid or request_id(), "--confirm", "--json",
    )  # fmt: skip
    assert asked.exit_code == 3, asked.output
    approval_id = parse(asked)["interaction"]["id"]
    assert isinstance(approval_id, str)
    return approval_id


# -- charter approvals ----------------------------------------------------------------------


def test_approvals_list_shows_a_tenants_pending_approvals(travel: TravelFiles) -> None:
    approval_id = pending_refund(travel)
    by_tenant = charter("approvals", "list", "--tenant", "acme", "--db", travel.db, "--json")
    as_approver = charter(
        "approvals", "list", "--key", travel.keys()["staff-approver"], "--db", travel.db
    )
    other_tenant = charter("approvals", "list", "--tenant", "globex", "--db", travel.db, "--json")
    assert [a["id"] for a in parse(by_tenant)] == [approval_id]
    assert parse(by_tenant)[0]["arguments"] == {"booking_id": "bkg_hotel001", "amount_cents": 1500}
    assert as_approver.exit_code == 0 and approval_id in as_approver.stdout
    assert "1 pending approval" in as_approver.stdout
    assert parse(other_tenant) == []


def test_approvals_show_prints_the_bound_arguments(travel: TravelFiles) -> None:
    approval_id = pending_refund(travel)
    shown = charter("approvals", "show", approval_id, "--db", travel.db)
    assert shown.exit_code == 0, shown.output
    assert "bookings.refund (travel.bookings.refund@1.0.0)" in shown.stdout
    assert '"amount_cents": 1500' in shown.stdout and "pending" in shown.stdout


def test_approvals_grant_then_the_call_completes_and_replays(travel: TravelFiles) -> None:
    rid = request_id()
    approval_id = pending_refund(travel, rid)
    keys = travel.keys()
    granted = charter(
        "approvals", "grant", approval_id, "--reason", "Customer called",
        "--key", keys["staff-approver"], "--db", travel.db,
    )  # fmt: skip
    assert granted.exit_code == 0, granted.output
    assert "approved" in granted.stdout
    assert f"--request-id {rid} --confirm --approval {approval_id}" in " ".join(
        granted.stdout.split()
    )
    call = [
        "bookings.refund", "--key", keys["traveller-agent"],
        "--args", '{"booking_id": "bkg_hotel001", "amount_cents": 1500}',
        "--request-id", rid, "--confirm", "--approval", approval_id,
    ]  # fmt: skip
    done = travel.run("call", *call)
    again = travel.run("call", *call)
    assert done.exit_code == 0, done.output
    assert parse(done)["refunded_cents"] == 1500
    assert parse(again) == parse(done) and "replayed" in again.stderr
    shown = charter("approvals", "show", approval_id, "--db", travel.db, "--json")
    assert parse(shown)["status"] == "consumed"


def test_approvals_deny_and_the_requester_cannot_decide(travel: TravelFiles) -> None:
    approval_id = pending_refund(travel)
    keys = travel.keys()
    own = charter(
        "approvals", "grant", approval_id, "--key", keys["traveller-agent"], "--db", travel.db
    )
    denied = charter(
        "approvals", "deny", approval_id, "--key", keys["staff-approver"], "--db", travel.db,
        "--json",
    )  # fmt: skip
    assert own.exit_code == 1 and own.stdout.startswith("[AUTHORIZATION_DENIED]")
    assert denied.exit_code == 0 and parse(denied)["status"] == "denied"


def test_approvals_of_an_unknown_id_fail_with_not_found(travel: TravelFiles) -> None:
    travel.keys()
    shown = charter("approvals", "show", "apr_nope", "--db", travel.db)
    assert shown.exit_code == 1 and shown.stdout.startswith("[NOT_FOUND]")
    assert "No approval 'apr_nope' that you may see." in shown.stdout
    assert "charter approvals list" in shown.stdout
    # The id is the caller's own text: the message shows at most 200 characters of it.
    long_id = "apr_" + "x" * 300
    shown = charter("approvals", "show", long_id, "--db", travel.db)
    assert shown.exit_code == 1 and shown.stdout.startswith("[NOT_FOUND] No approval")
    assert 0 < shown.stdout.count("x") <= 200


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["list"], "error: give --key (list what that principal may see) or --tenant"),
        (["list", "--status", "maybe"], "error: --status must be one of pending, approved"),
        (["grant", "apr_1"], "error: grant needs --key (or CHARTER_KEY)"),
        (["deny", "apr_1"], "error: deny needs --key (or CHARTER_KEY)"),
    ],
)
def test_approvals_with_bad_input_print_one_line_and_exit_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = charter("approvals", *args, "--db", sqlite(tmp_path / "c.db"))
    assert usage_error(result).startswith(message)


def test_approvals_with_an_unreachable_database_print_one_line_and_exit_2() -> None:
    result = charter("approvals", "list", "--tenant", "acme", "--db", "sqlite:////no/dir/c.db")
    assert usage_error(result).startswith("error: no database at /no/dir/c.db")


def test_approvals_over_url(notes_url: str) -> None:
    asked = charter(
        "call", "--url", notes_url, "notes.wipe", "--args", '{"text": "x"}',
        "--key", "writer-token", "--confirm", "--json",
    )  # fmt: skip
    approval_id = parse(asked)["interaction"]["id"]
    listed = charter("approvals", "list", "--url", notes_url, "--key", "approver-token", "--json")
    shown = charter("approvals", "show", approval_id, "--url", notes_url, "--key", "writer-token")
    denied = charter(
        "approvals", "deny", approval_id, "--url", notes_url, "--key", "approver-token",
        "--reason", "not today",
    )  # fmt: skip
    anonymous = charter("approvals", "list", "--url", notes_url)
    assert approval_id in [a["id"] for a in parse(listed)]
    assert shown.exit_code == 0 and "notes.wipe" in shown.stdout
    assert denied.exit_code == 0 and "not today" in denied.stdout
    assert anonymous.exit_code == 1 and anonymous.stdout.startswith("[UNAUTHENTICATED]")


def test_a_database_the_cli_creates_is_readable_by_its_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It holds approvals with their arguments, the audit trail and the key that seals MCP
    # request state: 0600 whatever the umask, its default folder 0700.
    monkeypatch.chdir(tmp_path)
    created = charter("keys", "create", "--tenant", "acme", "--subject", "bot")
    assert created.exit_code == 0, created.output
    folder = tmp_path / ".charter"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}
    assert modes and set(modes.values()) == {0o600}, modes
    named = tmp_path / "named.db"
    assert charter("db", "upgrade", "--db", sqlite(named)).exit_code == 0
    assert stat.S_IMODE(named.stat().st_mode) == 0o600
    # A file that exists keeps the mode its owner gave it.
    named.chmod(0o640)
    assert charter("keys", "list", "--db", sqlite(named)).exit_code == 0
    assert stat.S_IMODE(named.stat().st_mode) == 0o640


# -- charter keys ---------------------------------------------------------------------------


def test_keys_create_prints_the_key_once_then_list_and_revoke(tmp_path: Path) -> None:
    db = sqlite(tmp_path / "c.db")
    created = charter(
        "keys", "create", "--tenant", "acme", "--subject", "ci-bot", "--scope", "trips:read",
        "--scope", "trips:write", "--kind", "service", "--name", "CI", "--expires-in", "90d",
        "--db", db,
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    secret = created.stdout.strip()
    assert secret.startswith("chk_") and "\n" not in secret
    assert "only time the key is shown" in created.stderr
    key_id = secret.split("_")[1]
    listed = charter("keys", "list", "--db", db, "--json")
    (record,) = parse(listed)
    assert record["id"] == key_id and record["scopes"] == ["trips:read", "trips:write"]
    assert secret not in listed.stdout
    expires = datetime.fromisoformat(record["expires_at"])
    assert timedelta(days=89) < expires - datetime.now(UTC) <= timedelta(days=90)
    table = charter("keys", "list", "--db", db)
    assert key_id in table.stdout and "ci-bot" in table.stdout
    revoked = charter("keys", "revoke", key_id, "--db", db)
    assert revoked.exit_code == 0 and f"revoked key {key_id}" in revoked.stdout
    assert "revoked" in charter("keys", "list", "--db", db).stdout
    again = charter("keys", "revoke", key_id, "--db", db)
    assert again.exit_code == 1
    assert error_line(again) == f"no active key {key_id!r} (unknown, or already revoked)"


def test_a_created_key_works_for_calls(tmp_path: Path, travel: TravelFiles) -> None:
    created = charter(
        "keys", "create", "--tenant", "globex", "--subject", "gus", "--scope", "trips:read",
        "--db", travel.db,
    )  # fmt: skip
    result = travel.run("call", "trips.search", "--key", created.stdout.strip())
    assert result.exit_code == 0, result.output
    assert [t["id"] for t in parse(result)["trips"]] == ["trp_oslo0001"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind", "robot"], "error: --kind must be one of person, agent, service"),
        (["--scope", "not a scope"], "error: "),
        (["--expires-in", "soon"], "error: --expires-in must look like 90d, 12h, 30m or 45s"),
        (["--tenant", "acme\nglobex"], "error: Principal.tenant_id 'acme\\nglobex' holds a "),
        (["--subject", "bot\x1b[2J"], "error: Principal.subject 'bot\\x1b[2J' holds a "),
    ],
)
def test_keys_create_with_bad_input_prints_one_line_and_exits_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = charter(
        "keys", "create", "--tenant", "acme", "--subject", "x", *args,
        "--db", sqlite(tmp_path / "c.db"),
    )  # fmt: skip
    assert usage_error(result).startswith(message)


def test_keys_with_an_unreachable_database_print_one_line_and_exit_2() -> None:
    result = charter("keys", "list", "--db", "postgresql://nobody@127.0.0.1:1/none")
    assert usage_error(result).startswith("error: cannot open the database postgresql://")


# -- charter db -----------------------------------------------------------------------------


def test_db_upgrade_creates_the_schema_and_is_idempotent(tmp_path: Path) -> None:
    db = sqlite(tmp_path / "new" / "c.db")
    (tmp_path / "new").mkdir()
    first = charter("db", "upgrade", "--db", db)
    second = charter("db", "upgrade", "--db", db)
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    assert "is at charter's current schema" in second.stdout
    assert charter("keys", "list", "--db", db).exit_code == 0


def test_db_upgrade_of_a_database_a_newer_charter_migrated_says_to_upgrade_charter(
    tmp_path: Path,
) -> None:
    db = sqlite(tmp_path / "c.db")
    assert charter("db", "upgrade", "--db", db).exit_code == 0
    with sqlite3.connect(tmp_path / "c.db") as conn:
        conn.execute("UPDATE charter_alembic_version SET version_num = '9999_future'")
    result = charter("db", "upgrade", "--db", db)
    message = usage_error(result)
    assert "at revision 9999_future, which this charter does not know" in message
    assert "Upgrade charter." in message


@pytest.mark.parametrize(
    "command",
    [
        ["keys", "list"],
        ["keys", "revoke", "k1"],
        ["approvals", "list", "--tenant", "acme"],
        ["effects", "list"],
        ["limits"],
        ["db", "prune"],
    ],
)
def test_a_command_that_reads_a_database_refuses_one_that_does_not_exist(
    tmp_path: Path, command: list[str]
) -> None:
    # A mistyped --db must not answer from a new, empty database made on the spot.
    missing = tmp_path / "typo.db"
    result = charter(*command, "--db", sqlite(missing))
    assert usage_error(result).startswith(f"error: no database at {missing}")
    assert not missing.exists()


@pytest.mark.parametrize("folder", ["/proc", "/sys"])
def test_db_upgrade_where_no_file_can_be_created_prints_one_line_and_exits_2(
    folder: str,
) -> None:
    result = charter("db", "upgrade", "--db", f"sqlite+aiosqlite:///{folder}/charter.db")
    assert usage_error(result).startswith(f"error: cannot create the database {folder}/charter.db")


def test_db_prune_deletes_expired_records(travel: TravelFiles) -> None:
    key = travel.keys()["traveller-agent"]
    created = travel.run(
        "call", "trips.create", "--key", key,
        "--args", '{"name": "Old", "destination": "Rome", "nights": 1}',
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    nothing = charter("db", "prune", "--db", travel.db, "--json")
    later = (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%S")
    pruned = charter("db", "prune", "--db", travel.db, "--before", later, "--batch-size", "1")
    assert parse(nothing)["deleted"] == 0
    assert pruned.exit_code == 0 and "deleted 1 expired records" in pruned.stdout


@pytest.mark.parametrize("command", ["upgrade", "prune"])
def test_db_with_an_unreachable_database_prints_one_line_and_exits_2(command: str) -> None:
    result = charter("db", command, "--db", "postgresql://nobody@127.0.0.1:1/none")
    assert "postgresql://nobody@127.0.0.1:1/none" in usage_error(result)


def test_db_with_a_url_that_is_not_a_database_prints_one_line_and_exits_2() -> None:
    result = charter("db", "upgrade", "--db", "mysql://x/y")
    assert "SqlStore supports sqlite+aiosqlite:///path" in usage_error(result)
