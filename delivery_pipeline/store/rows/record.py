"""Parameters and rows of ``sql/queries/record.sql``: the delivery-events outbox (008) and
the daemons' heartbeats."""

import datetime as dt
from typing import NamedTuple, TypedDict

from psycopg.types.json import Jsonb

from delivery_pipeline.store.rows.common import ByIds


class DeliveryEvent(NamedTuple):
    """One outbox row (``delivery_events``, sql/migrations/008)."""

    id: int
    occurred_at: dt.datetime
    document_id: int
    person_id: int
    kind: str
    event: str
    reason: str | None
    chunks: int | None
    source: str
    claimed_by: str | None
    claimed_at: dt.datetime | None


class OutboxRuns(TypedDict):
    run_source: str
    run_claimant: str


class OutboxPending(TypedDict):
    lease: dt.timedelta
    push_claimant: str
    running_sources: list[str]
    running_claimants: list[str]
    limit: int


class OutboxClaimSource(TypedDict):
    source: str
    claimant: str
    limit: int


class OutboxClaimSeen(TypedDict):
    seen: Jsonb  # [{id, claimed_by}]
    claimant: str


class OutboxRelease(ByIds):
    claimant: str


class BySource(TypedDict):
    source: str


class Beat(NamedTuple):
    at: dt.datetime  # the database's now when the beat was left


class Heartbeat(NamedTuple):
    source: str
    seen_at: dt.datetime
    age_seconds: float
