"""Delivery events: the outbox rows of ``sql/migrations/008`` as events on ``delivered_documents``.

Every delivery, knock, abandonment and un-delivery of a document is a row of
``delivery_events``, written by the database in the transaction that makes
the transition, whoever makes it; ``source`` is the writer's
``application_name``. Recording therefore never blocks or fails a delivery,
and nothing is lost while Dagster is away: the rows wait.

Three reporters turn rows into events on the ``delivered_documents`` asset
(one event per batch of rows: counts that plot, the documents, and the ids
of the rows it stands for, ``outbox_ids``). Each claims rows before it
reports them, so no two report the same row:

* the webhook service pushes the rows its own sessions wrote to the Dagster
  webserver as soon as it wrote them (claimed ``push:<uuid>``; reported on a
  200; freed at once when the webserver refused or was not reached; held for
  ``PUSH_LEASE`` when the answer never came, since the event may still land);
* a ``deliver_documents`` run claims the rows its own sweep wrote
  (``run:<run id>``) and puts them in its materialization;
* the ``record_delivery_events`` sensor takes the rest: other writers' rows,
  pushes whose claim lapsed, the rows of runs that ended, and its own
  earlier ones. It only ever runs one tick at a time.

A row is reported once an event naming it is in Dagster's event log, and that
log, not our flag, is the truth: before the sensor reports a row someone
claimed earlier, it asks the log whether an event already names it (a push
whose answer was lost, a run that materialized, its own previous tick) and
only marks it. So every row reaches the timeline once, whoever crashed where.
A reported row is kept ``OUTBOX_KEEP`` and then deleted by the sensor: the
outbox stays the size of a week, however long the system runs.
No Dagster here: ``dagster_defs.outbox_sensor`` asks the log, ``service.timeline_push``
pushes.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.record import DeliveryEvent

# The asset the events go to (the Dagster layer names its asset with this).
DELIVERED_DOCUMENTS = "delivered_documents"
# The metadata entry that names the rows an event stands for.
OUTBOX_IDS = "outbox_ids"

# Who wrote a row: the application_name of the session that made the transition.
SERVICE_SOURCE = "delivery-service"
CLI_SOURCE = "delivery-pipeline"
RUN_SOURCE_PREFIX = "dagster-run:"

SENSOR_CLAIMANT = "sensor"
RUN_CLAIMANT_PREFIX = "run:"
PUSH_CLAIMANT_PREFIX = "push:"

# A push the webserver refused, or never received, frees its rows at once. One whose
# answer never came may still land (the webserver retries its storage): its rows
# wait this long before the sensor looks them up in the event log and reports the rest.
PUSH_LEASE = dt.timedelta(minutes=10)
# Rows per event: the event lists its documents, so keep it readable.
BATCH_SIZE = 200
# A run's materialization lists at most this many documents (its counts and
# outbox ids stay complete).
RUN_LISTED_DOCUMENTS = 1000
# Rows the sensor looks at per tick.
DRAIN_LIMIT = 2000
# Dagster's processes and the database may disagree on the time this much.
CLOCK_SKEW = dt.timedelta(minutes=5)
# A reported row is history: the asset's timeline is the record. The outbox
# keeps it this long for whoever looks in SQL, then the sensor forgets it,
# at most FORGET_LIMIT a tick (more than the fleet's top rate writes in one).
OUTBOX_KEEP = dt.timedelta(days=7)
FORGET_LIMIT = 5000


def run_source(run_id: str) -> str:
    """The application_name of a Dagster run's sessions (at most 63 characters)."""
    return f"{RUN_SOURCE_PREFIX}{run_id}"


def listed(e: DeliveryEvent) -> dict[str, Any]:
    """One row as the event lists it (plain JSON values)."""
    return {
        "document": e.document_id,
        "person": e.person_id,
        "kind": e.kind,
        "event": e.event,
        "reason": e.reason,
        "chunks": e.chunks,
        "at": e.occurred_at.astimezone(dt.UTC).isoformat(timespec="seconds"),
    }


@dataclass(frozen=True)
class EventRecord:
    """What one event on ``delivered_documents`` says: plain JSON values, so the
    webserver's REST endpoint and a sensor show it alike."""

    description: str
    metadata: dict[str, Any]
    ids: list[int]


# ── rows into events ────────────────────────────────────────────────────


def compact_ids(ids: Iterable[int]) -> str:
    """``[1, 2, 3, 7]`` → ``"1-3,7"``: a run's thousands of ids stay short."""
    ordered = sorted(set(ids))
    parts: list[str] = []
    start = prev = None
    for value in [*ordered, None]:
        if value is not None and prev is not None and value == prev + 1:
            prev = value
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = value
    return ",".join(parts)


def expand_ids(text: str) -> set[int]:
    """The inverse of ``compact_ids``."""
    ids: set[int] = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        ids.update(range(int(first), int(last or first) + 1))
    return ids


def describe(events: Sequence[DeliveryEvent], source: str) -> str:
    if len(events) == 1:
        e = events[0]
        what = {"delivered": f"{e.chunks} chunks", "abandoned": e.reason, "undelivered": e.reason}
        detail = ", ".join(filter(None, [e.kind, what.get(e.event)]))
        return f"{source}: document {e.document_id} {e.event} ({detail})"
    counts = Counter(e.event for e in events)
    return f"{source}: " + ", ".join(f"{n} {event}" for event, n in sorted(counts.items()))


