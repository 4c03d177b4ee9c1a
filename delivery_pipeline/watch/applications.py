"""The applications as ops watch them: their endpoints, and the events they were not told.

The outbox's rules (order, lease, retry schedule, horizon) are
``store/application_events.py``'s; this is what ops hear and read of it. An
endpoint failing for ``DELIVERY_API_EVENTS_ALERT_SECONDS`` is an alert
episode (reminded, resolved when it answers; one for the fleet); events given
up at the horizon are an error alert. ``status`` prints a line per
application, and the backlog asset records what each handed over and what
waits for it.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from typing import Any

import psycopg

from delivery_pipeline.model import Severity
from delivery_pipeline.store.application_events import handovers, outbox
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.api import OutboxState
from delivery_pipeline.watch.ages import format_age
from delivery_pipeline.watch.alerts import Alert, note_episode, record_alert

OWNER = "the application (its endpoint)"


def endpoint_alert_key(application: str) -> str:
    return f"application_endpoint:{application}"


def expired_alert_key(application: str) -> str:
    return f"application_events_expired:{application}"


async def alert_given_up(
    conn: psycopg.AsyncConnection[Any], given_up: Counter[str], horizon: dt.timedelta
) -> None:
    """An error alert per application some of whose events were given up at ``horizon``."""
    hours = horizon.total_seconds() / 3600
    for application, count in given_up.items():
        await record_alert(
            conn,
            Alert(
                expired_alert_key(application),
                Severity.ERROR,
                f"{count} events for {application} were not delivered within {hours:.3g} h "
                "and were given up: its endpoint failed or refused them (owner: "
                f"{OWNER}). The documents' states stay readable (GET /v1/documents/{{id}}).",
                {"application": application, "given_up": count},
            ),
        )


async def note_endpoints(
    conn: psycopg.AsyncConnection[Any],
    applications: list[str],
    *,
    alert_after: float,
    reminder_seconds: float,
) -> None:
    """An alert episode per endpoint failing longer than ``alert_after`` seconds:
    opened, reminded while it lasts, resolved when it answers (one for the fleet)."""
    now = dt.datetime.now(dt.UTC)
    for state in await QUERIES.api_outbox_state.all(conn, {}):
        if state.application not in applications:
            continue
        failing = state.failing_since is not None and (
            (now - state.failing_since).total_seconds() >= alert_after
        )
        await note_episode(
            conn,
            Alert(
                endpoint_alert_key(state.application),
                Severity.WARNING,
                describe_endpoint(state),
                {
                    "application": state.application,
                    "failures": state.failures,
                    "waiting": state.waiting,
                    "last_error": state.last_error,
                },
            ),
            failing=failing,
            reminder_seconds=reminder_seconds,
        )


def describe_endpoint(state: OutboxState) -> str:
    """One line: the endpoint, and what waits for it."""
    waiting = f"{state.waiting} events waiting"
    if state.oldest_age_seconds is not None and state.waiting:
        waiting += f", the oldest {format_age(state.oldest_age_seconds, precise=True)} old"
    if state.removed_at is not None:
        return f"{state.application}: no endpoint configured any more; {waiting}"
    if state.failing_since is None:
        return f"{state.application}: endpoint answering; {waiting}"
    since = (dt.datetime.now(dt.UTC) - state.failing_since).total_seconds()
    failing = format_age(since, precise=True)
    return (
        f"{state.application}: endpoint FAILING for {failing} ({state.failures} failures in "
        f"a row: {state.last_error}); {waiting}; next probe at "
        f"{state.next_attempt_at:%H:%M:%S %Z}; owner: {OWNER}"
    )


# ── what status and Dagster show (synchronous readers) ──────────────────


def outbox_lines(states: list[OutboxState]) -> list[str]:
    """``status``'s lines: each application's endpoint and what waits for it."""
    if not states:
        return []
    return ["", "application events (DELIVERY_API_WEBHOOKS):"] + [
        f"  {describe_endpoint(state)}" for state in states
    ]


@dataclass(frozen=True)
class ApplicationsRecord:
    """The backlog's view of the applications: a row each, and numbers the UI plots."""

    rows: list[dict[str, Any]]
    numbers: dict[str, float | int]


def applications_record(conn: psycopg.Connection[Any]) -> ApplicationsRecord:
    """What each application handed over in the last 24 hours, where that is now, and
    its events outbox: per application, and summed."""
    handed = {h.application: h for h in handovers(conn)}
    states = {o.application: o for o in outbox(conn)}
    rows: list[dict[str, Any]] = []
    numbers: dict[str, float | int] = {}
    for application in sorted(set(handed) | set(states)):
        h, o = handed.get(application), states.get(application)
        rows.append(
            {
                "application": application,
                "handed_over_24h": h.handed_over if h else 0,
                "delivered": h.delivered if h else 0,
                "abandoned": h.abandoned if h else 0,
                "open": h.open if h else 0,
                "events_waiting": o.waiting if o else 0,
                "oldest_event_age_seconds": round(o.oldest_age_seconds or 0.0, 1) if o else 0.0,
                "events_given_up_24h": o.expired_last_day if o else 0,
                "endpoint": _endpoint_word(o),
            }
        )
        numbers[f"handed_over_24h_{application}"] = h.handed_over if h else 0
        numbers[f"events_waiting_{application}"] = o.waiting if o else 0
    numbers["api_handed_over_24h"] = sum(row["handed_over_24h"] for row in rows)
    numbers["api_events_waiting"] = sum(row["events_waiting"] for row in rows)
    numbers["api_events_oldest_age_seconds"] = max(
        (row["oldest_event_age_seconds"] for row in rows), default=0.0
    )
    numbers["api_endpoints_failing"] = sum(row["endpoint"] == "failing" for row in rows)
    return ApplicationsRecord(rows, numbers)


def _endpoint_word(state: OutboxState | None) -> str:
    if state is None or state.removed_at is not None:
        return "none"
    return "failing" if state.failing_since is not None else "answering"
