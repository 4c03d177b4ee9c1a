"""Recording ops alerts in ``ops_alerts``, deduplicated by key.

Every alert is a row first; ``ops_channel.send_pending`` posts the rows the
channel has not taken yet. Recording never depends on the channel being up,
and two processes cannot both record the same alert (an advisory lock per
key serialises the decision).

Three ways to decide whether to write a row:

* ``record_alert`` — the engine and the webhook service: once per key per
  quiet period (a person unreachable, sending paused);
* ``record_once`` — once per key ever (a failed run);
* ``note_check`` — a check's episode: alert, escalation, reminder, resolved.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from delivery_pipeline.model import Severity
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows import NewAlert, OpsAlert

log = logging.getLogger(__name__)

DEFAULT_QUIET_SECONDS = 3600.0
DEFAULT_REMINDER_SECONDS = 4 * 3600


# The one severity (``model.Severity``), under the name the engine's modules import.
AlertSeverity = Severity


class AlertKind(enum.StrEnum):
    ALERT = "alert"
    REMINDER = "reminder"
    RESOLVED = "resolved"


class AlertChannel(enum.StrEnum):
    """Who is told (``ops_alerts.channel``): ops, or the reviewers about their own backlog
    (``REVIEW_WEBHOOK_URL``, falling back to the ops channel)."""

    OPS = "ops"
    REVIEWERS = "reviewers"


@dataclass(frozen=True)
class Alert:
    """What to tell a channel: a dedup key, a severity, one sentence, and details."""

    key: str
    severity: AlertSeverity
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    channel: AlertChannel = AlertChannel.OPS


def _params(alert: Alert, kind: AlertKind, *, episode: bool = False) -> NewAlert:
    return {
        "dedup_key": alert.key,
        "severity": alert.severity,
        "kind": kind,
        "message": alert.message,
        "details": Jsonb(alert.details),
        "channel": alert.channel,
        "episode": episode,
    }


async def record_alert(
    conn: psycopg.AsyncConnection[Any],
    alert: Alert,
    *,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
) -> bool:
    """Record ``alert`` unless its key was alerted within ``quiet_seconds``; True if written."""
    async with conn.transaction():
        await QUERIES.alert_lock.run(conn, {"dedup_key": alert.key})
        last = await QUERIES.last_alert.one(conn, {"dedup_key": alert.key})
        if last is not None and last.kind != AlertKind.RESOLVED:
            if last.age_seconds < quiet_seconds:
                return False
        await QUERIES.insert_alert.one(conn, _params(alert, AlertKind.ALERT))
    log.warning("ops alert [%s] %s: %s", alert.severity, alert.key, alert.message)
    return True


def _insert(
    conn: psycopg.Connection[Any], alert: Alert, kind: AlertKind, *, episode: bool = False
) -> OpsAlert:
    row = QUERIES.insert_alert.one(conn, _params(alert, kind, episode=episode))
    log.warning("ops %s [%s] %s: %s", kind, alert.severity, alert.key, alert.message)
    assert row is not None
    return row


def record_once(conn: psycopg.Connection[Any], alert: Alert) -> OpsAlert | None:
    """Record ``alert`` unless its key was ever recorded (a failed run: once per run)."""
    with conn.transaction():
        QUERIES.alert_lock.run(conn, {"dedup_key": alert.key})
        if QUERIES.last_alert.one(conn, {"dedup_key": alert.key}) is not None:
            return None
        return _insert(conn, alert, AlertKind.ALERT)


def note_check(
    conn: psycopg.Connection[Any],
    alert: Alert,
    *,
    failing: bool,
    reminder_seconds: float = DEFAULT_REMINDER_SECONDS,
) -> OpsAlert | None:
    """Record what a check's latest result calls for, if anything; returns the row.

    * starts failing (no alert yet, or the last one was ``resolved``) → ``alert``
    * keeps failing: escalated from warning to error → a new ``alert``; else a
      ``reminder`` once ``reminder_seconds`` passed since the last row
    * passes after failing → ``resolved``; passing and quiet → nothing

    The state is the newest ``ops_alerts`` row for the key, so it survives
    restarts and two evaluators cannot both alert.
    """
    with conn.transaction():
        QUERIES.alert_lock.run(conn, {"dedup_key": alert.key})
        last = QUERIES.last_alert.one(conn, {"dedup_key": alert.key})
        open_episode = last is not None and last.kind != AlertKind.RESOLVED
        if not failing:
            if not open_episode:
                return None
            resolved = Alert(
                alert.key, AlertSeverity.INFO, alert.message, alert.details, alert.channel
            )
            return _insert(conn, resolved, AlertKind.RESOLVED, episode=True)
        if not open_episode:
            return _insert(conn, alert, AlertKind.ALERT, episode=True)
        assert last is not None
        if last.severity == AlertSeverity.WARNING and alert.severity == AlertSeverity.ERROR:
            return _insert(conn, alert, AlertKind.ALERT, episode=True)
        if last.age_seconds >= reminder_seconds:
            return _insert(conn, alert, AlertKind.REMINDER, episode=True)
        return None


async def note_episode(
    conn: psycopg.AsyncConnection[Any],
    alert: Alert,
    *,
    failing: bool,
    reminder_seconds: float = DEFAULT_REMINDER_SECONDS,
) -> AlertKind | None:
    """``note_check`` for async callers (the fleet-wide pause): an alert when the
    episode opens, a reminder every ``reminder_seconds`` while it lasts, resolved
    when it ends. Returns the kind written, if any."""
    async with conn.transaction():
        await QUERIES.alert_lock.run(conn, {"dedup_key": alert.key})
        last = await QUERIES.last_alert.one(conn, {"dedup_key": alert.key})
        open_episode = last is not None and last.kind != AlertKind.RESOLVED
        if not failing:
            if not open_episode:
                return None
            alert = Alert(alert.key, AlertSeverity.INFO, alert.message, alert.details)
            kind = AlertKind.RESOLVED
        elif not open_episode:
            kind = AlertKind.ALERT
        elif last is not None and last.age_seconds >= reminder_seconds:
            kind = AlertKind.REMINDER
        else:
            return None
        await QUERIES.insert_alert.one(conn, _params(alert, kind, episode=True))
    log.warning("ops %s [%s] %s: %s", kind, alert.severity, alert.key, alert.message)
    return kind
