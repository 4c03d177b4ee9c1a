"""The dead-man's switch on Dagster's daemon, for processes that import no Dagster.

Dagster's daemon leaves heartbeats in our database (``dagster_heartbeats``):
the ``delivery_heartbeat`` sensor at every tick, each ops check when it is
evaluated. When neither has beaten for ``WATCHDOG_STALE_SECONDS``, nothing
requests delivery or generation runs, no check runs and no check alert goes
out: silence would look like health. The webhook service (a separate
process) then records an alert once, a reminder every
``OPS_ALERT_REMINDER_SECONDS`` while the silence lasts, and "resolved" when a
heartbeat comes back: the episode rule of a failing check
(``alerts.note_check``), so several service replicas alert once between them.

A deployment whose daemon never beat at all is silent too: staleness then
counts from when the watcher started, and only a heartbeat resolves it (a
replica that started a minute ago knows nothing, it has not seen the daemon
come back).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg

from delivery_pipeline.model import Severity
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.core import OpsAlert
from delivery_pipeline.watch.ages import format_age
from delivery_pipeline.watch.alerts import Alert, note_check

ALERT_KEY = "watchdog:dagster_daemon"
HEARTBEAT_SENSOR = "delivery_heartbeat"
CHECKS = "checks"
_NAMES = {HEARTBEAT_SENSOR: "delivery_heartbeat tick", CHECKS: "check evaluation"}


def beat(conn: psycopg.Connection[Any], source: str) -> dt.datetime:
    """Dagster's daemon is alive: ``source`` just ran. Returns the database's now."""
    row = QUERIES.beat.one(conn, {"source": source})
    assert row is not None  # an upsert that always returns its row
    return row.at


def interval_seconds(stale_seconds: float) -> float:
    """How often to look: a tenth of the stale time, between 1 s and a minute."""
    return min(60.0, max(1.0, stale_seconds / 10))


def _ages(conn: psycopg.Connection[Any]) -> dict[str, float]:
    return {row.source: row.age_seconds for row in QUERIES.heartbeats.all(conn, {})}


def daemon_alert(ages: dict[str, float], *, stale_seconds: float, since_start: float) -> Alert:
    """The alert (or, when not stale, the resolved message) for these heartbeat ages."""
    newest = min(ages.values(), default=since_start)
    seen = "; ".join(
        f"last {_NAMES.get(source, source)} {format_age(age, precise=True)} ago"
        for source, age in sorted(ages.items(), key=lambda item: item[1])
    )
    details = {"stale_after_seconds": stale_seconds, "heartbeat_ages_seconds": ages}
    if newest <= stale_seconds:
        return Alert(
            ALERT_KEY,
            Severity.INFO,
            f"Dagster's daemon is alive again ({seen}).",
            details,
        )
    silence = seen or f"no heartbeat at all in {format_age(since_start, precise=True)}"
    return Alert(
        ALERT_KEY,
        Severity.ERROR,
        "Dagster's daemon looks stopped: no delivery_heartbeat tick and no check evaluation "
        f"for over {format_age(stale_seconds, precise=True)} ({silence}). Until it is back no "
        "heartbeat delivery run, generation run, check or check alert happens; the webhook "
        "service still delivers on replies and pokes. What to do: is `dagster-daemon run` "
        "up (its log, its heartbeats on the UI's Deployment → Daemons page)? Restart it.",
        details,
    )


def watch_daemon(
    conn: psycopg.Connection[Any],
    *,
    stale_seconds: float,
    reminder_seconds: float,
    watching_since: dt.datetime,
) -> OpsAlert | None:
    """Look once; returns the ``ops_alerts`` row written (alert, reminder, resolved), if any."""
    ages = _ages(conn)
    since_start = (dt.datetime.now(dt.UTC) - watching_since).total_seconds()
    alert = daemon_alert(ages, stale_seconds=stale_seconds, since_start=since_start)
    if not ages and alert.severity is not Severity.ERROR:
        # No heartbeat yet and this watcher started recently: nothing is known,
        # so nothing is resolved. Another replica (or this one before a restart)
        # may be rightly alerting on the same silence.
        return None
    return note_check(
        conn,
        alert,
        failing=alert.severity is Severity.ERROR,
        reminder_seconds=reminder_seconds,
    )
