"""Any signed body, any content: answered 200 once kept, valid updates applied,
one log line an operator can read. A 5xx only when the body cannot be kept.

In process (the real ASGI app on real Postgres); the 10,000-body run against
the service as a real process is ``test_webhook_fuzz.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import random
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from delivery_pipeline.service.app import create_app
from delivery_pipeline.testing import payloads
from delivery_pipeline.testing.service import APP_SECRET
from delivery_pipeline.whatsapp.signature import sign
from delivery_pipeline_tests.support.data import add_person
from delivery_pipeline_tests.support.mutations import CORPUS, good_entry, mutate
from delivery_pipeline_tests.support.properties import examples

SERVICE_LOG = "delivery_pipeline.service.app"


@pytest.fixture
def app(settings):
    service_settings = settings.replace(whatsapp={"app_secret": APP_SECRET})
    return create_app(service_settings, service_settings.database.database_url)


@pytest.fixture
def client(app) -> Iterator[TestClient]:
    with TestClient(app) as test_client:
        yield test_client


def post(client: TestClient, body: bytes):
    return client.post(
        "/webhooks/whatsapp",
        content=body,
        headers={"X-Hub-Signature-256": sign(APP_SECRET, body), "Content-Type": "application/json"},
    )


def kept_raw(db, body: bytes) -> list[dict]:
    return db.execute(
        "SELECT id, reason, received_count FROM raw_webhooks WHERE body = %s ORDER BY id", (body,)
    ).fetchall()


def refused_whole(db, body: bytes) -> bool:
    """Deeper than Python's parser goes and too large to cut (payloads.CUT_MAX_BYTES,
    CUT_MAX_TOKENS): kept raw whole, nothing in it applied."""
    return any(r["reason"].endswith("not cut") for r in kept_raw(db, body))


def stored(db, wamid: str) -> int:
    return db.execute(
        "SELECT count(*) AS n FROM inbound_messages WHERE wa_message_id = %s", (wamid,)
    ).fetchone()["n"]


def envelope_of(*entries) -> bytes:
    return json.dumps({"object": "whatsapp_business_account", "entry": list(entries)}).encode()


@given(rng=st.randoms(use_true_random=False), base=st.sampled_from(CORPUS))
@examples(200, HealthCheck.too_slow)
def test_any_signed_body_is_answered_200_kept_and_its_valid_updates_applied(client, db, rng, base):
    person = db.execute("SELECT phone FROM people LIMIT 1").fetchone() or add_person(db)
    entry, wamid = good_entry(person["phone"])
    mutant = mutate(rng, base, extra_entry=entry)

    response = post(client, mutant.body)

    assert response.status_code == 200, (mutant.done, response.text)
    if mutant.unstorable:
        assert kept_raw(db, mutant.body), f"{mutant.done}: not kept raw"
    if mutant.carries_extra and not refused_whole(db, mutant.body):
        assert stored(db, wamid) == 1, f"{mutant.done}: the valid message was not applied"


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("NUL in a text", {"text": {"body": "a\x00b"}}),
        ("NUL in an id", {"id": "wamid.\x00"}),
        ("lone surrogate", {"text": {"body": "\ud800"}}),
        ("number beyond 64 bits", {"timestamp": 2**70}),
        ("70,000 characters", {"id": "wamid." + "x" * 70_000}),
        ("wrong types", {"from": [], "timestamp": {}, "type": 7, "text": "not an object"}),
    ],
)
def test_a_bad_update_costs_only_itself(client, db, name, bad):
    person = add_person(db)
    good_before, wamid_before = good_entry(person["phone"])
    good_after, wamid_after = good_entry(person["phone"])
    message = json.loads(payloads.inbound(person["phone"], "wamid.BAD"))["entry"][0]
    message["changes"][0]["value"]["messages"][0].update(bad)
    body = envelope_of(good_before, message, good_after)

    assert post(client, body).status_code == 200

    assert stored(db, wamid_before) == 1 and stored(db, wamid_after) == 1
    bad_id = bad.get("id", "wamid.BAD")
    assert kept_raw(db, body) or stored(db, bad_id) == 1, "bad update neither applied nor kept"


def test_one_status_the_database_refuses_costs_only_itself(client, db):
    items = [payloads.status_item(f"wamid.S{i}", "delivered") for i in range(5)]
    items[2]["id"] = "wamid." + "".join(random.Random(1).choices("abcdefgh", k=70_000))
    body = json.dumps(payloads.envelope({"statuses": items})).encode()

    assert post(client, body).status_code == 200

    ids = {r["wa_message_id"] for r in db.execute("SELECT wa_message_id FROM status_events")}
    assert ids == {"wamid.S0", "wamid.S1", "wamid.S3", "wamid.S4"}
    [raw] = kept_raw(db, body)
    assert "failed:ProgramLimitExceeded" in raw["reason"]


BAD_BODIES = {
    "malformed JSON": b"{not json",
    "not UTF-8": b'{"entry": "\xff"}',
    "nested too deeply": b"[" * 5000 + b"]" * 5000,
    "no entry list": b'{"object": "whatsapp_business_account"}',
    "NUL in a field name": envelope_of({"changes": [{"field": "mes\x00sages", "value": {}}]}),
    "code beyond a double": payloads.status("wamid.X", "failed").replace(
        b'"status": "failed"', b'"status": "failed", "errors": [{"code": 1e400}]'
    ),
}


def test_each_malformed_body_gets_one_warning_line_with_its_raw_id(client, db, caplog):
    caplog.set_level(logging.INFO, logger="delivery_pipeline")
    for body in BAD_BODIES.values():
        assert post(client, body).status_code == 200

    raw_ids = [r["id"] for r in db.execute("SELECT id FROM raw_webhooks ORDER BY id")]
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(raw_ids) == len(BAD_BODIES)
    assert [r.name for r in warnings] == [SERVICE_LOG] * len(BAD_BODIES)
    for record, raw_id in zip(warnings, raw_ids, strict=True):
        assert f"(raw_webhooks id {raw_id})" in record.getMessage()
    assert all("\n" not in r.getMessage() for r in warnings)
    assert not any(r.exc_info for r in caplog.records), "a traceback for expected bad input"


def test_a_4_mib_body_deeper_than_the_parser_goes_is_kept_raw_and_not_cut(client, db):
    """Cutting it would cost a Python step per bracket (unit/whatsapp/test_webhook_bodies.py
    counts them): a body this large and this deep is refused instead, kept raw, in
    bounded work."""
    half = 2 * 1024 * 1024
    body = b"[" * half + b"]" * half

    assert post(client, body).status_code == 200

    [raw] = kept_raw(db, body)
    assert raw["reason"].startswith("malformed JSON: nested deeper than Python's parser goes")
    assert raw["reason"].endswith("not cut")


def test_a_body_replayed_is_kept_once_and_counted(client, db):
    """One unused field makes a signed body kept raw; replaying it stores no other copy
    of its (up to 4 MiB of) bytes: the receipts are counted on the one row."""
    body = envelope_of({"changes": [{"field": "account_update", "value": {"pad": "x" * 500_000}}]})
    for _ in range(5):
        assert post(client, body).status_code == 200

    [raw] = kept_raw(db, body)
    assert raw["received_count"] == 5 and raw["reason"] == "field:account_update"
    row = db.execute(
        "SELECT count(*) AS n, sum(octet_length(body)) AS bytes FROM raw_webhooks"
    ).fetchone()
    assert row["n"] == 1 and row["bytes"] == len(body)


def test_fields_we_do_not_use_are_kept_at_info(client, db, caplog):
    caplog.set_level(logging.INFO, logger="delivery_pipeline")
    body = envelope_of({"changes": [{"field": "account_update", "value": {"event": "X"}}]})
    assert post(client, body).status_code == 200
    [record] = [r for r in caplog.records if "raw_webhooks" in r.getMessage()]
    assert record.levelno == logging.INFO and "field:account_update" in record.getMessage()


def test_our_own_bug_gets_a_traceback_and_costs_only_its_update(client, db, caplog, monkeypatch):
    from delivery_pipeline.service import ingest

    def broken(message):
        raise KeyError("a bug in our reader")

    monkeypatch.setattr(ingest, "message_body", broken)
    caplog.set_level(logging.INFO, logger="delivery_pipeline")
    status = payloads.envelope({"statuses": [payloads.status_item("wamid.OK", "sent")]})
    person = add_person(db)
    message = json.loads(payloads.inbound(person["phone"], "wamid.BUG"))
    body = envelope_of(message["entry"][0], status["entry"][0])

    assert post(client, body).status_code == 200

    assert db.execute("SELECT count(*) AS n FROM status_events").fetchone()["n"] == 1
    [raw] = kept_raw(db, body)
    assert "internal:KeyError" in raw["reason"]
    assert [r for r in caplog.records if r.exc_info], "our bug must show its traceback"


def test_repeated_warnings_are_rate_limited_with_a_count(app, client, db, caplog):
    now = [1000.0]
    quiet = app.state.service.quiet_log
    quiet.clock = lambda: now[0]
    caplog.set_level(logging.WARNING, logger="delivery_pipeline")
    body = b"{replayed"
    for _ in range(25):
        assert post(client, body).status_code == 200
    assert len(caplog.records) == quiet.burst
    now[0] += quiet.window
    assert post(client, body).status_code == 200

    [raw] = kept_raw(db, body)
    assert raw["received_count"] == 26, "every receipt is counted, whatever is logged"
    last = caplog.records[-1].getMessage()
    assert len(caplog.records) == quiet.burst + 1
    assert f"(and {25 - quiet.burst} more like it in the last 60 s)" in last


def test_a_body_that_cannot_be_kept_is_503(client, db, caplog):
    """Not 200: nothing would hold it, and Meta redelivers only what was not answered 200."""
    caplog.set_level(logging.WARNING, logger="delivery_pipeline")
    db.execute("ALTER TABLE raw_webhooks RENAME TO raw_webhooks_gone")
    assert post(client, b"{not json").status_code == 503
    [line] = caplog.records
    assert line.levelno == logging.ERROR and not line.exc_info
    assert '"raw_webhooks" does not exist' in line.getMessage()
    db.execute("ALTER TABLE raw_webhooks_gone RENAME TO raw_webhooks")
    assert post(client, b"{not json").status_code == 200


# ── timestamps from the future ──────────────────────────────────────────


def test_a_message_from_the_future_opens_the_window_from_now_not_until_then(client, db):
    person = add_person(db, inbound_age_seconds=None)
    ten_days = time.time() + 10 * 24 * 3600
    body = payloads.inbound(person["phone"], "wamid.FUTURE", timestamp=ten_days)

    assert post(client, body).status_code == 200

    row = db.execute(
        "SELECT p.last_inbound_at, i.sent_at, now() AS now FROM people p "
        "JOIN inbound_messages i ON i.person_id = p.id WHERE p.id = %s",
        (person["id"],),
    ).fetchone()
    assert row["last_inbound_at"] <= row["now"] and row["sent_at"] <= row["now"]
    assert row["now"] - row["last_inbound_at"] < dt.timedelta(minutes=1)
    [raw] = kept_raw(db, body)
    assert "timestamp-in-the-future" in raw["reason"]


def test_a_timestamp_within_the_clock_skew_is_taken_as_it_is(client, db):
    person = add_person(db, inbound_age_seconds=None)
    soon = int(time.time()) + 60
    body = payloads.inbound(person["phone"], "wamid.SKEW", timestamp=soon)

    assert post(client, body).status_code == 200

    row = db.execute("SELECT last_inbound_at FROM people WHERE id = %s", (person["id"],))
    assert row.fetchone()["last_inbound_at"] == dt.datetime.fromtimestamp(soon, dt.UTC)
    assert kept_raw(db, body) == []
