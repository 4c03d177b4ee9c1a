"""Delivery's side of the database: every statement the engine runs, typed.

Each method is one named query of ``sql/queries/core.sql``; the claim, the fence
and the knock reservation are read there, not here. Rows come back typed
(``store.rows.core``: a ``Claim`` is the claim's row); the ledger is reshaped here,
since one busy row and one row per chunk come back from the same statement.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from delivery_pipeline.delivery.completer import GOES_ON, Completed, Counted, Held, complete
from delivery_pipeline.delivery.knock_status import failed_before_waiting
from delivery_pipeline.delivery.ledger_writer import AdvanceRequest, BeginRequest, LedgerWriter
from delivery_pipeline.delivery.outcomes import Consequence, Failure, Step
from delivery_pipeline.delivery.pause import DEFAULT_REMINDER_SECONDS, resume_sender
from delivery_pipeline.delivery.sweep_target import SweepTarget
from delivery_pipeline.model import AbandonReason, ChunkState
from delivery_pipeline.settings import DEV_PHONE_NUMBER_ID, DeliverySettings
from delivery_pipeline.settings.eligibility import Guard
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.common import ChunkRef, ClaimRef
from delivery_pipeline.store.rows.core import Advance, Claim, KnockReservation, LedgerEntry
from delivery_pipeline.store.rows.files import FileWords
from delivery_pipeline.store.rows.pause import SendAllowed, SenderGate
from delivery_pipeline.store.rows.replies import ExpireAfter
from delivery_pipeline.store.rows.templates import OpenedKnock, TemplateHealth
from delivery_pipeline.text import stored_error
from delivery_pipeline.watch.alerts import Alert, record_alert

__all__ = ["Advance", "Claim", "DeliveryStore", "KnockReservation", "Ledger", "LedgerRow"]


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

    @classmethod
    def of(cls, entries: list[LedgerEntry]) -> Ledger:
        """The ledger from ``begin_delivery``'s rows: one busy row, or one row per chunk."""
        if entries[0].person_busy:
            return cls(person_busy=True, rows=[])
        rows = []
        for e in entries:
            assert e.chunk_index is not None and e.state is not None
            assert e.send_attempts is not None and e.written_now is not None
            assert e.ambiguous_age_seconds is not None
            rows.append(
                LedgerRow(
                    e.chunk_index,
                    e.state,
                    e.send_attempts,
                    e.callback_data,
                    e.body,
                    e.ambiguous_age_seconds,
                    e.written_now,
                )
            )
        return cls(person_busy=False, rows=rows)


