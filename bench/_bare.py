"""The baselines' hand-written idempotent write of a note, shared by ``bench_ledger`` and the
``bare-ledger`` server of ``load_servers`` (which imports it only when it serves that kind,
so that the other servers do not load charter's store schema).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from charter import Completed, Principal
from charter.store._schema import ledger_entries


async def write_note(
    conn: AsyncConnection, effects: sa.Table, principal: Principal, request_id: str, text: str
) -> Completed:
    """Insert a completed ``save_note`` ledger row with its outcome JSON and the note's
    effect row into ``effects``, in ``conn``'s transaction: the least a hand-written
    idempotent endpoint does. The outcome it recorded."""
    note_id = uuid.uuid4().hex
    now = datetime.now(UTC)
    outcome = Completed(output={"note_id": note_id, "text": text})
    await conn.execute(
        sa.insert(ledger_entries).values(
            tenant_id=principal.tenant_id,
            principal_id=principal.subject,
            request_id=request_id,
            tool="save_note",
            capability_id="save_note",
            capability_version="1",
            target=None,
            fingerprint="sha256:" + "0" * 64,
            status="completed",
            outcome=outcome.model_dump_json(),
            approval_id=None,
            invocation_id=uuid.uuid4().hex,
            created_at=now,
            expires_at=now + timedelta(hours=24),
        )
    )
    await conn.execute(
        sa.insert(effects).values(
            id=note_id, tenant_id=principal.tenant_id, request_id=request_id, text=text
        )
    )
    return outcome
