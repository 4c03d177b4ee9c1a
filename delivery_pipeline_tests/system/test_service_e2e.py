"""The whole loop with real processes: sandbox ⇄ webhook service ⇄ Postgres."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.testing.service import start_service
from delivery_pipeline_tests.support.data import (
    add_document,
    add_person,
    chunks,
    document,
    plan_body,
)
from delivery_pipeline_tests.support.engine import first_part_unknown, hooked_service, sweep
from delivery_pipeline_tests.support.inbox import knocks, texts
from delivery_pipeline_tests.support.waiting import wait_for


@pytest.fixture
def service(sandbox, settings) -> Iterator[object]:
    # These tests sweep by hand at chosen moments: the service reacts to webhooks
    # and pokes only (service/test_listener.py covers its ready notifications).
    with hooked_service(sandbox, settings.database.database_url) as svc:
        yield svc


def test_reply_to_a_knock_delivers_without_any_other_trigger(db, sandbox, settings, service):
    person = add_person(db, inbound_age_seconds=None)
    body = plan_body(4)
    doc = add_document(db, person["id"], body)
    sweep(settings)
    assert len(knocks(sandbox.inbox(person["phone"]))) == 1
    assert document(db, doc["id"])["awaiting_reply_since"] is not None

    sandbox.say(person["phone"], "yes please")

    wait_for(lambda: document(db, doc["id"])["delivered_at"], what="delivery after the reply")
    assert texts(sandbox.inbox(person["phone"])) == delivery_messages(body)
    # Status webhooks fill the ledger.
    wait_for(
        lambda: all(c["delivered_at"] for c in chunks(db, doc["id"])), what="delivered statuses"
    )


def test_async_reengagement_mid_plan_resends_only_what_never_arrived(
    db, sandbox, settings, service
):
    sandbox.faults(refusal_mode="async")
    person = add_person(db, inbound_age_seconds=60)
    sandbox.say(person["phone"], "hi")
    wait_for(
        lambda: db.execute("SELECT count(*) AS n FROM inbound_messages").fetchone()["n"],
        what="the inbound webhook",
    )
    body = plan_body(9, tag="A")
    doc = add_document(db, person["id"], body)
    # The platform's window closes ~2 s from now; ours still looks open.
    sandbox.set_window(person["phone"], 24 * 3600 - 2)

    sweep(settings.replace(delivery={"chunk_interval_seconds": 0.5}))

    # The failed statuses arrive and the document is due to knock: the service
    # knocks when the last of them comes after the sweep gave the document
    # back, else a later pass does, as the heartbeat would start one every few
    # seconds (this service listens to no ready notification). One pass is not
    # enough on a loaded machine: made before the last failed status is
    # applied, it finds nothing to knock for, or that status comes while it
    # holds the document and the service passes it by, and nobody knocks.
    def knocked() -> bool:
        if not knocks(sandbox.inbox(person["phone"])):
            sweep(settings)
        return len(knocks(sandbox.inbox(person["phone"]))) == 1

    wait_for(lambda: document(db, doc["id"])["claim_token"] is None, what="given back")
    wait_for(knocked, what="the knock")
    arrived = texts(sandbox.inbox(person["phone"]))
    assert 0 < len(arrived) < 9, "the refusal came mid-plan"
    wait_for(lambda: document(db, doc["id"])["awaiting_reply_since"], what="awaiting the reply")
    # Every chunk that never arrived is marked failed once its status is in
    # (the knock may go out before the last of them arrives).
    wait_for(
        lambda: sum(c["state"] == "failed" for c in chunks(db, doc["id"])) == 9 - len(arrived),
        what="a failed status for every chunk that never arrived",
    )

    sandbox.say(person["phone"], "ok, send it")

    wait_for(lambda: document(db, doc["id"])["delivered_at"], what="delivery after the reply")
    inbox_texts = texts(sandbox.inbox(person["phone"]))
    assert sorted(inbox_texts) == sorted(delivery_messages(body)), "every chunk exactly once"
    assert inbox_texts[: len(arrived)] == arrived
    assert len(knocks(sandbox.inbox(person["phone"]))) == 1


def test_poke_delivers_a_ready_document_and_a_second_poke_sends_nothing(
    db, sandbox, settings, service
):
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    doc = add_document(db, person["id"], plan_body(3))

    assert service.poke(document_id=doc["id"]).status_code == 202

    wait_for(lambda: document(db, doc["id"])["delivered_at"], what="delivery after the poke")
    assert len(texts(sandbox.inbox(person["phone"]))) == 3
    assert service.poke(document_id=doc["id"]).status_code == 202
    assert service.poke(person_id=person["id"]).status_code == 202
    time.sleep(0.5)
    assert len(sandbox.inbox(person["phone"])) == 3


def test_dropped_response_is_settled_by_the_status_webhook(db, sandbox, settings, service):
    person, doc = first_part_unknown(
        db, sandbox, settings.replace(whatsapp={"send_timeout": 2.0}), parts=3
    )

    # The 'sent' status carries our callback tag: the chunk is settled and
    # delivery resumes from chunk 1, with no duplicate of chunk 0.
    wait_for(lambda: document(db, doc["id"])["delivered_at"], what="delivery after settlement")
    assert len(texts(sandbox.inbox(person["phone"]))) == 3


def test_an_identity_the_api_refuses_is_told_at_start_up(db, sandbox, settings):
    with start_service(
        settings.database.database_url, sandbox.url, WHATSAPP_ACCESS_TOKEN="not-the-sandbox-one"
    ) as svc:
        line = wait_for(
            lambda: next((x for x in svc.log().splitlines() if "sending will not work" in x), None),
            what="the start-up line",
        )
        assert svc.http.get("/healthz").status_code == 200, "webhooks are still received"
    assert "ERROR" in line and "(190)" in line and "WHATSAPP_ACCESS_TOKEN" in line
