"""The daily briefs: enqueue today's, abandon earlier days' that never arrived.

Both are one set-based statement each (``sql/queries/generation.sql``), with
the local-date logic in SQL (``brief_due_date``, ``AT TIME ZONE`` the
person's zone), so a morning with 100,000 subscribers is two statements, not
a loop. Run every 15 minutes by the ``daily_briefs`` schedule; idempotent
through the unique index ``documents_one_brief_per_day``. No Dagster here.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import psycopg

from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.generation import AbandonedBrief, EnqueuedBrief

log = logging.getLogger(__name__)


@dataclass
class BriefsResult:
    """What one enqueue pass did."""

    enqueued: list[EnqueuedBrief] = field(default_factory=list)
    abandoned: list[AbandonedBrief] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "enqueued": len(self.enqueued),
            "abandoned_stale": len(self.abandoned),
            "abandoned_by_state": dict(Counter(row.status for row in self.abandoned)),
        }


def brief_due_date(
    conn: psycopg.Connection[Any], at: dt.datetime, time_zone: str, brief_local_time: dt.time
) -> dt.date | None:
    """The local date whose brief is due at ``at`` (None before the brief time)."""
    return QUERIES.brief_due_date.one(
        conn, {"at": at, "time_zone": time_zone, "brief_local_time": brief_local_time}
    )


def abandon_stale_briefs(
    conn: psycopg.Connection[Any], *, lease: dt.timedelta, at: dt.datetime | None = None
) -> list[AbandonedBrief]:
    """Abandon (``stale``) open briefs for a day already over in their person's zone.

    Includes briefs waiting on a knock reply, which the eligibility view never
    shows and so the sweep never abandons. ``lease``: a brief under a live
    delivery claim is left to its sender.
    """
    return QUERIES.abandon_stale_briefs.all(conn, {"at": at, "lease": lease})


def enqueue_daily_briefs(
    conn: psycopg.Connection[Any], *, at: dt.datetime | None = None
) -> list[EnqueuedBrief]:
    """A pending brief for each opted-in person whose brief time has passed today (local)."""
    return QUERIES.enqueue_daily_briefs.all(conn, {"at": at})


def run_briefs(
    conn: psycopg.Connection[Any], *, lease: dt.timedelta, at: dt.datetime | None = None
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
