"""Approval events reach a real webhook receiver, signed, deduplicable, retried, routed."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from notify_support import (
    ADA,
    ALICE,
    ALICE_GLOBEX,
    CARD,
    GUS,
    SECRET,
    Receiver,
    approval_event,
    approval_id_of,
    receiving,
    refund,
    registry,
    request_refund,
    rid,
)
from standardwebhooks import Webhook as Verifier
from standardwebhooks import WebhookVerificationError
from tests.builders import Clock

from charter import Completed, Failed
from charter.errors import ConfigurationError
from charter.host import Host
from charter.notify import ApprovalChange, ApprovalEvent, Slack, Webhook
from charter.store import SqlStore

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    async with SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'notify.db'}") as opened:
        await opened.upgrade()
        yield opened


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _webhook_host(
    store: SqlStore, clock: Clock, url: str, event: ApprovalChange, **options: Any
) -> Host:
    """A host on ``store`` and ``clock`` whose one webhook posts ``event`` notices to ``url``."""
    return Host(
        registry(),
        store=store,
        clock=clock,
        notifiers=[Webhook(url, secret=SECRET, events=[event])],
        **options,
    )


@contextmanager
def webhook_host(
    store: SqlStore, clock: Clock, path: str, event: ApprovalChange, **options: Any
) -> Iterator[tuple[Receiver, Host]]:
    """A receiver, and a host whose one webhook posts ``event`` notices to its ``path``."""
    with receiving() as (receiver, base):
        yield receiver, _webhook_host(store, clock, base + path, event, **options)


async def test_every_change_reaches_the_receiver_signed_in_order(store: SqlStore) -> None:
    with receiving() as (receiver, base):
        host = Host(
            registry(),
            store=store,
            notifiers=[Webhook(f"{base}/hooks/ops", secret=SECRET)],
            console_url="https://charter.example.com/",
        )
        request_id = rid()
        args = refund(request_id, card_token=CARD, note="refund <b>now</b> & thanks")
        approval_id = approval_id_of(await host.invoke("bookings.refund", args, ALICE))
        requested = await receiver.next("ops")
        granted_record = await host.approvals.grant(approval_id, ADA, "customer called")
        assert not isinstance(granted_record, Failed)
        granted = await receiver.next("ops")
        done = await host.invoke(
            "bookings.refund",
            refund(request_id, approval_id, card_token=CARD, note="refund <b>now</b> & thanks"),
            ALICE,
        )
        assert isinstance(done, Completed), done
        consumed = await receiver.next("ops")
        await host.aclose()

    assert [e["type"] for e in (requested, granted, consumed)] == [
        "approval.requested",
        "approval.granted",
        "approval.consumed",
    ]
    data = requested["data"]
    assert data["approval_id"] == approval_id
    assert data["tenant_id"] == "acme"
    assert data["tool"] == "bookings.refund"
    assert data["risk"] in ("high", "critical")
    assert data["target"] == "bk_1"
    assert data["requester"] == "acme/alice"
    assert data["arguments"]["booking_id"] == "bk_1"
    assert data["arguments"]["note"] == "refund <b>now</b> & thanks"
    # The secret is bound but never sent.
    assert data["arguments"]["card_token"] == {"$secret": "bound"}
    assert data["url"] == f"https://charter.example.com/console/#/approvals/{approval_id}"
    assert granted["data"]["approver"] == "acme/ada"
    assert granted["data"]["reason"] == "customer called"
    assert consumed["data"]["approver"] == "acme/alice"
    for event in (requested, granted, consumed):
        ApprovalEvent.model_validate(event["data"])
    raw = json.dumps(receiver.accepted["ops"])
    assert CARD not in raw
    assert receiver.rejected == []


async def test_a_receiver_failing_twice_gets_the_event_on_the_third_attempt(
    store: SqlStore, clock: Clock
) -> None:
    with webhook_host(store, clock, "/fail/2", "requested") as (receiver, host):
        approval_id = await request_refund(host)
        await host.notifications.drain()  # the fast path: attempt 1 failed
        (row,) = await host.effects.list(status="pending")
        assert (row.name, row.attempts, row.request_id) == ("charter.notify", 1, row.request_id)
        assert row.last_error is not None and "NotificationFailed" in row.last_error
        clock.advance(timedelta(minutes=11))
        assert await host.effects.run_due(worker="w1") == 1  # attempt 2 fails
        clock.advance(timedelta(minutes=11))
        assert await host.effects.run_due(worker="w1") == 1  # attempt 3 is taken
        event = await receiver.next("fail2")
        delivered = await store.get_effect(row.key)
        await host.aclose()
    assert event["data"]["approval_id"] == approval_id
    assert receiver.attempts[("fail2", event["data"]["id"])] == 3
    assert len(receiver.accepted["fail2"]) == 1
    assert delivered is not None and delivered.status == "delivered"
    assert delivered.attempts == 3


async def test_a_receiver_that_keeps_failing_parks_the_notification_dead_until_retried(
    store: SqlStore, clock: Clock
) -> None:
    with webhook_host(store, clock, "/fail/2", "requested", notify_attempts=2) as (receiver, host):
        await request_refund(host)
        await host.notifications.drain()
        clock.advance(timedelta(minutes=11))
        await host.effects.run_due(worker="w1")
        (dead,) = await host.effects.list(status="dead")
        assert dead.attempts == 2 and "NotificationFailed" in (dead.last_error or "")
        events = await store.events(tenant="acme", limit=50)
        assert "effect.dead" in {e.action for e in events}
        # Re-driven by a person (charter effects retry KEY): the receiver has recovered.
        assert await host.effects.retry(dead.key)
        await host.effects.run_due(worker="w1")
        event = await receiver.next("fail2")
        await host.aclose()
    assert event["type"] == "approval.requested"


async def test_events_go_only_to_the_notifiers_of_their_tenant(store: SqlStore) -> None:
    with receiving() as (receiver, base):
        host = Host(
            registry(),
            store=store,
            notifiers=[
                Webhook(f"{base}/hooks/acme", secret=SECRET, tenants=["acme"]),
                Webhook(f"{base}/hooks/globex", secret=SECRET, tenants=["globex"]),
            ],
        )
        # Same subject, two tenants: each approval goes to its own tenant's receiver.
        acme_id = await request_refund(host)
        globex_id = await request_refund(host, ALICE_GLOBEX)
        assert not isinstance(await host.approvals.deny(globex_id, GUS, "no"), Failed)
        acme_event = await receiver.next("acme")
        globex_requested = await receiver.next("globex")
        globex_denied = await receiver.next("globex")
        await host.aclose()
    assert acme_event["data"]["approval_id"] == acme_id
    assert acme_event["data"]["tenant_id"] == "acme"
    assert [globex_requested["type"], globex_denied["type"]] == [
        "approval.requested",
        "approval.denied",
    ]
    assert globex_denied["data"]["approver"] == "globex/gus"
    assert all(e["data"]["tenant_id"] == "acme" for e in receiver.accepted["acme"])
    assert all(e["data"]["tenant_id"] == "globex" for e in receiver.accepted["globex"])


async def test_an_unused_approval_tells_it_expired_and_a_decided_one_never_does(
    store: SqlStore, clock: Clock
) -> None:
    with webhook_host(store, clock, "/hooks/exp", "expired") as (receiver, host):
        unused = await request_refund(host)
        denied = await request_refund(host)
        assert not isinstance(await host.approvals.deny(denied, ADA), Failed)
        # Nothing is due before the expiry.
        assert await host.effects.run_due(worker="w1") == 0
        clock.advance(timedelta(hours=1, seconds=1))
        assert await host.effects.run_due(worker="w1") == 2
        event = await receiver.next("exp")
        statuses = {r.status for r in await host.effects.list()}
        await host.aclose()
    assert event["type"] == "approval.expired"
    assert event["data"]["approval_id"] == unused
    assert receiver.pending("exp") == 0
    assert [e["data"]["approval_id"] for e in receiver.accepted["exp"]] == [unused]
    # The denied approval's expiry effect ran and sent nothing: delivered, not retried.
    assert statuses == {"delivered"}


def test_the_webhook_id_is_stable_and_the_signature_verifies_with_the_reference_library() -> None:
    webhook = Webhook("https://hooks.example.com/charter", secret=SECRET)
    event = approval_event()
    body = webhook.body(event)
    first, second = webhook.headers(event, body), webhook.headers(event, body)
    assert first["webhook-id"] == second["webhook-id"] == event.id
    assert Verifier(SECRET).verify(body, first)["data"]["approval_id"] == event.approval_id
    other = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="
    with pytest.raises(WebhookVerificationError):
        Verifier(other).verify(body, first)
    with pytest.raises(WebhookVerificationError):
        Verifier(SECRET).verify(body.replace("bk_1", "bk_2"), first)


@pytest.mark.parametrize("secret", ["", "whsec_", "whsec_%%%not-base64%%%"])
def test_a_bad_secret_is_refused_without_echoing_it(secret: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Webhook("https://hooks.example.com/x", secret=secret)
    if secret.removeprefix("whsec_"):
        assert secret not in str(caught.value)


_TIMEOUT = "timeout must be a finite, positive number of seconds"
_NAME = "name must be a non-empty string"


@pytest.mark.parametrize("kind", [Slack, Webhook])
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"url": "ftp://hooks.example.com/x"}, "http:// or https://"),
        ({"url": 5}, "http:// or https://"),
        ({"url": "https://hooks.example.com:99999/x"}, "http:// or https://"),
        ({"url": "https://:443/x"}, "http:// or https://"),
        ({"tenants": []}, r"tenants is empty \(None means every tenant\)"),
        # One string would be the set of its characters: acme's events would go nowhere.
        ({"tenants": "acme"}, r"tenants must be a list, e\.g\. \['acme'\], not a string"),
        ({"tenants": ["acme", 1]}, "tenants must be a list of non-empty strings"),
        ({"tenants": [""]}, "tenants must be a list of non-empty strings"),
        ({"tenants": {"acme": True}}, "tenants must be a list of non-empty strings"),
        ({"events": ["approved"]}, "unknown event kinds"),
        ({"events": "requested"}, "events must be a list"),
        ({"events": []}, "events is empty"),
        ({"name": 5}, _NAME),
        ({"name": ""}, _NAME),
        ({"name": "ops\nchannel"}, _NAME),
        ({"timeout": math.nan}, _TIMEOUT),
        ({"timeout": math.inf}, _TIMEOUT),
        ({"timeout": True}, _TIMEOUT),
        ({"timeout": "5"}, _TIMEOUT),
        ({"timeout": 0}, _TIMEOUT),
        ({"timeout": -1.5}, _TIMEOUT),
    ],
)
def test_bad_notifier_options_are_configuration_errors(
    kind: type[Slack | Webhook], options: dict[str, Any], message: str
) -> None:
    arguments = {"url": "https://hooks.example.com/x", **options}
    if kind is Webhook:
        arguments["secret"] = SECRET
    with pytest.raises(ConfigurationError, match=message):
        kind(**arguments)


def test_routing_options_take_a_list_a_tuple_or_a_set() -> None:
    url = "https://hooks.example.com/x"
    for tenants in (["acme"], ("acme",), {"acme"}, frozenset({"acme"})):
        slack = Slack(url, tenants=tenants, events=("requested",), name="ops", timeout=2)
        assert slack.tenants == frozenset({"acme"}) and slack.events == frozenset({"requested"})
        assert slack.wants(approval_event(tenant_id="acme"))
        assert not slack.wants(approval_event(tenant_id="globex"))


def test_a_webhook_clock_must_be_callable() -> None:
    with pytest.raises(ConfigurationError, match="clock must be a function"):
        Webhook("https://hooks.example.com/x", secret=SECRET, clock="now")  # type: ignore[arg-type]


def test_two_notifiers_with_one_name_are_refused() -> None:
    url = "https://hooks.slack.com/services/T0/B0/secret"
    with pytest.raises(ConfigurationError, match="two notifiers are named"):
        Host(registry(), notifiers=[Slack(url), Slack(url)])
    with pytest.raises(ConfigurationError, match="not a notifier"):
        Host(registry(), notifiers=[object()])  # type: ignore[list-item]


class Numbered:
    """A notifier of one's own whose name is not a string."""

    name = 5

    def wants(self, event: object) -> bool:
        return True

    async def send(self, event: object) -> None:
        return None


