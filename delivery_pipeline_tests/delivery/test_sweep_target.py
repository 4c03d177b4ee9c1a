"""What a sweep targets, from the webhook to the claim: the person who wrote and
the documents a failed status gives back come out of the webhook's ingest as
``SweepTarget``s, and a sweep of one claims only what it names. Real Postgres,
the service's own ingest, the sandbox over HTTP."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from delivery_pipeline.delivery.sweep_target import SweepTarget
from delivery_pipeline.service.ingest import WebhookOutcome, apply_payload
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect_async
from delivery_pipeline.testing import payloads
from delivery_pipeline_tests.support.data import (
    add_document,
    add_person,
    chunks,
    document,
    plan_body,
)
from delivery_pipeline_tests.support.engine import sweep

pytestmark = pytest.mark.engine


def ingest(settings: Settings, body: bytes) -> WebhookOutcome:
    """The body through the service's own ingest, with this test's delivery settings."""

    async def go() -> WebhookOutcome:
        async with await connect_async(settings.database.database_url) as conn:
            return await apply_payload(conn, json.loads(body), settings.delivery)

    return asyncio.run(go())


def _two_waiting(db, sandbox) -> tuple[dict[str, Any], dict[str, Any], dict, dict]:
    writer, other = add_person(db), add_person(db)
    for person in (writer, other):
        sandbox.say(person["phone"], "hi")
    return (
        writer,
        other,
        add_document(db, writer["id"], plan_body(2)),
        add_document(db, other["id"], plan_body(2)),
    )


def test_who_wrote_is_the_target_and_its_sweep_claims_theirs_alone(db, sandbox, settings):
    writer, other, theirs, not_theirs = _two_waiting(db, sandbox)

    outcome = ingest(
        settings,
        payloads.inbound(writer["phone"], f"wamid.test-{uuid.uuid4().hex}", "hello"),
    )

    assert outcome.to_sweep == {SweepTarget.person(writer["id"])}
    (target,) = outcome.to_sweep
    result = sweep(settings, target=target)
    assert result.claimed == 1 and result.delivered == 1
    assert document(db, theirs["id"])["delivered_at"] is not None
    assert document(db, not_theirs["id"])["delivered_at"] is None
    # Another person's document named alone: that one, and nothing of anybody else's.
    assert sweep(settings, target=SweepTarget.document(not_theirs["id"])).delivered == 1
    assert document(db, not_theirs["id"])["delivered_at"] is not None


def test_a_person_and_a_document_together_claim_the_document_only_if_theirs(db, sandbox, settings):
    writer, other, _theirs, not_theirs = _two_waiting(db, sandbox)

    mismatched = SweepTarget(person_id=writer["id"], document_id=not_theirs["id"])
    assert sweep(settings, target=mismatched).claimed == 0
    matched = SweepTarget(person_id=other["id"], document_id=not_theirs["id"])
    assert sweep(settings, target=matched).delivered == 1


def test_a_failed_status_gives_its_document_back_as_a_target(db, sandbox, settings):
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    doc = add_document(db, person["id"], plan_body(2))
    sweep(settings, target=SweepTarget.document(doc["id"]))
    sent = chunks(db, doc["id"])[0]

    outcome = ingest(
        settings,
        payloads.status(
            sent["wa_message_id"],
            "failed",
            callback=sent["callback_data"],
            errors=[{"code": 131000, "title": "Something went wrong"}],
        ),
    )

    # Due again at once (this test's backoff is zero): the same document, as a target.
    assert outcome.to_sweep == {SweepTarget.document(doc["id"])}
    assert document(db, doc["id"])["delivered_at"] is None
