"""Approvals over HTTP: the round trip, decisions, and who may see or decide what."""

from __future__ import annotations

import uuid

import httpx
import pytest
from http_support import Live, assert_challenged, assert_problem

from charter import ErrorCode

REFUND = "/v1/tools/bookings.refund:call"
JSON = {"Content-Type": "application/json"}


def request_refund(
    agent: httpx.Client, booking_id: str, request_id: str | None = None
) -> tuple[str, str]:
    """Ask for a refund; return (request id, approval id) from the 202."""
    request_id = request_id or str(uuid.uuid4())
    response = agent.post(
        REFUND,
        json={"booking_id": booking_id, "amount_cents": 1250},
        headers={"Idempotency-Key": request_id, "Charter-Confirm": "true"},
    )
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["kind"] == "interaction-required"
    assert body["interaction"]["kind"] == "approval"
    assert body["approvalId"] == body["interaction"]["id"]
    assert body["requestId"] == request_id
    assert response.headers["location"] == f"/v1/actions/{request_id}"
    return request_id, body["approvalId"]


def retry(
    agent: httpx.Client, booking_id: str, request_id: str, approval_id: str | None
) -> httpx.Response:
    headers = {"Idempotency-Key": request_id, "Charter-Confirm": "true"}
    if approval_id is not None:
        headers["Charter-Approval"] = approval_id
    return agent.post(
        REFUND, json={"booking_id": booking_id, "amount_cents": 1250}, headers=headers
    )


def test_the_approval_round_trip_runs_the_action_once_and_then_replays(
    live: Live, agent: httpx.Client, approver: httpx.Client
) -> None:
    request_id, approval_id = request_refund(agent, "bkg_round")
    assert live.lab.runs["refund:bkg_round"] == 0
    assert agent.get(f"/v1/actions/{request_id}").json()["status"] == "awaiting_approval"

    pending = approver.get("/v1/approvals", params={"status": "pending"}).json()["approvals"]
    mine = next(a for a in pending if a["id"] == approval_id)
    assert mine["tool"] == "bookings.refund"
    assert mine["target"] == "bkg_round"
    assert mine["arguments"] == {"booking_id": "bkg_round", "amount_cents": 1250}
    assert mine["requesterId"] == "acme/agent-7"
    assert (mine["requesterTenant"], mine["requesterSubject"]) == ("acme", "agent-7")
    assert mine["risk"] == "critical"
    assert mine["tier"] == "destructive"
    assert mine["status"] == "pending"
    assert "fingerprint" not in mine

    granted = approver.post(f"/v1/approvals/{approval_id}:grant", json={"reason": "customer ok"})
    assert granted.status_code == 200
    assert granted.json()["status"] == "approved"
    assert granted.json()["decidedBy"] == "acme/ana"
    assert [d["decidedBy"] for d in granted.json()["history"]] == ["acme/ana"]
    assert granted.json()["decisionReason"] == "customer ok"

    done = retry(agent, "bkg_round", request_id, approval_id)
    assert done.status_code == 200
    assert done.json() == {
        "output": {"booking_id": "bkg_round", "refunded_cents": 1250},
        "replayed": False,
    }
    again = retry(agent, "bkg_round", request_id, approval_id)
    assert again.status_code == 200
    assert again.json()["replayed"] is True
    assert again.headers["idempotent-replayed"] == "true"
    assert live.lab.runs["refund:bkg_round"] == 1
    status = agent.get(f"/v1/actions/{request_id}").json()
    assert status["status"] == "completed"
    assert status["outcome"]["output"] == {"booking_id": "bkg_round", "refunded_cents": 1250}
    assert approver.get(f"/v1/approvals/{approval_id}").json()["status"] == "consumed"


def test_asking_again_returns_the_same_pending_approval(agent: httpx.Client) -> None:
    request_id, approval_id = request_refund(agent, "bkg_again")
    assert request_refund(agent, "bkg_again", request_id) == (request_id, approval_id)


def test_a_denied_approval_is_403_on_retry(
    live: Live, agent: httpx.Client, approver: httpx.Client
) -> None:
    request_id, approval_id = request_refund(agent, "bkg_deny")
    denied = approver.post(f"/v1/approvals/{approval_id}:deny", json={"reason": "fraud"})
    assert denied.status_code == 200
    assert denied.json()["status"] == "denied"
    assert agent.get(f"/v1/actions/{request_id}").json()["status"] == "denied"
    # Every retry is the person's denial, with who, when and why: a final 403.
    for approval in (approval_id, None):
        response = retry(agent, "bkg_deny", request_id, approval)
        assert response.status_code == 403
        problem = response.json()
        assert problem["type"] == "urn:charter:denied" and problem["reason"] == "approval_denied"
        assert problem["meta"]["approvalId"] == approval_id
        assert problem["meta"]["decisionReason"] == "fraud"
        assert problem["meta"]["decidedBy"] and problem["meta"]["decidedAt"]
        assert "fraud" in problem["detail"]
    assert live.lab.runs["refund:bkg_deny"] == 0


