"""The daily briefs: enqueue today's, abandon earlier days' that never arrived.

Both are one set-based statement each (``sql/queries_generation.sql``), with
the local-date logic in SQL (``brief_due_date``, ``AT TIME ZONE`` the
person's zone), so a morning with 100,000 subscribers is two statements, not
a loop. Run every 15 minutes by the ``daily_briefs`` schedule; idempotent
through the unique index ``documents_one_brief_per_day``. No Dagster here.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.rows import DictRow

from delivery_pipeline.store.queries import QUERIES

log = logging.getLogger(__name__)


@dataclass
class BriefsResult:
    """What one enqueue pass did."""

    enqueued: list[dict[str, Any]] = field(default_factory=list)
    abandoned: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "enqueued": len(self.enqueued),
            "abandoned_stale": len(self.abandoned),
            "abandoned_by_state": _count_by(self.abandoned, "status"),
        }


def _count_by(rows: list[dict[str, Any]], key: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row[key]] = counts.get(row[key], 0) + 1
    return counts


def brief_due_date(
    conn: psycopg.Connection[DictRow], at: dt.datetime, time_zone: str, brief_local_time: dt.time
) -> dt.date | None:
    """The local date whose brief is due at ``at`` (None before the brief time)."""
    row = conn.execute(
        QUERIES.brief_due_date,
        {"at": at, "time_zone": time_zone, "brief_local_time": brief_local_time},
    ).fetchone()
    assert row is not None  # a SELECT without FROM: always one row
    for_date: dt.date | None = row["for_date"]
    return for_date


def abandon_stale_briefs(
    conn: psycopg.Connection[DictRow], *, lease: dt.timedelta, at: dt.datetime | None = None
) -> list[dict[str, Any]]:
    """Abandon (``stale``) open briefs for a day already over in their person's zone.

    Includes briefs waiting on a knock reply, which the eligibility view never
    shows and so the sweep never abandons. ``lease``: a brief under a live
    delivery claim is left to its sender.
    """
    return conn.execute(QUERIES.abandon_stale_briefs, {"at": at, "lease": lease}).fetchall()


def enqueue_daily_briefs(
    conn: psycopg.Connection[DictRow], *, at: dt.datetime | None = None
) -> list[dict[str, Any]]:
    """A pending brief for each opted-in person whose brief time has passed today (local)."""
    return conn.execute(QUERIES.enqueue_daily_briefs, {"at": at}).fetchall()


def run_briefs(
    conn: psycopg.Connection[DictRow], *, lease: dt.timedelta, at: dt.datetime | None = None
) -> BriefsResult:
    """Abandon yesterday's stragglers, then enqueue today's briefs (``at``: now)."""
    result = BriefsResult(
        abandoned=abandon_stale_briefs(conn, lease=lease, at=at),
        enqueued=enqueue_daily_briefs(conn, at=at),
    )
    if result.abandoned:
        log.info("abandoned %d stale briefs", len(result.abandoned))
    if result.enqueued:
        log.info("enqueued %d daily briefs", len(result.enqueued))
    return result