@pytest.mark.parametrize("name", [5, "", None, "ops\nalerts"])
def test_a_notifier_of_ones_own_must_be_named_by_a_string(name: object) -> None:
    # Such a name failed every approval-gated call at its first notification.
    notifier = Numbered()
    notifier.name = name  # type: ignore[assignment]
    with pytest.raises(ConfigurationError, match="name must be a non-empty string"):
        Host(registry(), notifiers=[notifier])  # type: ignore[list-item]


def test_a_notifier_never_shows_its_url() -> None:
    url = "https://hooks.slack.com/services/T0/B0/very-secret-token"
    slack = Slack(url)
    assert "very-secret-token" not in repr(slack)
    assert "very-secret-token" not in slack.name


# What the committed change left in the store, per kind: the approval's status and the
# ledger entry of the call (None: no call finished).
_AFTER_CRASH: dict[ApprovalChange, tuple[str, str | None]] = {
    "requested": ("pending", None),
    "granted": ("approved", None),
    "denied": ("denied", None),
    "expired": ("pending", None),
    "consumed": ("consumed", "completed"),
}


@pytest.mark.parametrize("kind", list(_AFTER_CRASH))
async def test_sigkill_between_commit_and_delivery_loses_no_notification(
    store: SqlStore, tmp_path: Path, kind: ApprovalChange
) -> None:
    import os
    import subprocess
    import sys

    here = Path(__file__).resolve().parent
    request_id = rid()
    with receiving() as (receiver, base):
        url = f"{base}/hooks/crash"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here), str(here.parents[1])])}
        db = f"sqlite+aiosqlite:///{tmp_path / 'notify.db'}"  # the store fixture's file
        command = [sys.executable, str(here / "notify_crash_child.py"), db, url, request_id, kind]
        child = await anyio.to_thread.run_sync(
            lambda: subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        )
        assert child.returncode == -9, child.stderr
        # Committed: the change, (for consumed) the call's outcome, and the notice's row,
        # whose delivery had started (one attempt counted) when the process died.
        [approval] = await store.list_approvals("acme", None, 10)
        status, entry_status = _AFTER_CRASH[kind]
        assert approval.status == status
        entry = await store.get_entry("acme", "acme/alice", request_id)
        assert (entry.status if entry is not None else None) == entry_status
        (row,) = await store.list_effects(tenant_id="acme")
        assert (row.name, row.status, row.attempts) == ("charter.notify", "pending", 1)
        assert row.payload["event"]["kind"] == kind
        assert receiver.attempts.total() == 0  # the dead process sent nothing

        # After the dead process's lease, a worker (here, a new host's) delivers it once.
        clock = Clock()
        clock.advance(timedelta(hours=1, minutes=2) if kind == "expired" else timedelta(seconds=61))
        host = _webhook_host(store, clock, url, kind)
        assert await host.effects.work(once=True) == 1
        event = await receiver.next("crash")
        assert await host.effects.work(once=True) == 0
        delivered = await store.get_effect(row.key)
        await host.aclose()
    # Verified with standardwebhooks by the receiver, and sent exactly once.
    assert event["type"] == f"approval.{kind}"
    assert event["data"]["approval_id"] == approval.id
    assert delivered is not None and delivered.status == "delivered"
    assert len(receiver.accepted["crash"]) == 1 and receiver.rejected == []
    assert list(receiver.attempts.values()) == [1]


