"""The delivery engine: claim → fence → send chunks → record → release.

Plain Python over psycopg 3 and the Cloud API client; no Dagster. The same
``sweep`` runs in a Dagster run, in the webhook service (targeted at one
person or document) and from the CLI. Exclusivity comes from the claim in
``sql/queries.sql`` (``claim_batch``) and the fence before every chunk
(``fence_chunk``); everything here may run in many processes at once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
import time
import uuid
import weakref
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from delivery_pipeline.delivery.chunking import chunk_text
from delivery_pipeline.delivery.knock import knock_for
from delivery_pipeline.delivery.pacer import RateLimiter
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import QUERIES, async_pool
from delivery_pipeline.watch.alerts import record_alert
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline.whatsapp.errors import (
    CloudApiError,
    GlobalSendError,
    RecipientOptedOut,
    RecipientUnreachable,
    ReEngagementRequired,
    SendNotAttempted,
    SendOutcomeUnknown,
    Throttled,
)

log = logging.getLogger(__name__)

# A 130429 means the last second was one too many: a short pause for the
# whole process is enough (a full second cost a third of a benchmark run).
THROUGHPUT_PAUSE_SECONDS = 0.25
PAIR_RATE_RETRY_SECONDS = 6.0
SHORT_RETRY_SECONDS = 10.0
MAX_ROUNDS = 5


@dataclass
class SweepResult:
    """What one sweep did; printed by the CLI, shown as run metadata."""

    claimed: int = 0
    delivered: int = 0
    chunks_sent: int = 0
    knocks_sent: int = 0
    awaiting_reply: int = 0
    retry_scheduled: int = 0
    unknown_outcomes: int = 0
    lost_claims: int = 0
    due_again: int = 0
    abandoned: Counter[str] = field(default_factory=Counter)
    stopped_by: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "claimed": self.claimed,
            "delivered": self.delivered,
            "chunks_sent": self.chunks_sent,
            "knocks_sent": self.knocks_sent,
            "awaiting_reply": self.awaiting_reply,
            "retry_scheduled": self.retry_scheduled,
            "unknown_outcomes": self.unknown_outcomes,
            "lost_claims": self.lost_claims,
            "due_again": self.due_again,
            "abandoned": dict(self.abandoned),
            "stopped_by": self.stopped_by,
        }


class _GlobalStop(Exception):
    """A global error: nobody can be sent to; stop the sweep."""


@dataclass
class _Claim:
    document_id: int
    action: str
    token: uuid.UUID


class DeliveryEngine:
    """Delivers claimed documents; safe to run in many processes at once."""

    def __init__(
        self,
        settings: Settings,
        pool: AsyncConnectionPool,
        client: CloudApiClient,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.client = client
        self.limiter = limiter or RateLimiter(settings.rate_limit)
        # One document per person at a time in this process, so two documents
        # never interleave in one inbox; weak, so a long-lived service keeps no
        # lock for a person it is not sending to.
        # Whether sending may be paused (read at each sweep's start, set when
        # this process pauses it): only then does a success try to lift it,
        # instead of one more query per chunk.
        self._maybe_paused = True
        # Retries this process scheduled a few seconds ahead (throttling): the
        # sweep waits for them rather than leaving them to the next heartbeat.
        self._short_retry_until = 0.0
        self._person_locks: weakref.WeakValueDictionary[int, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    # ── parameters shared by the eligibility queries ────────────────────

    @property
    def _window(self) -> timedelta:
        return timedelta(seconds=self.settings.window_seconds)

    @property
    def _lease(self) -> timedelta:
        return timedelta(seconds=self.settings.lease_seconds)

    async def _fetch(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchall() if cur.description else []

    async def _fetch_one(self, query: str, params: dict[str, Any]) -> dict[str, Any] | None:
        rows = await self._fetch(query, params)
        return rows[0] if rows else None

    async def eligible_exists(self) -> bool:
        """The heartbeat guard."""
        row = await self._fetch_one(
            QUERIES.guard_exists, {"lease": self._lease, "service_window": self._window}
        )
        return bool(row and row["eligible"])

    # ── the sweep ───────────────────────────────────────────────────────

    async def sweep(
        self,
        *,
        document_id: int | None = None,
        person_id: int | None = None,
        limit: int | None = None,
        concurrency: int | None = None,
    ) -> SweepResult:
        """One delivery pass over what is eligible now (optionally one document/person)."""
        concurrency = concurrency or self.settings.concurrency
        result = SweepResult()
        stop = asyncio.Event()
        sender = await self._fetch_one(QUERIES.sender_state, {})
        self._maybe_paused = bool(sender and sender["paused_at"])
        queue: asyncio.Queue[_Claim | None] = asyncio.Queue(maxsize=concurrency)

        def database_lost(exc: Exception) -> None:
            if not stop.is_set():
                log.error(
                    "database unavailable, sweep stopped (claims lapse with their lease): %s", exc
                )
            result.stopped_by = result.stopped_by or f"database unavailable: {exc}"
            stop.set()

        async def produce() -> None:
            remaining = limit
            idle_rounds = 0
            try:
                while not stop.is_set():
                    batch = concurrency if remaining is None else min(concurrency, remaining)
                    if batch <= 0:
                        break
                    claims = await self._claim(batch, document_id, person_id)
                    if not claims:
                        if document_id is not None or person_id is not None:
                            # A targeted sweep (a reply, a poke) is done: what
                            # it could not claim another sweep holds, and that
                            # one goes round again for what comes back due.
                            break
                        # Rows locked by a concurrent claimer are skipped, not
                        # waited for; look again briefly before calling it done.
                        idle_rounds += 1
                        if idle_rounds < 3 and await self.eligible_exists():
                            await asyncio.sleep(0.02 * idle_rounds)
                            continue
                        wait = self._short_retry_until - time.monotonic()
                        if wait > 0:
                            await asyncio.sleep(wait + 0.05)
                            idle_rounds = 0
                            continue
                        break
                    idle_rounds = 0
                    result.claimed += len(claims)
                    if remaining is not None:
                        remaining -= len(claims)
                    for claim in claims:
                        if stop.is_set():
                            await self._release(claim)
                        else:
                            await queue.put(claim)
            except psycopg.OperationalError as exc:
                database_lost(exc)
            finally:
                for _ in range(concurrency):
                    await queue.put(None)

        async def work() -> None:
            while (claim := await queue.get()) is not None:
                try:
                    if stop.is_set():
                        await self._release(claim)
                        continue
                    try:
                        await self._process(claim, result, stop)
                    except _GlobalStop as exc:
                        result.stopped_by = str(exc)
                        stop.set()
                    except psycopg.OperationalError:
                        raise
                    except Exception:
                        log.exception(
                            "document %s: unexpected error; claim released", claim.document_id
                        )
                        await self._release_for_retry(
                            claim, attempt=1, error="internal error", result=result
                        )
                except psycopg.OperationalError as exc:
                    # The claim stays until its lease lapses; the ledger says
                    # where the document stopped, so nothing is sent twice.
                    database_lost(exc)

        # A document can come back due now while its own sweep runs (the
        # person wrote while we knocked; a chunk failed after acceptance):
        # a sweeper that skipped it as claimed has already gone, so the
        # sweep that released it goes round again.
        for _ in range(MAX_ROUNDS):
            due_again = result.due_again
            queue = asyncio.Queue(maxsize=concurrency)
            await asyncio.gather(produce(), *(work() for _ in range(concurrency)))
            if stop.is_set() or result.due_again == due_again or limit is not None:
                break
        return result

    async def _claim(
        self, batch: int, document_id: int | None, person_id: int | None
    ) -> list[_Claim]:
        token = uuid.uuid4()
        rows = await self._fetch(
            QUERIES.claim_batch,
            {
                "lease": self._lease,
                "service_window": self._window,
                "document_id": document_id,
                "person_id": person_id,
                "limit": batch,
                "token": token,
                "chunk_limit": self.settings.chunk_limit,
            },
        )
        return [_Claim(row["id"], row["action"], token) for row in rows]

    async def _process(self, claim: _Claim, result: SweepResult, stop: asyncio.Event) -> None:
        if claim.action == "abandon_unreachable":
            await self._abandon(claim, "unreachable", "no WhatsApp number, or opted out", result)
            return
        if claim.action == "abandon_stale":
            await self._abandon(claim, "stale", "brief for a day already over", result)
            return
        doc = await self._fetch_one(
            QUERIES.claimed_document, {"id": claim.document_id, "token": claim.token}
        )
        if doc is None:
            result.lost_claims += 1
            return
        lock = self._person_locks.get(doc["person_id"])
        if lock is None:
            lock = self._person_locks[doc["person_id"]] = asyncio.Lock()
        async with lock:
            if claim.action == "knock":
                await self._knock(claim, doc, result)
            else:
                await self._deliver(claim, doc, result, stop)

    # ── delivering the chunks ───────────────────────────────────────────

    async def _deliver(
        self, claim: _Claim, doc: dict[str, Any], result: SweepResult, stop: asyncio.Event
    ) -> None:
        chunks = chunk_text(doc["body"], doc["chunk_limit"] or self.settings.chunk_limit)
        ledger = {
            row["chunk_index"]: row
            for row in await self._fetch(
                QUERIES.document_chunks_with_age, {"document_id": claim.document_id}
            )
        }
        for index, text in enumerate(chunks):
            row = ledger.get(index)
            if row is not None and row["state"] == "sent":
                continue
            resend_ambiguous = False
            if row is not None and row["state"] in ("sending", "unknown"):
                decision = await self._settle_ambiguous(claim, index, row, result)
                if decision != "resend":
                    return
                resend_ambiguous = True
            if stop.is_set():
                await self._release(claim)
                return
            attempt_no = (row["send_attempts"] + 1) if row is not None else 1
            callback = f"dp:{claim.document_id}:{index}:{attempt_no}"
            fenced = await self._fetch_one(
                QUERIES.fence_chunk,
                {
                    "document_id": claim.document_id,
                    "token": claim.token,
                    "chunk_index": index,
                    "callback_data": callback,
                    "resend_ambiguous": resend_ambiguous,
                },
            )
            if fenced is None:
                result.lost_claims += 1
                log.info(
                    "document %s: claim lost before chunk %s; stopping", claim.document_id, index
                )
                return
            chunk_key = {
                "document_id": claim.document_id,
                "chunk_index": index,
                "callback_data": callback,
            }
            await self.limiter.acquire()
            try:
                started_at = dt.datetime.now(dt.UTC)
                wamid = await self.client.send_text(doc["phone"], text, callback_data=callback)
            except SendOutcomeUnknown as exc:
                await self._fetch(QUERIES.chunk_unknown, chunk_key)
                result.unknown_outcomes += 1
                await self._release_for_retry(
                    claim,
                    attempt=0,
                    delay=self.settings.unknown_grace_seconds,
                    error=f"chunk {index}: outcome unknown ({exc.reason})",
                    result=result,
                )
                return
            except SendNotAttempted as exc:
                await self._fetch(QUERIES.chunk_failed, {**chunk_key, "error_code": None})
                await self._release_for_retry(
                    claim,
                    attempt=0,
                    error=f"not sent: {exc}",
                    result=result,
                    delay=self._backoff(doc["delivery_attempts"] + 1),
                )
                return
            except CloudApiError as exc:
                await self._fetch(QUERIES.chunk_failed, {**chunk_key, "error_code": exc.code})
                if isinstance(exc, ReEngagementRequired):
                    await self._fetch(
                        QUERIES.refuse_window, {"person_id": doc["person_id"], "at": None}
                    )
                    await self._knock(claim, doc, result)
                    return
                await self._handle_error(claim, doc, exc, result)
                return
            await self._fetch(QUERIES.chunk_sent, {**chunk_key, "wa_message_id": wamid})
            result.chunks_sent += 1
            await self._sent_ok(started_at)
            if self.settings.chunk_interval_seconds and index < len(chunks) - 1:
                await asyncio.sleep(self.settings.chunk_interval_seconds)
        delivered = await self._fetch_one(
            QUERIES.mark_delivered,
            {"document_id": claim.document_id, "token": claim.token, "chunk_count": len(chunks)},
        )
        if delivered:
            result.delivered += 1
        else:
            # A status webhook failed one of the chunks meanwhile (async
            # refusal): give the document back, due now, for the next pass.
            await self._release_for_retry(
                claim, attempt=0, error="a chunk failed after acceptance", result=result
            )

    async def _settle_ambiguous(
        self, claim: _Claim, index: int, row: dict[str, Any], result: SweepResult
    ) -> str:
        """A chunk whose send outcome is unknown: wait for a status, then the policy."""
        grace = self.settings.unknown_grace_seconds
        age = row["ambiguous_age_seconds"]
        if age < grace:
            await self._release_for_retry(
                claim,
                attempt=0,
                delay=grace - age,
                error=f"chunk {index}: outcome unknown, waiting for a status webhook",
                result=result,
            )
            return "wait"
        if self.settings.unknown_policy == "abandon":
            await self._abandon(
                claim, "unknown_outcome", f"chunk {index}: outcome never settled", result
            )
            return "abandoned"
        log.warning(
            "document %s chunk %s: outcome unsettled after %ss; resending (policy)",
            claim.document_id,
            index,
            grace,
        )
        return "resend"

    async def _sent_ok(self, started_at: dt.datetime) -> None:
        """A send accepted: a pause recorded before it started is over. (One that was
        already in flight when another worker hit the global error proves nothing.)"""
        if not self._maybe_paused:
            return
        row = await self._fetch_one(QUERIES.resume_sender, {"send_started_at": started_at})
        if row is not None:
            log.warning("sending resumed after a global pause")
            self._maybe_paused = False

    # ── the knock ───────────────────────────────────────────────────────

    async def _knock(self, claim: _Claim, doc: dict[str, Any], result: SweepResult) -> None:
        """Window closed: knock once per document, at most once per person per 24 h."""
        reservation = None
        if doc["knock_sent_at"] is None:
            reservation = await self._fetch_one(
                QUERIES.reserve_knock, {"person_id": doc["person_id"]}
            )
        wamid: str | None = None
        if reservation is not None:
            knock = knock_for(
                doc["locale"],
                doc["name"],
                self.settings.knock_templates,
                self.settings.knock_param_max,
            )
            await self.limiter.acquire()
            try:
                started_at = dt.datetime.now(dt.UTC)
                wamid = await self.client.send_template(
                    doc["phone"],
                    knock.template,
                    knock.language,
                    knock.parameters,
                    callback_data=f"dp:{claim.document_id}:knock",
                )
            except SendOutcomeUnknown:
                # It may have reached the person: count it as sent rather
                # than risk a second knock.
                wamid = None
            except (CloudApiError, SendNotAttempted) as exc:
                await self._fetch(
                    QUERIES.unreserve_knock,
                    {
                        "person_id": doc["person_id"],
                        "previous": reservation["previous"],
                        "reserved": reservation["reserved"],
                    },
                )
                if isinstance(exc, SendNotAttempted):
                    await self._release_for_retry(
                        claim,
                        attempt=0,
                        error=f"knock not sent: {exc}",
                        delay=self._backoff(doc["delivery_attempts"] + 1),
                        result=result,
                    )
                    return
                await self._handle_error(claim, doc, exc, result)
                return
            result.knocks_sent += 1
            await self._sent_ok(started_at)
        row = await self._fetch_one(
            QUERIES.await_reply,
            {
                "document_id": claim.document_id,
                "token": claim.token,
                "knocked": reservation is not None,
                "knock_message_id": wamid,
                "service_window": self._window,
            },
        )
        if row is None:
            result.lost_claims += 1
        elif row["awaiting_reply_since"] is not None:
            result.awaiting_reply += 1
        else:
            result.due_again += 1

    # ── errors ──────────────────────────────────────────────────────────

    async def _handle_error(
        self, claim: _Claim, doc: dict[str, Any], exc: CloudApiError, result: SweepResult
    ) -> None:
        if isinstance(exc, GlobalSendError):
            await self._release(claim)
            await self._fetch(QUERIES.pause_sender, {"code": exc.code, "reason": str(exc)})
            self._maybe_paused = True
            async with self.pool.connection() as conn:
                await record_alert(
                    conn,
                    f"sender_paused:{exc.code}",
                    "error",
                    f"Sending paused: WhatsApp refused every send ({exc}). "
                    "Fix the credentials/template/account; the next sweep resumes by itself.",
                    {"code": exc.code, "document_id": claim.document_id},
                )
            raise _GlobalStop(str(exc))
        if isinstance(exc, RecipientUnreachable):
            if isinstance(exc, RecipientOptedOut):
                await self._fetch(QUERIES.person_opted_out, {"person_id": doc["person_id"]})
            await self._abandon(claim, exc.abandon_reason, str(exc), result)
            async with self.pool.connection() as conn:
                await record_alert(
                    conn,
                    f"recipient:{doc['person_id']}",
                    "warning",
                    f"Person {doc['person_id']} cannot receive WhatsApp messages ({exc}); "
                    f"document {claim.document_id} abandoned.",
                    {
                        "code": exc.code,
                        "document_id": claim.document_id,
                        "person_id": doc["person_id"],
                    },
                )
            return
        if isinstance(exc, Throttled):
            if exc.code == 131056:
                delay = PAIR_RATE_RETRY_SECONDS
            else:
                self.limiter.back_off(THROUGHPUT_PAUSE_SECONDS)
                delay = THROUGHPUT_PAUSE_SECONDS
            await self._release_for_retry(
                claim,
                attempt=0,
                delay=delay * random.uniform(1, 1.5),
                error=str(exc),
                result=result,
            )
            return
        # Transient (or unknown): bounded retries with backoff.
        attempts = doc["delivery_attempts"] + 1
        if attempts >= self.settings.max_attempts:
            await self._abandon(claim, "max_attempts", f"{attempts} attempts, last: {exc}", result)
            async with self.pool.connection() as conn:
                await record_alert(
                    conn,
                    f"max_attempts:{claim.document_id}",
                    "warning",
                    f"Document {claim.document_id} abandoned after {attempts} attempts: {exc}",
                    {"document_id": claim.document_id, "code": exc.code},
                )
            return
        await self._release_for_retry(
            claim, attempt=1, delay=self._backoff(attempts), error=str(exc), result=result
        )

    def _backoff(self, attempts: int) -> float:
        """Exponential in the attempts so far, with ±25 % jitter, capped."""
        base = self.settings.backoff_base_seconds * 2 ** max(attempts - 1, 0)
        return min(base, self.settings.backoff_max_seconds) * random.uniform(0.75, 1.25)

    # ── releasing ───────────────────────────────────────────────────────

    async def _release(self, claim: _Claim) -> None:
        await self._fetch(
            QUERIES.release_claim, {"document_id": claim.document_id, "token": claim.token}
        )

    async def _release_for_retry(
        self, claim: _Claim, *, attempt: int, error: str, result: SweepResult, delay: float = 0.0
    ) -> None:
        await self._fetch(
            QUERIES.release_for_retry,
            {
                "document_id": claim.document_id,
                "token": claim.token,
                "delay_seconds": delay,
                "attempt": attempt,
                "error": error[:1000],
            },
        )
        result.retry_scheduled += 1
        if delay <= 0:
            result.due_again += 1
        elif delay <= SHORT_RETRY_SECONDS:
            self._short_retry_until = max(self._short_retry_until, time.monotonic() + delay)

    async def _abandon(self, claim: _Claim, reason: str, error: str, result: SweepResult) -> None:
        row = await self._fetch_one(
            QUERIES.abandon_document,
            {
                "document_id": claim.document_id,
                "token": claim.token,
                "reason": reason,
                "error": error[:1000],
            },
        )
        if row is not None:
            result.abandoned[reason] += 1
            log.info("document %s abandoned: %s (%s)", claim.document_id, reason, error)
        else:
            result.lost_claims += 1


def pool_size(concurrency: int) -> int:
    """Connections a sweep needs: workers hold one only for a query, never
    across a send, so a few serve many documents in flight (and eight
    sweepers stay well inside a server's default 100 connections)."""
    return min(concurrency, 6) + 2


async def run_sweep(
    settings: Settings,
    database_url: str,
    *,
    document_id: int | None = None,
    person_id: int | None = None,
    limit: int | None = None,
    concurrency: int | None = None,
) -> SweepResult:
    """Open a pool and a client, sweep once, close them."""
    concurrency = concurrency or settings.concurrency
    async with (
        async_pool(database_url, max_size=pool_size(concurrency)) as pool,
        CloudApiClient.from_settings(settings, max_connections=concurrency) as client,
    ):
        engine = DeliveryEngine(settings, pool, client)
        return await engine.sweep(
            document_id=document_id, person_id=person_id, limit=limit, concurrency=concurrency
        )


def eligible_now(conn: psycopg.Connection, settings: Settings) -> bool:
    """The heartbeat guard for synchronous callers: one indexed EXISTS."""
    row = conn.execute(
        QUERIES.guard_exists,
        {
            "lease": timedelta(seconds=settings.lease_seconds),
            "service_window": timedelta(seconds=settings.window_seconds),
        },
    ).fetchone()
    return bool(row and (row["eligible"] if isinstance(row, dict) else row[0]))


def sweep_sync(settings: Settings, database_url: str, **kwargs: Any) -> SweepResult:
    """``run_sweep`` for synchronous callers (CLI, Dagster ops)."""
    return asyncio.run(run_sweep(settings, database_url, **kwargs))
