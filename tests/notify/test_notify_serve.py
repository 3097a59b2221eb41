"""`charter serve --notify FILE --public-url URL`: notifiers from TOML, secrets from the env."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import httpx
import pytest
from notify_support import SECRET, receiving
from typer.testing import CliRunner

from charter.cli import app
from charter.cli._common import Unusable
from charter.cli._notify_config import load_notifiers
from charter.notify import Slack, Webhook

HERE = Path(__file__).resolve().parent


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"CHARTER_DB": None})
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def test_serve_sends_signed_events_to_the_notifiers_of_its_notify_file(
    tmp_path: Path,
) -> None:
    from live_server import charter_serve

    db = f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}"
    _run("db", "upgrade", "--db", db)
    key = _run(
        "keys", "create", "--db", db, "--tenant", "acme", "--subject", "agent-7",
        "--scope", "bookings:refund",
    )  # fmt: skip
    with receiving() as (receiver, base):
        config = tmp_path / "notify.toml"
        config.write_text(
            f'[[webhook]]\nurl = "{base}/hooks/ops"\nsecret_env = "OPS_WEBHOOK_SECRET"\n'
            'tenants = ["acme"]\n'
        )
        env = {
            "OPS_WEBHOOK_SECRET": SECRET,
            # notify_support beside this file; the root's tests.builders, which it imports.
            "PYTHONPATH": os.pathsep.join(
                [str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")]
            ),
        }
        with charter_serve(
            "notify_support:registry", "--db", db, "--notify", str(config),
            "--public-url", "https://charter.example.com",
            cwd=tmp_path, env=env,
        ) as served:  # fmt: skip
            request_id = str(uuid.uuid4())
            with httpx.Client(base_url=served.url) as client:
                response = client.post(
                    "/v1/tools/bookings.refund:call",
                    json={"booking_id": "bk_1", "amount_cents": 900},
                    headers={
                        "X-API-Key": key,
                        "Idempotency-Key": request_id,
                        "Charter-Confirm": "true",
                    },
                )
            assert response.status_code == 202, response.text
            approval_id = response.json()["approvalId"]
            event = receiver.next_sync("ops")
    assert event["type"] == "approval.requested"
    assert event["data"]["approval_id"] == approval_id
    assert event["data"]["url"] == f"https://charter.example.com/console/#/approvals/{approval_id}"
    assert receiver.rejected == []


def test_a_notify_file_reads_every_secret_from_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "notify.toml"
    config.write_text(
        '[[webhook]]\nurl = "https://hooks.example.com/a"\nsecret_env = "A_SECRET"\n'
        'events = ["requested", "expired"]\n'
        '[[slack]]\nurl_env = "SLACK_URL"\ntenants = ["acme", "globex"]\n'
    )
    notifiers = load_notifiers(
        str(config),
        {"A_SECRET": SECRET, "SLACK_URL": "https://hooks.slack.com/services/T/B/tok"},
    )
    webhook, slack = notifiers
    assert isinstance(webhook, Webhook) and webhook.events == frozenset({"requested", "expired"})
    assert isinstance(slack, Slack) and slack.tenants == frozenset({"acme", "globex"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[[webhook]]\nurl = "https://h.example.com"\nsecret_env = "MISSING"\n',
            "MISSING is not set",
        ),
        (
            '[[webhook]]\nurl = "https://h.example.com"\nsecret = "whsec_x"\n',
            "unknown keys ['secret']",
        ),
        ('[[webhook]]\nurl = "https://h.example.com"\n', "secret_env names the variable"),
        (
            '[[slack]]\nurl = "https://h.example.com"\nurl_env = "X"\n',
            "exactly one of url and url_env",
        ),
        ('[[teams]]\nurl = "https://h.example.com"\n', "unknown tables ['teams']"),
        (
            '[[slack]]\nurl = "https://h.example.com"\nevents = ["approved"]\n',
            "unknown event kinds",
        ),
        ("[[slack]\n", "not valid TOML"),
        (
            '[[slack]]\nurl = "https://h.example.com"\ntenants = "acme"\n',
            "[[slack]] #1 in {path}: slack: tenants must be a list, e.g. ['acme'], not a string",
        ),
        (
            '[[slack]]\nurl = "https://h.example.com"\ntimeout = nan\n',
            "timeout must be a finite, positive number of seconds, got nan",
        ),
        (
            '[[slack]]\nurl = "https://h.example.com"\ntimeout = true\n',
            "timeout must be a finite, positive number of seconds, got True",
        ),
        (
            '[[slack]]\nurl = "https://h.example.com"\ntimeout = "5"\n',
            "timeout must be a finite, positive number of seconds, got '5'",
        ),
        (
            '[[webhook]]\nurl = "https://h.example.com"\nsecret_env = "S"\nname = 5\n',
            "[[webhook]] #1 in {path}: webhook: name must be a non-empty string",
        ),
    ],
)
def test_a_bad_notify_file_says_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "notify.toml"
    config.write_text(text)
    with pytest.raises(Unusable, match=None) as caught:
        load_notifiers(str(config), {"S": SECRET})
    assert message.format(path=config) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_serve_stops_before_listening_on_a_notify_option_the_notifier_refuses(
    tmp_path: Path,
) -> None:
    config = tmp_path / "notify.toml"
    config.write_text('[[slack]]\nurl = "https://hooks.slack.com/services/T/B/x"\ntenants = "ac"\n')
    result = CliRunner().invoke(
        app,
        ["serve", "notify_support:registry", "--notify", str(config), "--db",
         f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"],
        env={"CHARTER_DB": None},
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --notify: [[slack]] #1 in {config}: slack: tenants must be a list, e.g. ['ac'], "
        "not a string"
    ]


def test_serve_refuses_notify_options_for_a_target_that_makes_its_own_host(tmp_path: Path) -> None:
    config = tmp_path / "notify.toml"
    config.write_text("")
    result = CliRunner().invoke(
        app,
        ["serve", "examples.travel:host", "--notify", str(config), "--db",
         f"sqlite+aiosqlite:///{tmp_path / 'x.db'}", "--public-url", "https://c.example.com"],
        env={"CHARTER_DB": None},
    )  # fmt: skip
    assert result.exit_code == 2
    assert "pass Host(notifiers=..., console_url=...)" in result.stderr


def test_serve_refuses_a_relative_public_url() -> None:
    result = CliRunner().invoke(
        app, ["serve", "examples.travel:host", "--public-url", "/console"], env={"CHARTER_DB": None}
    )
    assert result.exit_code == 2
    assert "--public-url must be an absolute" in result.stderr


def test_charter_worker_retries_notifications_with_the_notify_file(tmp_path: Path) -> None:
    import asyncio
    from datetime import timedelta

    from notify_support import ALICE, approval_id_of, refund, registry, rid

    from charter.host import Host
    from charter.store import SqlStore

    db = f"sqlite+aiosqlite:///{tmp_path / 'worker.db'}"
    _run("db", "upgrade", "--db", db)
    with receiving() as (receiver, base):
        url = f"{base}/fail/1"

        async def serve_once() -> str:
            # The serving process: its fast-path attempt meets a 503.
            async with SqlStore(db) as store:
                host = Host(
                    registry(),
                    store=store,
                    notifiers=[Webhook(url, secret=SECRET, events=["requested"])],
                    notify_backoff=timedelta(milliseconds=1),
                )
                outcome = await host.invoke("bookings.refund", refund(rid()), ALICE)
                await host.notifications.drain()
                await host.aclose()
                return approval_id_of(outcome)

        approval_id = asyncio.run(serve_once())
        config = tmp_path / "notify.toml"
        config.write_text(
            f'[[webhook]]\nurl = "{url}"\nsecret_env = "OPS_SECRET"\nevents = ["requested"]\n'
        )
        result = CliRunner().invoke(
            app,
            ["worker", "notify_support:registry", "--db", db, "--notify", str(config), "--once"],
            env={"CHARTER_DB": None, "OPS_SECRET": SECRET},
        )
        assert result.exit_code == 0, result.output
        event = receiver.next_sync("fail1")
    assert event["data"]["approval_id"] == approval_id
    assert receiver.attempts[("fail1", event["data"]["id"])] == 2
