"""No polling floor: the service sweeps when Postgres says a document became deliverable.

A trigger (sql/migrations/012) sends ``NOTIFY delivery_ready, '<id>:<due epoch>'`` when a
document enters the queue unclaimed or its due time changes there, whatever
made it so (generated, approved, woken by a reply, released after a
backoff). The listener turns notifications into sweeps: one due now wakes
the sweeper at once; one due later sets a timer for that moment (as does the
earliest future due time read after every sweep), so a backoff expiring
needs no event. Notifications that arrive while a sweep runs coalesce into
one more sweep. A lost connection is re-opened with backoff and followed by
one catch-up sweep, since what was notified meanwhile is gone. The Dagster
heartbeat stays the safety net.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from delivery_pipeline.store.db import notifications
from delivery_pipeline.store.queries import QUERIES

log = logging.getLogger(__name__)

APPLICATION_NAME = "delivery_pipeline listener"
# A timer far in the future is re-armed after every sweep anyway; this caps
# how long the sweeper sleeps without looking at the clock again.
MAX_SLEEP_SECONDS = 60.0


def _due_epoch(payload: str) -> float | None:
    """``'<id>:<epoch>'`` → the epoch second the document is due; None if unreadable."""
    try:
        return float(payload.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None


class ReadyListener:
    """LISTEN on ``delivery_ready`` and run ``sweep`` when something is due."""

    def __init__(
        self,
        database_url: str,
        pool: AsyncConnectionPool[psycopg.AsyncConnection[DictRow]],
        sweep: Callable[[], Awaitable[Any]],
    ) -> None:
        self._url = database_url
        self._pool = pool
        self._sweep = sweep
        self._wake = asyncio.Event()
        self._due_now = False
        self._next_due = math.inf  # epoch seconds
        self.connected = asyncio.Event()

    async def run(self) -> None:
        """Listen and sweep until cancelled."""
        sweeper = asyncio.create_task(self._sweeper())
        try:
            await self._listen_forever()
        finally:
            sweeper.cancel()
            await asyncio.gather(sweeper, return_exceptions=True)

    def _due_at(self, epoch: float) -> None:
        if epoch <= time.time():
            self._due_now = True
        else:
            self._next_due = min(self._next_due, epoch)
        self._wake.set()

    async def _listen_forever(self) -> None:
        heard = notifications(self._url, APPLICATION_NAME, QUERIES.listen_ready, self._lost)
        async for notify in heard:
            if notify is None:
                self.connected.set()
                # What became ready while nobody listened: one catch-up sweep.
                self._due_at(time.time())
            else:
                due = _due_epoch(notify.payload)
                self._due_at(time.time() if due is None else due)

    def _lost(self, exc: Exception, delay: float) -> None:
        self.connected.clear()
        log.warning("ready listener lost its connection (%s); reconnecting in %.1fs", exc, delay)

    async def _sweeper(self) -> None:
        while True:
            self._wake.clear()
            if self._due_now or self._next_due <= time.time():
                self._due_now, self._next_due = False, math.inf
                try:
                    await self._sweep()
                    await self._arm_timer()
                except Exception:
                    log.exception("sweep after a ready notification failed; the heartbeat retries")
                    await asyncio.sleep(1.0)
                continue
            timeout = min(self._next_due - time.time(), MAX_SLEEP_SECONDS)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(timeout, 0.0))

    async def _arm_timer(self) -> None:
        """Wake again when the earliest document not due yet becomes due."""
        async with self._pool.connection() as conn:
            next_due = await QUERIES.next_due.one(conn, {})
        if next_due is not None:
            self._due_at(next_due.timestamp())
