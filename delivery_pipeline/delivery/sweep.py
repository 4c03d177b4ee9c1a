"""The sweep: claim what is eligible, deliver it with bounded concurrency, release.

Plain Python over psycopg 3 and the Cloud API client; no Dagster. The same
sweep runs in a Dagster run, in the webhook service (targeted at one person
or document) and from the CLI, and may run in many processes at once:
exclusivity comes from the claim in ``sql/queries/core.sql`` (``claim_batch``: one
document per person at a time, oldest first) and the fence before every
chunk (``advance_delivery``); the number's rate from the shared pacer.

``DeliveryEngine`` is what lives as long as its process (pool, client,
pacer); each ``sweep()`` is a ``Sweep`` with its own state.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from delivery_pipeline.delivery.acknowledgement import Acknowledgements
from delivery_pipeline.delivery.document import DocumentDelivery, FirstSend, GlobalStop
from delivery_pipeline.delivery.pacer import Pacer, Pacers, SharedPacer
from delivery_pipeline.delivery.pause import EVERY_NUMBER
from delivery_pipeline.delivery.progress import Event, SweepObserver
from delivery_pipeline.delivery.result import SweepResult, SweepState
from delivery_pipeline.delivery.statements import Claim, DeliveryStore
from delivery_pipeline.delivery.sweep_target import EVERYTHING, SweepTarget
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import async_pool
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.replies import ExpireAfter
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline.whatsapp.credential_check import check_identity

log = logging.getLogger(__name__)

# A sweep goes round again while it released documents due now (see Sweep.run).
MAX_ROUNDS = 5
# Probes one sweep makes in a row when each document it probed with sent
# nothing (held for quiet hours, abandoned, knocked already).
PROBE_TRIES = 3
# Rows locked by a concurrent claimer are skipped, not waited for: look again
# this many times before calling the queue empty.
IDLE_ROUNDS = 3


class DeliveryEngine:
    """Delivers documents; one per process, shared by every sweep it runs."""

    def __init__(
        self,
        settings: Settings,
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]],
        client: CloudApiClient,
        pacer: Pacer | None = None,
    ) -> None:
        self.settings = settings.delivery
        self.store = DeliveryStore(pool, settings.delivery, settings.whatsapp.phone_number_id)
        self.first_send = FirstSend()
        self.store.reminder_seconds = float(settings.ops.alert_reminder_seconds)
        self.client = client
        numbers = settings.whatsapp.business_numbers
        limits = {n.id: n.limit for n in numbers}
        # Each number's knock templates by locale; its keys are the numbers we send from.
        self.numbers = {
            n.id: n.knock_template_choices(settings.delivery.knock_templates) for n in numbers
        }

        def shared(number: str) -> Pacer:
            # The number's own timeline: its limit, whoever sends from it.
            return SharedPacer(
                str(pool.conninfo), number, limits[number], cap=settings.delivery.rate_limit
            )

        self.pacers = Pacers((lambda _number: pacer) if pacer is not None else shared)
        # The answers owed to presses of Later and Stop, sent by the same means.
        self.acknowledgements = Acknowledgements(
            pool,
            client,
            self.pacers,
            self.first_send,
            settings.delivery,
            numbers=frozenset(self.numbers),
            default_number=settings.whatsapp.phone_number_id,
            reminder_seconds=self.store.reminder_seconds,
        )

    async def aclose(self) -> None:
        """Close what the engine opened itself (the pacers' and the ledger writer's
        connections)."""
        await self.pacers.aclose()
        await self.store.writer.aclose()

    async def eligible_exists(self) -> bool:
        """The heartbeat guard."""
        return await self.store.eligible_exists()

    async def sweep(
        self,
        *,
        target: SweepTarget = EVERYTHING,
        number: str | None = None,
        limit: int | None = None,
        concurrency: int | None = None,
        observer: SweepObserver | None = None,
    ) -> SweepResult:
        """One delivery pass over what is eligible now of ``target`` (optionally of one
        business number's documents); ``observer`` hears every event as it happens."""
        sweep = Sweep(
            self,
            target=target,
            number=number,
            limit=limit,
            concurrency=concurrency or self.settings.concurrency,
            observer=observer,
        )
        return await sweep.run()


class Sweep:
    """One pass: a producer claims batches, ``concurrency`` workers deliver them."""

    def __init__(
        self,
        engine: DeliveryEngine,
        *,
        target: SweepTarget,
        limit: int | None,
        concurrency: int,
        observer: SweepObserver | None = None,
        number: str | None = None,
    ) -> None:
        self.engine = engine
        self.target = target
        # Only this business number's documents (a sender per number); None: all.
        self.number = number
        self.limit = limit
        self.concurrency = concurrency
        self.state = SweepState(observer=observer)
        # Documents this sweep claimed and has not finished: when one finishes,
        # the person's next document may be theirs to claim.
        self.in_flight = 0
        self.finished = asyncio.Event()
        self.delivery = DocumentDelivery(
            engine.settings,
            engine.store,
            engine.client,
            engine.pacers,
            self.state,
            engine.numbers,
            engine.first_send,
            answering=target.person_id is not None,
        )

    @property
    def targeted(self) -> bool:
        return not self.target.whole_queue

    async def run(self) -> SweepResult:
        result = self.state.result
        if not await self._may_send():
            return result
        if self.target.document_id is None and not await self._acknowledge():
            return result
        if self.target.whole_queue:
            # A knock the platform dropped at its time to live: a brief on it ends
            # expired. A knock delivered (or dropped) and not answered: its one
            # reminder, then no_reply. The heartbeat does it too: nothing else
            # wakes these documents.
            await self.engine.store.remind_and_expire(self.engine.settings.no_reply_seconds)
        # A document can come back due now while its own sweep runs (the
        # person wrote while we knocked; a chunk failed after acceptance): a
        # sweeper that skipped it as claimed has already gone, so the sweep
        # that released it goes round again.
        for _ in range(MAX_ROUNDS):
            due_again = result.due_again
            queue: asyncio.Queue[Claim | None] = asyncio.Queue(maxsize=self.concurrency)
            await asyncio.gather(
                self._produce(queue), *(self._work(queue) for _ in range(self.concurrency))
            )
            if self.state.stop.is_set() or result.due_again == due_again or self.limit is not None:
                break
        return result

    async def _may_send(self) -> bool:
        """Read the pauses before claiming anything. Every number paused: this sweep
        sends nothing, unless it takes that pause's one probe (one document), whose
        success resumes everybody (and this sweep goes on). A number paused on its
        own: the claim skips its documents, and this sweep probes it when its probe
        is due; the other numbers deliver."""
        store = self.engine.store
        token = uuid.uuid4()
        try:
            for _ in range(PROBE_TRIES):
                gates = await store.gate(token, self.number)
                every = next((g for g in gates if g.phone_number_id == EVERY_NUMBER), None)
                self.state.maybe_paused = any(not g.open for g in gates)
                if every is None or every.open:
                    for gate in gates:
                        if gate.probe and not self.state.stop.is_set():
                            await self._probe(token, gate.phone_number_id)
                    return not self.state.stop.is_set()
                if not every.probe:
                    when = f"{every.next_probe_at:%H:%M:%S %Z}" if every.next_probe_at else "soon"
                    self.state.note(
                        Event.STOPPED,
                        detail=f"sending is paused (code {every.pause_code}); next probe at "
                        f"{when}; `delivery-pipeline resume` once the cause is fixed",
                    )
                    self.state.stop.set()
                    return False
                if not await self._probe(token, EVERY_NUMBER) or self.state.stop.is_set():
                    return False
        except psycopg.OperationalError as exc:
            self._database_lost(exc)
            return False
        return False

    async def _acknowledge(self) -> bool:
        """Answer the presses of Later and Stop owed now (first: they answer a press
        the person just made); False: the sweep stopped."""
        try:
            await self.engine.acknowledgements.send_due(
                self.state, person_id=self.target.person_id, number=self.number
            )
        except psycopg.OperationalError as exc:
            self._database_lost(exc)
        return not self.state.stop.is_set()

    async def _probe(self, token: uuid.UUID, scope: str) -> bool:
        """Deliver one document while ``scope`` is paused (every number, or one):
        that pause's probe. False: nothing to probe with (the next probe stays an
        interval away)."""
        store = self.engine.store
        claims = await store.claim(
            1,
            target=self.target,
            probe=scope,
            number=self.number,
        )
        probed = False
        try:
            if claims and await store.probe_document(token, claims[0].document_id, scope):
                probed = True
                log.info(
                    "sending is paused (%s): probing with document %s",
                    "every number" if scope == EVERY_NUMBER else f"number {scope}",
                    claims[0].document_id,
                )
                self.state.note(Event.CLAIMED, count=1)
                self.state.maybe_paused = True
                await self._deliver(claims[0])
            elif claims:
                await store.release(claims[0])
        finally:
            # A probe whose document sent nothing proved nothing: the next is due now.
            await store.end_probe(token, scope, again=probed)
        return probed

    def _database_lost(self, exc: Exception) -> None:
        if not self.state.stop.is_set():
            log.error(
                "database unavailable, sweep stopped (claims lapse with their lease): %s", exc
            )
        self.state.note(Event.STOPPED, detail=f"database unavailable: {exc}")
        self.state.stop.set()

    async def _produce(self, queue: asyncio.Queue[Claim | None]) -> None:
        remaining = self.limit
        idle_rounds = 0
        # The pass's first document goes alone: a token that expired, an account
        # locked, a number gone since the last pass is then one refused send per
        # process, not one per worker, before the fleet-wide pause stops everybody.
        first = True
        try:
            while not self.state.stop.is_set():
                batch = self.concurrency if remaining is None else min(self.concurrency, remaining)
                if first:
                    batch = min(batch, 1)
                if batch <= 0:
                    break
                claims = await self.engine.store.claim(
                    batch,
                    target=self.target,
                    number=self.number,
                )
                if not claims:
                    if self.in_flight:
                        # Our own claims hold back their persons' next documents:
                        # each that finishes may let one go. The claim is planned
                        # afresh at every call, dearer than the guard's probe, and
                        # as the queue drains nearly every finish would find nothing.
                        await self._await_eligible()
                        continue
                    if self.targeted:
                        # A reply or a poke: what it could not claim another sweep
                        # holds, and that one goes round again for what comes back due.
                        break
                    idle_rounds += 1
                    if idle_rounds < IDLE_ROUNDS and await self.engine.store.eligible_exists():
                        await asyncio.sleep(0.02 * idle_rounds)
                        continue
                    wait = self.state.short_retry_until - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait + 0.05)
                        idle_rounds = 0
                        continue
                    break
                idle_rounds = 0
                self.state.note(Event.CLAIMED, count=len(claims))
                self.in_flight += len(claims)
                if remaining is not None:
                    remaining -= len(claims)
                for claim in claims:
                    if self.state.stop.is_set():
                        await self.engine.store.release(claim)
                        self.state.note(Event.RELEASED, claim.document_id)
                        self.in_flight -= 1
                    else:
                        await queue.put(claim)
                if first:
                    first = False
                    while self.in_flight and not self.state.stop.is_set():
                        self.finished.clear()
                        await self.finished.wait()
        except psycopg.OperationalError as exc:
            self._database_lost(exc)
        finally:
            for _ in range(self.concurrency):
                await queue.put(None)

    async def _await_eligible(self) -> None:
        """Wait, after a claim found nothing, until one of our documents finishes and
        the guard finds something eligible, or none of ours is left in flight."""
        while self.in_flight and not self.state.stop.is_set():
            self.finished.clear()
            await self.finished.wait()
            if await self.engine.store.eligible_exists():
                return

    async def _work(self, queue: asyncio.Queue[Claim | None]) -> None:
        while (claim := await queue.get()) is not None:
            try:
                if self.state.stop.is_set():
                    await self.engine.store.release(claim)
                    self.state.note(Event.RELEASED, claim.document_id)
                    continue
                await self._deliver(claim)
            except psycopg.OperationalError as exc:
                # The claim stays until its lease lapses; the ledger says
                # where the document stopped, so nothing is sent twice.
                self._database_lost(exc)
            finally:
                self.in_flight -= 1
                self.finished.set()

    async def _deliver(self, claim: Claim) -> None:
        try:
            await self.delivery.run(claim)
        except GlobalStop as exc:
            self.state.note(Event.STOPPED, detail=str(exc))
            self.state.stop.set()
        except psycopg.OperationalError:
            raise
        except Exception:
            log.exception("document %s: unexpected error; claim released", claim.document_id)
            await self.engine.store.release_for_retry(
                claim, delay=0, counts_attempt=True, error="internal error"
            )
            self.state.note(
                Event.RETRY_SCHEDULED, claim.document_id, detail="internal error", after_seconds=0
            )


