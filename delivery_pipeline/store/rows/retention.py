"""Parameters and rows of ``sql/queries/retention.sql``: history pruned in batches."""

import datetime as dt
from typing import NamedTuple, NotRequired, TypedDict


class PruneBatch(TypedDict):
    """One prune batch: rows older than ``keep``, after the previous batch's last key
    (all None: from the oldest). The key is an id or a text, per table; only
    status_events' has a third part, which the other tables' queries do not read."""

    keep: dt.timedelta
    limit: int
    after_at: dt.datetime | None
    after_key: int | str | None
    after_sub: NotRequired[str | None]


class BatchPruned(NamedTuple):
    """What one prune batch did, and the key the next one continues after."""

    deleted: int
    examined: int
    after_at: dt.datetime | None
    after_key: int | str | None
    after_sub: str | None


class OldestKept(NamedTuple):
    """How old each pruned table's oldest row is (seconds; None: the table is empty)."""

    raw_webhooks: float | None
    status_events: float | None
    inbound_messages: float | None
    ops_alerts: float | None
    document_files: float | None
