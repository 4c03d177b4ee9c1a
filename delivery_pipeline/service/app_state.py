"""What the webhook service holds for its lifetime, read by every route.

Apart from ``app.py`` so the routes of other modules (``review_page.py``)
import it without importing the app that mounts them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool
from starlette.background import BackgroundTask
from starlette.requests import Request

from delivery_pipeline.delivery.sweep import DeliveryEngine
from delivery_pipeline.delivery.sweep_target import SweepTarget
from delivery_pipeline.service.listener import ReadyListener
from delivery_pipeline.service.log_limit import RateLimitedLog
from delivery_pipeline.service.metrics import Counters
from delivery_pipeline.service.sessions import Sessions
from delivery_pipeline.service.timeline_push import TimelinePush
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import database_unavailable

# the app's logger, as before the state left app.py: operators filter on it
log = logging.getLogger("delivery_pipeline.service.app")

TARGETED_SWEEP_CONCURRENCY = 2


@dataclass
class Service:
    """What the app holds for its lifetime (``request.app.state.service``)."""

    settings: Settings
    pool: AsyncConnectionPool[psycopg.AsyncConnection[DictRow]]
    engine: DeliveryEngine
    # the review page's sessions; None when no review or operator token is set (the page is off)
    review_sessions: Sessions | None = None
    sweeps: set[asyncio.Task[None]] = field(default_factory=set)
    listener: ReadyListener | None = None
    # A replayed bad body must not fill the disk: a few lines per kind, then a count.
    quiet_log: RateLimitedLog = field(default_factory=lambda: RateLimitedLog(log))
    # pushes what the service delivered to Dagster's timeline (None: no DAGSTER_WEBSERVER_URL)
    timeline_push: TimelinePush | None = None
    # what this process saw, for /metrics (service/metrics.py)
    counters: Counters = field(default_factory=Counters)

    def recorded(self) -> None:
        """Something may have changed a document: have it on Dagster's timeline soon."""
        if self.timeline_push is not None:
            self.timeline_push.kick()

    async def sweep_and_record(self) -> Any:
        """A sweep after a ready notification, and what it did onto Dagster's timeline."""
        try:
            return await self.engine.sweep()
        finally:
            self.recorded()

    def sweep_later(self, targets: Collection[SweepTarget]) -> BackgroundTask | None:
        """A sweep of each target detached from the response, so a slow one never holds
        the connection; tracked so shutdown can cancel it."""
        if not targets:
            return None
        in_order = sorted(targets, key=SweepTarget.order)

        async def start() -> None:
            task = asyncio.create_task(self._sweep(in_order))
            self.sweeps.add(task)
            task.add_done_callback(self.sweeps.discard)

        return BackgroundTask(start)

    async def _sweep(self, targets: Sequence[SweepTarget]) -> None:
        for target in targets:
            named = target.named
            try:
                result = await self.engine.sweep(
                    concurrency=TARGETED_SWEEP_CONCURRENCY, target=target
                )
                if result.claimed:
                    log.info("targeted sweep %s: %s", named, result.as_dict())
            except Exception as exc:
                if not database_unavailable(exc):
                    log.exception("targeted sweep %s failed; the heartbeat will retry", named)
                    continue
                self.quiet_log.log(
                    logging.WARNING,
                    "sweep-database-unavailable",
                    "targeted sweep %s: database unavailable (%s); the heartbeat will retry",
                    named,
                    one_line(str(exc)),
                )
        self.recorded()


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def one_line(text: str) -> str:
    """Text from outside as one printable line (a body must not forge log lines)."""
    return "".join(c if c.isprintable() else " " for c in text)
