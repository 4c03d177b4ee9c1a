"""One eligibility definition: the guard, the sweep's claim and the view agree."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import uuid

import pytest
from psycopg.types.json import Jsonb

from delivery_pipeline.settings import DEV_PHONE_NUMBER_ID
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.explain import rows_read
from delivery_pipeline_tests.support.data import add_document, add_person

pytestmark = pytest.mark.engine

LEASE = dt.timedelta(minutes=10)
WINDOW = dt.timedelta(hours=23, minutes=45)
# No quiet hours by default: the cases below must not depend on the hour they run at.
PARAMS = {
    "lease": LEASE,
    "service_window": WINDOW,
    "quiet_hours": None,
    "default_number": DEV_PHONE_NUMBER_ID,
}


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
    # Quiet hours: the person's own window around now, in their zone.
    ("their quiet hours: held", {"inbound_age_seconds": 3600}, {}, "hold_quiet"),
    ("their quiet hours, window closed: no knock", {"inbound_age_seconds": None}, {}, "hold_quiet"),
    (
        "their quiet hours, but they wrote 5 minutes ago",
        {"inbound_age_seconds": 300},
        {},
        "deliver",
    ),
    (
        "their quiet hours, a stale brief is still abandoned",
        {"inbound_age_seconds": 3600, "time_zone": "UTC"},
        {"kind": "daily_brief", "for_date": "yesterday"},
        "abandon_stale",
    ),
    (
        "their quiet hours, held until they end",
        {"inbound_age_seconds": 3600},
        {
            "next_attempt_at": "now() + interval '2 hours'",
            "quiet_until": "now() + interval '2 hours'",
        },
        None,
    ),
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
    if name.startswith("their quiet hours"):
        db.execute(
            "UPDATE people SET quiet_hours = "
            "to_char(now() AT TIME ZONE time_zone - interval '1 hour', 'HH24:MI') || '-' || "
            "to_char(now() AT TIME ZONE time_zone + interval '1 hour', 'HH24:MI') "
            "WHERE id = %s",
            (doc["person_id"],),
        )

    guard = db.execute(QUERIES.guard_exists.sql, PARAMS).fetchone()["eligible"]
    view = db.execute(QUERIES.eligible_ids.sql, PARAMS).fetchall()
    claimed = db.execute(QUERIES.claim_batch.sql, _claim_args()).fetchall()

    assert guard is (expected is not None)
    assert [(r["id"], r["action"]) for r in view] == ([(doc["id"], expected)] if expected else [])
    assert [(r["document_id"], r["action"]) for r in claimed] == (
        [(doc["id"], expected)] if expected else []
    )


def test_claim_is_exclusive(db):
    person = add_person(db)
    doc = add_document(db, person["id"], "Body.")
    args = {
        **PARAMS,
        "document_id": doc["id"],
        "person_id": None,
        "limit": 1,
        "chunk_limit": 4096,
        "probe_number": None,
        "number": None,
    }
    first = db.execute(QUERIES.claim_batch.sql, {**args, "token": uuid.uuid4()}).fetchall()
    second = db.execute(QUERIES.claim_batch.sql, {**args, "token": uuid.uuid4()}).fetchall()
    assert len(first) == 1 and second == []


def test_the_heartbeat_asks_the_rule_only_when_something_is_due(db, database_url):
    """``eligible_now``: nothing due (held for the night, awaiting a reply) is told by
    ``anything_due`` alone; a due document the rule holds back (its person's other
    document is being sent) is told by the rule; an eligible one by both."""
    from delivery_pipeline.delivery.sweep import eligible_now
    from delivery_pipeline.settings import Settings

    settings = Settings().replace(
        database={"database_url": database_url}, delivery={"quiet_hours": ""}
    )

    def asked() -> tuple[bool, bool, bool]:
        due = QUERIES.anything_due.one(db, {})
        rule = QUERIES.guard_exists.one(db, settings.guard)
        return bool(due), bool(rule), eligible_now(db, settings)

    assert asked() == (False, False, False)
    held = _case_doc(db, next_attempt_at="now() + interval '9 hours'")
    _case_doc(db, awaiting_reply_since="now()")
    assert asked() == (False, False, False)

    person = add_person(db)
    sending = add_document(db, person["id"], "Being sent.")
    add_document(db, person["id"], "Its turn comes after.")
    db.execute(
        "UPDATE documents SET claim_token = gen_random_uuid(), claimed_at = now() WHERE id = %s",
        (sending["id"],),
    )
    assert asked() == (True, False, False)

    db.execute("UPDATE documents SET next_attempt_at = now() WHERE id = %s", (held["id"],))
    assert asked() == (True, True, True)


def test_guard_uses_the_partial_index(db):
    # Enough rows that a sequential scan is not the obvious plan.
    person = add_person(db)
    db.execute(
        "INSERT INTO documents (person_id, kind, status, body, generated_at, delivered_at) "
        "SELECT %s, 'plan', 'succeeded', 'x', now(), now() FROM generate_series(1, 5000)",
        (person["id"],),
    )
    db.execute("ANALYZE documents")
    plan = db.execute("EXPLAIN (FORMAT TEXT) " + QUERIES.guard_exists.sql, PARAMS).fetchall()
    text = "\n".join(row["QUERY PLAN"] for row in plan)
    assert "documents_queue" in text, text
    assert "Seq Scan on documents" not in text, text


@pytest.mark.parametrize("number", [None, DEV_PHONE_NUMBER_ID])
def test_a_claim_reads_the_queue_in_due_order_and_stops_at_its_batch(db, number):
    """20,000 due plans, a fifth of them on a paused number: a claim of 32 reads a
    few hundred queued documents, not the queue (sql/migrations/032). Before, the turn rule was
    an anti join over every queued document and the claim judged the whole queue."""
    paused = "200000000000001"
    db.execute(
        "INSERT INTO people (phone, name, last_inbound_at, phone_number_id) "
        "SELECT '+1555' || lpad(g::text, 8, '0'), 'P', now(), "
        "       CASE WHEN g %% 5 = 0 THEN %s END FROM generate_series(1, 20000) g",
        (paused,),
    )
    db.execute(
        "INSERT INTO documents (person_id, kind, status, body, generated_at, next_attempt_at) "
        "SELECT id, 'plan', 'succeeded', 'A plan.', now(), "
        "       now() - interval '1 hour' + id * interval '1 millisecond' FROM people"
    )
    db.execute(
        "INSERT INTO sender_state (phone_number_id, paused_at, pause_code) "
        "VALUES (%s, now(), 133010)",
        (paused,),
    )
    db.execute("ANALYZE people")
    db.execute("ANALYZE documents")
    args = {
        **PARAMS,
        "document_id": None,
        "person_id": None,
        "limit": 32,
        "token": uuid.uuid4(),
        "chunk_limit": 4096,
        "probe_number": None,
        "number": number,
    }

    with db.transaction(force_rollback=True):
        explained = db.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + QUERIES.claim_batch.sql, args
        ).fetchone()

    assert rows_read(explained["QUERY PLAN"], "documents") < 1000
    with db.transaction(force_rollback=True):
        claimed = QUERIES.claim_batch.all(db, args)
    first = db.execute(
        "SELECT d.id FROM documents d JOIN people p ON p.id = d.person_id "
        "WHERE p.phone_number_id IS NULL ORDER BY d.next_attempt_at, d.id LIMIT 32"
    ).fetchall()
    assert sorted(c.document_id for c in claimed) == [r["id"] for r in first], "the oldest"


# One sender per person, oldest first: two documents of one person (the older
# generated a minute earlier) → which one the guard, the view and the claim offer.
# (name, older → SQL expression, younger → SQL expression, expected: "older" / "younger" / None)
SIBLING_CASES = [
    ("both due: the older goes first", {}, {}, "older"),
    (
        "older in backoff: the younger waits",
        {"next_attempt_at": "now() + interval '5 minutes'"},
        {},
        None,
    ),
    (
        "older under a live claim",
        {"claim_token": "gen_random_uuid()", "claimed_at": "now()"},
        {},
        None,
    ),
    (
        "older's claim lapsed: it is taken over, still first",
        {"claim_token": "gen_random_uuid()", "claimed_at": "now() - interval '11 minutes'"},
        {},
        "older",
    ),
    (
        "younger under a live claim (the older came back meanwhile)",
        {},
        {"claim_token": "gen_random_uuid()", "claimed_at": "now()"},
        None,
    ),
    ("older delivered", {"delivered_at": "now()"}, {}, "younger"),
    ("older abandoned", {"abandoned_at": "now()", "abandon_reason": "'operator'"}, {}, "younger"),
    (
        "older waits on a reply",
        {"knock_sent_at": "now()", "awaiting_reply_since": "now()"},
        {},
        "younger",
    ),
    ("older not generated yet", {"status": "'pending'"}, {}, "younger"),
]


@pytest.mark.parametrize(
    ("name", "older_updates", "younger_updates", "expected"),
    SIBLING_CASES,
    ids=[c[0] for c in SIBLING_CASES],
)
def test_one_document_per_person_oldest_first(db, name, older_updates, younger_updates, expected):
    person = add_person(db)
    older = add_document(db, person["id"], "Older.")
    younger = add_document(db, person["id"], "Younger.")
    db.execute(
        "UPDATE documents SET generated_at = now() - interval '1 minute' WHERE id = %s",
        (older["id"],),
    )
    for doc, updates in ((older, older_updates), (younger, younger_updates)):
        if updates:
            assignments = ", ".join(f"{column} = {expr}" for column, expr in updates.items())
            db.execute(f"UPDATE documents SET {assignments} WHERE id = %s", (doc["id"],))
    want = {"older": older["id"], "younger": younger["id"], None: None}[expected]

    guard = db.execute(QUERIES.guard_exists.sql, PARAMS).fetchone()["eligible"]
    view = [r["id"] for r in db.execute(QUERIES.eligible_ids.sql, PARAMS).fetchall()]
    claimed = [
        r["document_id"] for r in db.execute(QUERIES.claim_batch.sql, _claim_args()).fetchall()
    ]

    assert guard is (want is not None)
    assert view == claimed == ([want] if want else [])


def test_same_generated_time_goes_by_id(db):
    person = add_person(db)
    first = add_document(db, person["id"], "One.")
    second = add_document(db, person["id"], "Two.")
    db.execute(
        "UPDATE documents SET generated_at = '2026-01-01T00:00:00Z' WHERE id = ANY(%s)",
        ([first["id"], second["id"]],),
    )
    claimed = [
        r["document_id"] for r in db.execute(QUERIES.claim_batch.sql, _claim_args()).fetchall()
    ]
    assert claimed == [first["id"]]


def test_a_claim_that_raced_another_of_the_person_is_given_back(db):
    """Two claims of one person's documents committed at once (the older came back
    into the queue while the younger was being claimed): begin_delivery says busy
    to both, so neither sends, and nothing is written to the ledger."""
    person = add_person(db)
    docs = [add_document(db, person["id"], f"Doc {i}.") for i in range(2)]
    tokens = [uuid.uuid4(), uuid.uuid4()]
    for doc, token in zip(docs, tokens, strict=True):
        db.execute(
            "UPDATE documents SET claim_token = %s, claimed_at = now() WHERE id = %s",
            (token, doc["id"]),
        )
    for doc, token in zip(docs, tokens, strict=True):
        rows = db.execute(
            QUERIES.begin_delivery.sql, _begin_args(doc["id"], token, ["Doc."])
        ).fetchall()
        assert [r["person_busy"] for r in rows] == [True]
    assert db.execute("SELECT count(*) AS n FROM delivery_chunks").fetchone()["n"] == 0


def test_the_person_probe_uses_the_queue_index(db):
    person = add_person(db)
    db.execute(
        "INSERT INTO documents (person_id, kind, status, body, generated_at, delivered_at) "
        "SELECT %s, 'plan', 'succeeded', 'x', now(), now() FROM generate_series(1, 5000)",
        (person["id"],),
    )
    add_document(db, person["id"], "Waiting.")
    db.execute("ANALYZE documents")
    plan = db.execute("EXPLAIN (FORMAT TEXT) " + QUERIES.eligible_ids.sql, PARAMS).fetchall()
    text = "\n".join(row["QUERY PLAN"] for row in plan)
    assert "documents_queue_by_person" in text, text
    assert "Seq Scan on documents" not in text, text


def _claim_args() -> dict:
    return {
        **PARAMS,
        "document_id": None,
        "person_id": None,
        "limit": 10,
        "token": uuid.uuid4(),
        "chunk_limit": 4096,
        "probe_number": None,
        "number": None,
    }


def _pending_chunk(db, document_id: int) -> None:
    db.execute(
        "INSERT INTO delivery_chunks (document_id, chunk_index, state, callback_data, "
        "send_attempts, body) VALUES (%s, 0, 'pending', 'dp:x:0:1', 0, 'Body.')",
        (document_id,),
    )


def _begin_args(document_id: int, token: uuid.UUID, chunks: list[str]) -> dict:
    """begin_delivery's arguments for a batch of one fresh document."""
    return {
        "documents": Jsonb(
            [
                {
                    "document_id": document_id,
                    "token": str(token),
                    "phone_number_id": DEV_PHONE_NUMBER_ID,
                    "fresh": True,
                }
            ]
        ),
        "chunks": Jsonb(
            [
                {"document_id": document_id, "chunk_index": i, "body": body, "tag": f"dp:{i}"}
                for i, body in enumerate(chunks)
            ]
        ),
        "lease": LEASE,
    }