class DeliveryStore:
    """The engine's statements over one connection pool."""

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        settings: DeliverySettings,
        default_number: str = DEV_PHONE_NUMBER_ID,
    ) -> None:
        self.pool = pool
        self._settings = settings
        self.reminder_seconds = DEFAULT_REMINDER_SECONDS
        self._eligibility = settings.eligibility
        # The number of a person bound to none (WHATSAPP_PHONE_NUMBER_ID).
        self._guard: Guard = {**settings.eligibility, "default_number": default_number}
        self._chunk_limit = settings.chunk_limit
        # A chunk renews the lease only once a quarter of it has gone: most
        # documents take seconds, so most chunks write nothing to their document.
        # The fences and records of this store's documents, batched.
        self.writer = LedgerWriter(
            str(pool.conninfo), lease=settings.eligibility["lease"], renew_after=settings.lease / 4
        )

    # ── the claim ──────────────────────────────────────────────────────

    async def eligible_exists(self) -> bool:
        """The heartbeat guard: one probe of the queue index."""
        async with self.pool.connection() as conn:
            if not await QUERIES.anything_due.one(conn, {}):
                return False
            return bool(await QUERIES.guard_exists.one(conn, self._guard))

    async def claim(
        self,
        limit: int,
        *,
        target: SweepTarget,
        probe: str | None = None,
        number: str | None = None,
    ) -> list[Claim]:
        """Claim up to ``limit`` documents of ``target``, of numbers not paused; with
        ``probe`` (a pause this sweep probes: '*' or a number) one of that pause's;
        with ``number`` only that number's."""
        async with self.pool.connection() as conn:
            return await QUERIES.claim_batch.all(
                conn,
                {
                    **self._guard,
                    "document_id": target.document_id,
                    "person_id": target.person_id,
                    "limit": limit,
                    "token": uuid.uuid4(),
                    "chunk_limit": self._chunk_limit,
                    "probe_number": probe,
                    "number": number,
                },
            )

    async def hold_quiet(self, claim: Claim) -> bool | None:
        """Give the document back until the person's quiet hours end. True: held;
        False: due again now (the person wrote meanwhile); None: the claim was lost."""
        async with self.pool.connection() as conn:
            return await QUERIES.hold_quiet.one(
                conn,
                {
                    **_claim_ref(claim),
                    "until": claim.quiet_until,
                },
            )

    async def release(self, claim: Claim) -> None:
        async with self.pool.connection() as conn:
            await _release(conn, claim)

    async def release_for_retry(
        self, claim: Claim, *, delay: float, counts_attempt: bool, error: str
    ) -> None:
        async with self.pool.connection() as conn:
            await _release_for_retry(conn, claim, delay, counts_attempt, error)

    async def abandon(self, claim: Claim, reason: AbandonReason, error: str) -> bool:
        async with self.pool.connection() as conn:
            return await _abandon(conn, claim, reason, error)

    async def complete(self, claim: Claim, failure: Failure) -> Completed:
        """Carry out a failed send of this claim's (``completer``), in one transaction."""
        async with self.pool.connection() as conn, conn.transaction():
            return await complete(
                conn,
                failure,
                ClaimedDocument(claim),
                self._settings,
                reminder_seconds=self.reminder_seconds,
            )

    # ── the ledger ─────────────────────────────────────────────────────

    async def begin(
        self,
        claim: Claim,
        chunks: Sequence[str | None] | None,
        tags: Sequence[str] | None,
        *,
        linger: float = 0.0,
    ) -> Ledger | None:
        """Store the chunks with the tags of their first attempts (first claim; chunk 0
        fenced) and read the ledger, within ``linger`` seconds (``LedgerWriter``).
        None: the claim is lost."""
        entries = await self.writer.begin(
            BeginRequest(claim.document_id, claim.token, claim.phone_number_id, chunks, tags),
            linger=linger,
        )
        return Ledger.of(entries) if entries else None

    async def advance(
        self,
        claim: Claim,
        *,
        sent: tuple[int, str, str] | None = None,
        fence: tuple[int, str] | None = None,
        resend_ambiguous: bool = False,
        finish: bool = False,
        linger: float = 0.0,
    ) -> Advance:
        """One round trip: record ``sent`` (index, callback, message id) as accepted, then
        fence ``fence`` (index, callback) or, with ``finish``, mark the document delivered;
        within ``linger`` seconds (``LedgerWriter``)."""
        return await self.writer.advance(
            AdvanceRequest(
                claim.document_id,
                claim.token,
                claim.phone_number_id,
                sent,
                fence,
                resend_ambiguous,
                finish,
            ),
            linger=linger,
        )

    async def chunk_failed(
        self, claim: Claim, index: int, callback: str, error_code: int | None
    ) -> None:
        async with self.pool.connection() as conn:
            await QUERIES.chunk_failed.run(
                conn, {**_chunk(claim, index, callback), "error_code": error_code}
            )

    async def release_unknown(
        self, claim: Claim, index: int, callback: str, *, delay: float, error: str
    ) -> bool | None:
        """The chunk's outcome unknown, the document given back after ``delay``;
        as a status left it if one settled or failed the chunk first. True: left
        unknown; None: the claim was lost."""
        async with self.pool.connection() as conn:
            return await QUERIES.release_unknown.one(
                conn,
                {
                    **_chunk(claim, index, callback),
                    "token": claim.token,
                    "delay_seconds": delay,
                    "error": stored_error(error),
                },
            )

    # ── the way: a file (sql/queries/files.sql) ───────────────────────

    async def choose_file_way(
        self, claim: Claim, way: str, template: tuple[str, str] | None
    ) -> bool:
        """Under the claim: it goes as a file (``way``), on ``template``; False: claim lost."""
        name, language = template or (None, None)
        async with self.pool.connection() as conn:
            chosen = await QUERIES.choose_file_way.one(
                conn,
                {
                    **_claim_ref(claim),
                    "way": way,
                    "template": name,
                    "language": language,
                },
            )
        return chosen is not None

    async def forget_file_ledger(self, claim: Claim, way: str | None) -> bool | None:
        """Under the claim: its file is not sent after all; its way is ``way`` again.
        True: its ledger is empty; False: the file's send left (sent, or its outcome
        unknown), and nothing changed; None: the claim is lost."""
        async with self.pool.connection() as conn:
            return await QUERIES.forget_file_ledger.one(conn, {**_claim_ref(claim), "way": way})

    async def file_words(self, document_id: int) -> FileWords | None:
        async with self.pool.connection() as conn:
            return await QUERIES.file_words.one(conn, {"document_id": document_id})

    # ── the person ─────────────────────────────────────────────────────

    async def reserve_knock(self, person_id: int) -> KnockReservation | None:
        async with self.pool.connection() as conn:
            return await QUERIES.reserve_knock.one(conn, {"person_id": person_id})

    async def unreserve_knock(self, person_id: int, reservation: KnockReservation) -> None:
        async with self.pool.connection() as conn:
            await QUERIES.unreserve_knock.run(
                conn,
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
        due again (they wrote meanwhile), None: the claim was lost. A knock whose
        failed status came first has its failure carried out here."""
        async with self.pool.connection() as conn:
            row = await QUERIES.await_reply.one(
                conn,
                {
                    **_claim_ref(claim),
                    "knocked": knocked,
                    "knock_message_id": knock_message_id,
                    "service_window": self._eligibility["service_window"],
                },
            )
            if row is None:
                return None
            if row.failed_knock_id is not None and row.awaiting_reply_since is not None:
                async with conn.transaction():
                    await failed_before_waiting(conn, row.failed_knock_id, self._settings)
                return False
        return row.awaiting_reply_since is not None

    # ── the sender ─────────────────────────────────────────────────────

    async def sender_paused(self) -> bool:
        """Is any sending paused (of every number, or of one)?"""
        async with self.pool.connection() as conn:
            states = await QUERIES.sender_state.all(conn, {})
        return any(state.paused_at for state in states)

    async def every_number_pause(self) -> str | None:
        """Why sending is paused for every number (the refusal that paused it), if it is."""
        async with self.pool.connection() as conn:
            states = await QUERIES.sender_state.all(conn, {})
        return next(
            (s.pause_reason for s in states if s.phone_number_id == "*" and s.paused_at), None
        )

    async def gate(self, token: uuid.UUID, number: str | None = None) -> list[SenderGate]:
        """Each pause row ('*' first): open, or this sweep takes its probe, or paused.
        A sweep of one ``number`` takes only its number's probe and every number's."""
        async with self.pool.connection() as conn:
            return await QUERIES.sender_gate.all(
                conn,
                {
                    "token": token,
                    "first_seconds": self._settings.pause_probe_seconds,
                    "number": number,
                },
            )

    async def probe_document(self, token: uuid.UUID, document_id: int, scope: str) -> bool:
        async with self.pool.connection() as conn:
            row = await QUERIES.probe_document.one(
                conn, {"token": token, "document_id": document_id, "phone_number_id": scope}
            )
        return row is not None

    async def end_probe(self, token: uuid.UUID, scope: str, *, again: bool) -> None:
        async with self.pool.connection() as conn:
            await QUERIES.end_probe.one(
                conn, {"token": token, "again": again, "phone_number_id": scope}
            )

    async def may_send(self, claim: Claim) -> SendAllowed:
        async with self.pool.connection() as conn:
            allowed = await QUERIES.may_send.one(
                conn,
                {"document_id": claim.document_id, "phone_number_id": claim.phone_number_id},
            )
        assert allowed is not None  # an aggregate: one row
        return allowed

    async def resume_sender(self, send_started_at: dt.datetime, number: str) -> bool:
        async with self.pool.connection() as conn:
            return await resume_sender(conn, send_started_at, number, by="a send succeeded")

    async def record_alert(self, alert: Alert) -> None:
        async with self.pool.connection() as conn:
            await record_alert(conn, alert)

    # ── knocks and templates (sql/queries/templates.sql) ──────────────

    async def template_health(self, choices: list[tuple[str, str]]) -> list[TemplateHealth]:
        async with self.pool.connection() as conn:
            return await QUERIES.template_health.all(
                conn, {"names": [n for n, _ in choices], "languages": [lg for _, lg in choices]}
            )

    async def open_knock(
        self,
        claim: Claim,
        template: str,
        language: str,
        reservation: KnockReservation,
        *,
        reminder: bool = False,
    ) -> OpenedKnock | None:
        """The knock's row, recorded before it is sent, with every document of the
        person it asks about; None: our claim is lost."""
        async with self.pool.connection() as conn:
            return await QUERIES.open_knock.one(
                conn,
                {
                    **_claim_ref(claim),
                    "person_id": claim.person_id,
                    "template": template,
                    "language": language,
                    "reserved_at": reservation.reserved,
                    "previous_knock_at": reservation.previous,
                    "reminder": reminder,
                    "phone_number_id": claim.phone_number_id,
                },
            )

    async def remind_and_expire(self, no_reply_seconds: float) -> None:
        """End the knocks and the files the platform dropped at their time to live (a
        brief waiting on one, or sent as one, ends `expired`); wake the documents due
        for their one reminder; abandon `no_reply` those still unanswered that long
        after it (sql/queries/replies.sql)."""
        async with self.pool.connection() as conn:
            grace: ExpireAfter = {"grace_seconds": self._settings.template_ttl_grace_seconds}
            await QUERIES.expire_dropped_knocks.all(conn, grace)
            await QUERIES.expire_dropped_parts.all(conn, grace)
            await QUERIES.wake_for_reminders.all(conn, {})
            await QUERIES.abandon_no_reply.all(conn, {"after_seconds": no_reply_seconds})

    async def take_read_mark(self, person_id: int, number: str, fresh_seconds: float) -> str | None:
        """The person's newest message to ``number`` from the last ``fresh_seconds``
        not marked read yet, taken by this sender alone (with those before it); None:
        nothing to mark."""
        async with self.pool.connection() as conn:
            return await QUERIES.take_read_mark.one(
                conn, {"person_id": person_id, "number": number, "fresh_seconds": fresh_seconds}
            )

    async def knock_accepted(self, knock_id: int, wamid: str | None, ttl_seconds: float) -> None:
        """The knock left (``wamid``; None: its outcome is unknown, counted as sent),
        with its deadline: the platform drops it undelivered after ``ttl_seconds``."""
        async with self.pool.connection() as conn, conn.transaction():
            await QUERIES.knock_accepted.run(
                conn,
                {
                    "knock_id": knock_id,
                    "state": "sent" if wamid else "unknown",
                    "wa_message_id": wamid,
                },
            )
            await QUERIES.knock_deadline.run(
                conn, {"knock_id": knock_id, "ttl_seconds": ttl_seconds}
            )

    async def knock_refused(self, knock_id: int, code: int | None, error: str) -> None:
        """The send call refused the knock; the person's reservation is given back."""
        async with self.pool.connection() as conn:
            await QUERIES.knock_refused.run(
                conn, {"knock_id": knock_id, "error_code": code, "error": error}
            )

    async def hold_knock(self, claim: Claim, delay: float, error: str) -> bool:
        async with self.pool.connection() as conn:
            held = await QUERIES.hold_knock.one(
                conn,
                {
                    **_claim_ref(claim),
                    "delay_seconds": delay,
                    "error": error,
                },
            )
        return held is not None


def _claim_ref(claim: Claim) -> ClaimRef:
    """What a statement under the claim is fenced by: the document and the claim's token."""
    return {"document_id": claim.document_id, "token": claim.token}


def _chunk(claim: Claim, index: int, callback: str) -> ChunkRef:
    return {"document_id": claim.document_id, "chunk_index": index, "callback_data": callback}


@dataclass(frozen=True)
class ClaimedDocument(Held):
    """A document as its sender holds it, under its claim (``completer.Held``): what
    is written of it needs the claim still ours; it goes on at once under the claim
    (``completer.GOES_ON``) and, paused, is given back as it was (the pause decides
    when it goes: the probe)."""

    claim: Claim

    @property
    def number(self) -> str | None:
        return self.claim.phone_number_id

    @property
    def probe_document(self) -> int | None:
        return self.claim.document_id

    async def give_back(
        self, conn: AsyncConnection[Any], consequence: Consequence, error: str
    ) -> list[Counted]:
        if consequence.step in GOES_ON:
            return []
        if consequence.step is Step.PAUSE:
            await _release(conn, self.claim)
            return []
        attempts = await _release_for_retry(
            conn, self.claim, consequence.retry_after, consequence.counts_attempt, error
        )
        return [] if attempts is None else [Counted(self.claim.document_id, attempts)]

    async def abandon(
        self, conn: AsyncConnection[Any], reason: AbandonReason, error: str
    ) -> list[int]:
        return [self.claim.document_id] if await _abandon(conn, self.claim, reason, error) else []


async def _release(conn: AsyncConnection[Any], claim: Claim) -> None:
    await QUERIES.release_claim.run(conn, _claim_ref(claim))


async def _release_for_retry(
    conn: AsyncConnection[Any], claim: Claim, delay: float, counts_attempt: bool, error: str
) -> int | None:
    """The document given back due after ``delay``; its attempts (None: the claim was lost)."""
    return await QUERIES.release_for_retry.one(
        conn,
        {
            **_claim_ref(claim),
            "delay_seconds": delay,
            "attempt": int(counts_attempt),
            "error": stored_error(error),
        },
    )


async def _abandon(
    conn: AsyncConnection[Any], claim: Claim, reason: AbandonReason, error: str
) -> bool:
    abandoned = await QUERIES.abandon_document.one(
        conn,
        {
            **_claim_ref(claim),
            "reason": reason,
            "error": stored_error(error),
        },
    )
    return abandoned is not None