class SweepNotStarted(Exception):
    """The identity check refused us (or found no API): nothing was claimed or sent."""


def pool_size(concurrency: int) -> int:
    """Connections a sweep needs: workers hold one only for a query, never
    across a send, so a few serve many documents in flight (and eight
    sweepers stay well inside a server's default 100 connections)."""
    return min(concurrency, 6) + 2


async def run_sweep(
    settings: Settings,
    database_url: str,
    *,
    target: SweepTarget = EVERYTHING,
    number: str | None = None,
    limit: int | None = None,
    concurrency: int | None = None,
    observer: SweepObserver | None = None,
    check_identity_first: bool = False,
) -> SweepResult:
    """Open a pool and a client, sweep once, close them.

    ``check_identity_first``: ask the API whether it accepts our token and
    every number this sweep sends from before claiming anything
    (``SweepNotStarted`` if not). For
    an operator's sweep, whose shell may hold other credentials than the
    fleet's: a refusal there must not pause sending for everybody.
    """
    concurrency = concurrency or settings.delivery.concurrency
    async with (
        async_pool(
            database_url,
            max_size=pool_size(concurrency),
            pooled=settings.database.transaction_pooled,
        ) as pool,
        CloudApiClient.from_settings(settings, max_connections=concurrency) as client,
    ):
        if check_identity_first:
            problem = await check_identity(client, settings.whatsapp, number)
            if problem is not None:
                raise SweepNotStarted(problem.message)
        engine = DeliveryEngine(settings, pool, client)
        try:
            return await engine.sweep(
                target=target,
                number=number,
                limit=limit,
                concurrency=concurrency,
                observer=observer,
            )
        finally:
            await engine.aclose()