def _advance_args(
    document_id: int,
    token: uuid.UUID,
    *,
    sent: tuple[int, str, str] | None = None,
    fence: tuple[int, str] | None = None,
    finish: bool = False,
) -> dict:
    """advance_delivery's arguments for a batch of one document."""
    request = {
        "document_id": document_id,
        "token": str(token),
        "phone_number_id": DEV_PHONE_NUMBER_ID,
        "sent_index": sent[0] if sent else None,
        "sent_callback": sent[1] if sent else None,
        "wa_message_id": sent[2] if sent else None,
        "next_index": fence[0] if fence else None,
        "next_callback": fence[1] if fence else None,
        "resend_ambiguous": False,
        "finish": finish,
    }
    return {"requests": Jsonb([request]), "renew_after": LEASE / 4}


def _fence_first_chunk(document_id: int, token: uuid.UUID) -> dict:
    """advance_delivery's arguments: record nothing, fence chunk 0."""
    return _advance_args(document_id, token, fence=(0, f"dp:{document_id}:0:1"))


def test_a_sweeper_whose_lease_lapsed_fences_nothing_its_successor_claims(db, database_url):
    """A stalled sender (lease older than the renewal age) fences its next chunk
    while another sweeper takes the document over: the fence waits for the
    takeover and then finds the claim gone, instead of deciding on a snapshot."""
    person = add_person(db)
    doc = add_document(db, person["id"], "Body.")
    stalled, successor = uuid.uuid4(), uuid.uuid4()
    db.execute(
        "UPDATE documents SET claim_token = %s, claimed_at = now() - interval '9 minutes' "
        "WHERE id = %s",
        (stalled, doc["id"]),
    )
    _pending_chunk(db, doc["id"])

    def takeover(conn) -> None:
        conn.execute(
            "UPDATE documents SET claim_token = %s, claimed_at = now() WHERE id = %s",
            (successor, doc["id"]),
        )

    def advance(conn):
        return conn.execute(
            QUERIES.advance_delivery.sql, _fence_first_chunk(doc["id"], stalled)
        ).fetchone()

    answer = _waits_for_the_service(database_url, takeover, advance)
    # a fence also says whether sending is paused (sql/migrations/018); it is not, here
    assert answer == {
        "document_id": doc["id"],
        "ours": False,
        "fenced": False,
        "delivered": False,
        "paused": False,
        "every": False,
    }
    [chunk] = db.execute("SELECT state FROM delivery_chunks").fetchall()
    assert chunk["state"] == "pending"


