"""Recording ops alerts in ``ops_alerts``: episodes, and one-shot notices.

Every alert is a row first; ``ops_channel.send_pending`` posts the rows the
channel has not taken yet. Recording never depends on the channel being up,
and two processes cannot both record the same alert (an advisory lock per
key serialises the decision).

* ``record_alert`` — the engine and the webhook service. An alert about a
  lasting cause (a knock template's trouble, the knocks it holds) is a report
  on that cause's episode (``episodes``: one alert, resolved once); anything
  else (a person unreachable, a document given up) is a notice, once per key
  per quiet period;
* ``record_once`` — once per key ever (a failed run);
* ``note_check`` / ``note_episode`` — a report on an episode (a check's result,
  the pause, the daemon's watchdog), sync and async.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import psycopg

from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.core import OpsAlert
from delivery_pipeline.watch.alert import (
    Alert,
    AlertChannel,
    AlertKind,
    AlertSeverity,
    insert_params,
)
from delivery_pipeline.watch.episodes import (
    DEFAULT_REMINDER_SECONDS,
    Report,
    episode_of,
    note,
    note_async,
)

__all__ = [
    "DEFAULT_QUIET_SECONDS",
    "DEFAULT_REMINDER_SECONDS",
    "Alert",
    "AlertChannel",
    "AlertKind",
    "AlertSeverity",
    "note_check",
    "note_episode",
    "record_alert",
    "record_once",
]

log = logging.getLogger(__name__)

DEFAULT_QUIET_SECONDS = 3600.0


async def record_alert(
    conn: psycopg.AsyncConnection[Any],
    alert: Alert,
    *,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
) -> bool:
    """Record ``alert``; True if a row was written.

    Its cause's episode when it has one (``episodes.episode_of``): it opens the
    episode or joins the open one. Else a notice, unless its key was alerted
    within ``quiet_seconds``.
    """
    episode = episode_of(alert)
    if episode is not None:
        source = {**alert.details, "reported_as": alert.key}
        report = Report(dataclasses.replace(alert, key=episode, details=source), failing=True)
        return await note_async(conn, report) is not None
    async with conn.transaction():
        await QUERIES.alert_lock.run(conn, {"dedup_key": alert.key})
        last = await QUERIES.last_alert.one(conn, {"dedup_key": alert.key})
        if last is not None and last.kind != AlertKind.RESOLVED:
            if last.age_seconds < quiet_seconds:
                return False
        await QUERIES.insert_alert.one(conn, insert_params(alert, AlertKind.ALERT))
    log.warning("ops alert [%s] %s: %s", alert.severity, alert.key, alert.message)
    return True


def record_once(conn: psycopg.Connection[Any], alert: Alert) -> OpsAlert | None:
    """Record ``alert`` unless its key was ever recorded (a failed run: once per run)."""
    with conn.transaction():
        QUERIES.alert_lock.run(conn, {"dedup_key": alert.key})
        if QUERIES.last_alert.one(conn, {"dedup_key": alert.key}) is not None:
            return None
        row = QUERIES.insert_alert.one(conn, insert_params(alert, AlertKind.ALERT))
    log.warning("ops alert [%s] %s: %s", alert.severity, alert.key, alert.message)
    return row


def note_check(
    conn: psycopg.Connection[Any],
    alert: Alert,
    *,
    failing: bool,
    reminder_seconds: float = DEFAULT_REMINDER_SECONDS,
) -> OpsAlert | None:
    """A report, observed now, on the episode of ``alert.key``; the row written, if any
    (``episodes.decide``: alert, escalation, reminder, resolved)."""
    return note(conn, Report(alert, failing, reminder_seconds=reminder_seconds))


async def note_episode(
    conn: psycopg.AsyncConnection[Any],
    alert: Alert,
    *,
    failing: bool,
    reminder_seconds: float = DEFAULT_REMINDER_SECONDS,
) -> AlertKind | None:
    """``note_check`` for async callers (the fleet-wide pause); the kind written, if any."""
    return await note_async(conn, Report(alert, failing, reminder_seconds=reminder_seconds))
