"""Delivery's side of the database: every statement the engine runs, typed.

Each method is one named query of ``sql/queries.sql``; the claim, the fence
and the knock reservation are read there, not here. Rows come back as the
dataclasses below, so nothing past this module indexes a ``dict`` by name.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow, class_row
from psycopg_pool import AsyncConnectionPool

from delivery_pipeline.model import AbandonReason, Action, ChunkState
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.watch.alerts import Alert, record_alert


@dataclass(frozen=True)
class Claim:
    """A document this sweep holds, and what the eligibility function said to do."""

    document_id: int
    action: Action
    token: uuid.UUID


@dataclass(frozen=True)
class ClaimedDocument:
    id: int
    kind: str
    for_date: dt.date | None
    body: str
    chunk_limit: int | None
    delivery_attempts: int
    knock_sent_at: dt.datetime | None
    claim_token: uuid.UUID
    person_id: int
    phone: str
    name: str
    locale: str


@dataclass(frozen=True)
class LedgerRow:
    chunk_index: int
    state: ChunkState
    send_attempts: int
    wa_message_id: str | None
    ambiguous_age_seconds: float


@dataclass(frozen=True)
class KnockReservation:
    previous: dt.datetime | None
    reserved: dt.datetime


class DeliveryStore:
    """The engine's statements over one connection pool."""

    def __init__(
        self, pool: AsyncConnectionPool[AsyncConnection[DictRow]], settings: DeliverySettings
    ) -> None:
        self.pool = pool
        self._eligibility = {"lease": settings.lease, "service_window": settings.window}
        self._chunk_limit = settings.chunk_limit

    async def _run(self, query: str, params: dict[str, Any]) -> list[DictRow]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchall() if cur.description else []

    async def _one(self, query: str, params: dict[str, Any]) -> DictRow | None:
        rows = await self._run(query, params)
        return rows[0] if rows else None

    # ── the claim ──────────────────────────────────────────────────────

    async def eligible_exists(self) -> bool:
        """The heartbeat guard: one probe of the queue index."""
        row = await self._one(QUERIES.guard_exists, self._eligibility)
        return bool(row and row["eligible"])

    async def claim(
        self, limit: int, *, document_id: int | None, person_id: int | None
    ) -> list[Claim]:
        token = uuid.uuid4()
        rows = await self._run(
            QUERIES.claim_batch,
            {
                **self._eligibility,
                "document_id": document_id,
                "person_id": person_id,
                "limit": limit,
                "token": token,
                "chunk_limit": self._chunk_limit,
            },
        )
        return [Claim(row["id"], Action(row["action"]), token) for row in rows]

    async def claimed_document(self, claim: Claim) -> ClaimedDocument | None:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=class_row(ClaimedDocument))
            await cur.execute(
                QUERIES.claimed_document, {"id": claim.document_id, "token": claim.token}
            )
            return await cur.fetchone()

    async def release(self, claim: Claim) -> None:
        await self._run(
            QUERIES.release_claim, {"document_id": claim.document_id, "token": claim.token}
        )

    async def release_for_retry(
        self, claim: Claim, *, delay: float, counts_attempt: bool, error: str
    ) -> None:
        await self._run(
            QUERIES.release_for_retry,
            {
                "document_id": claim.document_id,
                "token": claim.token,
                "delay_seconds": delay,
                "attempt": int(counts_attempt),
                "error": error[:1000],
            },
        )

    async def abandon(self, claim: Claim, reason: AbandonReason, error: str) -> bool:
        row = await self._one(
            QUERIES.abandon_document,
            {
                "document_id": claim.document_id,
                "token": claim.token,
                "reason": reason,
                "error": error[:1000],
            },
        )
        return row is not None

    # ── the ledger ─────────────────────────────────────────────────────

    async def ledger(self, document_id: int) -> dict[int, LedgerRow]:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=class_row(LedgerRow))
            await cur.execute(QUERIES.document_chunks_with_age, {"document_id": document_id})
            return {row.chunk_index: row for row in await cur.fetchall()}

    async def fence(
        self, claim: Claim, index: int, callback: str, *, resend_ambiguous: bool
    ) -> bool:
        """Record chunk ``index`` as sending if our claim still holds; False: stop."""
        row = await self._one(
            QUERIES.fence_chunk,
            {
                "document_id": claim.document_id,
                "token": claim.token,
                "chunk_index": index,
                "callback_data": callback,
                "resend_ambiguous": resend_ambiguous,
            },
        )
        return row is not None

    async def chunk_sent(self, claim: Claim, index: int, callback: str, wamid: str) -> None:
        await self._run(
            QUERIES.chunk_sent, {**_chunk(claim, index, callback), "wa_message_id": wamid}
        )

    async def chunk_failed(
        self, claim: Claim, index: int, callback: str, error_code: int | None
    ) -> None:
        await self._run(
            QUERIES.chunk_failed, {**_chunk(claim, index, callback), "error_code": error_code}
        )

    async def chunk_unknown(self, claim: Claim, index: int, callback: str) -> None:
        await self._run(QUERIES.chunk_unknown, _chunk(claim, index, callback))

    async def mark_delivered(self, claim: Claim, chunk_count: int) -> bool:
        row = await self._one(
            QUERIES.mark_delivered,
            {"document_id": claim.document_id, "token": claim.token, "chunk_count": chunk_count},
        )
        return row is not None

    # ── the person ─────────────────────────────────────────────────────

    async def reserve_knock(self, person_id: int) -> KnockReservation | None:
        row = await self._one(QUERIES.reserve_knock, {"person_id": person_id})
        return KnockReservation(row["previous"], row["reserved"]) if row else None

    async def unreserve_knock(self, person_id: int, reservation: KnockReservation) -> None:
        await self._run(
            QUERIES.unreserve_knock,
            {
                "person_id": person_id,
                "previous": reservation.previous,
                "reserved": reservation.reserved,
            },
        )

    async def await_reply(
        self, claim: Claim, *, knocked: bool, knock_message_id: str | None
    ) -> bool | None:
        """Release the document to wait for the person; True: it waits, False: it is
        due again (they wrote meanwhile), None: the claim was lost."""
        row = await self._one(
            QUERIES.await_reply,
            {
                "document_id": claim.document_id,
                "token": claim.token,
                "knocked": knocked,
                "knock_message_id": knock_message_id,
                "service_window": self._eligibility["service_window"],
            },
        )
        return None if row is None else row["awaiting_reply_since"] is not None

    async def refuse_window(self, person_id: int, at: dt.datetime | None = None) -> None:
        await self._run(QUERIES.refuse_window, {"person_id": person_id, "at": at})

    async def opt_out(self, person_id: int) -> None:
        await self._run(QUERIES.person_opted_out, {"person_id": person_id})

    # ── the sender ─────────────────────────────────────────────────────

    async def sender_paused(self) -> bool:
        row = await self._one(QUERIES.sender_state, {})
        return bool(row and row["paused_at"])

    async def pause_sender(self, code: int | None, reason: str) -> None:
        await self._run(QUERIES.pause_sender, {"code": code, "reason": reason})

    async def resume_sender(self, send_started_at: dt.datetime) -> bool:
        return (
            await self._one(QUERIES.resume_sender, {"send_started_at": send_started_at}) is not None
        )

    async def record_alert(self, alert: Alert) -> None:
        async with self.pool.connection() as conn:
            await record_alert(conn, alert)


def _chunk(claim: Claim, index: int, callback: str) -> dict[str, Any]:
    return {"document_id": claim.document_id, "chunk_index": index, "callback_data": callback}