def _claimed_now(db, document_id: int) -> uuid.UUID:
    """The document under a fresh claim; its token."""
    token = uuid.uuid4()
    db.execute(
        "UPDATE documents SET claim_token = %s, claimed_at = now() WHERE id = %s",
        (token, document_id),
    )
    return token


def _cancel(document_id: int):
    """An operator's cancel, as `documents cancel` runs it, left uncommitted."""

    def cancel(conn) -> None:
        conn.execute(QUERIES.lock_document.sql, {"document_id": document_id})
        conn.execute(QUERIES.cancel_document.sql, {"document_id": document_id, "why": "t"})

    return cancel


def test_a_fresh_claims_fence_waits_for_a_cancel_and_finds_the_claim_revoked(db, database_url):
    """A cancel commits while a young claim's next fence is being decided: the
    fence waits for it and fences nothing, instead of fencing from a snapshot
    that still shows the claim (the part would go out uncounted by the cancel)."""
    person = add_person(db)
    doc = add_document(db, person["id"], "Body.")
    token = _claimed_now(db, doc["id"])
    _pending_chunk(db, doc["id"])

    def advance(conn):
        return conn.execute(
            QUERIES.advance_delivery.sql, _fence_first_chunk(doc["id"], token)
        ).fetchone()

    answer = _waits_for_the_service(database_url, _cancel(doc["id"]), advance)
    assert (answer["ours"], answer["fenced"]) == (False, False)
    [chunk] = db.execute("SELECT state FROM delivery_chunks").fetchall()
    assert chunk["state"] == "pending"


