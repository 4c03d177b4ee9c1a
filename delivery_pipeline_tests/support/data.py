"""Test data, with the clock controlled through the data (ages, not sleeps)."""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from typing import Any

import psycopg

from delivery_pipeline.service.ingest import apply_payload
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.db import connect_async
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing import payloads
from delivery_pipeline.testing.plans import plan_body as plan_body  # where the tests import it

_numbers = itertools.count(1)


def new_phone(prefix: str = "+1555") -> str:
    """A number no other test in this session uses."""
    return f"{prefix}{next(_numbers):07d}"


def add_person(
    conn: psycopg.Connection,
    *,
    phone: str | None = None,
    name: str = "Ana",
    locale: str = "en",
    time_zone: str = "UTC",
    inbound_age_seconds: float | None = 60,
    brief_opt_in: bool = False,
    brief_local_time: str = "07:00",
    phone_number_id: str | None = None,
) -> dict[str, Any]:
    """A person; ``inbound_age_seconds`` None means they never wrote (window closed);
    ``phone_number_id`` the business number they are bound to (None: the default)."""
    person = conn.execute(
        QUERIES.insert_person.sql,
        {
            "phone": phone or new_phone(),
            "name": name,
            "locale": locale,
            "time_zone": time_zone,
            "brief_opt_in": brief_opt_in,
            "brief_local_time": brief_local_time,
            "phone_number_id": phone_number_id,
        },
    ).fetchone()
    if inbound_age_seconds is not None:
        set_inbound_age(conn, person["id"], inbound_age_seconds)
    return person


def set_inbound_age(conn: psycopg.Connection, person_id: int, seconds: float | None) -> None:
    conn.execute(
        "UPDATE people SET last_inbound_at = CASE WHEN %(s)s::float8 IS NULL THEN NULL "
        "ELSE now() - make_interval(secs => %(s)s::float8) END WHERE id = %(id)s",
        {"s": seconds, "id": person_id},
    )


def add_document(
    conn: psycopg.Connection,
    person_id: int,
    body: str,
    *,
    kind: str = "plan",
    for_date: Any = None,
    needs_review: bool = False,
) -> dict[str, Any]:
    """A generated document, ready for delivery (``needs_review``: awaiting review)."""
    return conn.execute(
        QUERIES.insert_ready_document.sql,
        {
            "person_id": person_id,
            "kind": kind,
            "for_date": for_date,
            "body": body,
            "needs_review": needs_review,
        },
    ).fetchone()


def document(conn: psycopg.Connection, document_id: int) -> dict[str, Any]:
    return conn.execute(QUERIES.document_by_id.sql, {"id": document_id}).fetchone()


def chunks(conn: psycopg.Connection, document_id: int) -> list[dict[str, Any]]:
    return conn.execute(QUERIES.document_chunks.sql, {"document_id": document_id}).fetchall()


def person_writes(
    database_url: str, sandbox: Any, person: dict[str, Any], text: str = "hi!"
) -> None:
    """The person writes: their phone sends it in the sandbox (its window opens), and
    the inbound webhook is applied through the service's own ingest, as in production."""
    sandbox.say(person["phone"], text)
    inbound_arrives(database_url, person, text)


def inbound_arrives(database_url: str, person: dict[str, Any], text: str = "hi!") -> None:
    """The webhook of the person's message reaches the service's ingest."""
    body = payloads.inbound(person["phone"], f"wamid.test-{uuid.uuid4().hex}", text)
    asyncio.run(_ingest(database_url, json.loads(body)))


async def _ingest(database_url: str, payload: dict[str, Any]) -> None:
    async with await connect_async(database_url) as conn:
        await apply_payload(conn, payload, DeliverySettings())


def state_of(conn: psycopg.Connection, document_id: int) -> str:
    """The document's state as the Dagster UI and the checks name it (document_states)."""
    row = conn.execute("SELECT state FROM document_states WHERE id = %s", (document_id,)).fetchone()
    assert row is not None, f"no document {document_id}"
    return str(row["state"])


def knock_rows(conn: psycopg.Connection, person_id: int) -> list[dict[str, Any]]:
    """The person's knocks, oldest first, each with the documents it knocked for."""
    return conn.execute(
        "SELECT k.*, array_agg(kd.document_id) AS document_ids FROM knocks k "
        "JOIN knock_documents kd ON kd.knock_id = k.id WHERE k.person_id = %s "
        "GROUP BY k.id ORDER BY k.id",
        (person_id,),
    ).fetchall()
