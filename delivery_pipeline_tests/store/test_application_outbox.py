"""The applications' outbox, replace keys and priorities, in SQL (sql/migrations/036): the triggers
write each event in the transaction of its transition, once; supersede and the turn read
what the application said."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from psycopg.types.json import Jsonb

from delivery_pipeline.settings import DEV_PHONE_NUMBER_ID
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline_tests.support.data import add_document, add_person

ELIGIBILITY = {
    "lease": dt.timedelta(minutes=10),
    "service_window": dt.timedelta(hours=23, minutes=45),
    "quiet_hours": None,
    "default_number": DEV_PHONE_NUMBER_ID,
}


def _hand_over(
    db,
    person_id: int,
    *,
    application: str = "acme",
    replace_key: str | None = None,
    priority: str = "normal",
    kind: str = "plan",
    for_date: Any = None,
) -> int:
    doc = add_document(db, person_id, "Body.", kind=kind, for_date=for_date)
    QUERIES.api_insert_document.run(
        db,
        {
            "document_id": doc["id"],
            "application": application,
            "idempotency_key": None,
            "request_hash": None,
            "replace_key": replace_key,
            "priority": priority,
            "metadata": Jsonb({"job": doc["id"]}),
        },
    )
    QUERIES.api_link_person.one(
        db, {"application": application, "person_id": person_id, "user_key": None}
    )
    return doc["id"]


def _ledger(db, document_id: int, parts: int) -> None:
    for index in range(parts):
        db.execute(
            "INSERT INTO delivery_chunks (document_id, chunk_index, state, callback_data, "
            "wa_message_id, sent_at) VALUES (%s, %s, 'sent', %s, %s, now())",
            (document_id, index, f"dp:{document_id}:{index}:1", f"wamid.{document_id}.{index}"),
        )


def _events(db, document_id: int | None = None) -> list[dict[str, Any]]:
    return db.execute(
        "SELECT application, type, stream, data FROM api_events "
        "WHERE %(d)s::bigint IS NULL OR document_id = %(d)s ORDER BY id",
        {"d": document_id},
    ).fetchall()


def _register(db, *applications: str) -> None:
    for application in applications:
        QUERIES.api_register_endpoint.run(db, {"application": application})


def test_each_transition_of_an_applications_document_is_an_event(db):
    _register(db, "acme")
    person = add_person(db, inbound_age_seconds=None)
    doc = _hand_over(db, person["id"], replace_key="weekly")
    _ledger(db, doc, 2)

    db.execute(
        "UPDATE documents SET awaiting_reply_since = now(), knock_sent_at = now() WHERE id = %s",
        (doc,),
    )
    db.execute("UPDATE documents SET awaiting_reply_since = NULL WHERE id = %s", (doc,))
    db.execute("UPDATE documents SET delivered_at = now() WHERE id = %s", (doc,))
    db.execute(
        "UPDATE delivery_chunks SET read_at = now() WHERE document_id = %s AND chunk_index = 0",
        (doc,),
    )
    assert [e["type"] for e in _events(db, doc)] == [
        "document.awaiting_reply",
        "document.delivered",
    ], "read only once its last part is"
    db.execute(
        "UPDATE delivery_chunks SET read_at = now() WHERE document_id = %s AND chunk_index = 1",
        (doc,),
    )
    db.execute(
        "UPDATE documents SET abandoned_at = now(), abandon_reason = 'undeliverable', "
        "delivered_at = NULL WHERE id = %s",
        (doc,),
    )

    events = _events(db, doc)
    assert [e["type"] for e in events] == [
        "document.awaiting_reply",
        "document.delivered",
        "document.read",
        "document.abandoned",
    ]
    assert {e["stream"] for e in events} == {f"document:{doc}"}
    delivered = events[1]["data"]
    assert delivered["document"] == {
        "id": doc,
        "kind": "plan",
        "day": None,
        "idempotency_key": None,
        "replace_key": "weekly",
        "metadata": {"job": doc},
    }
    assert delivered["person"] == {"id": person["id"], "key": None}
    assert delivered["parts"] == 2
    assert events[3]["data"]["reason"] == "undeliverable"


def test_no_event_without_a_registered_endpoint_nor_for_other_documents(db):
    _register(db, "acme", "beta")
    QUERIES.api_unregister_endpoints.run(db, {"applications": ["acme"]})
    person = add_person(db)
    theirs = _hand_over(db, person["id"], application="beta")
    operators = add_document(db, person["id"], "Added with the CLI.")["id"]
    db.execute(
        "UPDATE documents SET delivered_at = now() WHERE id IN (%s, %s)", (theirs, operators)
    )
    assert _events(db) == []


def test_an_opt_out_is_told_to_every_application_that_knows_the_person(db):
    _register(db, "acme", "beta")
    person = add_person(db)
    QUERIES.api_link_person.one(
        db, {"application": "acme", "person_id": person["id"], "user_key": "u-1"}
    )
    QUERIES.api_link_person.one(
        db, {"application": "beta", "person_id": person["id"], "user_key": None}
    )
    stranger = add_person(db)

    QUERIES.stop_knocks.run(db, {"person_id": person["id"]})
    QUERIES.stop_knocks.run(db, {"person_id": stranger["id"]})

    events = _events(db)
    assert sorted((e["application"], e["type"], e["data"]["via"]) for e in events) == [
        ("acme", "person.opted_out", "stop"),
        ("beta", "person.opted_out", "stop"),
    ]
    assert {e["data"]["person"]["key"] for e in events} == {"u-1", None}


@pytest.mark.parametrize("first", ["read", "delivered"])
def test_read_and_delivered_racing_tell_read_once(database_url, db, first):
    """The last part's read status and the document's finish in two transactions at
    once: whichever commits second sees the other, and document.read is told once."""
    _register(db, "acme")
    person = add_person(db)
    doc = _hand_over(db, person["id"])
    _ledger(db, doc, 1)
    statements = {
        "read": ("UPDATE delivery_chunks SET read_at = now() WHERE document_id = %s", (doc,)),
        "delivered": ("UPDATE documents SET delivered_at = now() WHERE id = %s", (doc,)),
    }
    second = "delivered" if first == "read" else "read"
    with (
        connect(database_url, autocommit=False) as one,
        connect(database_url, autocommit=False) as two,
    ):
        one.execute(*statements[first])  # holds the api_documents row until it commits
        done = threading.Event()

        def then() -> None:
            two.execute(*statements[second])
            two.commit()
            done.set()

        waiter = threading.Thread(target=then)
        waiter.start()
        assert not done.wait(0.5), "the second waits for the first's lock"
        one.commit()
        waiter.join(10)
    assert [e["type"] for e in _events(db, doc)] == ["document.delivered", "document.read"]


def _eligible(db) -> dict[int, str]:
    return {row.id: row.action for row in QUERIES.eligible_ids.all(db, ELIGIBILITY)}


@pytest.mark.parametrize(
    ("older", "newer", "superseded"),
    [
        ({"replace_key": "weekly"}, {"replace_key": "weekly"}, True),
        ({"replace_key": "weekly"}, {"replace_key": "trip"}, False),
        ({}, {}, False),
        ({"replace_key": "weekly"}, {"replace_key": "weekly", "application": "beta"}, False),
        (
            {"replace_key": "w"},
            {"replace_key": "w", "kind": "daily_brief", "for_date": dt.date(2099, 1, 1)},
            True,
        ),
        (None, {}, False),
        ({}, None, False),
        (None, None, True),
    ],
    ids=[
        "same-key",
        "other-key",
        "no-keys",
        "other-application",
        "same-key-any-kind",
        "cli-then-api",
        "api-then-cli",
        "cli-then-cli",
    ],
)
def test_supersede_follows_the_replace_key(db, older, newer, superseded):
    """None: a document added with the CLI (025's rule among those)."""
    person = add_person(db)
    ids = []
    for said in (older, newer):
        if said is None:
            ids.append(add_document(db, person["id"], "Body.")["id"])
        else:
            ids.append(_hand_over(db, person["id"], **said))
    eligible = _eligible(db)
    if superseded:
        assert eligible == {ids[0]: "abandon_superseded"}
    else:
        assert eligible == {ids[0]: "deliver"}, "the older goes first, then the newer"


@pytest.mark.parametrize(
    ("older", "newer", "first"),
    [
        ({"priority": "low"}, {"kind": "daily_brief", "for_date": dt.date(2099, 1, 1)}, "newer"),
        (
            {"kind": "daily_brief", "for_date": dt.date(2099, 1, 1)},
            {"priority": "high", "kind": "daily_brief", "for_date": dt.date(2099, 1, 2)},
            "newer",
        ),
        ({"kind": "daily_brief", "for_date": dt.date(2099, 1, 1)}, {}, "newer"),
        ({}, {"priority": "high"}, "older"),
    ],
    ids=[
        "low-after-a-brief",
        "high-brief-before-a-brief",
        "plan-before-a-brief",
        "high-is-a-plans-place",
    ],
)
def test_a_priority_moves_a_document_in_its_persons_turn(db, older, newer, first):
    person = add_person(db)
    ids = [_hand_over(db, person["id"], **said) for said in (older, newer)]
    assert list(_eligible(db)) == [ids[0] if first == "older" else ids[1]]


def test_a_begun_document_is_finished_first_whatever_the_priority(db):
    person = add_person(db)
    begun = _hand_over(db, person["id"], priority="low")
    db.execute(
        "INSERT INTO delivery_chunks (document_id, chunk_index, state, callback_data) "
        "VALUES (%s, 0, 'sent', 'dp:x'), (%s, 1, 'pending', 'dp:y')",
        (begun, begun),
    )
    _hand_over(db, person["id"], priority="high")
    assert list(_eligible(db)) == [begun]


def test_rate_takes_a_burst_then_the_rate(db):
    params = {"bucket": "acme:abc", "interval": dt.timedelta(seconds=10), "burst": 3}
    taken = [QUERIES.api_rate_take.one(db, params) is not None for _ in range(5)]
    assert taken == [True, True, True, False, False]
    wait = QUERIES.api_rate_wait.one(db, params)
    assert wait is not None and 9 < wait <= 10