def test_a_first_fence_waits_for_a_cancel_and_writes_no_ledger(db, database_url):
    """The same for begin_delivery, whose ledger insert fences the first chunk."""
    person = add_person(db)
    doc = add_document(db, person["id"], "Body.")
    token = _claimed_now(db, doc["id"])

    def begin(conn):
        return conn.execute(
            QUERIES.begin_delivery.sql, _begin_args(doc["id"], token, ["Body."])
        ).fetchall()

    assert _waits_for_the_service(database_url, _cancel(doc["id"]), begin) == []
    assert db.execute("SELECT count(*) AS n FROM delivery_chunks").fetchone()["n"] == 0


def test_a_fresh_claim_fences_without_touching_the_document(db):
    person = add_person(db)
    doc = add_document(db, person["id"], "Body.")
    token = uuid.uuid4()
    db.execute(
        "UPDATE documents SET claim_token = %s, claimed_at = now() - interval '1 minute' "
        "WHERE id = %s",
        (token, doc["id"]),
    )
    _pending_chunk(db, doc["id"])
    before = db.execute("SELECT claimed_at FROM documents WHERE id = %s", (doc["id"],)).fetchone()
    row = db.execute(
        QUERIES.advance_delivery.sql,
        _fence_first_chunk(doc["id"], token),
    ).fetchone()
    assert (row["ours"], row["fenced"]) == (True, True)
    after = db.execute("SELECT claimed_at FROM documents WHERE id = %s", (doc["id"],)).fetchone()
    assert after == before


