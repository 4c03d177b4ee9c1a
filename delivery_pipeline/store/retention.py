"""History kept for a while, not forever: the prune_history job's work.

``raw_webhooks``, ``status_events``, ``inbound_messages`` and ``ops_alerts``
lose their rows older than ``RETENTION_*_DAYS`` (``document_files``: older
than ``settings.DOCUMENT_FILES_DAYS``), the oldest first, a bounded
batch per statement (``sql/queries/retention.sql``, its indexes ``sql/migrations/017``),
the outbox's pattern (``watch.delivery_events.forget_reported``). A row something
still reads stays however old it is:

* the statuses of a knock whose document still waits on its person;
* each person's newest inbound message (their window and an unanswered
  knock's wait go back to it);
* every row of a check's alert episode that is still open (its newest row is
  the episode's state: open or not, severity, when to remind);
* the file of a document still on its way (a finished one's is drawn again
  from its body if a resend needs it; the body itself is never pruned).

Each batch continues after the last row the previous one looked at, so a row
that stays is looked at once a run. A run stops after ``max_batches`` per
table and says that more is left; the next day's run goes on. No Dagster here:
``dagster_defs.jobs`` runs it and shows the counts.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import psycopg

from delivery_pipeline.settings import RetentionSettings
from delivery_pipeline.store.queries import QUERIES, Query
from delivery_pipeline.store.rows.retention import BatchPruned, PruneBatch


@dataclass(frozen=True)
class Table:
    """A pruned table: its query and the rows per statement (raw bodies are up to
    4 MiB each, so fewer of them)."""

    name: str
    query: Query[PruneBatch, BatchPruned]
    batch: int


TABLES = (
    Table("raw_webhooks", QUERIES.prune_raw_webhooks, batch=50),
    Table("status_events", QUERIES.prune_status_events, batch=5000),
    Table("inbound_messages", QUERIES.prune_inbound_messages, batch=5000),
    Table("ops_alerts", QUERIES.prune_ops_alerts, batch=5000),
    # Rendered PDFs, tens of KB each (sql/migrations/037).
    Table("document_files", QUERIES.prune_document_files, batch=200),
)
# Batches per table and run: a run's work is bounded; a backlog beyond it (a
# first run over years of history) is the next runs'.
MAX_BATCHES = 1000


@dataclass
class Pruned:
    """What one run did to one table."""

    table: str
    keep_days: float
    deleted: int = 0
    # looked at, old enough, and kept: something still reads them
    kept: int = 0
    batches: int = 0
    # stopped at the run's bound with old rows not yet looked at
    more: bool = False
    oldest_age_seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "keep_days": self.keep_days,
            "deleted": self.deleted,
            "kept": self.kept,
            "batches": self.batches,
            "more": self.more,
            "oldest_age_seconds": self.oldest_age_seconds,
        }


@dataclass
class Retention:
    """What one run did, per table."""

    tables: list[Pruned] = field(default_factory=list)

    @property
    def deleted(self) -> int:
        return sum(t.deleted for t in self.tables)

    def summary(self) -> str:
        parts = [f"{t.table} {t.deleted}" + (" (more left)" if t.more else "") for t in self.tables]
        return f"Deleted {self.deleted} rows past their retention: " + ", ".join(parts) + "."


def prune_table(
    conn: psycopg.Connection[Any],
    table: Table,
    keep: dt.timedelta,
    *,
    batch: int | None = None,
    max_batches: int = MAX_BATCHES,
) -> Pruned:
    """Delete ``table``'s rows older than ``keep`` that nothing reads, oldest first."""
    limit = batch or table.batch
    pruned = Pruned(table.name, keep_days=keep.total_seconds() / 86400)
    after: BatchPruned | None = None
    while pruned.batches < max_batches:
        row = table.query.one(
            conn,
            {
                "keep": keep,
                "limit": limit,
                "after_at": after.after_at if after else None,
                "after_key": after.after_key if after else None,
                "after_sub": after.after_sub if after else None,
            },
        )
        assert row is not None
        pruned.batches += 1
        pruned.deleted += row.deleted
        pruned.kept += row.examined - row.deleted
        if row.examined < limit:
            return pruned
        after = row
    pruned.more = True
    return pruned


def prune_history(
    conn: psycopg.Connection[Any],
    settings: RetentionSettings,
    *,
    max_batches: int = MAX_BATCHES,
) -> Retention:
    """One run over every table (each batch its own short transaction: ``conn`` is
    in autocommit)."""
    keep = settings.keep()
    result = Retention(
        [prune_table(conn, table, keep[table.name], max_batches=max_batches) for table in TABLES]
    )
    oldest = QUERIES.retention_oldest.one(conn, {})
    ages = oldest._asdict() if oldest else {}
    for pruned in result.tables:
        pruned.oldest_age_seconds = ages.get(pruned.table)
    return result
