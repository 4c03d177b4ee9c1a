"""The webhook service, in process (the real ASGI app on real Postgres)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from delivery_pipeline.service.app import create_app
from delivery_pipeline.testing import payloads
from delivery_pipeline.testing.service import APP_SECRET, INTERNAL_TOKEN, VERIFY_TOKEN
from delivery_pipeline.whatsapp.signature import sign
from delivery_pipeline.whatsapp.webhook_values import TEMPLATE_FIELDS
from delivery_pipeline_tests.support.data import (
    add_document,
    add_person,
    chunks,
    document,
)
from delivery_pipeline_tests.support.engine import first_part_unknown, sweep
from delivery_pipeline_tests.support.properties import examples

FIXTURES = Path(__file__).parents[1] / "fixtures" / "meta-webhooks"


@pytest.fixture
def service_settings(settings):
    return settings.replace(
        whatsapp={"app_secret": APP_SECRET, "verify_token": VERIFY_TOKEN},
        # Sweeps run by hand here; test_listener.py covers ready notifications.
        service={
            "internal_token": INTERNAL_TOKEN,
            "webhook_max_body_bytes": 64 * 1024,
            "listen": False,
        },
    )


@pytest.fixture
def client(service_settings) -> Iterator[TestClient]:
    app = create_app(service_settings, service_settings.database.database_url)
    with TestClient(app) as test_client:
        yield test_client


def post(client: TestClient, body: bytes, signature: str | None = "valid"):
    headers = {"Content-Type": "application/json"}
    if signature == "valid":
        headers["X-Hub-Signature-256"] = sign(APP_SECRET, body)
    elif signature is not None:
        headers["X-Hub-Signature-256"] = signature
    return client.post("/webhooks/whatsapp", content=body, headers=headers)


def count(db, table: str) -> int:
    return db.execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"]


def test_verification_handshake(client):
    ok = client.get(
        "/webhooks/whatsapp",
        params={
            "hub.mode": "subscribe",
            "hub.verify_token": VERIFY_TOKEN,
            "hub.challenge": "1158201444",
        },
    )
    assert ok.status_code == 200 and ok.text == "1158201444"
    wrong = client.get(
        "/webhooks/whatsapp",
        params={"hub.mode": "subscribe", "hub.verify_token": "nope", "hub.challenge": "x"},
    )
    assert wrong.status_code == 403


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.stem)
def test_every_fixture_is_answered_without_5xx(client, db, path):
    response = post(client, path.read_bytes())
    assert response.status_code == 200, response.text
    payload = json.loads(path.read_bytes())
    values = [c["value"] for e in payload["entry"] for c in e.get("changes", [])]
    messages = [m for v in values for m in v.get("messages", [])]
    statuses = [s for v in values for s in v.get("statuses", [])]
    assert count(db, "inbound_messages") == len(messages)
    assert count(db, "status_events") == len(statuses)
    text = [m for m in messages if m.get("type") == "text"]
    if text:
        stored = db.execute(
            "SELECT body FROM inbound_messages WHERE message_type = 'text'"
        ).fetchall()
        assert [r["body"] for r in stored] == [m["text"]["body"] for m in text]
    lifecycle = [
        c for e in payload["entry"] for c in e.get("changes", []) if c["field"] in TEMPLATE_FIELDS
    ]
    # Template lifecycle changes are kept as template events (sql/migrations/020).
    assert count(db, "template_events") == len(lifecycle)
    if not messages and not statuses and not lifecycle:
        assert count(db, "raw_webhooks") == 1, "other fields are recorded for inspection"


@pytest.mark.parametrize("signature", [None, "sha256=" + "0" * 64, "stale", "md5=abc"])
def test_bad_signatures_store_nothing(client, db, signature):
    person = add_person(db)
    body = payloads.inbound(person["phone"], "wamid.SIG1")
    if signature == "stale":
        signature = sign(APP_SECRET, payloads.inbound(person["phone"], "wamid.OTHER"))
    response = post(client, body, signature)
    assert response.status_code == (401 if signature is None else 403)
    assert count(db, "inbound_messages") == 0 and count(db, "raw_webhooks") == 0


def test_body_over_the_limit_is_413(client, db):
    body = b'{"entry": [' + b" " * (64 * 1024) + b"]}"
    assert post(client, body).status_code == 413
    assert count(db, "raw_webhooks") == 0


def test_malformed_json_is_kept_raw_and_answered_200(client, db):
    assert post(client, b"{not json").status_code == 200
    assert post(client, b'{"object": "whatsapp_business_account"}').status_code == 200
    rows = db.execute("SELECT reason, body FROM raw_webhooks ORDER BY id").fetchall()
    assert len(rows) == 2 and rows[0]["body"] == b"{not json"


def test_redelivered_inbound_stores_one_row(client, db):
    person = add_person(db)
    body = payloads.inbound(person["phone"], "wamid.DUP1", "same")
    for _ in range(3):
        assert post(client, body).status_code == 200
    assert count(db, "inbound_messages") == 1


def test_unknown_sender_is_stored_and_flagged(client, db):
    assert post(client, payloads.inbound("+4915200000001", "wamid.UNK1")).status_code == 200
    row = db.execute("SELECT * FROM inbound_messages").fetchone()
    assert row["unknown_sender"] is True and row["person_id"] is None


def test_older_message_never_lowers_last_inbound(client, db):
    person = add_person(db, inbound_age_seconds=None)
    now = time.time()
    post(client, payloads.inbound(person["phone"], "wamid.NEW", timestamp=now - 60))
    post(client, payloads.inbound(person["phone"], "wamid.OLD", timestamp=now - 7200))
    last = db.execute(
        "SELECT extract(epoch FROM last_inbound_at) AS t FROM people WHERE id = %s", (person["id"],)
    ).fetchone()["t"]
    assert abs(float(last) - (int(now) - 60)) < 1


def test_inbound_reply_wakes_awaiting_documents(client, db, sandbox):
    person = add_person(db, inbound_age_seconds=None)
    doc = add_document(db, person["id"], "A short plan.")
    db.execute(
        "UPDATE documents SET knock_sent_at = now(), awaiting_reply_since = now() WHERE id = %s",
        (doc["id"],),
    )
    sandbox.say(person["phone"], "here I am")  # the sandbox's window opens too
    assert post(client, payloads.inbound(person["phone"], "wamid.WAKE")).status_code == 200
    # The targeted sweep runs in the background after the 200.
    deadline = time.monotonic() + 10
    while document(db, doc["id"])["delivered_at"] is None:
        assert time.monotonic() < deadline, "not delivered by the inbound sweep"
        time.sleep(0.05)
    assert [m["text"] for m in sandbox.inbox(person["phone"])] == ["A short plan."]


def _delivered_chunk(db, sandbox, settings, person_body="Hello."):
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    doc = add_document(db, person["id"], person_body)
    sweep(settings)
    return person, doc, chunks(db, doc["id"])[0]


def test_statuses_out_of_order_keep_the_highest_state(client, db, sandbox, settings):
    _, doc, chunk = _delivered_chunk(db, sandbox, settings)
    wamid = chunk["wa_message_id"]
    t = time.time()
    for state, ts in (("read", t + 3), ("delivered", t + 2), ("sent", t + 1), ("read", t + 3)):
        assert post(client, payloads.status(wamid, state, timestamp=ts)).status_code == 200
    row = chunks(db, doc["id"])[0]
    assert row["state"] == "sent" and row["read_at"] is not None and row["delivered_at"] is not None
    assert count(db, "status_events") == 3


def test_read_without_delivered_fills_both(client, db, sandbox, settings):
    _, doc, chunk = _delivered_chunk(db, sandbox, settings)
    post(client, payloads.status(chunk["wa_message_id"], "read"))
    row = chunks(db, doc["id"])[0]
    assert row["delivered_at"] is not None and row["read_at"] is not None


def test_status_with_callback_settles_an_unknown_chunk(client, db, sandbox, settings):
    person, doc = first_part_unknown(db, sandbox, settings)
    unknown, pending = chunks(db, doc["id"])
    assert (unknown["state"], pending["state"]) == ("unknown", "pending")
    wamid = sandbox.inbox(person["phone"])[0]["id"]

    post(client, payloads.status(wamid, "sent", callback=unknown["callback_data"]))

    settled = chunks(db, doc["id"])[0]
    assert settled["state"] == "sent" and settled["wa_message_id"] == wamid
    # The settled document is due now: the service's own sweep (started by the
    # status) or this one delivers the rest, whichever claims it.
    sweep(settings)
    deadline = time.monotonic() + 20
    while document(db, doc["id"])["delivered_at"] is None:
        assert time.monotonic() < deadline, "the rest was never delivered"
        time.sleep(0.05)
    assert len(sandbox.inbox(person["phone"])) == 2, "chunk 0 was not re-sent"


def test_async_unreachable_abandons_with_reason(client, db, sandbox, settings):
    person, doc, chunk = _delivered_chunk(db, sandbox, settings)
    error = {"code": 131026, "title": "Receiver is incapable of receiving this message"}
    post(client, payloads.status(chunk["wa_message_id"], "failed", errors=[error]))
    row = document(db, doc["id"])
    assert row["abandon_reason"] == "undeliverable" and row["delivered_at"] is None
    assert chunks(db, doc["id"])[0]["state"] == "failed"


def test_async_reengagement_undelivers_and_closes_the_window(client, db, sandbox, settings):
    person, doc, chunk = _delivered_chunk(db, sandbox, settings)
    post(
        client,
        payloads.status(chunk["wa_message_id"], "failed", errors=[payloads.REENGAGEMENT_ERROR]),
    )
    row = document(db, doc["id"])
    assert row["delivered_at"] is None and row["abandoned_at"] is None
    assert (
        db.execute(
            "SELECT window_refused_at FROM people WHERE id = %s", (person["id"],)
        ).fetchone()["window_refused_at"]
        is not None
    )


def test_a_refusal_from_the_future_does_not_keep_the_window_shut(client, db, sandbox, settings):
    """A 131047 status dated a month ahead: the window is closed from now, not until
    then (a person's next message reopens it), and the chunk failed now."""
    person, doc, chunk = _delivered_chunk(db, sandbox, settings)
    body = payloads.status(
        chunk["wa_message_id"],
        "failed",
        timestamp=time.time() + 30 * 24 * 3600,
        errors=[payloads.REENGAGEMENT_ERROR],
    )

    assert post(client, body).status_code == 200

    row = db.execute(
        "SELECT p.window_refused_at, c.failed_at, now() AS now FROM people p "
        "JOIN documents d ON d.person_id = p.id JOIN delivery_chunks c ON c.document_id = d.id "
        "WHERE d.id = %s",
        (doc["id"],),
    ).fetchone()
    assert row["window_refused_at"] is not None and row["window_refused_at"] <= row["now"]
    assert row["failed_at"] <= row["now"]


def test_poke_requires_the_token_and_a_target(client):
    assert client.post("/internal/sweep", json={"document_id": 1}).status_code == 401
    bad = {"Authorization": "Bearer wrong"}
    assert client.post("/internal/sweep", json={"document_id": 1}, headers=bad).status_code == 401
    good = {"Authorization": f"Bearer {INTERNAL_TOKEN}"}
    assert client.post("/internal/sweep", json={}, headers=good).status_code == 400
    assert (
        client.post("/internal/sweep", json={"document_id": "7"}, headers=good).status_code == 400
    )
    assert client.post("/internal/sweep", content=b"[", headers=good).status_code == 400
    assert (
        client.post("/internal/sweep", json={"document_id": 99999}, headers=good).status_code == 202
    )


def test_healthz(client):
    body = client.get("/healthz").json()
    assert body["status"] == "ok" and body["schema_version"] >= 1 and body["version"]


def test_healthz_without_its_database_says_a_fixed_sentence_and_logs_the_detail(
    service_settings, caplog
):
    """Whoever reaches the port learns nothing of the database: not its host, its user
    or the driver's words; the service's log has them."""
    url = "postgresql://ops_user:hunter2-secret@127.0.0.1:9/delivery?connect_timeout=1"
    app = create_app(service_settings.replace(database={"database_url": url}), url)
    caplog.set_level(logging.WARNING, logger="delivery_pipeline.service.app")
    with TestClient(app) as test_client:
        response = test_client.get("/healthz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "database": "unreachable, or not migrated: see the service's log",
        "version": response.json()["version"],
    }
    for internal in ("ops_user", "hunter2", "127.0.0.1", "9", "connection", "pool"):
        assert internal not in response.text.replace(response.json()["version"], "")
    [line] = [r.getMessage() for r in caplog.records if "health check" in r.getMessage()]
    assert "the database is not usable" in line


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "entry",
                    "changes",
                    "value",
                    "messages",
                    "statuses",
                    "errors",
                    "id",
                    "from",
                    "timestamp",
                    "type",
                    "text",
                    "body",
                    "status",
                    "field",
                    "biz_opaque_callback_data",
                    "contacts",
                    "recipient_id",
                    "code",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@given(payload=json_values)
@examples(150)
def test_fuzzed_signed_bodies_never_5xx(client, payload):
    body = json.dumps({"object": "whatsapp_business_account", "entry": payload}).encode()
    assert post(client, body).status_code == 200