def _finishing_document(db) -> tuple[int, uuid.UUID, dict]:
    """A claimed two-chunk document: chunk 0 sent, chunk 1 being sent; and the
    sender's finish for it."""
    person = add_person(db)
    doc = add_document(db, person["id"], "Body.")
    token = _claimed_now(db, doc["id"])
    db.execute(
        "INSERT INTO delivery_chunks (document_id, chunk_index, state, callback_data, "
        "send_attempts, wa_message_id, sent_at) VALUES "
        "(%(d)s, 0, 'sent', 'dp:x:0:1', 1, 'wamid.0', now()), "
        "(%(d)s, 1, 'sending', 'dp:x:1:1', 1, NULL, NULL)",
        {"d": doc["id"]},
    )
    finish = _advance_args(doc["id"], token, sent=(1, "dp:x:1:1", "wamid.1"), finish=True)
    return doc["id"], token, finish


def _fail_chunk(conn, document_id: int, index: int = 0) -> None:
    """What the service does for a failed status of a chunk (service/ingest.py)."""
    conn.execute(
        QUERIES.chunk_refused.sql,
        {
            "document_id": document_id,
            "chunk_index": index,
            "at": dt.datetime.now(dt.UTC),
            "callback_data": f"dp:x:{index}:1",
            "error_code": 131026,
        },
    )


