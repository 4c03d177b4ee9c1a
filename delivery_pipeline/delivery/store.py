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
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from delivery_pipeline.model import AbandonReason, Action, ChunkState
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.watch.alerts import Alert, record_alert


@dataclass(frozen=True)
class Claim:
    """A document this sweep holds, what the eligibility function said to do, and
    what delivering it needs (the claim returns it: no second read)."""

    document_id: int
    action: Action
    token: uuid.UUID
    chunk_limit: int | None
    delivery_attempts: int
    knock_sent_at: dt.datetime | None
    person_id: int
    phone: str
    name: str
    locale: str
    # Only while the ledger holds no chunk text: the first claim cuts it.
    body: str | None
    # The action is hold_quiet: when the person's quiet hours end.
    quiet_until: dt.datetime | None = None


@dataclass(frozen=True)
class LedgerRow:
    chunk_index: int
    state: ChunkState
    send_attempts: int
    callback_data: str | None
    body: str | None  # None once sent, or when the caller gave the chunks
    ambiguous_age_seconds: float
    written_now: bool  # stored by this begin (chunk 0 of a fresh ledger: fenced by it)


@dataclass(frozen=True)
class Ledger:
    """What ``begin_delivery`` found: the chunks, or that the person is busy."""

    person_busy: bool
    rows: list[LedgerRow]


@dataclass(frozen=True)
class Advance:
    """What ``advance_delivery`` did: is the claim ours, was the chunk fenced, is
    the document delivered."""

    ours: bool
    fenced: bool
    delivered: bool


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
        self._eligibility = settings.eligibility
        self._chunk_limit = settings.chunk_limit
        # A chunk renews the lease only once a quarter of it has gone: most
        # documents take seconds, so most chunks write nothing to their document.
        self._renew_after = settings.lease / 4

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
        return [
            Claim(
                document_id=row["id"],
                action=Action(row["action"]),
                token=token,
                chunk_limit=row["chunk_limit"],
                delivery_attempts=row["delivery_attempts"],
                knock_sent_at=row["knock_sent_at"],
                person_id=row["person_id"],
                phone=row["phone"],
                name=row["name"],
                locale=row["locale"],
                body=row["body"],
                quiet_until=row["quiet_until"],
            )
            for row in rows
        ]

    async def hold_quiet(self, claim: Claim) -> bool | None:
        """Give the document back until the person's quiet hours end. True: held;
        False: due again now (the person wrote meanwhile); None: the claim was lost."""
        row = await self._one(
            QUERIES.hold_quiet,
            {"document_id": claim.document_id, "token": claim.token, "until": claim.quiet_until},
        )
        return None if row is None else bool(row["held"])

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

    async def begin(
        self, claim: Claim, chunks: list[str] | None, tags: list[str] | None
    ) -> Ledger | None:
        """Store the chunks with the tags of their first attempts (first claim; chunk 0
        fenced) and read the ledger. None: the claim is lost."""
        rows = await self._run(
            QUERIES.begin_delivery,
            {
                "document_id": claim.document_id,
                "token": claim.token,
                "chunks": chunks,
                "tags": tags,
                "lease": self._eligibility["lease"],
            },
        )
        if not rows:
            return None
        if rows[0]["person_busy"]:
            return Ledger(person_busy=True, rows=[])
        return Ledger(
            person_busy=False,
            rows=[
                LedgerRow(
                    chunk_index=row["chunk_index"],
                    state=ChunkState(row["state"]),
                    send_attempts=row["send_attempts"],
                    callback_data=row["callback_data"],
                    body=row["body"],
                    ambiguous_age_seconds=row["ambiguous_age_seconds"],
                    written_now=row["written_now"],
                )
                for row in rows
            ],
        )

    async def advance(
        self,
        claim: Claim,
        *,
        sent: tuple[int, str, str] | None = None,
        fence: tuple[int, str] | None = None,
        resend_ambiguous: bool = False,
        finish: bool = False,
    ) -> Advance:
        """One round trip: record ``sent`` (index, callback, message id) as accepted, then
        fence ``fence`` (index, callback) or, with ``finish``, mark the document delivered."""
        row = await self._one(
            QUERIES.advance_delivery,
            {
                "document_id": claim.document_id,
                "token": claim.token,
                "sent_index": sent[0] if sent else None,
                "sent_callback": sent[1] if sent else None,
                "wa_message_id": sent[2] if sent else None,
                "next_index": fence[0] if fence else None,
                "next_callback": fence[1] if fence else None,
                "resend_ambiguous": resend_ambiguous,
                "finish": finish,
                "renew_after": self._renew_after,
            },
        )
        assert row is not None
        return Advance(ours=row["ours"], fenced=row["fenced"], delivered=row["delivered"])

    async def chunk_failed(
        self, claim: Claim, index: int, callback: str, error_code: int | None
    ) -> None:
        await self._run(
            QUERIES.chunk_failed, {**_chunk(claim, index, callback), "error_code": error_code}
        )

    async def chunk_unknown(self, claim: Claim, index: int, callback: str) -> None:
        await self._run(QUERIES.chunk_unknown, _chunk(claim, index, callback))

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
