"""A document as one file (delivery/as_file.py): on a document template outside the
window, as a document message inside it; fenced, counted and watched like a part.

Real Postgres, the sandbox over HTTP, the PDF opened and read; racing sweepers
are real processes.
"""

from __future__ import annotations

import datetime as dt
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.files.stored import ensure_file
from delivery_pipeline.settings import Settings
from delivery_pipeline.testing.files import flat, pdf_text
from delivery_pipeline.testing.service import APP_SECRET
from delivery_pipeline.watch.checks import Severity
from delivery_pipeline.watch.checks import templates as template_checks
from delivery_pipeline_tests.support.api import AUTH, start_api_service
from delivery_pipeline_tests.support.api import plan as api_plan
from delivery_pipeline_tests.support.cli import run, sweep_process
from delivery_pipeline_tests.support.data import (
    add_document,
    add_person,
    chunks,
    document,
    new_phone,
    plan_body,
)
from delivery_pipeline_tests.support.engine import hooked_service, sweep
from delivery_pipeline_tests.support.inbox import knocks, texts
from delivery_pipeline_tests.support.waiting import wait_for

pytestmark = pytest.mark.engine

DOCUMENT_TEMPLATES = (
    "en=document_attached:en|brief_attached:en,es=document_attached:es,pt=document_attached:pt_BR"
)
# brief_attached takes no {{kind}}: the fallback, tried once the first is paused.
ENV = {"DELIVERY_DOCUMENT_TEMPLATES": DOCUMENT_TEMPLATES}


@pytest.fixture
def file_settings(settings: Settings) -> Settings:
    return settings.replace(delivery={"document_templates": DOCUMENT_TEMPLATES})


