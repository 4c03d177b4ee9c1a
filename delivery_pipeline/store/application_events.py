"""The applications' outbox (``api_events``, sql/migrations/036): its rules, whoever sends.

Triggers write a row for each transition of a document an application handed
over (delivered, read, abandoned with its reason, awaiting the person's reply)
and for each opt-out of a person it knows, in the transaction that makes it,
for the applications whose endpoint a service registered. Nothing is lost
while an endpoint, a service or the network is away: the rows wait.

Sending (``service/api/events.py``) follows these rules, which hold across
any number of processes because each lives in Postgres (sql/queries/api.sql):

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
  application (its endpoint); an event not delivered within ``horizon`` (the
  schedule's sum, 27 h 35 min) is given up. The alerts, on a failing endpoint
  and on events given up, are ``watch/applications.py``'s. The document's
  state stays readable (``GET /v1/documents/{id}``): an application that lost
  events asks.

Delivered and given-up events are history: forgotten after ``KEEP``.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from typing import Any

import psycopg

from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.api import HandOvers, OutboxState

# Standard Webhooks' retry schedule: the delay after the n-th failure in a row.
SCHEDULE_SECONDS = (5.0, 5 * 60.0, 30 * 60.0, 2 * 3600.0, 5 * 3600.0, 10 * 3600.0, 10 * 3600.0)
CLAIM_LEASE = dt.timedelta(seconds=60)
BATCH = 64
EXPIRE_BATCH = 1000
KEEP = dt.timedelta(days=7)
FORGET_BATCH = 5000


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


async def give_up(
    conn: psycopg.AsyncConnection[Any], schedule: Schedule, *, limit: int = EXPIRE_BATCH
) -> Counter[str]:
    """Give up the events older than the horizon; how many, per application."""
    return Counter(
        await QUERIES.api_expire_events.all(conn, {"horizon": schedule.horizon, "limit": limit})
    )


async def forget(conn: psycopg.AsyncConnection[Any]) -> int:
    """Delete a batch of events delivered or given up more than ``KEEP`` ago."""
    return await QUERIES.api_forget_events.run(conn, {"keep": KEEP, "limit": FORGET_BATCH})


def outbox(conn: psycopg.Connection[Any]) -> list[OutboxState]:
    """Each application's outbox and endpoint."""
    return QUERIES.api_outbox_state.all(conn, {})


def handovers(conn: psycopg.Connection[Any]) -> list[HandOvers]:
    """What each application handed over in the last 24 hours, and where it is now."""
    return QUERIES.api_handovers.all(conn, {})
