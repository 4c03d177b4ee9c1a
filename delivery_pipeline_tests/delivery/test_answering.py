"""A person who writes sees us answer; a brief the platform dropped ends expired.

Through the production path: the engine sends on the sandbox over HTTP, the
person writes in the sandbox, whose signed webhooks go into the webhook service
(a real process) on real Postgres, which sweeps the person. The sandbox keeps
every read mark and every inbox record with one sequence, so the order of the
typing indicator and the first part is what it saw. A phone that is off holds
its messages, and drops a template message silently once its time to live
(the template's ``message_send_ttl_seconds``) has passed.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import multiprocessing
import time
from typing import Any

import psycopg
import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.delivery.sweep import eligible_now, run_sweep
from delivery_pipeline.delivery.sweep_target import SweepTarget
from delivery_pipeline.reports.report import delivery_report
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.watch.outlook import outlook
from delivery_pipeline_tests.support.data import (
    add_document,
    add_person,
    document,
    knock_rows,
    plan_body,
    set_inbound_age,
    state_of,
)
from delivery_pipeline_tests.support.engine import sweep
from delivery_pipeline_tests.support.inbox import knocks, texts
from delivery_pipeline_tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

# The knock template's time to live, as the sandbox's template was created with it
# and as DELIVERY_TEMPLATE_TTLS tells the engine; the grace for a late status.
TTL_SECONDS = 2
GRACE_SECONDS = 1


@pytest.fixture
def knock_settings(knock_settings: Settings) -> Settings:
    return knock_settings.replace(
        delivery={
            "template_ttls": f"documents_ready={TTL_SECONDS}",
            "template_ttl_grace_seconds": GRACE_SECONDS,
        }
    )


def knocked(db, knock_settings, **document_args: Any) -> tuple[dict, dict, str]:
    person = add_person(db, inbound_age_seconds=None)
    body = plan_body(3, tag="T-")
    doc = add_document(db, person["id"], body, **document_args)
    sweep(knock_settings)
    assert state_of(db, doc["id"]) == "awaiting_reply"
    return person, doc, body


# ── the read mark and the typing indicator ──────────────────────────────


def test_a_reply_to_the_knock_is_marked_read_and_typed_before_the_first_part(
    db, sandbox, knock_settings, service
):
    person, doc, body = knocked(db, knock_settings)

    their_message = sandbox.say(person["phone"], "yes please")

    wait_for(lambda: document(db, doc["id"])["delivered_at"], what="delivery after the reply")
    detail = sandbox.person(person["phone"])
    [mark] = detail["read_marks"]
    assert (mark["message_id"], mark["typing"]) == (their_message, True)
    parts = [m for m in sandbox.inbox(person["phone"]) if m["type"] == "text"]
    assert [m["text"] for m in parts] == delivery_messages(body)
    assert mark["seq"] < min(m["seq"] for m in parts), "typing showed before the first part"
    marked = db.execute(
        "SELECT read_marked_at FROM inbound_messages WHERE wa_message_id = %s", (their_message,)
    ).fetchone()
    assert marked["read_marked_at"] is not None


def test_each_message_is_marked_once_and_a_delivery_nobody_just_asked_for_marks_none(
    db, sandbox, knock_settings, service
):
    person, first, _ = knocked(db, knock_settings)
    sandbox.say(person["phone"], "hello")
    wait_for(lambda: document(db, first["id"])["delivered_at"], what="the first delivery")

    # Their window is open, nothing new from them: the next document, even in a
    # sweep of theirs alone, finds their message marked already.
    second = add_document(db, person["id"], plan_body(2, tag="U-"))
    sweep(knock_settings, target=SweepTarget.person(person["id"]))
    assert document(db, second["id"])["delivered_at"] is not None
    assert len(sandbox.person(person["phone"])["read_marks"]) == 1

    # A document for someone whose window opened long ago: no mark either.
    earlier = add_person(db, inbound_age_seconds=3600)
    sandbox.set_window(earlier["phone"], 3600)
    third = add_document(db, earlier["id"], plan_body(1, tag="V-"))
    sweep(knock_settings)
    assert texts(sandbox.inbox(earlier["phone"])) == delivery_messages(plan_body(1, tag="V-"))
    assert document(db, third["id"])["delivered_at"] is not None
    assert sandbox.person(earlier["phone"])["read_marks"] == []


def _person_sweep(database_url: str, sandbox_url: str, person_id: int, barrier: Any) -> None:
    settings = Settings().replace(
        database={"database_url": database_url},
        whatsapp={"api_base_url": sandbox_url, "send_timeout": 5.0, "throughput_limit": 2000.0},
        delivery={"quiet_hours": "", "concurrency": 4},
    )
    barrier.wait(timeout=60)
    asyncio.run(run_sweep(settings, database_url, target=SweepTarget.person(person_id)))


def test_eight_sweeps_answering_one_message_mark_it_once_before_the_first_part(
    db, sandbox, database_url
):
    """Eight processes sweep the person who just wrote, two documents of theirs due:
    one read mark, before the first part any of them sent."""
    person = add_person(db, inbound_age_seconds=None)
    their_message = sandbox.say(person["phone"], "hi, anything for me?")
    db.execute(
        "INSERT INTO inbound_messages (wa_message_id, person_id, from_number, message_type, "
        "body, sent_at, payload, to_phone_number_id) "
        "VALUES (%s, %s, %s, 'text', 'hi, anything for me?', now(), '{}', %s)",
        (their_message, person["id"], person["phone"], sandbox.phone_number_id),
    )
    set_inbound_age(db, person["id"], 0)
    # Two kinds, so neither supersedes the other.
    today = dt.datetime.now(dt.UTC).date()
    docs = [
        add_document(db, person["id"], plan_body(2, tag="R-")),
        add_document(db, person["id"], "Your day: sun.", kind="daily_brief", for_date=today),
    ]

    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(8)
    sweeps = [
        context.Process(
            target=_person_sweep, args=(database_url, sandbox.url, person["id"], barrier)
        )
        for _ in range(8)
    ]
    for process in sweeps:
        process.start()
    for process in sweeps:
        process.join(timeout=120)
        assert process.exitcode == 0

    assert all(document(db, d["id"])["delivered_at"] for d in docs)
    [mark] = sandbox.person(person["phone"])["read_marks"]
    assert (mark["message_id"], mark["typing"]) == (their_message, True)
    parts = [m for m in sandbox.inbox(person["phone"]) if m["type"] == "text"]
    assert len(parts) == 3
    assert mark["seq"] < min(m["seq"] for m in parts)


# ── a template message past its time to live ────────────────────────────


def test_a_brief_whose_knock_outlives_its_time_to_live_ends_expired_and_is_never_resent(
    db, sandbox, knock_settings, service
):
    sandbox.template("documents_ready", "en", message_send_ttl_seconds=TTL_SECONDS)
    person = add_person(db, inbound_age_seconds=None)
    sandbox.set_online(person["phone"], False)
    today = dt.datetime.now(dt.UTC).date()
    brief = add_document(
        db, person["id"], "Your day. Rain at noon.", kind="daily_brief", for_date=today
    )
    plan = add_document(db, person["id"], plan_body(2, tag="W-"))

    sweep(knock_settings)
    [knock] = knock_rows(db, person["id"])
    assert sorted(knock["document_ids"]) == sorted([brief["id"], plan["id"]])
    assert knock["expires_at"] == knock["sent_at"] + dt.timedelta(seconds=TTL_SECONDS)
    assert state_of(db, brief["id"]) == "awaiting_reply"
    # `documents show` says until when it waits.
    seen = outlook(db, knock_settings, brief["id"])
    assert seen is not None and "expired if not by then" in seen.why
    assert seen.until == knock["expires_at"] + dt.timedelta(seconds=GRACE_SECONDS)

    # Past the deadline and its grace, with no delivered status and no failed one.
    time.sleep(TTL_SECONDS + GRACE_SECONDS + 0.5)
    sweep(knock_settings)

    row = document(db, brief["id"])
    assert (row["abandon_reason"], state_of(db, brief["id"])) == ("expired", "abandoned")
    [knock] = knock_rows(db, person["id"])
    assert knock["expired_at"] is not None and knock["delivered_at"] is None
    # The plan is not a brief: it waits for the knock's one reminder, as after a
    # knock delivered and unanswered.
    assert state_of(db, plan["id"]) == "awaiting_reply"

    # The phone comes back: the sandbox dropped the knock without a word.
    sandbox.set_online(person["phone"], True)
    sandbox.wait_webhooks_idle()
    assert knocks(sandbox.inbox(person["phone"])) == []
    assert len(sandbox.person(person["phone"])["dropped"]) == 1
    assert sandbox.stats()["dropped_ttl"] == 1

    report = delivery_report(db, today)
    assert report.abandoned_by_reason.get("expired") == 1
    assert report.numbers["knocks_expired"] == 1

    # Never sent again: not by another sweep, not when the person writes.
    with psycopg.connect(knock_settings.database.database_url, autocommit=True) as conn:
        eligible_now(conn, knock_settings)
    sweep(knock_settings)
    sandbox.say(person["phone"], "hi")
    wait_for(lambda: document(db, plan["id"])["delivered_at"], what="the plan, once they wrote")
    assert "Rain at noon" not in " ".join(texts(sandbox.inbox(person["phone"])))
    assert document(db, brief["id"])["abandon_reason"] == "expired"


def test_a_knock_delivered_in_time_is_not_expired(db, sandbox, knock_settings, service):
    sandbox.template("documents_ready", "en", message_send_ttl_seconds=TTL_SECONDS)
    person = add_person(db, inbound_age_seconds=None)
    today = dt.datetime.now(dt.UTC).date()
    brief = add_document(db, person["id"], "Sunny.", kind="daily_brief", for_date=today)

    sweep(knock_settings)
    wait_for(lambda: knock_rows(db, person["id"])[0]["delivered_at"], what="the knock delivered")
    time.sleep(TTL_SECONDS + GRACE_SECONDS + 0.5)
    sweep(knock_settings)

    assert knock_rows(db, person["id"])[0]["expired_at"] is None
    assert state_of(db, brief["id"]) == "awaiting_reply"


def test_a_brief_sent_as_a_file_that_outlived_its_time_to_live_ends_expired(db, knock_settings):
    """A file on a document template is one row of the document's ledger; its sender
    records the row's deadline (part_deadline). Dropped by the platform, the brief that
    was recorded delivered at acceptance is not: the heartbeat ends it expired. One
    delivered in time, and a plan, stay delivered."""
    today = dt.datetime.now(dt.UTC).date()

    def sent_as_file(kind: str, *, delivered: bool) -> int:
        person = add_person(db, inbound_age_seconds=None)
        doc = add_document(
            db,
            person["id"],
            "Your day.",
            kind=kind,
            for_date=today if kind == "daily_brief" else None,
        )["id"]
        db.execute(
            "INSERT INTO delivery_chunks (document_id, chunk_index, state, callback_data, "
            "sent_at, delivered_at) VALUES (%s, 0, 'sent', %s, now() - interval '3 hours', "
            "CASE WHEN %s THEN now() - interval '2 hours' END)",
            (doc, f"dp:{doc}:0:1", delivered),
        )
        db.execute(
            "UPDATE documents SET delivered_at = now() - interval '3 hours' WHERE id = %s", (doc,)
        )
        QUERIES.part_deadline.run(db, {"document_id": doc, "chunk_index": 0, "ttl_seconds": 3600})
        return doc

    dropped = sent_as_file("daily_brief", delivered=False)
    arrived = sent_as_file("daily_brief", delivered=True)
    plan = sent_as_file("plan", delivered=False)

    with psycopg.connect(knock_settings.database.database_url, autocommit=True) as conn:
        eligible_now(conn, knock_settings)

    row = document(db, dropped)
    assert (row["abandon_reason"], row["delivered_at"]) == ("expired", None)
    assert state_of(db, dropped) == "abandoned"
    assert state_of(db, arrived) == "delivered" and state_of(db, plan) == "delivered"
    expired = db.execute(
        "SELECT document_id FROM delivery_chunks WHERE expired_at IS NOT NULL ORDER BY 1"
    ).fetchall()
    assert [r["document_id"] for r in expired] == sorted([dropped, plan])
    events = db.execute(
        "SELECT event, reason FROM delivery_events WHERE document_id = %s ORDER BY id", (dropped,)
    ).fetchall()
    assert [e["event"] for e in events][-2:] == ["undelivered", "abandoned"]
