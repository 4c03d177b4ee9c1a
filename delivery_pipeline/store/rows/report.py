"""Rows of ``sql/queries/report.sql``: the daily delivery report's raw rows, and what came
of each knock (026)."""

import datetime as dt
from typing import NamedTuple


class ReportDocument(NamedTuple):
    id: int
    kind: str
    generated_at: dt.datetime
    delivered_at: dt.datetime | None
    generated_in_day: bool | None
    delivered_in_day: bool | None
    phone_number_id: str  # '' before its first claim (sql/migrations/027)
    way: str  # how it went (sql/migrations/039); '' while not delivered


class ReportChunk(NamedTuple):
    document_id: int
    chunk_index: int
    state: str
    delivered: bool
    read: bool
    phone_number_id: str  # '' for a document claimed before sql/migrations/027


class ReportKnock(NamedTuple):
    id: int
    person_id: int
    knock_sent_at: dt.datetime
    delivered: bool
    seen: bool
    answered: bool


class ReportAbandoned(NamedTuple):
    id: int
    reason: str | None


class KnockOutcome(NamedTuple):
    """A knock that left in the day, and what came of it (one outcome)."""

    id: int
    reminder: bool
    phone_number_id: str  # '' for a knock sent before sql/migrations/027
    outcome: str  # answered, later, stop, not_wanted, not_seen, expired, never_delivered


class KnockPresses(NamedTuple):
    action: str
    via: str
    presses: int