def test_a_retry_before_the_grant_is_202_still_pending(agent: httpx.Client) -> None:
    request_id, approval_id = request_refund(agent, "bkg_early")
    response = retry(agent, "bkg_early", request_id, approval_id)
    assert response.status_code == 202
    body = response.json()
    assert body["gate"] == "approval" and body["approvalStatus"] == "pending"
    assert body["approvalId"] == approval_id and body["requestId"] == request_id
    assert body["retryWith"] == {
        "requestId": request_id,
        "confirmed": True,
        "approvalId": approval_id,
    }


def test_the_requester_sees_its_own_approval_but_may_not_decide_it(
    agent: httpx.Client,
) -> None:
    _, approval_id = request_refund(agent, "bkg_self")
    assert agent.get(f"/v1/approvals/{approval_id}").status_code == 200
    assert approval_id in [a["id"] for a in agent.get("/v1/approvals").json()["approvals"]]
    response = agent.post(f"/v1/approvals/{approval_id}:grant")
    # An agent never decides approvals, whatever its scopes: no scope to step up to.
    assert response.status_code == 403
    assert response.json()["reason"] == "not_a_person"
    assert "www-authenticate" not in response.headers


def test_another_tenant_cannot_see_or_decide_an_approval(live: Live, agent: httpx.Client) -> None:
    _, approval_id = request_refund(agent, "bkg_foreign")
    with live.client("globex-approver-token") as foreign:
        assert approval_id not in [
            a["id"] for a in foreign.get("/v1/approvals").json()["approvals"]
        ]
        seen = foreign.get(f"/v1/approvals/{approval_id}")
        granted = foreign.post(f"/v1/approvals/{approval_id}:grant")
        unknown = foreign.post("/v1/approvals/apr_nothing:grant")
    assert seen.status_code == granted.status_code == unknown.status_code == 404
    assert granted.json()["code"] == ErrorCode.NOT_FOUND
    assert granted.text.replace(approval_id, "X") == unknown.text.replace("apr_nothing", "X")


def test_approvals_need_credentials(anonymous: httpx.Client) -> None:
    routes = [
        ("GET", "/v1/approvals"),
        ("GET", "/v1/approvals/apr_x"),
        ("POST", "/v1/approvals/apr_x:grant"),
        ("POST", "/v1/approvals/apr_x:deny"),
    ]
    assert_challenged(anonymous, routes, "Bearer")


def test_the_status_filter_and_limit_are_checked(approver: httpx.Client) -> None:
    assert approver.get("/v1/approvals", params={"status": "all", "limit": 1}).status_code == 200
    for params in ({"status": "maybe"}, {"limit": "0"}, {"limit": "501"}, {"limit": "1e3"}):
        response = approver.get("/v1/approvals", params=params)
        assert response.status_code == 422, params
        assert response.json()["reason"] == "invalid_query"


def test_a_decision_body_must_be_a_reason_or_nothing(
    agent: httpx.Client, approver: httpx.Client
) -> None:
    _, approval_id = request_refund(agent, "bkg_body")
    path = f"/v1/approvals/{approval_id}:deny"
    malformed = approver.post(path, content=b'{"reason": ', headers=JSON)
    assert malformed.status_code == 400
    assert malformed.json()["reason"] == "invalid_json"
    extra = approver.post(path, json={"reason": "x", "why": "y"})
    assert extra.status_code == 422
    assert extra.json()["reason"] == "validation_failed"
    assert approver.post(path).json()["status"] == "denied"


@pytest.mark.parametrize(
    ("token", "booking"), [("wildcard-token", "bkg_wild"), ("bot-approver-token", "bkg_bot")]
)
def test_only_a_person_holding_the_approver_scope_itself_decides(
    live: Live, agent: httpx.Client, token: str, booking: str
) -> None:
    _, approval_id = request_refund(agent, booking)
    with live.client(token) as other:
        assert other.get("/v1/whoami").json()["approver"] is False
        response = other.post(f"/v1/approvals/{approval_id}:grant")
    assert response.status_code in (403, 404)
    with live.client("approver-token") as approver:
        assert approver.get(f"/v1/approvals/{approval_id}").json()["status"] == "pending"


