"""A document knocked for and waiting on its person's reply, put there through the data.

The knock's clock is moved into the past (nothing sleeps): the document was
knocked for ``knock_age_seconds`` ago and waits since, and the person's one
knock of the day is spent as long ago.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg

from delivery_pipeline.store.queries import QUERIES


def mark_knocked(
    conn: psycopg.Connection[Any],
    document_id: int,
    person_id: int,
    knock_age_seconds: float,
    wamid: str,
) -> None:
    """The document's knock (message ``wamid``) went out ``knock_age_seconds`` ago."""
    conn.execute(
        "UPDATE documents SET knock_sent_at = now() - make_interval(secs => %(a)s::float8), "
        "knock_message_id = %(w)s, "
        "awaiting_reply_since = now() - make_interval(secs => %(a)s::float8) WHERE id = %(id)s",
        {"a": knock_age_seconds, "w": wamid, "id": document_id},
    )
    conn.execute(
        "UPDATE people SET last_knock_at = now() - make_interval(secs => %(a)s::float8) "
        "WHERE id = %(p)s",
        {"a": knock_age_seconds, "p": person_id},
    )


def knocked_document(conn: psycopg.Connection[Any], phone: str, knock_age_seconds: float) -> int:
    """A person at ``phone`` who never wrote, and a plan knocked for and waiting on
    their reply; returns the document's id."""
    person = QUERIES.insert_person.one(
        conn,
        {
            "phone": phone,
            "name": "Ana",
            "locale": "en",
            "time_zone": "UTC",
            "brief_opt_in": False,
            "brief_local_time": dt.time(7),
            "phone_number_id": None,
        },
    )
    assert person is not None
    document = QUERIES.insert_ready_document.one(
        conn,
        {
            "person_id": person.id,
            "kind": "plan",
            "for_date": None,
            "body": "Your plan.",
            "needs_review": False,
        },
    )
    assert document is not None
    mark_knocked(conn, document.id, person.id, knock_age_seconds, f"wamid.knock.{document.id}")
    return document.id
