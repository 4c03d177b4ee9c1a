"""The deliverer: each application's events, signed, to its endpoint.

It runs in every webhook service process, beside the requests, for three
reasons: the service is the one process a deployment always runs (Meta's
webhooks need it), so events flow while Dagster is down; it is asynchronous,
so hundreds of slow endpoints' requests in flight cost little; and it scales
with its replicas, which need no coordination beyond the outbox's claims
(``store/application_events.py`` has the rules: in order per stream, at least
once, backoff for hours, one probe of a failing endpoint for the fleet).

Woken by the outbox's notification (``LISTEN api_events``), else it looks
every ``IDLE_SECONDS``. Every ``LOOK_SECONDS`` it gives up what is past the
horizon, opens or resolves each failing endpoint's alert, and forgets old
history. The endpoint's URL and secrets are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
import time
import uuid
from dataclasses import dataclass

import httpx
import psycopg
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from delivery_pipeline import __version__
from delivery_pipeline.client.webhooks import signed_headers
from delivery_pipeline.service.log_limit import RateLimitedLog
from delivery_pipeline.settings import Settings
from delivery_pipeline.store import application_events as outbox
from delivery_pipeline.store.application_events import BATCH, CLAIM_LEASE, Schedule
from delivery_pipeline.store.db import notifications
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.api import ApiEvent
from delivery_pipeline.watch import applications

log = logging.getLogger(__name__)

IDLE_SECONDS = 1.0
LOOK_SECONDS = 10.0
APPLICATION_NAME = "delivery_pipeline events"


class Outcome(enum.Enum):
    DELIVERED = "delivered"  # 2xx
    REFUSED = "refused"  # the endpoint answered, and not with a 2xx: this event waits
    UNREACHABLE = "unreachable"  # no answer, a timeout, 408, 429, 5xx: the endpoint fails


@dataclass(frozen=True)
class Sent:
    event: ApiEvent
    outcome: Outcome
    error: str = ""


def envelope(event: ApiEvent) -> bytes:
    """The body an endpoint receives (``schemas.Event``)."""
    return json.dumps(
        {
            "type": event.type,
            "timestamp": event.created_at.isoformat(),
            "data": event.data,
        },
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()


def event_id(event: ApiEvent) -> str:
    """The ``webhook-id``: the same on every attempt of the event."""
    return f"evt_{event.event_id.hex}"


def outcome_of(status: int) -> Outcome:
    if 200 <= status < 300:
        return Outcome.DELIVERED
    if status in (408, 429) or status >= 500:
        return Outcome.UNREACHABLE
    return Outcome.REFUSED


class EventDeliverer:
    """Sends the events of the applications whose endpoints this process knows."""

    def __init__(
        self,
        pool: AsyncConnectionPool[psycopg.AsyncConnection[DictRow]],
        listen_url: str | None,
        settings: Settings,
    ) -> None:
        api = settings.api
        self.pool = pool
        # None: no session to LISTEN on (a transaction pooler); the sender looks every
        # IDLE_SECONDS instead
        self.listen_url = listen_url
        self.endpoints = api.endpoints
        self.keys = api.signing_secrets
        self.schedule = Schedule(api.events_backoff_scale)
        self.alert_after = api.events_alert_seconds
        self.reminder_seconds = float(settings.ops.alert_reminder_seconds)
        self.token = uuid.uuid4()
        self.quiet_log = RateLimitedLog(log)
        self._limit = asyncio.Semaphore(api.events_concurrency)
        self._wake = asyncio.Event()
        self._http = httpx.AsyncClient(
            timeout=api.events_timeout_seconds,
            follow_redirects=False,
            headers={"User-Agent": f"delivery-pipeline/{__version__}"},
        )

    async def run(self) -> None:
        """Register this process's endpoints, then send until cancelled."""
        listening = asyncio.create_task(self._listen())
        try:
            await self._register()
            next_look = 0.0
            # a failing endpoint is alerted within half its allowance
            every = min(LOOK_SECONDS, self.alert_after / 2)
            while True:
                busy = await self._pass_all()
                if time.monotonic() >= next_look:
                    await self._look_after()
                    next_look = time.monotonic() + every
                if not busy:
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), IDLE_SECONDS)
        finally:
            listening.cancel()
            await asyncio.gather(listening, return_exceptions=True)
            await self._http.aclose()

    async def register_only(self) -> None:
        """No endpoint here: only say so to the fleet (no events are recorded for one)."""
        await self._register()

    async def _register(self) -> None:
        while True:
            try:
                async with self.pool.connection() as conn:
                    await outbox.register_endpoints(conn, sorted(self.endpoints))
                return
            except (psycopg.Error, OSError) as exc:
                self._problem("register", exc)
                await asyncio.sleep(IDLE_SECONDS)

    async def _pass_all(self) -> bool:
        """A pass for every application at once: a slow endpoint holds up only its own."""
        passes = await asyncio.gather(*(self._pass(application) for application in self.endpoints))
        return any(passes)

    async def _pass(self, application: str) -> bool:
        try:
            return await self.deliver(application)
        except (psycopg.Error, OSError) as exc:
            self._problem("pass", exc)
            await asyncio.sleep(IDLE_SECONDS)
            return False

    async def deliver(self, application: str) -> bool:
        """One pass for one application: claim, send, record. True if it sent anything."""
        async with self.pool.connection() as conn:
            probing = await QUERIES.api_endpoint_gate.one(
                conn, {"application": application, "lease": CLAIM_LEASE}
            )
            if probing is None:
                return False
            events = await QUERIES.api_claim_events.all(
                conn,
                {
                    "application": application,
                    "token": self.token,
                    "lease": CLAIM_LEASE,
                    "limit": 1 if probing else BATCH,
                    "probing": probing,
                },
            )
            if not events:
                if probing:
                    await QUERIES.api_endpoint_probe_unused.run(conn, {"application": application})
                return False
        sent = await asyncio.gather(*(self._send(application, event) for event in events))
        await self._record(application, sent, probing)
        return True

    async def _send(self, application: str, event: ApiEvent) -> Sent:
        body = envelope(event)
        headers = signed_headers(self.keys[application], event_id(event), int(time.time()), body)
        headers["Content-Type"] = "application/json"
        async with self._limit:
            try:
                response = await self._http.post(
                    self.endpoints[application], content=body, headers=headers
                )
            except httpx.HTTPError as exc:
                # the exception's text may hold the URL (a secret): its kind only
                return Sent(event, Outcome.UNREACHABLE, type(exc).__name__)
        outcome = outcome_of(response.status_code)
        return Sent(
            event, outcome, "" if outcome == Outcome.DELIVERED else f"HTTP {response.status_code}"
        )

    async def _record(self, application: str, sent: list[Sent], probing: bool) -> None:
        delivered = [s.event.id for s in sent if s.outcome == Outcome.DELIVERED]
        failed = [s for s in sent if s.outcome != Outcome.DELIVERED]
        unreachable = [s for s in failed if s.outcome == Outcome.UNREACHABLE]
        async with self.pool.connection() as conn:
            if delivered:
                await QUERIES.api_events_delivered.run(conn, {"ids": delivered})
            for s in failed:
                await QUERIES.api_event_failed.run(
                    conn,
                    {
                        "id": s.event.id,
                        "token": self.token,
                        "error": s.error,
                        "delay_seconds": self.schedule.after(s.event.attempts + 1),
                    },
                )
            if unreachable:
                failures = await QUERIES.api_endpoint_failed.one(
                    conn,
                    {
                        "application": application,
                        "error": unreachable[0].error,
                        "schedule": self.schedule.delays,
                    },
                )
                self.quiet_log.log(
                    logging.WARNING,
                    f"failing:{application}",
                    "%s's endpoint failed (%s; %s in a row): its events wait",
                    application,
                    unreachable[0].error,
                    failures,
                )
            elif probing:
                due = await QUERIES.api_endpoint_ok.one(conn, {"application": application})
                log.info("%s's endpoint answers again: %s events due now", application, due)

    async def _look_after(self) -> None:
        try:
            async with self.pool.connection() as conn:
                given_up = await outbox.give_up(conn, self.schedule)
                await applications.alert_given_up(conn, given_up, self.schedule.horizon)
                await applications.note_endpoints(
                    conn,
                    sorted(self.endpoints),
                    alert_after=self.alert_after,
                    reminder_seconds=self.reminder_seconds,
                )
                await outbox.forget(conn)
        except (psycopg.Error, OSError) as exc:
            self._problem("look", exc)

    async def _listen(self) -> None:
        """Wake the sender when an event is recorded; reconnect with backoff."""
        if self.listen_url is None:
            return
        heard = notifications(
            self.listen_url,
            APPLICATION_NAME,
            QUERIES.api_listen_events,
            lambda exc, _delay: self._problem("listen", exc),
        )
        async for _ in heard:
            self._wake.set()  # an event recorded, or (re)connected: what waits is sent

    def _problem(self, what: str, exc: BaseException) -> None:
        self.quiet_log.log(
            logging.WARNING,
            f"events-{what}",
            "application events (%s): %s: %s; trying again",
            what,
            type(exc).__name__,
            " ".join(str(exc).split())[:200],
        )
