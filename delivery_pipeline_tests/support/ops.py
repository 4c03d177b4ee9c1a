"""Stranding one document (or person, or the sender) per waiting state, and fixing it.

The clock is controlled through the data: timestamps are moved into the past,
nothing sleeps. Each ``Stranding`` says which check it trips, with which
severity, and how to put things right.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from delivery_pipeline.settings import CheckSettings, Settings
from delivery_pipeline.store.review import Decision, decide
from delivery_pipeline.testing.knocks import mark_knocked
from delivery_pipeline_tests.support.data import add_document, add_person
from delivery_pipeline_tests.support.review import awaiting

HOUR = 3600
TIER_LIMIT = CheckSettings().tier_limit  # WHATSAPP_MESSAGING_TIER's default, 250


def ago(conn: psycopg.Connection, seconds: float) -> Any:
    return conn.execute(
        "SELECT now() - make_interval(secs => %(s)s::float8) AS t", {"s": seconds}
    ).fetchone()["t"]


def pending(conn: psycopg.Connection, age_seconds: float) -> int:
    person = add_person(conn)
    doc = conn.execute(
        "INSERT INTO documents (person_id, kind, created_at) "
        "VALUES (%(p)s, 'plan', now() - make_interval(secs => %(a)s::float8)) RETURNING id",
        {"p": person["id"], "a": age_seconds},
    ).fetchone()
    return doc["id"]


def generating(conn: psycopg.Connection, claimed_seconds_ago: float) -> int:
    doc_id = pending(conn, claimed_seconds_ago + 60)
    conn.execute(
        "UPDATE documents SET status = 'generating', generation_attempts = 1, "
        "generation_claim_token = gen_random_uuid(), "
        "generation_claimed_at = now() - make_interval(secs => %(a)s::float8), "
        "next_generation_at = now() - make_interval(secs => %(a)s::float8) + interval '10 min' "
        "WHERE id = %(id)s",
        {"a": claimed_seconds_ago, "id": doc_id},
    )
    return doc_id


def undelivered(
    conn: psycopg.Connection,
    age_seconds: float,
    *,
    backoff_seconds: float | None = None,
    inbound_age_seconds: float = 60,
) -> int:
    """A generated document nothing delivered; ``backoff_seconds``: due that far in the future."""
    person = add_person(conn, inbound_age_seconds=inbound_age_seconds)
    doc = add_document(conn, person["id"], "Your plan.")
    conn.execute(
        "UPDATE documents SET generated_at = now() - make_interval(secs => %(a)s::float8), "
        "created_at = now() - make_interval(secs => %(a)s::float8), "
        "next_attempt_at = CASE WHEN %(b)s::float8 IS NULL "
        "  THEN now() - make_interval(secs => %(a)s::float8) "
        "  ELSE now() + make_interval(secs => %(b)s::float8) END, "
        "delivery_attempts = CASE WHEN %(b)s::float8 IS NULL THEN 0 ELSE 2 END "
        "WHERE id = %(id)s",
        {"a": age_seconds, "b": backoff_seconds, "id": doc["id"]},
    )
    return doc["id"]


def knocked(
    conn: psycopg.Connection,
    knock_age_seconds: float,
    *,
    delivered: bool = False,
    read: bool = False,
    answered: bool = False,
    wamid: str | None = None,
) -> int:
    """A document knocked for and waiting on the person's reply."""
    person = add_person(conn, inbound_age_seconds=None)
    doc = add_document(conn, person["id"], "Your plan.")
    wamid = wamid or f"wamid.knock.{doc['id']}"
    mark_knocked(conn, doc["id"], person["id"], knock_age_seconds, wamid)
    if delivered or read:
        add_status(conn, wamid, "delivered", knock_age_seconds - 5)
    if read:
        add_status(conn, wamid, "read", knock_age_seconds - 10)
    if answered:
        answer(conn, doc["id"], knock_age_seconds - 60)
    return doc["id"]


def knocked_phone(conn: psycopg.Connection, knock_age_seconds: float) -> tuple[int, str]:
    """``knocked``, and the number the person would reply from: (document id, phone)."""
    doc = knocked(conn, knock_age_seconds)
    row = conn.execute(
        "SELECT p.phone FROM documents d JOIN people p ON p.id = d.person_id WHERE d.id = %(id)s",
        {"id": doc},
    ).fetchone()
    return doc, row["phone"]


def add_status(conn: psycopg.Connection, wamid: str, status: str, age_seconds: float) -> None:
    conn.execute(
        "INSERT INTO status_events (wa_message_id, status, occurred_at, payload) "
        "VALUES (%(w)s, %(s)s, now() - make_interval(secs => %(a)s::float8), '{}') "
        "ON CONFLICT DO NOTHING",
        {"w": wamid, "s": status, "a": age_seconds},
    )


def answer(conn: psycopg.Connection, document_id: int, age_seconds: float) -> None:
    """The document's person wrote ``age_seconds`` ago (after the knock)."""
    conn.execute(
        "INSERT INTO inbound_messages (wa_message_id, person_id, message_type, body, sent_at, "
        "payload) SELECT 'wamid.in.' || %(id)s || '.' || %(a)s, person_id, 'text', 'hi', "
        "now() - make_interval(secs => %(a)s::float8), '{}' FROM documents WHERE id = %(id)s",
        {"id": document_id, "a": age_seconds},
    )


def abandoned(conn: psycopg.Connection, reason: str, age_seconds: float = 600) -> int:
    doc_id = undelivered(conn, age_seconds + 60)
    conn.execute(
        "UPDATE documents SET abandoned_at = now() - make_interval(secs => %(a)s::float8), "
        "abandon_reason = %(r)s WHERE id = %(id)s",
        {"a": age_seconds, "r": reason, "id": doc_id},
    )
    return doc_id


