"""Failures that count, and errors that arrive later: the sandbox fails sends in a
status webhook, the webhook service (a real process) applies it, Postgres holds
the outcome. Every row of the classification that can arrive asynchronously
(but a template's, which only knocks meet) is driven here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.whatsapp.errors import RULES, Arrives, Scope, Trouble
from delivery_pipeline_tests.support.data import add_document, add_person, plan_body
from delivery_pipeline_tests.support.engine import hooked_service, sweep
from delivery_pipeline_tests.support.inbox import knocks, texts
from delivery_pipeline_tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

MAX_ATTEMPTS = 3


@pytest.fixture
def service(sandbox, settings) -> Iterator[object]:
    with hooked_service(
        sandbox,
        settings.database.database_url,
        DELIVERY_MAX_ATTEMPTS=str(MAX_ATTEMPTS),
        # A failure's retry waits an hour, so each pass is the test's own
        # (``due_now``): with no wait the service retries at once and races it.
        DELIVERY_BACKOFF_BASE_SECONDS="3600",
        DELIVERY_BACKOFF_MAX_SECONDS="3600",
    ) as svc:
        yield svc


@pytest.fixture
def engine(settings):
    return settings.replace(delivery={"max_attempts": MAX_ATTEMPTS, "quiet_hours": ""})


def doc_row(db, doc_id):
    return db.execute("SELECT * FROM documents WHERE id = %s", (doc_id,)).fetchone()


def due_now(db, doc_id):
    """The hour a failure's retry waits has passed."""
    db.execute("UPDATE documents SET next_attempt_at = now() WHERE id = %s", (doc_id,))


def failed_statuses_applied(db, doc_id, n):
    return lambda: (
        db.execute(
            "SELECT count(*) AS n FROM status_events WHERE status = 'failed' "
            "AND callback_data LIKE %s",
            (f"dp:{doc_id}:%",),
        ).fetchone()["n"]
        >= n
    )


def test_async_failures_on_a_chunk_count_up_to_the_maximum(db, sandbox, engine, service):
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    body = plan_body(2, tag="M")
    # Each refusal is registered before there is anything to send: the
    # service's own sweep for the person who just wrote may send first.
    sandbox.refuse(131000, "async", to=person["phone"], count=1)
    doc = add_document(db, person["id"], body)

    for attempt in range(1, MAX_ATTEMPTS + 1):
        # Each pass: the first chunk sent is accepted, then fails in a status.
        if attempt > 1:
            sandbox.refuse(131000, "async", to=person["phone"], count=1)
        due_now(db, doc["id"])
        sweep(engine)
        wait_for(failed_statuses_applied(db, doc["id"], attempt), what=f"failure {attempt}")
        row = wait_for(
            lambda: (r := doc_row(db, doc["id"]))["delivered_at"] is None and r,
            what="un-delivered",
        )
        assert row["delivery_attempts"] == attempt, "an async failure is an attempt"

    row = doc_row(db, doc["id"])
    assert row["abandon_reason"] == "max_attempts"
    assert "131000" in row["last_delivery_error"]
    alert = db.execute(
        "SELECT * FROM ops_alerts WHERE dedup_key = %s", (f"max_attempts:{doc['id']}",)
    ).fetchall()
    assert len(alert) == 1, "abandoned and alerted"
    # Never sent again: the first part never arrived, the second once.
    assert sweep(engine).claimed == 0
    assert texts(sandbox.inbox(person["phone"])) == [delivery_messages(body)[1]]


def test_a_part_resent_after_a_later_one_says_where_it_belongs(db, sandbox, engine, service):
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    body = plan_body(3, tag="O")
    sandbox.refuse(131000, "async", to=person["phone"], count=1)
    doc = add_document(db, person["id"], body)

    sweep(engine)
    wait_for(failed_statuses_applied(db, doc["id"], 1), what="the failure")
    wait_for(lambda: doc_row(db, doc["id"])["delivered_at"] is None, what="un-delivered")
    due_now(db, doc["id"])
    sweep(engine)

    wait_for(lambda: doc_row(db, doc["id"])["delivered_at"], what="delivered at last")
    messages = delivery_messages(body)
    arrived = texts(sandbox.inbox(person["phone"]))
    assert arrived == [messages[1], messages[2], messages[0]], "part 1 came last"
    assert [m[:6] for m in arrived] == ["(2/3) ", "(3/3) ", "(1/3) "], "each says where it goes"
    assert doc_row(db, doc["id"])["delivery_attempts"] == 1


ASYNC_ROWS = sorted(
    code
    for code, rule in RULES.items()
    if rule.arrives in (Arrives.ASYNC, Arrives.BOTH) and rule.scope != Scope.TEMPLATE
)


@pytest.mark.parametrize("code", ASYNC_ROWS)
def test_each_code_failed_later_has_the_consequence_of_its_scope(
    code, db, sandbox, engine, service
):
    rule = RULES[code]
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    # Registered before the document exists: the service's sweep for the
    # person who just wrote may be the one that sends it.
    sandbox.refuse(code, "async", to=person["phone"], message_type="text")
    doc = add_document(db, person["id"], "A short plan.")

    sweep(engine)
    wait_for(failed_statuses_applied(db, doc["id"], 1), what="the failed status")

    if rule.trouble == Trouble.WINDOW_CLOSED:
        wait_for(lambda: knocks(sandbox.inbox(person["phone"])), what="the knock")
        wait_for(lambda: doc_row(db, doc["id"])["awaiting_reply_since"], what="awaiting")
    elif rule.trouble == Trouble.UNREACHABLE:
        row = wait_for(lambda: (r := doc_row(db, doc["id"]))["abandoned_at"] and r, what="abandon")
        assert row["abandon_reason"] == rule.error.abandon_reason
    elif rule.trouble == Trouble.PLATFORM_HOLD:
        row = wait_for(lambda: (r := doc_row(db, doc["id"]))["delivered_at"] is None and r)
        assert (row["next_attempt_at"] - row["created_at"]).total_seconds() > 23 * 3600
        assert row["delivery_attempts"] == 0
    elif rule.trouble == Trouble.SENDER_REFUSED:
        state = wait_for(
            lambda: (s := db.execute(QUERIES.sender_state.sql).fetchone())["paused_at"] and s,
            what="the pause",
        )
        assert state["pause_code"] == code
        assert doc_row(db, doc["id"])["delivery_attempts"] == 0
    else:
        # A media refusal (without_file) of a part, which carried no file, is that
        # message's own trouble, as a retry's.
        assert rule.trouble in (Trouble.THIS_SEND, Trouble.FILE_REFUSED)
        for attempt in range(2, MAX_ATTEMPTS + 1):
            wait_for(lambda: doc_row(db, doc["id"])["delivered_at"] is None, what="un-delivered")
            due_now(db, doc["id"])
            sweep(engine)
            wait_for(failed_statuses_applied(db, doc["id"], attempt), what=f"failure {attempt}")
        row = wait_for(lambda: (r := doc_row(db, doc["id"]))["abandoned_at"] and r, what="abandon")
        assert row["abandon_reason"] == "max_attempts" and f"({code})" in row["last_delivery_error"]