def _waits_for_the_service(database_url, service, racer):
    """``service(conn)`` in a transaction left open while ``racer(conn)`` runs on
    another connection: the racer must wait for it; its answer once it commits."""
    answer: list = []

    def race() -> None:
        with connect(database_url) as conn:
            answer.append(racer(conn))

    with connect(database_url, autocommit=False) as conn:
        service(conn)
        thread = threading.Thread(target=race)
        thread.start()
        time.sleep(0.5)
        assert thread.is_alive(), "the racer must wait for the rows the service holds"
        conn.commit()
    thread.join(timeout=10)
    assert len(answer) == 1, "the racer never finished"
    return answer[0]


def _undeliver(conn, document_id: int) -> None:
    conn.execute(
        QUERIES.undeliver_document.sql,
        {
            "document_id": document_id,
            "error": "131026",
            "delay_seconds": 3600,
            "attempt": 1,
            "chunk_index": 0,
        },
    )


def test_a_failure_being_applied_holds_back_the_finish(db, database_url):
    """The service is applying a failed status to chunk 0 (its transaction holds
    the chunk and the document) when the sender finishes the document with
    chunk 1: the finish waits for it and sees the failure, instead of marking
    the document delivered from a snapshot taken before the failure committed."""
    document_id, _, finish = _finishing_document(db)

    def service(conn) -> None:
        _fail_chunk(conn, document_id)
        _undeliver(conn, document_id)

    answer = _waits_for_the_service(
        database_url,
        service,
        lambda conn: conn.execute(QUERIES.advance_delivery.sql, finish).fetchone(),
    )
    assert answer["ours"] is True and answer["delivered"] is False
    row = db.execute(
        "SELECT delivered_at, next_attempt_at > now() + interval '50 minutes' AS backed_off "
        "FROM documents WHERE id = %s",
        (document_id,),
    ).fetchone()
    assert row["delivered_at"] is None and row["backed_off"]


def test_a_failure_applied_after_the_finish_undelivers(db, database_url):
    """The other order: the service has failed chunk 0 but not yet reached the
    document when the sender finishes. The finish goes through; the service's
    update then waits for it and leaves the document undelivered, backed off."""
    document_id, _, finish = _finishing_document(db)
    with connect(database_url, autocommit=False) as service:
        _fail_chunk(service, document_id)
        answer = db.execute(QUERIES.advance_delivery.sql, finish).fetchone()
        assert answer["delivered"] is True
        _undeliver(service, document_id)
        service.commit()
    row = db.execute(
        "SELECT delivered_at, claim_token, next_attempt_at > now() + interval '50 minutes' "
        "AS backed_off FROM documents WHERE id = %s",
        (document_id,),
    ).fetchone()
    assert row["delivered_at"] is None and row["claim_token"] is None and row["backed_off"]