def sweep_sync(settings: Settings, database_url: str, **kwargs: Any) -> SweepResult:
    """``run_sweep`` for synchronous callers (CLI, Dagster ops), on uvloop where it
    exists: the same sweep costs markedly less CPU per message (docs/benchmarks.md)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - Windows: no uvloop
        return asyncio.run(run_sweep(settings, database_url, **kwargs))
    return uvloop.run(run_sweep(settings, database_url, **kwargs))


def eligible_now(conn: psycopg.Connection[Any], settings: Settings) -> bool:
    """The heartbeat guard for synchronous callers: one indexed EXISTS, after
    ending what waited on a knock, or went as a file, the platform dropped (a
    brief `expired`),
    putting back in the queue what is due for its reminder (and abandoning
    `no_reply` what was reminded and never answered): nothing else wakes a
    document that waits on a person who does not answer."""
    grace: ExpireAfter = {"grace_seconds": settings.delivery.template_ttl_grace_seconds}
    QUERIES.expire_dropped_knocks.all(conn, grace)
    QUERIES.expire_dropped_parts.all(conn, grace)
    QUERIES.wake_for_reminders.all(conn, {})
    QUERIES.abandon_no_reply.all(conn, {"after_seconds": settings.delivery.no_reply_seconds})
    if not QUERIES.anything_due.one(conn, {}):
        return False
    return bool(QUERIES.guard_exists.one(conn, settings.guard))