def files(inbox: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages that carried a file."""
    return [m for m in inbox if m.get("document")]


def pdf_reads_body(sandbox, message: dict[str, Any], body: str) -> bool:
    return flat(body) in flat(pdf_text(sandbox.media_bytes(message["document"]["id"])))


# ── outside the window ──────────────────────────────────────────────────


def test_outside_the_window_the_document_goes_as_one_file_on_a_template(db, sandbox, file_settings):
    person = add_person(db, name="Ana", inbound_age_seconds=None)
    body = plan_body(9)
    doc = add_document(db, person["id"], body)

    result = sweep(file_settings)

    assert result.delivered == 1 and result.files_sent == 1 and result.knocks_sent == 0
    inbox = sandbox.inbox(person["phone"])
    [message] = inbox
    assert message["type"] == "template"
    assert message["template"]["name"] == "document_attached"
    assert message["template"]["parameters"][0] == "Ana"
    assert message["document"]["filename"].endswith(".pdf")
    assert pdf_reads_body(sandbox, message, body)
    row = document(db, doc["id"])
    assert row["way"] == "file" and row["file_template"] == "document_attached"
    [ledger] = chunks(db, doc["id"])
    assert ledger["state"] == "sent" and ledger["wa_message_id"] == message["id"]

    # Which way it went, where a person looks.
    url = file_settings.database.database_url
    shown = run(url, "documents", "show", str(doc["id"])).stdout
    assert "way:    file (document_attached:en)" in shown, shown
    listed = run(url, "documents", "list", "--json").stdout
    assert '"way": "file"' in listed, listed
    status = run(url, "status").stdout
    assert "delivered by way: file 1 (1 in 24h)" in status, status


def test_without_document_templates_it_knocks_as_before(db, sandbox, settings):
    person = add_person(db, inbound_age_seconds=None)
    add_document(db, person["id"], plan_body(3))

    result = sweep(settings)

    assert result.knocks_sent == 1 and result.files_sent == 0
    assert files(sandbox.inbox(person["phone"])) == []


def test_a_kind_not_sent_as_a_file_knocks(db, sandbox, file_settings):
    knocking = file_settings.replace(delivery={"file_outside_window": "daily_brief"})
    person = add_person(db, inbound_age_seconds=None)
    add_document(db, person["id"], plan_body(3))

    result = sweep(knocking)

    assert result.knocks_sent == 1 and result.files_sent == 0


def test_a_paused_template_falls_over_to_the_next_then_to_the_knock(db, sandbox, file_settings):
    first = add_person(db, inbound_age_seconds=None)
    second = add_person(db, inbound_age_seconds=None)
    sandbox.template("document_attached", "en", status="PAUSED", reason="LOW_QUALITY")
    add_document(db, first["id"], plan_body(2))

    # Refused on the send (the sandbox's template is paused): the next one, at once.
    result = sweep(file_settings)

    assert result.delivered == 1 and result.files_sent == 1
    [message] = sandbox.inbox(first["phone"])
    assert message["template"]["name"] == "brief_attached"

    sandbox.template("brief_attached", "en", status="PAUSED", reason="LOW_QUALITY")
    doc = add_document(db, second["id"], plan_body(2))
    result = sweep(file_settings)

    # Both known to be refused now: the knock, and nothing of a file is left behind.
    assert result.knocks_sent == 1 and result.files_sent == 0
    assert [k["name"] for k in knocks(sandbox.inbox(second["phone"]))] == ["document_ready"]
    assert chunks(db, doc["id"]) == [] and document(db, doc["id"])["way"] is None


def test_a_refused_file_goes_without_it(db, sandbox, file_settings):
    person = add_person(db, inbound_age_seconds=None)
    doc = add_document(db, person["id"], plan_body(2))
    sandbox.faults(media_max_bytes=100)

    result = sweep(file_settings)

    assert result.knocks_sent == 1 and result.files_sent == 0
    row = document(db, doc["id"])
    assert row["way"] == "parts" and row["awaiting_reply_since"] is not None
    alerts = db.execute("SELECT dedup_key FROM ops_alerts").fetchall()
    assert any(a["dedup_key"].startswith("media_refused:") for a in alerts)


def test_a_forgotten_media_id_is_dropped_uploaded_again_and_sent_once(db, sandbox, file_settings):
    person = add_person(db, inbound_age_seconds=None)
    body = plan_body(2)
    doc = add_document(db, person["id"], body)
    # An id recorded before that the platform no longer knows.
    stored = ensure_file(db, doc["id"])
    assert stored is not None
    db.execute(
        "INSERT INTO document_media (document_id, phone_number_id, sha256, media_id, "
        "uploaded_at, expires_at, uploads) "
        "VALUES (%s, %s, %s, 'gone-media-id', now(), now() + interval '29 days', 1)",
        (doc["id"], sandbox.phone_number_id, stored.sha256),
    )

    result = sweep(file_settings)

    assert result.delivered == 1 and result.files_sent == 1
    [message] = files(sandbox.inbox(person["phone"]))
    assert message["document"]["id"] != "gone-media-id"
    assert pdf_reads_body(sandbox, message, body)


# ── inside the window ───────────────────────────────────────────────────


def test_inside_the_window_parts_by_default_a_file_when_the_kind_says(db, sandbox, file_settings):
    texting, filing = add_person(db), add_person(db)
    for person in (texting, filing):
        sandbox.say(person["phone"], "hi")
    body = plan_body(4)
    add_document(db, texting["id"], body)
    result = sweep(file_settings)
    assert result.chunks_sent == len(delivery_messages(body)) and result.files_sent == 0
    assert texts(sandbox.inbox(texting["phone"])) == delivery_messages(body)

    as_file = file_settings.replace(delivery={"file_in_window": "plan"})
    doc = add_document(db, filing["id"], body)
    result = sweep(as_file)

    assert result.files_sent == 1 and result.chunks_sent == 0 and result.delivered == 1
    [message] = sandbox.inbox(filing["phone"])
    assert message["type"] == "document" and message["document"]["caption"].startswith(
        "Your plan · "
    )
    assert pdf_reads_body(sandbox, message, body)
    assert document(db, doc["id"])["way"] == "file_in_window"


# ── real processes: racing sweepers, sweeps killed ──────────────────────


@pytest.mark.slow
def test_eight_racing_sweepers_send_one_template_per_document(db, sandbox, file_settings):
    # Every request takes a while: the sweepers overlap on every document.
    sandbox.faults(latency_ms=100, pair_rate_enabled=False, throughput_limit=0)
    people, bodies = [], {}
    for i in range(24):
        person = add_person(db, name=f"Person {i}", inbound_age_seconds=None)
        people.append(person)
        bodies[person["phone"]] = plan_body(3, tag=f"D{i} ")
        add_document(db, person["id"], bodies[person["phone"]])

    procs = [sweep_process(file_settings, "--concurrency", "4", **ENV) for _ in range(8)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outputs]

    inboxes = sandbox.inboxes()
    for person in people:
        inbox = inboxes.get(person["phone"], [])
        assert len(inbox) == 1, (person["phone"], inbox)
        [message] = inbox
        assert message["template"]["name"] == "document_attached"
        assert pdf_reads_body(sandbox, message, bodies[person["phone"]])
    assert len(sandbox.media()) == len(people), "one upload per document"
    ways = db.execute(
        "SELECT way, count(*) AS n FROM documents WHERE delivered_at IS NOT NULL GROUP BY way"
    ).fetchall()
    assert [(w["way"], w["n"]) for w in ways] == [("file", len(people))]


@pytest.fixture
def service(sandbox, file_settings) -> Iterator[Any]:
    with hooked_service(sandbox, file_settings.database.database_url, **ENV) as svc:
        yield svc


def _kill_when(proc, ready, what: str) -> None:
    deadline = time.monotonic() + 60
    while not ready():
        assert time.monotonic() < deadline and proc.poll() is None, what
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _lease_lapses(db, document_id: int) -> None:
    """The dead sender's lease is over (the clock, moved through the data)."""
    db.execute(
        "UPDATE documents SET claimed_at = now() - interval '1 hour' WHERE id = %s",
        (document_id,),
    )


@pytest.mark.slow
def test_a_sweep_killed_between_upload_and_send_sends_once(db, sandbox, file_settings, service):
    person = add_person(db, inbound_age_seconds=None)
    body = plan_body(3)
    doc = add_document(db, person["id"], body)
    sandbox.faults(latency_ms=1500)

    proc = sweep_process(file_settings, **ENV)
    _kill_when(
        proc,
        lambda: db.execute(
            "SELECT 1 FROM document_media WHERE document_id = %s AND media_id IS NOT NULL",
            (doc["id"],),
        ).fetchone(),
        "the file never uploaded",
    )
    sandbox.faults(latency_ms=0)
    time.sleep(2.0)  # a send in flight when the sender died arrives, or never does
    sandbox.wait_webhooks_idle()
    _lease_lapses(db, doc["id"])

    result = sweep(file_settings.replace(delivery={"unknown_grace_seconds": 0}))

    assert result.delivered == 1
    [message] = sandbox.inbox(person["phone"])
    assert pdf_reads_body(sandbox, message, body)
    assert len(sandbox.media()) == 1, "the recorded upload is reused"
    assert document(db, doc["id"])["delivered_at"] is not None


@pytest.mark.slow
def test_a_sweep_killed_after_the_send_before_its_record_sends_once(
    db, sandbox, file_settings, service
):
    person = add_person(db, inbound_age_seconds=None)
    body = plan_body(3)
    doc = add_document(db, person["id"], body)
    # Accepted, then the answer trickles: the sender waits for it, and dies.
    sandbox.faults(stall_after_accept_rate=1.0, stall_ms=30_000)

    proc = sweep_process(file_settings, **ENV)
    _kill_when(proc, lambda: sandbox.inbox(person["phone"]), "the file never went")
    sandbox.faults(stall_after_accept_rate=0.0)
    wait_for(
        lambda: chunks(db, doc["id"])[0]["state"] == "sent",
        what="its sent status settles the file's row",
    )
    _lease_lapses(db, doc["id"])

    result = sweep(file_settings)

    assert result.delivered == 1 and result.files_sent == 0
    assert len(sandbox.inbox(person["phone"])) == 1
    assert len(sandbox.media()) == 1


@pytest.mark.slow
def test_a_template_paused_mid_morning_the_fallback_then_the_knock(
    db, sandbox, file_settings, service
):
    early, later, last = (add_person(db, inbound_age_seconds=None) for _ in range(3))
    add_document(db, early["id"], plan_body(2))
    assert sweep(file_settings).files_sent == 1

    sandbox.template("document_attached", "en", status="PAUSED", reason="LOW_QUALITY")
    wait_for(
        lambda: db.execute(
            "SELECT 1 FROM message_templates WHERE name = 'document_attached' "
            "AND language = 'en' AND status = 'PAUSED'"
        ).fetchone(),
        what="the pause applied",
    )
    add_document(db, later["id"], plan_body(2))
    result = sweep(file_settings)

    # Known paused before any send: the fallback, with no refused send.
    assert result.files_sent == 1 and not result.send_errors
    [message] = sandbox.inbox(later["phone"])
    assert message["template"]["name"] == "brief_attached"
    # Its own check says so, as a knock template's would.
    check = template_checks.check_document_template(
        db, file_settings, name="document_attached", language="en"
    )
    assert check.name == "document_template_document_attached_en"
    assert check.severity is Severity.ERROR and "PAUSED" in check.summary
    assert template_checks.check_document_template(
        db, file_settings, name="brief_attached", language="en"
    ).passed

    sandbox.template("brief_attached", "en", status="PAUSED", reason="LOW_QUALITY")
    wait_for(
        lambda: db.execute(
            "SELECT 1 FROM message_templates WHERE name = 'brief_attached' AND status = 'PAUSED'"
        ).fetchone(),
        what="the second pause applied",
    )
    add_document(db, last["id"], plan_body(2))
    result = sweep(file_settings)

    assert result.knocks_sent == 1 and result.files_sent == 0 and not result.send_errors
    assert files(sandbox.inbox(last["phone"])) == []


@pytest.mark.slow
def test_a_file_failed_after_acceptance_goes_through_the_completer(
    db, sandbox, file_settings, service
):
    person = add_person(db, inbound_age_seconds=None)
    doc = add_document(db, person["id"], plan_body(2))
    # The template is accepted, then failed: paused after acceptance (132015).
    sandbox.refuse(132015, to=person["phone"], message_type="template", mode="async", count=1)

    # The failed status makes the document due again at once: when it is applied
    # while this sweep still claims, the sweep sends the file again itself.
    sent = sweep(file_settings).files_sent
    assert sent in (1, 2), sent
    wait_for(
        lambda: db.execute(
            "SELECT 1 FROM message_templates t WHERE name = 'document_attached' "
            "AND language = 'en' AND template_problem(t) = 'refused'"
        ).fetchone(),
        what="the failed status applied, holding the template it named",
    )
    if sent == 1:
        # Due again at once: the service sweeps what a status made due (or a sweep does).
        sweep(file_settings)
    wait_for(
        lambda: document(db, doc["id"])["delivered_at"] is not None,
        what="delivered on the next template",
    )
    # The failed one never reached the phone; the file did, once, on the next template.
    names = [m["template"]["name"] for m in sandbox.inbox(person["phone"])]
    assert names == ["brief_attached"]
    row = document(db, doc["id"])
    assert row["way"] == "file" and row["file_template"] == "brief_attached"
    assert row["delivery_attempts"] == 0, "a template's refusal is no attempt of the document's"


@pytest.mark.slow
def test_the_api_says_a_handed_over_document_went_as_a_file(db, sandbox, file_settings):
    with start_api_service(file_settings.database.database_url, sandbox.url, **ENV) as svc:
        sandbox.faults(webhook_url=svc.webhook_url, app_secret=APP_SECRET)
        phone = new_phone()  # a new person: their window is closed
        created = svc.http.post("/v1/documents", json=api_plan(phone), headers=AUTH).json()
        path = f"/v1/documents/{created['id']}"
        if svc.http.get(path, headers=AUTH).json()["state"] != "delivered":
            sweep(file_settings)  # the service's own sweep may have taken it already
        seen = wait_for(
            lambda: (d := svc.http.get(path, headers=AUTH).json())["state"] == "delivered" and d,
            what="the handed-over document delivered",
        )

    assert seen["way"] == "file"
    [message] = sandbox.inbox(phone)
    assert message["template"]["name"] == "document_attached"


@pytest.mark.slow
def test_a_template_flipped_to_marketing_is_passed_over(db, sandbox, file_settings, service):
    sandbox.template("document_attached", "en", category="MARKETING")
    wait_for(
        lambda: db.execute(
            "SELECT 1 FROM message_templates WHERE name = 'document_attached' "
            "AND language = 'en' AND category = 'MARKETING'"
        ).fetchone(),
        what="the re-categorisation applied",
    )
    person = add_person(db, inbound_age_seconds=None)
    add_document(db, person["id"], plan_body(2))

    result = sweep(file_settings)

    # A marketing file would be capped and priced as marketing: the next one.
    assert result.files_sent == 1 and not result.send_errors
    [message] = sandbox.inbox(person["phone"])
    assert message["template"]["name"] == "brief_attached"


# ── late is not stale, at the platform too ──────────────────────────────


def test_a_brief_sent_as_a_file_the_platform_dropped_at_its_time_to_live_ends_expired(
    db, sandbox, file_settings
):
    """The file's sender records its deadline (the template's time to live from the send);
    the phone stays off past it, the sandbox drops the message without a word, and the
    next sweep ends the brief that was recorded delivered at acceptance as expired. It is
    not sent again when the phone comes back."""
    ttl, grace = 2, 1
    sandbox.template("brief_attached", "en", message_send_ttl_seconds=ttl)
    briefs = file_settings.replace(
        delivery={
            "brief_document_templates": "en=brief_attached:en",
            "template_ttls": f"brief_attached={ttl}",
            "template_ttl_grace_seconds": grace,
        }
    )
    person = add_person(db, inbound_age_seconds=None)
    sandbox.set_online(person["phone"], False)
    today = dt.datetime.now(dt.UTC).date()
    brief = add_document(
        db, person["id"], "Your day. Rain at noon.", kind="daily_brief", for_date=today
    )

    assert sweep(briefs).files_sent == 1
    [deadline] = db.execute(
        "SELECT expires_at - sent_at AS ttl FROM delivery_chunks WHERE document_id = %s",
        (brief["id"],),
    ).fetchall()
    assert deadline["ttl"] == dt.timedelta(seconds=ttl)
    assert document(db, brief["id"])["delivered_at"] is not None  # accepted: delivered, for now

    time.sleep(ttl + grace + 0.5)
    sweep(briefs)

    row = document(db, brief["id"])
    assert (row["abandon_reason"], row["delivered_at"]) == ("expired", None)
    sandbox.set_online(person["phone"], True)
    sandbox.wait_webhooks_idle()
    assert files(sandbox.inbox(person["phone"])) == []
    assert sandbox.stats()["dropped_ttl"] == 1
    assert sweep(briefs).files_sent == 0  # never sent again
