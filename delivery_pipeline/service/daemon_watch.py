"""The webhook service watches Dagster's daemon, and posts what ops must hear.

Every ``daemon_heartbeats.interval_seconds(WATCHDOG_STALE_SECONDS)`` (a minute by
default) the service reads the daemon's heartbeats in our database and
records an alert, a reminder or "resolved" (``watch/daemon_heartbeats.py``), then
posts every unsent ops alert. Posting here matters: the only other poster is
a Dagster sensor, which is exactly what is silent when the daemon is down.
The two posters take turns (``ops_channel.send_pending`` holds a lock), so no
alert goes out twice. The database work is synchronous and short; it runs in
a thread beside the requests.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

from delivery_pipeline.settings import Settings
from delivery_pipeline.settings.urls import secret
from delivery_pipeline.store.db import connect
from delivery_pipeline.watch.daemon_heartbeats import interval_seconds, watch_daemon
from delivery_pipeline.watch.ops_channel import OpsNotifier, send_pending

log = logging.getLogger(__name__)


def look_once(database_url: str, settings: Settings, watching_since: dt.datetime) -> None:
    notifier = OpsNotifier(url=secret(settings.ops.webhook_url), docs_url=settings.ops.docs_url)
    # The reviewers' alerts go where the alert sensor would post them.
    reviewers = OpsNotifier.for_reviewers(secret(settings.review.webhook_url))
    with connect(database_url) as conn:
        watch_daemon(
            conn,
            stale_seconds=settings.ops.watchdog_stale_seconds,
            reminder_seconds=settings.ops.alert_reminder_seconds,
            watching_since=watching_since,
        )
        send_pending(conn, notifier, reviewers=reviewers)


async def watch_forever(database_url: str, settings: Settings) -> None:
    """Look, post, sleep; until cancelled. A failed look is logged and retried."""
    watching_since = dt.datetime.now(dt.UTC)
    every = interval_seconds(settings.ops.watchdog_stale_seconds)
    while True:
        try:
            await asyncio.to_thread(look_once, database_url, settings, watching_since)
        except Exception:
            log.exception("the Dagster daemon watch could not look; trying again in %ss", every)
        await asyncio.sleep(every)