def _release_unknown(conn, document_id: int, token: uuid.UUID) -> bool | None:
    """What a sender does when chunk 1's send got no answer (grace: an hour)."""
    row = conn.execute(
        QUERIES.release_unknown.sql,
        {
            "document_id": document_id,
            "token": token,
            "chunk_index": 1,
            "callback_data": "dp:x:1:1",
            "delay_seconds": 3600,
            "error": "chunk 1: outcome unknown",
        },
    ).fetchone()
    return None if row is None else bool(row["unknown"])


def _settle_chunk_1(conn, document_id: int) -> None:
    """What the service does for the 'sent' status of chunk 1 (service/ingest.py)."""
    event = {
        "wa_message_id": "wamid.1",
        "status": "sent",
        "occurred_at": dt.datetime.now(dt.UTC).isoformat(),
        "recipient_id": "15550000000",
        "callback_data": "dp:x:1:1",
        "document_id": document_id,
        "chunk_index": 1,
        "error_code": None,
        "error_title": None,
        "payload": {},
    }
    conn.execute(QUERIES.apply_statuses.sql, {"events": json.dumps([event])}).fetchall()
    conn.execute(QUERIES.resume_documents.sql, {"document_ids": [document_id]})


def _due_in(db, document_id: int) -> tuple[str, float]:
    row = db.execute(
        "SELECT c.state, extract(epoch FROM d.next_attempt_at - now())::float AS due_in "
        "FROM documents d JOIN delivery_chunks c ON c.document_id = d.id AND c.chunk_index = 1 "
        "WHERE d.id = %s AND d.claim_token IS NULL",
        (document_id,),
    ).fetchone()
    return row["state"], row["due_in"]


def test_an_unanswered_send_waits_the_grace_for_its_status(db):
    document_id, token, _ = _finishing_document(db)
    assert _release_unknown(db, document_id, token) is True
    state, due_in = _due_in(db, document_id)
    assert state == "unknown" and due_in > 3000


def test_a_status_that_settles_the_chunk_first_leaves_the_document_due_now(db):
    """The 'sent' status came while the sender still held the claim (the status's
    resume skipped the claimed document): the release must not add the grace."""
    document_id, token, _ = _finishing_document(db)
    _settle_chunk_1(db, document_id)
    assert _release_unknown(db, document_id, token) is False
    state, due_in = _due_in(db, document_id)
    assert state == "sent" and due_in <= 0


def test_a_status_being_applied_is_waited_for_by_the_release(db, database_url):
    """The service holds chunk 1, settling it, when the sender releases: the
    release waits for it, sees the chunk settled and leaves the document due now."""
    document_id, token, _ = _finishing_document(db)
    answer = _waits_for_the_service(
        database_url,
        lambda conn: _settle_chunk_1(conn, document_id),
        lambda conn: _release_unknown(conn, document_id, token),
    )
    assert answer is False
    state, due_in = _due_in(db, document_id)
    assert state == "sent" and due_in <= 0


def test_a_status_that_failed_the_chunk_first_keeps_its_consequence(db):
    """A failed status came first and backed the document off: the release keeps
    that due time and that error instead of the grace or due now."""
    document_id, token, _ = _finishing_document(db)
    _fail_chunk(db, document_id, 1)
    _undeliver(db, document_id)
    assert _release_unknown(db, document_id, token) is False
    state, due_in = _due_in(db, document_id)
    assert state == "failed" and 3000 < due_in <= 3600
    error = db.execute(
        "SELECT last_delivery_error FROM documents WHERE id = %s", (document_id,)
    ).fetchone()
    assert error["last_delivery_error"] == "131026"
