"""Knocks watched like chunks, and knock templates with a lifecycle.

Real processes: the sandbox plays the platform over HTTP (a template paused,
disabled, re-categorised, paced; the lifecycle webhooks posted), the webhook
service applies what it posts, Postgres holds the state, and the engine
sweeps by hand at chosen moments.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.watch.checks import Severity
from delivery_pipeline.watch.checks import templates as template_checks
from delivery_pipeline_tests.support.data import (
    add_document,
    add_person,
    document,
    knock_rows,
    plan_body,
    state_of,
)
from delivery_pipeline_tests.support.engine import hooked_service, sweep
from delivery_pipeline_tests.support.inbox import knocks, texts
from delivery_pipeline_tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

# The one-parameter knock with a fallback in English.
TEMPLATES = "en=document_ready:en|document_waiting:en,es=document_ready:es"


@pytest.fixture
def knock_templates() -> str:
    return TEMPLATES


@pytest.fixture
def service(sandbox, knock_settings) -> Iterator[Any]:
    with hooked_service(
        sandbox,
        knock_settings.database.database_url,
        DELIVERY_KNOCK_TEMPLATES=TEMPLATES,
        DELIVERY_MAX_ATTEMPTS="2",
    ) as svc:
        yield svc


def template_row(db, name: str, language: str = "en") -> dict[str, Any] | None:
    return db.execute(
        "SELECT *, template_problem(t) AS problem FROM message_templates t "
        "WHERE name = %s AND language = %s",
        (name, language),
    ).fetchone()


def alerts(db, prefix: str) -> list[dict[str, Any]]:
    return db.execute(
        "SELECT * FROM ops_alerts WHERE dedup_key LIKE %s ORDER BY id", (prefix + "%",)
    ).fetchall()


# ── the lifecycle webhooks ──────────────────────────────────────────────


def test_lifecycle_webhooks_are_kept_once_and_move_the_template_forwards(db, sandbox, service):
    sandbox.template("document_ready", "en", status="PAUSED", reason="LOW_QUALITY")
    row = wait_for(
        lambda: (r := template_row(db, "document_ready")) and r["status"] == "PAUSED" and r,
        what="the status webhook applied",
    )
    assert row["problem"] == "paused" and row["pause_count"] == 1
    paused_for = (row["paused_until"] - row["status_at"]).total_seconds()
    assert paused_for == 3 * 3600, "a first pause lasts 3 h"

    # The same change redelivered (Meta does): stored once, applied once.
    body = json.dumps(
        {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": "100000000000002",
                    "time": int(row["status_at"].timestamp()),
                    "changes": [
                        {
                            "field": "message_template_status_update",
                            "value": {
                                "event": "PAUSED",
                                "message_template_id": 1,
                                "message_template_name": "document_ready",
                                "message_template_language": "en",
                                "reason": "LOW_QUALITY",
                            },
                        }
                    ],
                }
            ],
        }
    ).encode()
    for _ in range(2):
        assert service.post_webhook(body).status_code == 200
    assert template_row(db, "document_ready")["pause_count"] == 1
    events = db.execute(
        "SELECT count(*) AS n FROM template_events WHERE name = 'document_ready'"
    ).fetchone()
    assert events["n"] == 1

    # Quality and the end of the pause.
    sandbox.template("document_ready", "en", quality="YELLOW", status="APPROVED")
    row = wait_for(
        lambda: (r := template_row(db, "document_ready")) and r["status"] == "APPROVED" and r,
        what="the approval",
    )
    wait_for(lambda: template_row(db, "document_ready")["quality"] == "YELLOW", what="quality")
    row = template_row(db, "document_ready")
    assert row["problem"] == "ok" and row["paused_until"] is None

    # A second pause lasts 6 h; a quality alert and a status alert reached ops.
    # (A change carries no id, only its entry's time in whole seconds: the same
    # change within the same second is a redelivery. Pauses are hours apart.)
    time.sleep(1.1)
    sandbox.template("document_ready", "en", status="PAUSED")
    row = wait_for(
        lambda: (r := template_row(db, "document_ready")) and r["status"] == "PAUSED" and r,
        what="the second pause",
    )
    assert (row["paused_until"] - row["status_at"]).total_seconds() == 6 * 3600
    # The template's trouble is one episode, whatever each webhook said: opened by the
    # first pause, escalated by none (the quality went YELLOW while it was open).
    rows = alerts(db, "template:document_ready:en")
    assert [(a["dedup_key"], a["kind"], a["severity"]) for a in rows] == [
        ("template:document_ready:en", "alert", "error")
    ]
    assert rows[0]["details"]["reported_as"] == "template:document_ready:en:status"


# ── item 5: a template paused mid-morning ───────────────────────────────


def test_a_template_paused_mid_morning_fails_knocks_over_while_in_window_deliveries_go_on(
    db, sandbox, knock_settings, service
):
    # The platform pauses document_ready and nobody told us yet (its webhook
    # is late): the knock's send is what finds out.
    sandbox.template("document_ready", "en", status="PAUSED", webhook=False)
    in_window = add_person(db, inbound_age_seconds=60)
    sandbox.set_window(in_window["phone"], 60)
    closed = add_person(db, inbound_age_seconds=None)
    body = plan_body(3)
    reading = add_document(db, in_window["id"], body)
    knocked = add_document(db, closed["id"], plan_body(2, tag="K"))

    sweep(knock_settings)

    # In-window deliveries need no template: delivered, and sending never paused.
    assert document(db, reading["id"])["delivered_at"] is not None
    assert texts(sandbox.inbox(in_window["phone"])) == delivery_messages(body)
    sender = db.execute("SELECT paused_at FROM sender_state").fetchone()
    assert sender is None or sender["paused_at"] is None
    # The knock failed over to the fallback at once, one knock reached the person.
    got = knocks(sandbox.inbox(closed["phone"]))
    assert [k["name"] for k in got] == ["document_waiting"]
    assert state_of(db, knocked["id"]) == "awaiting_reply"
    rows = knock_rows(db, closed["id"])
    assert [(r["template"], r["state"], r["error_code"]) for r in rows] == [
        ("document_ready", "refused", 132015),
        ("document_waiting", "sent", None),
    ]
    assert template_row(db, "document_ready")["problem"] == "refused"
    # The refused send opened the template's episode.
    (refused,) = alerts(db, "template:document_ready:en")
    assert refused["details"]["reported_as"] == "knock_template:document_ready:en:132015"

    # The webhook arrives: the next knock goes straight to the fallback,
    # without another refused send.
    sandbox.template("document_ready", "en", status="APPROVED", webhook=False)
    sandbox.template("document_ready", "en", status="PAUSED")
    wait_for(lambda: template_row(db, "document_ready")["status"] == "PAUSED", what="webhook")
    refused_before = sandbox.stats()["rejected_by_code"].get("132015", 0)
    later = add_person(db, inbound_age_seconds=None)
    add_document(db, later["id"], plan_body(2, tag="L"))
    sweep(knock_settings)
    assert [k["name"] for k in knocks(sandbox.inbox(later["phone"]))] == ["document_waiting"]
    assert sandbox.stats()["rejected_by_code"].get("132015", 0) == refused_before


def test_with_no_healthy_template_knocks_wait_and_go_out_when_one_recovers(
    db, sandbox, knock_settings, service
):
    for name in ("document_ready", "document_waiting"):
        sandbox.template(name, "en", status="PAUSED")
    wait_for(
        lambda: all(
            (r := template_row(db, n)) and r["status"] == "PAUSED"
            for n in ("document_ready", "document_waiting")
        ),
        what="both pauses",
    )
    person = add_person(db, inbound_age_seconds=None)
    doc = add_document(db, person["id"], plan_body(2))

    sweep(knock_settings)

    assert knocks(sandbox.inbox(person["phone"])) == []
    assert state_of(db, doc["id"]) == "knock_held"
    row = document(db, doc["id"])
    assert "no knock template can be used" in row["last_delivery_error"]
    # Held for want of a template: the first template's episode, already open (the
    # pause webhooks): no second alert.
    assert alerts(db, "knock_held:") == []
    assert [a["kind"] for a in alerts(db, "template:document_ready:en")] == ["alert"]
    held = template_checks.check_knock_held(db, knock_settings)
    assert held.severity == Severity.ERROR and held.count == 1
    # Not knocked: the person's 24 h knock is still theirs.
    assert (
        db.execute("SELECT last_knock_at FROM people WHERE id = %s", (person["id"],)).fetchone()[
            "last_knock_at"
        ]
        is None
    )

    # The fallback is approved again: its webhook wakes the held knock, the
    # service sweeps it, and it goes out on the template that recovered.
    sandbox.template("document_waiting", "en", status="APPROVED")
    wait_for(lambda: knocks(sandbox.inbox(person["phone"])), what="the knock after the recovery")
    assert [k["name"] for k in knocks(sandbox.inbox(person["phone"]))] == ["document_waiting"]
    wait_for(lambda: state_of(db, doc["id"]) == "awaiting_reply", what="awaiting the reply")
    assert template_checks.check_knock_held(db, knock_settings).passed


def test_a_pause_that_ends_by_itself_is_noticed(db, sandbox, knock_settings, service):
    sandbox.template("document_ready", "en", status="PAUSED")
    wait_for(lambda: template_row(db, "document_ready"), what="the pause")
    # Three hours pass (the clock moved through the data): no webhook came.
    db.execute(
        "UPDATE message_templates SET status_at = status_at - interval '3 hours 1 minute', "
        "paused_until = paused_until - interval '3 hours 1 minute' WHERE name = 'document_ready'"
    )
    sandbox.template("document_ready", "en", status="APPROVED", webhook=False)
    (state,) = [
        t
        for t in template_checks.template_states(db, knock_settings)
        if t.name == "document_ready" and t.language == "en"
    ]
    assert state.problem == "ok" and state.pause_lapsed
    result = template_checks.template_result(state)
    assert result.passed and result.metadata["pause_ended_by_itself"]
    assert "ended by itself" in result.summary
    person = add_person(db, inbound_age_seconds=None)
    add_document(db, person["id"], plan_body(1))
    sweep(knock_settings)
    assert [k["name"] for k in knocks(sandbox.inbox(person["phone"]))] == ["document_ready"]


# ── item 4: asynchronous failures of knocks ──────────────────────────────


def test_a_knock_failed_later_as_unreachable_abandons_and_alerts(
    db, sandbox, knock_settings, service
):
    person = add_person(db, inbound_age_seconds=None)
    sandbox.set_unreachable(person["phone"], mode="async")
    doc = add_document(db, person["id"], plan_body(2))
    sweep(knock_settings)
    # Waiting, or already abandoned when the failed status beat the sweep.
    assert state_of(db, doc["id"]) in ("awaiting_reply", "abandoned")

    wait_for(lambda: document(db, doc["id"])["abandoned_at"], what="the abandonment")
    assert document(db, doc["id"])["abandon_reason"] == "undeliverable"
    assert knock_rows(db, person["id"])[-1]["state"] == "failed"
    assert alerts(db, f"recipient:{person['id']}")


def test_a_knock_failed_before_its_send_was_answered_is_not_forgotten(
    db, sandbox, knock_settings, service
):
    # The sandbox accepts the knock, fails it by status at once, and takes
    # 1.5 s to finish its answer to the send: the failure is applied while the
    # sender still holds the document, before it parks it to wait.
    person = add_person(db, inbound_age_seconds=None)
    sandbox.set_unreachable(person["phone"], mode="async")
    sandbox.faults(stall_after_accept_rate=1.0, stall_ms=1500)
    doc = add_document(db, person["id"], plan_body(2))
    sweep(knock_settings)

    row = wait_for(lambda: (r := document(db, doc["id"]))["abandoned_at"] and r, what="abandoned")
    assert row["abandon_reason"] == "undeliverable"
    failed_at = db.execute(
        "SELECT s.received_at FROM status_events s "
        "JOIN knocks k ON k.wa_message_id = s.wa_message_id "
        "WHERE k.person_id = %s AND s.status = 'failed'",
        (person["id"],),
    ).fetchone()["received_at"]
    assert failed_at < row["knock_sent_at"], "the failure came before the knock was recorded"
    assert alerts(db, f"recipient:{person['id']}")


def test_a_knock_whose_template_fails_later_knocks_again_on_the_fallback(
    db, sandbox, knock_settings, service
):
    # Accepted, then failed with 132015: the pause reached the send late.
    sandbox.template("document_ready", "en", status="PAUSED", mode="async", webhook=False)
    person = add_person(db, inbound_age_seconds=None)
    doc = add_document(db, person["id"], plan_body(2))
    sweep(knock_settings)

    # The failed status gives the knock back; the service sweeps the document
    # at once and it knocks on the fallback (the person's knock is theirs again).
    wait_for(
        lambda: [k["name"] for k in knocks(sandbox.inbox(person["phone"]))] == ["document_waiting"],
        what="the knock on the fallback",
    )
    wait_for(lambda: state_of(db, doc["id"]) == "awaiting_reply", what="awaiting the reply")
    rows = knock_rows(db, person["id"])
    assert [(r["template"], r["state"], r["error_code"]) for r in rows] == [
        ("document_ready", "failed", 132015),
        ("document_waiting", "sent", None),
    ]
    assert document(db, doc["id"])["delivery_attempts"] == 0, "the template's, not the person's"


def test_a_knock_withheld_for_ecosystem_health_is_parked_a_day_and_counted(
    db, sandbox, knock_settings, service
):
    sandbox.template("document_ready", "en", fail_code=131049, mode="async")
    person = add_person(db, inbound_age_seconds=None)
    doc = add_document(db, person["id"], plan_body(2))
    sweep(knock_settings)

    wait_for(lambda: document(db, doc["id"])["awaiting_reply_since"] is None, what="unwaited")
    row = db.execute(
        "SELECT delivery_attempts, extract(epoch FROM next_attempt_at - now()) AS due_in, "
        "knock_sent_at FROM documents WHERE id = %s",
        (doc["id"],),
    ).fetchone()
    assert row["delivery_attempts"] == 1
    assert row["due_in"] >= 24 * 3600 - 60, "not before a day has passed"
    assert row["knock_sent_at"] is None, "it knocks again then"
    assert knock_rows(db, person["id"])[-1]["error_code"] == 131049


def test_knocks_failing_later_count_up_to_the_maximum_and_are_abandoned(
    db, sandbox, knock_settings, service
):
    # A passing failure after acceptance (131000), every time; DELIVERY_MAX_ATTEMPTS=2.
    sandbox.template("document_ready", "en", fail_code=131000, mode="async")
    sandbox.template("document_waiting", "en", fail_code=131000, mode="async")
    person = add_person(db, inbound_age_seconds=None)
    doc = add_document(db, person["id"], plan_body(2))
    settings = knock_settings.replace(delivery={"max_attempts": 2})
    for attempt in (1, 2):
        sweep(settings)
        wait_for(
            lambda attempt=attempt: (
                len([r for r in knock_rows(db, person["id"]) if r["state"] == "failed"]) == attempt
            ),
            what=f"failed knock {attempt}",
        )
        if attempt == 1:
            wait_for(lambda: document(db, doc["id"])["delivery_attempts"] == 1, what="counted")
            assert state_of(db, doc["id"]) == "undelivered"
            # A minute passes (through the data): the retry is due.
            db.execute("UPDATE documents SET next_attempt_at = now() WHERE id = %s", (doc["id"],))
    wait_for(lambda: document(db, doc["id"])["abandoned_at"], what="abandoned at the maximum")
    assert document(db, doc["id"])["abandon_reason"] == "max_attempts"
    assert alerts(db, f"max_attempts:{doc['id']}")
    assert len(knocks(sandbox.inbox(person["phone"]))) == 0, "none ever arrived"


# ── the knock never delivered ────────────────────────────────────────────


def test_a_knock_never_delivered_is_reported_apart_from_an_unanswered_one(
    db, sandbox, knock_settings, service
):
    # Template pacing: the platform accepts document_ready's sends, says "sent",
    # and never delivers them. document_waiting delivers normally.
    sandbox.template("document_ready", "en", pacing="drop")
    dropped = add_person(db, inbound_age_seconds=None, locale="en")
    delivered = add_person(db, inbound_age_seconds=None, locale="es")
    dropped_doc = add_document(db, dropped["id"], plan_body(2))
    add_document(db, delivered["id"], plan_body(2, tag="E"))
    sweep(knock_settings)
    wait_for(
        lambda: knock_rows(db, delivered["id"])[0]["delivered_at"] is not None,
        what="the delivered knock's status",
    )
    wait_for(
        lambda: knock_rows(db, dropped["id"])[0]["wa_message_id"] is not None,
        what="the dropped knock's sent status",
    )
    assert knocks(sandbox.inbox(dropped["phone"])) == []
    assert sandbox.stats()["paced"] == 1

    # Before the threshold nothing is reported.
    assert template_checks.check_knocks_not_delivered(db, knock_settings).passed
    # One second is the threshold here; the default is an hour.
    quick = knock_settings.replace(checks={"knock_undelivered_seconds": 1})
    time.sleep(1.2)
    result = template_checks.check_knocks_not_delivered(db, quick)
    assert result.severity == Severity.WARNING and result.count == 1
    (listed,) = result.metadata["oldest"]
    assert listed["person"] == dropped["id"] and listed["documents"] == [dropped_doc["id"]]
    assert listed["template"] == "document_ready:en"
    # The template's own check says so too; the delivered knock is not reported.
    (state,) = [
        t
        for t in template_checks.template_states(db, quick)
        if (t.name, t.language) == ("document_ready", "en")
    ]
    assert state.not_delivered == 1 and template_checks.template_result(state).severity == (
        Severity.WARNING
    )
    (es,) = [
        t
        for t in template_checks.template_states(db, quick)
        if (t.name, t.language) == ("document_ready", "es")
    ]
    assert es.delivered == 1 and es.not_delivered == 0
    # Both documents wait on their person; only the dropped knock is "not delivered".
    assert state_of(db, dropped_doc["id"]) == "awaiting_reply"


# ── a re-categorisation announced ────────────────────────────────────────


def test_a_recategorisation_announced_alerts_before_it_takes_effect(
    db, sandbox, knock_settings, service
):
    sandbox.template(
        "document_ready", "en", announce_category="MARKETING", effective_in_seconds=24 * 3600
    )
    row = wait_for(
        lambda: (r := template_row(db, "document_ready")) and r["announced_category"] and r,
        what="the announcement",
    )
    # Ops is told now, a day ahead; the template still knocks meanwhile.
    (alert,) = alerts(db, "template:document_ready:en")
    assert alert["details"]["reported_as"] == "template:document_ready:en:category"
    assert alert["severity"] == "warning"
    assert "MARKETING" in alert["message"]
    assert row["announced_effective_at"] is not None and row["problem"] == "ok"
    (state,) = [
        t
        for t in template_checks.template_states(db, knock_settings)
        if (t.name, t.language) == ("document_ready", "en")
    ]
    check = template_checks.template_result(state)
    assert check.severity == Severity.WARNING and "announced" in check.summary
    person = add_person(db, inbound_age_seconds=None)
    add_document(db, person["id"], plan_body(1))
    sweep(knock_settings)
    assert [k["name"] for k in knocks(sandbox.inbox(person["phone"]))] == ["document_ready"]

    # It takes effect: the template is no longer UTILITY: ERROR, and knocks
    # use the fallback (a marketing knock to a +1 number would never arrive).
    sandbox.template("document_ready", "en", category="MARKETING")
    wait_for(
        lambda: template_row(db, "document_ready")["category"] == "MARKETING",
        what="the re-categorisation",
    )
    (state,) = [
        t
        for t in template_checks.template_states(db, knock_settings)
        if (t.name, t.language) == ("document_ready", "en")
    ]
    assert state.problem == "not_utility" and state.announced_category is None
    assert template_checks.template_result(state).severity == Severity.ERROR
    later = add_person(db, inbound_age_seconds=None)
    add_document(db, later["id"], plan_body(1, tag="M"))
    sweep(knock_settings)
    assert [k["name"] for k in knocks(sandbox.inbox(later["phone"]))] == ["document_waiting"]