async def test_a_call_that_rolls_back_tells_nothing_and_its_retry_tells_consumed_once() -> None:
    from notify_support import PROVIDER_DOWN

    # The default in-memory store keeps the outbox too.
    host = Host(
        registry(),
        notifiers=[Webhook("http://127.0.0.1:9/unused", secret=SECRET, events=["consumed"])],
    )
    request_id = rid()
    approval_id = approval_id_of(await host.invoke("bookings.refund", refund(request_id), ALICE))
    assert not isinstance(await host.approvals.grant(approval_id, ADA), Failed)
    PROVIDER_DOWN.append(True)
    failed = await host.invoke("bookings.refund", refund(request_id, approval_id), ALICE)
    assert isinstance(failed, Failed), failed
    # Rolled back: the approval is still granted, and no notification was written.
    assert await host.effects.list() == []
    done = await host.invoke("bookings.refund", refund(request_id, approval_id), ALICE)
    assert isinstance(done, Completed), done
    replayed = await host.invoke("bookings.refund", refund(request_id, approval_id), ALICE)
    assert isinstance(replayed, Completed) and replayed.replayed
    await host.notifications.drain()
    rows = await host.effects.list()
    assert [(r.name, r.payload["event"]["kind"]) for r in rows] == [("charter.notify", "consumed")]
    await host.aclose()


async def test_the_same_decision_twice_tells_it_once() -> None:
    host = Host(
        registry(),
        notifiers=[Webhook("http://127.0.0.1:9/unused", secret=SECRET, events=["granted"])],
    )
    approval_id = await request_refund(host)
    for _ in range(2):
        assert not isinstance(await host.approvals.grant(approval_id, ADA, "ok"), Failed)
    await host.notifications.drain()
    rows = await host.effects.list()
    assert [r.payload["event"]["kind"] for r in rows] == ["granted"]
    await host.aclose()


def test_one_registry_delivers_the_notifications_of_one_host() -> None:
    shared = registry()
    webhook = Webhook("https://hooks.example.com/a", secret=SECRET)
    Host(shared, notifiers=[webhook])
    with pytest.raises(ConfigurationError, match="already delivers another host's"):
        Host(shared, notifiers=[webhook])
    # A host without notifiers on the same registry is fine.
    Host(shared)
