"""One eligibility definition: the guard, the sweep's claim and the view agree."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline_tests.support.data import add_document, add_person

pytestmark = pytest.mark.engine

LEASE = dt.timedelta(minutes=10)
WINDOW = dt.timedelta(hours=23, minutes=45)
PARAMS = {"lease": LEASE, "service_window": WINDOW}


def _case_doc(db, person_kwargs=None, **doc_updates):
    person = add_person(db, **(person_kwargs or {}))
    kind = doc_updates.pop("kind", "plan")
    for_date = doc_updates.pop("for_date", None)
    doc = add_document(db, person["id"], "Body.", kind=kind, for_date=for_date)
    if doc_updates:
        assignments = ", ".join(f"{column} = {expr}" for column, expr in doc_updates.items())
        db.execute(f"UPDATE documents SET {assignments} WHERE id = %s", (doc["id"],))
    return doc


# (name, person kwargs, document column → SQL expression, expected action or None)
CASES = [
    ("queued, window open", {}, {}, "deliver"),
    ("queued, window closed, never knocked", {"inbound_age_seconds": None}, {}, "knock"),
    ("window closed 25h ago", {"inbound_age_seconds": 25 * 3600}, {}, "knock"),
    ("inside the safety margin", {"inbound_age_seconds": 24 * 3600 - 60}, {}, "knock"),
    (
        "knocked, awaiting the reply",
        {"inbound_age_seconds": None},
        {"knock_sent_at": "now()", "awaiting_reply_since": "now()"},
        None,
    ),
    (
        "knocked, window closed again, not awaiting",
        {"inbound_age_seconds": None},
        {"knock_sent_at": "now() - interval '2 days'"},
        "knock",
    ),
    ("backoff not elapsed", {}, {"next_attempt_at": "now() + interval '5 minutes'"}, None),
    ("backoff elapsed", {}, {"next_attempt_at": "now() - interval '1 second'"}, "deliver"),
    ("claimed, lease fresh", {}, {"claim_token": "gen_random_uuid()", "claimed_at": "now()"}, None),
    (
        "claimed, lease expired",
        {},
        {"claim_token": "gen_random_uuid()", "claimed_at": "now() - interval '11 minutes'"},
        "deliver",
    ),
    ("delivered", {}, {"delivered_at": "now()"}, None),
    ("abandoned", {}, {"abandoned_at": "now()", "abandon_reason": "'operator'"}, None),
    ("pending generation", {}, {"status": "'pending'"}, None),
    ("generation failed", {}, {"status": "'failed'"}, None),
    (
        "brief for yesterday (person's zone)",
        {"time_zone": "Asia/Tokyo"},
        {"kind": "daily_brief", "for_date": "yesterday"},
        "abandon_stale",
    ),
    (
        "brief for today (person's zone)",
        {"time_zone": "America/Los_Angeles"},
        {"kind": "daily_brief", "for_date": "today"},
        "deliver",
    ),
    (
        "stale brief beats the closed window",
        {"inbound_age_seconds": None, "time_zone": "UTC"},
        {"kind": "daily_brief", "for_date": "yesterday"},
        "abandon_stale",
    ),
    ("person opted out", {}, {}, "abandon_unreachable"),
    ("platform refused after their last message", {}, {}, "knock"),
]


@pytest.mark.parametrize(
    ("name", "person_kwargs", "updates", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_guard_view_and_claim_agree(db, name, person_kwargs, updates, expected):
    updates = dict(updates)
    if updates.get("for_date") in ("today", "yesterday"):
        tz = person_kwargs.get("time_zone", "UTC")
        today = db.execute("SELECT (now() AT TIME ZONE %s)::date AS d", (tz,)).fetchone()["d"]
        updates["for_date"] = (
            today if updates["for_date"] == "today" else today - dt.timedelta(days=1)
        )
    doc = _case_doc(db, person_kwargs, **updates)
    if name == "person opted out":
        db.execute("UPDATE people SET opted_out_at = now() WHERE id = %s", (doc["person_id"],))
    if name.startswith("platform refused"):
        db.execute("UPDATE people SET window_refused_at = now() WHERE id = %s", (doc["person_id"],))

    guard = db.execute(QUERIES.guard_exists, PARAMS).fetchone()["eligible"]
    view = db.execute(QUERIES.eligible_ids, PARAMS).fetchall()
    claimed = db.execute(
        QUERIES.claim_batch,
        {
            **PARAMS,
            "document_id": None,
            "person_id": None,
            "limit": 10,
            "token": uuid.uuid4(),
            "chunk_limit": 4096,
        },
    ).fetchall()

    assert guard is (expected is not None)
    assert [(r["id"], r["action"]) for r in view] == ([(doc["id"], expected)] if expected else [])
    assert [(r["id"], r["action"]) for r in claimed] == (
        [(doc["id"], expected)] if expected else []
    )


def test_claim_is_exclusive(db):
    person = add_person(db)
    doc = add_document(db, person["id"], "Body.")
    args = {**PARAMS, "document_id": doc["id"], "person_id": None, "limit": 1, "chunk_limit": 4096}
    first = db.execute(QUERIES.claim_batch, {**args, "token": uuid.uuid4()}).fetchall()
    second = db.execute(QUERIES.claim_batch, {**args, "token": uuid.uuid4()}).fetchall()
    assert len(first) == 1 and second == []


def test_guard_uses_the_partial_index(db):
    # Enough rows that a sequential scan is not the obvious plan.
    person = add_person(db)
    db.execute(
        "INSERT INTO documents (person_id, kind, status, body, generated_at, delivered_at) "
        "SELECT %s, 'plan', 'succeeded', 'x', now(), now() FROM generate_series(1, 5000)",
        (person["id"],),
    )
    db.execute("ANALYZE documents")
    plan = db.execute("EXPLAIN (FORMAT TEXT) " + QUERIES.guard_exists, PARAMS).fetchall()
    text = "\n".join(row["QUERY PLAN"] for row in plan)
    assert "documents_queue" in text, text
    assert "Seq Scan on documents" not in text, text
