"""Where requests stand, the audit trail, the caller, health, readiness and the OpenAPI document."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, get_args

import anyio
from starlette.requests import Request
from starlette.responses import Response

from charter._safe_log import log_exception
from charter.effects import EffectStatus
from charter.errors import ErrorCode
from charter.host import EffectAction, Host
from charter.outcome import Failed, not_found

from ._authentication import caller_of, required_caller
from ._openapi import OpenAPIDocument
from ._payloads import (
    ActionStatusBody,
    AuditBody,
    AuditEventBody,
    BudgetBody,
    BudgetsBody,
    EffectBody,
    EffectsBody,
    HealthBody,
    ReadyBody,
    UpstreamBody,
    UpstreamsBody,
    WhoamiBody,
)
from ._problem import failed_problem, http_problem
from ._responses import json_response
from ._routes_approvals import bad_query, listing_caller

if TYPE_CHECKING:
    from charter.gateway import Gateway, UpstreamHealth

__all__ = ("OpsRoutes",)

logger = logging.getLogger("charter.http")

_READY_TIMEOUT_SECONDS = 2.0
_EFFECT_STATUSES: dict[str, EffectStatus] = {s: s for s in get_args(EffectStatus)}


class OpsRoutes:
    """Actions, audit, whoami, health, readiness and OpenAPI for one host."""

    def __init__(
        self, host: Host, openapi: OpenAPIDocument, gateway: Gateway | None = None
    ) -> None:
        """Serve ``host``; ``openapi`` builds each caller's document; ``gateway`` its upstreams."""
        self.host = host
        self.openapi = openapi
        self.gateway = gateway

    async def action_status(self, request: Request) -> Response:
        """``GET /v1/actions/{request_id}?tenant=``: one of the caller's own requests.

        ``tenant`` names the tenant a delegated request acted for (default: the caller's).
        """
        caller = required_caller(request)
        if isinstance(caller, Response):
            return caller
        request_id: str = request.path_params["request_id"]
        tenant = request.query_params.get("tenant") or None
        status = await self.host.action_status(caller, request_id, tenant=tenant)
        if status is None:
            return failed_problem(
                not_found(
                    "request",
                    request_id,
                    "of yours in your tenant",
                    next_step="Check the request id (the Idempotency-Key you sent).",
                )
            )
        return json_response(ActionStatusBody.from_status(status))

    async def audit(self, request: Request) -> Response:
        """``GET /v1/audit?tenant=&limit=50``: the caller's tenant; admins may name another.

        Approvers and admins see every event of the tenant; other callers their own.
        """
        asked = listing_caller(request, default_limit=50)
        if isinstance(asked, Response):
            return asked
        caller, limit = asked
        trail = await self.host.audit_events(
            caller, tenant=request.query_params.get("tenant"), limit=limit
        )
        if isinstance(trail, Failed):
            return failed_problem(trail)
        return json_response(
            AuditBody(
                tenant=trail.tenant, events=[AuditEventBody.from_event(e) for e in trail.events]
            )
        )

    async def limits(self, request: Request) -> Response:
        """``GET /v1/limits?tenant=``: the budgets being spent in the caller's tenant.

        Approvers and admins see every budget of the tenant; other callers their own and
        the tenant's. Only the admin scope may name another tenant.
        """
        caller = required_caller(request)
        if isinstance(caller, Response):
            return caller
        report = await self.host.budget_usage(caller, tenant=request.query_params.get("tenant"))
        if isinstance(report, Failed):
            return failed_problem(report)
        budgets = [
            BudgetBody(
                tool=usage.bucket.tool,
                limit=usage.bucket.limit,
                holder=usage.bucket.holder,
                used=usage.used(report.at),
                capacity=usage.capacity,
                full_in=round(report.full_in(usage), 3),
            )
            for usage in report.buckets
        ]
        return json_response(BudgetsBody(tenant=report.tenant, budgets=budgets))

    async def effects(self, request: Request) -> Response:
        """``GET /v1/effects?tenant=&status=&requestId=&limit=100``: the effect outbox.

        Approvers and admins see every effect of the tenant; other callers those their own
        calls staged. Only the admin scope may name another tenant.
        """
        asked = listing_caller(request, default_limit=100)
        if isinstance(asked, Response):
            return asked
        caller, limit = asked
        status = request.query_params.get("status")
        if status is not None and status not in _EFFECT_STATUSES:
            return bad_query("status", f"must be one of {', '.join(_EFFECT_STATUSES)}")
        listing = await self.host.effects.visible(
            caller,
            tenant=request.query_params.get("tenant"),
            status=_EFFECT_STATUSES[status] if status is not None else None,
            request_id=request.query_params.get("requestId"),
            limit=limit,
        )
        if isinstance(listing, Failed):
            return failed_problem(listing)
        return json_response(
            EffectsBody(
                tenant=listing.tenant,
                effects=[EffectBody.from_record(e) for e in listing.effects],
            )
        )

    async def get_effect(self, request: Request) -> Response:
        """``GET /v1/effects/{key}?tenant=``: one effect, 404 unless the list would show it."""
        caller = required_caller(request)
        if isinstance(caller, Response):
            return caller
        found = await self.host.effects.read(
            caller, request.path_params["key"], tenant=request.query_params.get("tenant")
        )
        if isinstance(found, Failed):
            return failed_problem(found)
        return json_response(EffectBody.from_record(found))

    async def retry_effect(self, request: Request) -> Response:
        """``POST /v1/effects/{key}:retry``: a dead or discarded effect pending again (admin)."""
        return await self._change_effect(request, "retry")

    async def discard_effect(self, request: Request) -> Response:
        """``POST /v1/effects/{key}:discard``: give up on a pending or dead effect (admin)."""
        return await self._change_effect(request, "discard")

    async def _change_effect(self, request: Request, action: EffectAction) -> Response:
        caller = required_caller(request)
        if isinstance(caller, Response):
            return caller
        changed = await self.host.effects.change(request.path_params["key"], action, by=caller)
        if isinstance(changed, Failed):
            return failed_problem(changed)
        return json_response(EffectBody.from_record(changed))

    async def whoami(self, request: Request) -> Response:
        """``GET /v1/whoami``: who the credentials belong to."""
        caller = required_caller(request)
        if isinstance(caller, Response):
            return caller
        return json_response(
            WhoamiBody(
                subject=caller.subject,
                tenant_id=caller.tenant_id,
                kind=caller.kind,
                actor=caller.actor,
                display_name=caller.display_name,
                scopes=sorted(caller.scopes),
                approver=self.host.approvals.is_approver(caller),
                admin=self.host.admin_scope in caller.scopes,
            )
        )

    async def healthz(self, request: Request) -> Response:
        """``GET /healthz``: the process answers."""
        return json_response(HealthBody(status="ok"))

    async def readyz(self, request: Request) -> Response:
        """``GET /readyz``: the store answers, and audit events are not being lost.

        The store must answer a cheap read within two seconds; an audit event lost in the
        last minute, with none recorded since, is not ready (``Host.audit_losses``).
        """
        try:
            with anyio.fail_after(_READY_TIMEOUT_SECONDS):
                await self.host.store.get_approval("apr_readiness_probe")
        except Exception:  # a probe reports every failure as "not ready"
            log_exception(logger, "readiness probe: the store did not answer")
            return _not_ready("The store is not reachable.", "store_unreachable")
        losses = self.host.audit_losses()
        if losses.failing:
            # Never silent: a replica that loses audit events leaves the rotation.
            return _not_ready(
                f"Audit events are being lost: {losses.lost} could not be recorded since "
                "start, the latest just now (see the log).",
                "audit_lost",
            )
        if self.gateway is not None:
            return self._upstreams_ready(self.gateway)
        return json_response(HealthBody(status="ok"))

    def _upstreams_ready(self, gateway: Gateway) -> Response:
        """Ready when every upstream MCP server is connected; the body shows each one."""
        health = gateway.health()
        down = [h.name for h in health if h.state != "connected"]
        if down:
            return _not_ready(
                f"Upstream MCP servers are not connected: {', '.join(down)}; charter is "
                "reconnecting.",
                "upstream_unavailable",
                meta={"upstreams": ", ".join(down)},
            )
        return json_response(ReadyBody(status="ok", upstreams=_upstream_bodies(health)))

    async def upstreams(self, request: Request) -> Response:
        """``GET /v1/upstreams``: each upstream MCP server's connection (for the console)."""
        caller = required_caller(request)
        if isinstance(caller, Response):
            return caller
        health = self.gateway.health() if self.gateway is not None else []
        return json_response(UpstreamsBody(upstreams=_upstream_bodies(health)))

    async def openapi_json(self, request: Request) -> Response:
        """``GET /v1/openapi.json``: the routes and the tools the caller may call."""
        caller = caller_of(request)
        document = self.openapi.build(
            self.host.callable_tools(caller), server_url=request.scope.get("root_path") or "/"
        )
        return json_response(document)


def _upstream_bodies(health: list[UpstreamHealth]) -> list[UpstreamBody]:
    # The body has the health's fields, by the same names (camelCase only on the wire).
    return [UpstreamBody.model_validate(h, from_attributes=True) for h in health]


def _not_ready(detail: str, reason: str, *, meta: Mapping[str, str] | None = None) -> Response:
    """The 503 of ``/readyz``: the load balancer retries later (``Retry-After``)."""
    return http_problem(
        503,
        "Not ready",
        detail,
        code=ErrorCode.PROVIDER_UNAVAILABLE,
        reason=reason,
        meta=meta,
        headers={"Retry-After": "1"},
    )