def record_for(
    events: Sequence[DeliveryEvent],
    *,
    now: dt.datetime | None = None,
    listed_limit: int | None = None,
) -> EventRecord:
    """The event for some rows: counts (the UI plots them), the documents, the row ids."""
    now = now or dt.datetime.now(dt.UTC)
    counts = Counter(e.event for e in events)
    sources = sorted({e.source for e in events})
    source = sources[0] if len(sources) == 1 else ", ".join(sources)
    shown = [listed(e) for e in events[:listed_limit]]
    metadata: dict[str, Any] = {
        "delivered": counts["delivered"],
        "knocked": counts["knocked"],
        "abandoned": counts["abandoned"],
        "undelivered": counts["undelivered"],
        "chunks_delivered": sum(e.chunks or 0 for e in events if e.event == "delivered"),
        "recorded_after_seconds": round(
            max((now - e.occurred_at).total_seconds() for e in events) if events else 0.0, 3
        ),
        "source": source,
        "documents": shown,
        OUTBOX_IDS: compact_ids(e.id for e in events),
    }
    if len(shown) < len(events):
        metadata["documents_listed"] = f"the first {len(shown)} of {len(events)}"
    return EventRecord(describe(events, source), metadata, [e.id for e in events])


def batches(events: Sequence[DeliveryEvent], size: int = BATCH_SIZE) -> list[list[DeliveryEvent]]:
    """Rows grouped by writer, in order, at most ``size`` per event."""
    by_source: dict[str, list[DeliveryEvent]] = {}
    for event in events:
        by_source.setdefault(event.source, []).append(event)
    return [rows[i : i + size] for rows in by_source.values() for i in range(0, len(rows), size)]


# ── claiming and reporting (synchronous callers: the sensor, a run) ─────


def claim_source(
    conn: psycopg.Connection[Any], source: str, claimant: str, *, limit: int = DRAIN_LIMIT
) -> list[DeliveryEvent]:
    """Claim the unclaimed rows one writer made (a run its own sweep's)."""
    claimed: list[DeliveryEvent] = []
    while True:
        rows = QUERIES.outbox_claim_source.all(
            conn, {"source": source, "claimant": claimant, "limit": limit}
        )
        claimed.extend(rows)
        if len(rows) < limit:
            return sorted(claimed, key=lambda e: e.id)


def mark_reported(conn: psycopg.Connection[Any], ids: Iterable[int]) -> None:
    QUERIES.outbox_reported.run(conn, {"ids": sorted(ids)})


@dataclass
class Drain:
    """What one sensor tick does: events to report, rows found already reported."""

    records: list[EventRecord]
    confirmed: int = 0
    forgotten: int = 0

    def summary(self) -> str:
        rows = sum(len(r.ids) for r in self.records)
        if not rows and not self.confirmed:
            text = "Nothing to record: every delivery is on the timeline or being reported"
        else:
            text = f"{len(self.records)} events ({rows} deliveries) to record"
            if self.confirmed:
                text += f"; {self.confirmed} found already on the timeline"
        if self.forgotten:
            text += f"; {self.forgotten} reported over {OUTBOX_KEEP.days} days ago forgotten"
        return text + "."


def drain(
    conn: psycopg.Connection[Any],
    *,
    on_timeline: Callable[[dt.datetime], set[int]],
    runs_in_flight: Callable[[set[str]], set[str]],
    limit: int = DRAIN_LIMIT,
) -> Drain:
    """One tick of the sensor: what to report now, without reporting anything twice.

    ``on_timeline(since)``: the outbox ids named by events stored since then.
    ``runs_in_flight(run_ids)``: those of the runs that are still queued or running.
    The rows a live push or a running delivery run holds are left to them.
    """
    names = QUERIES.outbox_runs.all(
        conn, {"run_source": RUN_SOURCE_PREFIX + "%", "run_claimant": RUN_CLAIMANT_PREFIX + "%"}
    )
    runs = {name.split(":", 1)[1] for name in names}
    live = runs_in_flight(runs) if runs else set()
    rows = QUERIES.outbox_pending.all(
        conn,
        {
            "lease": PUSH_LEASE,
            "push_claimant": PUSH_CLAIMANT_PREFIX + "%",
            "running_sources": [run_source(run) for run in live],
            "running_claimants": [RUN_CLAIMANT_PREFIX + run for run in live],
            "limit": limit,
        },
    )
    # Claimed before: an event may already name them. Ask the log, not our flag.
    handed_over = [row for row in rows if row.claimed_by is not None]
    found: set[int] = set()
    if handed_over:
        since = min(row.claimed_at or row.occurred_at for row in handed_over) - CLOCK_SKEW
        found = on_timeline(since) & {row.id for row in handed_over}
        if found:
            mark_reported(conn, found)
    seen = [{"id": row.id, "claimed_by": row.claimed_by} for row in rows if row.id not in found]
    claimed = (
        QUERIES.outbox_claim_seen.all(conn, {"seen": Jsonb(seen), "claimant": SENSOR_CLAIMANT})
        if seen
        else []
    )
    claimed.sort(key=lambda e: e.id)
    return Drain(
        [record_for(batch) for batch in batches(claimed)],
        confirmed=len(found),
        forgotten=forget_reported(conn),
    )


def forget_reported(
    conn: psycopg.Connection[Any], *, keep: dt.timedelta = OUTBOX_KEEP, limit: int = FORGET_LIMIT
) -> int:
    """Delete the oldest rows reported more than ``keep`` ago; how many went."""
    return QUERIES.outbox_forget.run(conn, {"keep": keep, "limit": limit})
