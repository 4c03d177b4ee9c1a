"""What a person's own message changes: their window, and the documents that
waited for it."""

from __future__ import annotations

import datetime as dt

import psycopg

from delivery_pipeline.store.db import QUERIES


def note_inbound(conn: psycopg.Connection, person_id: int, sent_at: dt.datetime) -> list[int]:
    """Open the person's window and put their awaiting documents back; returns their ids.

    Two statements on purpose, in this order: a knock being recorded
    concurrently locks the person row (``await_reply``), so it either sees the
    new ``last_inbound_at`` or has committed its ``awaiting_reply_since``
    before the second statement looks for it.
    """
    conn.execute(QUERIES.raise_last_inbound, {"person_id": person_id, "sent_at": sent_at})
    return [
        row["id"] for row in conn.execute(QUERIES.wake_awaiting_documents, {"person_id": person_id})
    ]
