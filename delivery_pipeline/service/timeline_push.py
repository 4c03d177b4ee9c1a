"""The service's deliveries onto Dagster's timeline, as soon as they happen.

Every transition the service makes leaves an outbox row (``sql/migrations/008``; the
service's sessions are named ``SERVICE_SOURCE``). After each sweep and each
webhook the push claims the service's own unreported rows and posts them
to the Dagster webserver's ``/report_asset_materialization/`` endpoint (no
Dagster import: plain HTTP), one event per batch, and marks them reported on
a 200. It never blocks or fails a delivery: it runs beside the requests.
When the webserver refuses the event (its storage is down) or cannot be
reached, the rows are freed at once for the ``record_delivery_events``
sensor; when the answer never came, the event may still land, so the claim
is left to lapse and the sensor first asks Dagster's event log. After a
failure the push pauses and leaves new rows to the sensor.

``watch/delivery_events.py`` has the rules; this is the service's reporter.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from typing import Any

import httpx
import psycopg
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.watch.delivery_events import (
    BATCH_SIZE,
    DELIVERED_DOCUMENTS,
    PUSH_CLAIMANT_PREFIX,
    PUSH_LEASE,
    SERVICE_SOURCE,
    EventRecord,
    record_for,
)

log = logging.getLogger(__name__)

POST_TIMEOUT_SECONDS = 5.0
# After a failed post, leave the rows to the sensor for this long.
PAUSE_AFTER_FAILURE_SECONDS = 10.0
# Look for rows even when nothing kicked (an async status, a restart).
IDLE_SECONDS = 10.0


class TimelinePush:
    """Pushes the service's delivery events to the Dagster webserver."""

    def __init__(
        self,
        pool: AsyncConnectionPool[psycopg.AsyncConnection[DictRow]],
        webserver_url: str,
        *,
        source: str = SERVICE_SOURCE,
        timeout_seconds: float = POST_TIMEOUT_SECONDS,
    ) -> None:
        self.pool = pool
        self.endpoint = f"{webserver_url}/report_asset_materialization/{DELIVERED_DOCUMENTS}"
        self.source = source
        self._kick = asyncio.Event()
        self._paused_until = 0.0
        self._client = httpx.AsyncClient(timeout=timeout_seconds)

    def kick(self) -> None:
        """Something may have been delivered: push soon (never waits)."""
        self._kick.set()

    async def run(self) -> None:
        """Push whenever kicked (and every ``IDLE_SECONDS``), until cancelled."""
        try:
            while True:
                try:
                    await asyncio.wait_for(self._kick.wait(), timeout=IDLE_SECONDS)
                except TimeoutError:
                    pass
                self._kick.clear()
                try:
                    await self.push()
                except Exception:
                    log.exception("recording deliveries in Dagster failed; the sensor will")
        finally:
            await self._client.aclose()

    async def push(self) -> int:
        """Claim and post the service's unreported rows; returns how many were reported."""
        if time.monotonic() < self._paused_until:
            return 0
        reported = 0
        while True:
            claimant = f"{PUSH_CLAIMANT_PREFIX}{uuid.uuid4()}"
            async with self.pool.connection() as conn:
                claimed = await QUERIES.outbox_claim_source.all(
                    conn, {"source": self.source, "claimant": claimant, "limit": BATCH_SIZE}
                )
            rows = sorted(claimed, key=lambda e: e.id)
            if not rows:
                return reported
            record = record_for(rows)
            outcome = await self._post(record)
            if outcome is not Posted.OK:
                self._paused_until = time.monotonic() + PAUSE_AFTER_FAILURE_SECONDS
                if outcome is Posted.REFUSED:  # definitely not stored: the sensor's, now
                    async with self.pool.connection() as conn:
                        await QUERIES.outbox_release.run(
                            conn, {"ids": record.ids, "claimant": claimant}
                        )
                return reported
            async with self.pool.connection() as conn:
                await QUERIES.outbox_reported.run(conn, {"ids": record.ids})
            reported += len(rows)
            if len(rows) < BATCH_SIZE:
                return reported

    async def _post(self, record: EventRecord) -> Posted:
        body: dict[str, Any] = {"description": record.description, "metadata": record.metadata}
        try:
            response = await self._client.post(self.endpoint, json=body)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            log.warning(
                "Dagster webserver unreachable (%r); the record_delivery_events sensor records "
                "%d deliveries instead",
                exc,
                len(record.ids),
            )
            return Posted.REFUSED
        except httpx.HTTPError as exc:
            log.warning(
                "no answer from the Dagster webserver (%r); the sensor checks in %s whether "
                "%d deliveries were recorded and records the rest",
                exc,
                PUSH_LEASE,
                len(record.ids),
            )
            return Posted.UNKNOWN
        if response.status_code != 200:
            log.warning(
                "Dagster webserver refused the delivery events (HTTP %s: %s); the sensor records "
                "them instead",
                response.status_code,
                response.text[:200],
            )
            return Posted.REFUSED
        return Posted.OK


class Posted(enum.Enum):
    OK = "ok"
    REFUSED = "refused"  # definitely not stored
    UNKNOWN = "unknown"  # sent, no answer: it may still be stored