def test_decisions_over_rest_are_audited_with_the_decider_and_the_reason(
    live: Live, agent: httpx.Client, approver: httpx.Client
) -> None:
    _, approval_id = request_refund(agent, "bkg_audited")
    assert approver.post(f"/v1/approvals/{approval_id}:grant", json={"reason": "ok"}).is_success
    revoked = approver.post(f"/v1/approvals/{approval_id}:deny", json={"reason": "oops"})
    assert revoked.json()["status"] == "denied"
    assert [(d["status"], d["decidedBy"]) for d in revoked.json()["history"]] == [
        ("approved", "acme/ana"),
        ("denied", "acme/ana"),
    ]
    events = approver.get("/v1/audit", params={"limit": 500}).json()["events"]
    decided = [
        (e["action"], e["subject"], e["note"]) for e in events if e["approvalId"] == approval_id
    ]
    assert ("approval.grant", "ana", "ok") in decided
    assert ("approval.revoke", "ana", "oops") in decided


def test_a_reason_code_with_a_bidi_override_is_refused_before_any_approval_is_asked(
    agent: httpx.Client, approver: httpx.Client
) -> None:
    # Shown raw, "\u202edevorppa-erp OFC" reads "CFO pre-approved" to the approver.
    response = agent.post(
        REFUND,
        json={
            "booking_id": "bkg_bidi",
            "amount_cents": 1250,
            "_charter": {"reasonCode": "\u202edevorppa-erp OFC"},
        },
        headers={"Idempotency-Key": str(uuid.uuid4()), "Charter-Confirm": "true"},
    )
    problem = assert_problem(response, 422, reason="invalid_controls")
    assert [issue["loc"] for issue in problem["meta"]["issues"]] == [["_charter", "reasonCode"]]
    listed = approver.get("/v1/approvals", params={"status": "all"}).json()["approvals"]
    assert not [a for a in listed if a["target"] == "bkg_bidi"]


def test_an_approval_header_with_a_zero_width_character_is_malformed(agent: httpx.Client) -> None:
    response = agent.post(
        REFUND,
        json={"booking_id": "bkg_zw", "amount_cents": 1250},
        headers={
            b"Idempotency-Key": str(uuid.uuid4()).encode(),
            b"Charter-Confirm": b"true",
            # UTF-8 read as latin-1 (as HTTP headers are): "\u200b" arrives as C1 controls.
            b"Charter-Approval": "apr_1\u200b".encode(),
        },
    )
    problem = assert_problem(response, 400, reason="invalid_header")
    assert problem["meta"] == {"header": "Charter-Approval"}


def test_the_list_pages_back_with_the_next_cursor_to_an_older_request(
    agent: httpx.Client, approver: httpx.Client
) -> None:
    _, oldest = request_refund(agent, "bkg_page0")
    for i in range(1, 6):
        request_refund(agent, f"bkg_page{i}")
    seen: list[str] = []
    query: dict[str, str | int] = {"limit": 2}
    while oldest not in seen:
        page = approver.get("/v1/approvals", params=query)
        assert page.status_code == 200, page.text
        body = page.json()
        assert len(body["approvals"]) <= 2
        seen += [a["id"] for a in body["approvals"]]
        assert body["next"] is not None or oldest in seen
        query = {"limit": 2, "before": body["next"]}
    assert len(seen) == len(set(seen))  # no page repeats one


def test_a_cursor_that_no_page_gave_is_422(approver: httpx.Client) -> None:
    for cursor in ("", "x", "not base64!", "MjAyNi0wMS0wMQ", "é"):
        response = approver.get("/v1/approvals", params={"before": cursor})
        problem = assert_problem(response, 422, reason="invalid_cursor")
        assert problem["meta"] == {"parameter": "before"}


def test_a_requester_lists_its_own_request_past_a_page_of_others(
    live: Live, agent: httpx.Client, approver: httpx.Client
) -> None:
    _, mine = request_refund(agent, "bkg_ownlist")
    with live.client("approver-token") as other:  # a person asking for approvals too
        for i in range(3):
            other.post(
                REFUND,
                json={"booking_id": f"bkg_other{i}", "amount_cents": 1},
                headers={"Idempotency-Key": str(uuid.uuid4()), "Charter-Confirm": "true"},
            )
    listed = agent.get("/v1/approvals", params={"limit": 1}).json()["approvals"]
    assert [a["id"] for a in listed] == [mine]
