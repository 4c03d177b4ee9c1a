"""What a person's own message changes: their window, and the documents that waited for it."""

from __future__ import annotations

import datetime as dt
from typing import Any

from psycopg import AsyncConnection

from delivery_pipeline.store.queries import QUERIES


async def note_inbound(conn: AsyncConnection[Any], person_id: int, sent_at: dt.datetime) -> None:
    """Open the person's window and put their documents waiting on a reply back in the queue.

    Two statements on purpose, in this order: a knock being recorded
    concurrently locks the person row (``await_reply``), so it either sees the
    new ``last_inbound_at`` or has committed its ``awaiting_reply_since``
    before the second statement looks for it.
    """
    await QUERIES.raise_last_inbound.one(conn, {"person_id": person_id, "sent_at": sent_at})
    await QUERIES.wake_awaiting_documents.all(conn, {"person_id": person_id})
