"""The applications' outbox (``api_events``, sql/migrations/036): its rules, whoever sends.

Triggers write a row for each transition of a document an application handed
over (delivered, read, abandoned with its reason, awaiting the person's reply)
and for each opt-out of a person it knows, in the transaction that makes it,
for the applications whose endpoint a service registered. Nothing is lost
while an endpoint, a service or the network is away: the rows wait.

Sending (``service/api/events.py``) follows these rules, which hold across
any number of processes because each lives in Postgres:

* **In order per stream** (a document's events, a person's): only the oldest
  unsent event of a stream is ever claimed, and the next one only once it is
  delivered or given up.
* **At least once**: a claim is a lease (``CLAIM_LEASE``); a process that dies
  holding events leaves them to the next. The event's id (``webhook-id``)
  stays the same on every attempt: the application deduplicates on it.
* **Retried with backoff for hours**: an event the endpoint refused is tried
  again on ``SCHEDULE`` (Standard Webhooks' own: 5 s, 5 min, 30 min, 2 h, 5 h,
  10 h, 10 h). An endpoint that cannot be reached (a connection error, a
  timeout, 408, 429, 5xx) is *failing*: one process at a time probes it, on
  the same schedule by its failures in a row, with one event; the first
  answer makes every waiting event due at once.
* **A waiting state with an owner, a limit and an alert**: the owner is the
  application (its endpoint); an endpoint failing for ``DELIVERY_API_EVENTS_ALERT_SECONDS``
  is an alert episode (reminded, resolved when it answers); an event not
  delivered within ``horizon`` (the schedule's sum, 27 h 35 min) is given up,
  and that is an error alert. The document's state stays readable
  (``GET /v1/documents/{id}``): an application that lost events asks.

Delivered and given-up events are history: forgotten after ``KEEP``.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from typing import Any

import psycopg

from delivery_pipeline.model import Severity
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.api import HandOvers, OutboxState
from delivery_pipeline.watch.alerts import Alert, note_episode, record_alert

# Standard Webhooks' retry schedule: the delay after the n-th failure in a row.
SCHEDULE_SECONDS = (5.0, 5 * 60.0, 30 * 60.0, 2 * 3600.0, 5 * 3600.0, 10 * 3600.0, 10 * 3600.0)
CLAIM_LEASE = dt.timedelta(seconds=60)
BATCH = 64
EXPIRE_BATCH = 1000
KEEP = dt.timedelta(days=7)
FORGET_BATCH = 5000
OWNER = "the application (its endpoint)"


def endpoint_alert_key(application: str) -> str:
    return f"application_endpoint:{application}"


def expired_alert_key(application: str) -> str:
    return f"application_events_expired:{application}"


@dataclass(frozen=True)
class Schedule:
    """The retry schedule, scaled (``DELIVERY_API_EVENTS_BACKOFF_SCALE``; 1 in production)."""

    scale: float = 1.0

    @property
    def delays(self) -> list[float]:
        return [seconds * self.scale for seconds in SCHEDULE_SECONDS]

    def after(self, failures: int) -> float:
        """The delay after ``failures`` failures in a row (at least one)."""
        delays = self.delays
        return delays[min(max(failures, 1), len(delays)) - 1]

    @property
    def horizon(self) -> dt.timedelta:
        """How long an event is tried before it is given up."""
        return dt.timedelta(seconds=sum(self.delays))


async def register_endpoints(conn: psycopg.AsyncConnection[Any], applications: list[str]) -> None:
    """This service's endpoints are the fleet's: events are recorded for these
    applications from now on, and no longer for any other."""
    for application in applications:
        await QUERIES.api_register_endpoint.run(conn, {"application": application})
    await QUERIES.api_unregister_endpoints.run(conn, {"applications": applications})


async def expire(
    conn: psycopg.AsyncConnection[Any], schedule: Schedule, *, limit: int = EXPIRE_BATCH
) -> Counter[str]:
    """Give up the events older than the horizon; how many per application, each alerted."""
    given_up = Counter(
        await QUERIES.api_expire_events.all(conn, {"horizon": schedule.horizon, "limit": limit})
    )
    for application, count in given_up.items():
        hours = schedule.horizon.total_seconds() / 3600
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
    return given_up


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


async def forget(conn: psycopg.AsyncConnection[Any]) -> int:
    """Delete a batch of events delivered or given up more than ``KEEP`` ago."""
    return await QUERIES.api_forget_events.run(conn, {"keep": KEEP, "limit": FORGET_BATCH})


def describe_endpoint(state: OutboxState) -> str:
    """One line: the endpoint, and what waits for it."""
    waiting = f"{state.waiting} events waiting"
    if state.oldest_age_seconds is not None and state.waiting:
        waiting += f", the oldest {_age(state.oldest_age_seconds)} old"
    if state.removed_at is not None:
        return f"{state.application}: no endpoint configured any more; {waiting}"
    if state.failing_since is None:
        return f"{state.application}: endpoint answering; {waiting}"
    since = (dt.datetime.now(dt.UTC) - state.failing_since).total_seconds()
    return (
        f"{state.application}: endpoint FAILING for {_age(since)} ({state.failures} failures in "
        f"a row: {state.last_error}); {waiting}; next probe at "
        f"{state.next_attempt_at:%H:%M:%S %Z}; owner: {OWNER}"
    )


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# ── what status and Dagster show (synchronous readers) ──────────────────


def outbox(conn: psycopg.Connection[Any]) -> list[OutboxState]:
    """Each application's outbox and endpoint."""
    return QUERIES.api_outbox_state.all(conn, {})


def outbox_lines(states: list[OutboxState]) -> list[str]:
    """``status``'s lines: each application's endpoint and what waits for it."""
    if not states:
        return []
    return ["", "application events (DELIVERY_API_WEBHOOKS):"] + [
        f"  {describe_endpoint(state)}" for state in states
    ]


def handovers(conn: psycopg.Connection[Any]) -> list[HandOvers]:
    """What each application handed over in the last 24 hours, and where it is now."""
    return QUERIES.api_handovers.all(conn, {})


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