def generation_failed(conn: psycopg.Connection) -> int:
    doc_id = pending(conn, 600)
    conn.execute(
        "UPDATE documents SET status = 'failed', generation_error = 'boom' WHERE id = %(id)s",
        {"id": doc_id},
    )
    return doc_id


def knocked_people(conn: psycopg.Connection, count: int, age_seconds: float = HOUR) -> list[int]:
    ids = []
    for _ in range(count):
        person = add_person(conn, inbound_age_seconds=None)
        conn.execute(
            "UPDATE people SET last_knock_at = now() - make_interval(secs => "
            "%(a)s::float8) WHERE id = %(id)s",
            {"a": age_seconds, "id": person["id"]},
        )
        ids.append(person["id"])
    return ids


def pause_sender(conn: psycopg.Connection) -> int:
    """Sending paused by a global error, with one (young) document held behind it."""
    doc_id = undelivered(conn, 60, backoff_seconds=60)
    conn.execute(
        "UPDATE sender_state SET paused_at = now() - interval '5 minutes', "
        "pause_code = 190, pause_reason = 'access token expired'"
    )
    return doc_id


def deliver(conn: psycopg.Connection, document_id: int) -> None:
    """Fixed: generated and delivered now, nothing waiting."""
    conn.execute(
        "UPDATE documents SET status = 'succeeded', body = coalesce(body, 'x'), "
        "generated_at = coalesce(generated_at, now()), generation_claim_token = NULL, "
        "generation_claimed_at = NULL, awaiting_reply_since = NULL, delivered_at = now(), "
        "claim_token = NULL, claimed_at = NULL WHERE id = %(id)s",
        {"id": document_id},
    )


@dataclass(frozen=True)
class Stranding:
    """One waiting state stranded: the check it trips and how to fix it."""

    check: str
    severity: str  # "warning" | "error"
    strand: Callable[[psycopg.Connection], Any]
    fix: Callable[[psycopg.Connection, Any], None]
    env: tuple[tuple[str, str], ...] = ()

    def settings(self) -> Settings:
        """The settings the check is evaluated with: the defaults plus ``env``."""
        return Settings.from_env(dict(self.env))


def _fix_knock(conn: psycopg.Connection, doc_id: int) -> None:
    add_status(conn, f"wamid.knock.{doc_id}", "delivered", 30)
    answer(conn, doc_id, 20)
    deliver(conn, doc_id)


def unrecorded_delivery(conn: psycopg.Connection, age_seconds: float) -> int:
    """A delivery the outbox holds and no reporter put on Dagster's timeline."""
    doc_id = undelivered(conn, age_seconds + 60)
    deliver(conn, doc_id)  # the trigger writes the outbox row
    conn.execute(
        "UPDATE delivery_events SET occurred_at = now() - make_interval(secs => %(a)s::float8) "
        "WHERE document_id = %(id)s",
        {"a": age_seconds, "id": doc_id},
    )
    return doc_id


def _record(conn: psycopg.Connection, doc_id: int) -> None:
    conn.execute(
        "UPDATE delivery_events SET reported_at = now() WHERE document_id = %(id)s", {"id": doc_id}
    )


def _unpause(conn: psycopg.Connection, _: Any) -> None:
    conn.execute(
        "UPDATE sender_state SET paused_at = NULL, pause_code = NULL, "
        "pause_reason = NULL, resumed_at = now()"
    )


def approve(conn: psycopg.Connection, document_id: int) -> None:
    """Fixed: a reviewer approved it (it goes to delivery, due now)."""
    decide(conn, Decision.approve(document_id, "fixer"))


STRANDINGS = {
    "awaiting_review_too_long": Stranding(
        # WARN: the reviewers' own alert only (ERROR also escalates to ops)
        "awaiting_review_too_long",
        "warning",
        lambda c: awaiting(c, age_seconds=40 * 60),
        approve,
    ),
    "pending_too_long": Stranding(
        "pending_too_long", "error", lambda c: pending(c, 2 * HOUR), deliver
    ),
    "generating_too_long": Stranding(
        "generating_too_long", "error", lambda c: generating(c, 2 * HOUR), deliver
    ),
    "undelivered_stranded": Stranding(
        "undelivered_stranded", "error", lambda c: undelivered(c, 3 * HOUR), deliver
    ),
    "awaiting_reply": Stranding(
        "awaiting_reply",
        "error",
        lambda c: knocked(c, HOUR),
        _fix_knock,
        env=(("CHECK_KNOCK_MIN_SAMPLE", "1"),),
    ),
    "abandoned_or_failed": Stranding(
        "abandoned_or_failed",
        "warning",
        lambda c: abandoned(c, "undeliverable"),
        lambda c, doc_id: c.execute(
            "UPDATE documents SET abandoned_at = now() - interval '2 days' WHERE id = %(id)s",
            {"id": doc_id},
        ),
    ),
    "messaging_tier_headroom": Stranding(
        "messaging_tier_headroom",
        "error",
        # the default tier's limit reached: as many people knocked in the last 24 h
        lambda c: knocked_people(c, TIER_LIMIT),
        lambda c, ids: c.execute(
            "UPDATE people SET last_knock_at = now() - interval '25 hours' WHERE id = ANY(%(ids)s)",
            {"ids": ids},
        ),
    ),
    "sender_paused": Stranding("sender_paused", "error", pause_sender, _unpause),
    "delivery_events_unrecorded": Stranding(
        "delivery_events_unrecorded", "error", lambda c: unrecorded_delivery(c, HOUR), _record
    ),
}
