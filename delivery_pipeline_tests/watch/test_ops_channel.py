"""The ops channel: the notifier's retries and payloads against a local HTTP
sink, the outbox (unsent alerts retried next tick), and the alert/reminder/
resolved transitions recorded in ops_alerts."""

from __future__ import annotations

import logging

import pytest

from delivery_pipeline.watch.alerts import Alert, AlertSeverity, note_check, record_once
from delivery_pipeline.watch.ops_channel import OpsChannelError, OpsNotifier, send_pending
from delivery_pipeline_tests.support.fake_http import Answer, FakeHttpServer

SECRET_PATH = "/services/T000/B000/s3cr3t"


@pytest.fixture
def sink():
    with FakeHttpServer(Answer(200, "ok")) as server:
        yield server


def notifier(sink, **kw):
    return OpsNotifier(url=sink.url + SECRET_PATH, timeout_seconds=2.0, backoff_seconds=0.0, **kw)


def test_post_sends_slack_json(sink):
    notifier(sink).post("hello", blocks=[{"type": "section"}])
    assert len(sink.requests) == 1
    request = sink.requests[0]
    assert request.path == SECRET_PATH and request.method == "POST"
    assert request.json() == {"text": "hello", "blocks": [{"type": "section"}]}
    assert request.headers["content-type"] == "application/json"


def test_transient_errors_are_retried_a_bounded_number_of_times(sink):
    sink.answer(Answer(503), Answer(429))
    notifier(sink, max_retries=2).post("x")
    assert len(sink.requests) == 3
    sink.answer(Answer(500), Answer(500), Answer(500))
    with pytest.raises(OpsChannelError) as raised:
        notifier(sink, max_retries=2).post("x")
    assert raised.value.transient and "HTTP 500" in str(raised.value)
    assert len(sink.requests) == 6


def test_a_client_error_is_final(sink):
    sink.answer(Answer(400, raw=b"invalid_payload"))
    with pytest.raises(OpsChannelError) as raised:
        notifier(sink).post("x")
    assert not raised.value.transient and "invalid_payload" in str(raised.value)
    assert len(sink.requests) == 1


def test_a_timeout_is_transient_and_the_url_never_shows(sink, caplog):
    sink.answer(*[Answer(200, delay_seconds=1.0)] * 2)
    slow = OpsNotifier(
        url=sink.url + SECRET_PATH, timeout_seconds=0.2, max_retries=1, backoff_seconds=0.0
    )
    with caplog.at_level(logging.DEBUG), pytest.raises(OpsChannelError) as raised:
        slow.post("x")
    assert raised.value.transient
    assert "s3cr3t" not in str(raised.value) and "s3cr3t" not in repr(slow)
    assert "s3cr3t" not in caplog.text


def test_unreachable_channel_is_transient():
    with pytest.raises(OpsChannelError) as raised:
        OpsNotifier(url="http://127.0.0.1:9/x", timeout_seconds=1.0, max_retries=0).post("x")
    assert raised.value.transient


# ── the outbox ──────────────────────────────────────────────────────────


def alert(db, key="k", severity="error", message="boom"):
    return note_check(db, Alert(key, AlertSeverity(severity), message), failing=True)


def test_send_pending_marks_sent_and_posts_each_once(db, sink):
    alert(db, "a")
    alert(db, "b", "warning")
    report = send_pending(db, notifier(sink))
    assert len(report.sent) == 2 and not report.failed
    texts = [r.json()["text"] for r in sink.requests]
    assert texts == [":red_circle: *ERROR* boom", ":warning: *WARN* boom"]
    assert send_pending(db, notifier(sink)).sent == []
    assert len(sink.requests) == 2


def test_channel_down_records_unsent_and_the_next_tick_sends(db, sink, caplog):
    alert(db, "a")
    alert(db, "b")
    sink.answer(*[Answer(502)] * 3)
    with caplog.at_level(logging.WARNING):
        report = send_pending(db, notifier(sink, max_retries=2))
    assert report.sent == [] and len(report.failed) == 1, "stops at the first transient failure"
    assert "s3cr3t" not in caplog.text
    rows = db.execute("SELECT * FROM ops_alerts ORDER BY id").fetchall()
    assert [r["sent_at"] for r in rows] == [None, None]
    assert rows[0]["send_attempts"] == 1 and rows[0]["last_send_error"].startswith("HTTP 502")
    report = send_pending(db, notifier(sink))
    assert len(report.sent) == 2
    rows = db.execute("SELECT * FROM ops_alerts ORDER BY id").fetchall()
    assert all(r["sent_at"] is not None and r["last_send_error"] is None for r in rows)
    assert rows[0]["send_attempts"] == 2


def test_a_refused_alert_does_not_block_the_others(db, sink):
    alert(db, "a")
    alert(db, "b")
    sink.answer(Answer(400, raw=b"no_text"))
    report = send_pending(db, notifier(sink))
    assert len(report.failed) == 1 and len(report.sent) == 1


def test_alerts_older_than_a_day_are_left_recorded(db, sink):
    alert(db, "old")
    db.execute("UPDATE ops_alerts SET created_at = now() - interval '25 hours'")
    assert send_pending(db, notifier(sink)).sent == []
    assert sink.requests == []


def test_no_url_leaves_alerts_recorded_and_unsent(db):
    alert(db)
    report = send_pending(db, OpsNotifier(url=None))
    assert report.unconfigured and "no OPS_WEBHOOK_URL" in report.summary()
    assert db.execute("SELECT sent_at FROM ops_alerts").fetchone()["sent_at"] is None


# ── transitions ─────────────────────────────────────────────────────────


def kinds(db):
    return [
        (r["kind"], r["severity"])
        for r in db.execute("SELECT kind, severity FROM ops_alerts ORDER BY id")
    ]


def check(severity, message):
    return Alert("c", AlertSeverity(severity), message)


def test_alert_once_reminder_escalation_resolved(db):
    assert note_check(db, check("warning", "ok"), failing=False) is None
    assert note_check(db, check("warning", "bad"), failing=True).kind == "alert"
    assert note_check(db, check("warning", "bad"), failing=True) is None
    db.execute("UPDATE ops_alerts SET created_at = created_at - interval '2 hours'")
    assert note_check(db, check("warning", "bad"), failing=True, reminder_seconds=3 * 3600) is None
    assert (
        note_check(db, check("warning", "bad"), failing=True, reminder_seconds=3600).kind
        == "reminder"
    )
    assert note_check(db, check("error", "worse"), failing=True).kind == "alert"
    assert note_check(db, check("warning", "better"), failing=True) is None
    assert note_check(db, check("warning", "ok"), failing=False).kind == "resolved"
    assert note_check(db, check("warning", "ok"), failing=False) is None
    assert note_check(db, check("error", "again"), failing=True).kind == "alert"
    assert kinds(db) == [
        ("alert", "warning"),
        ("reminder", "warning"),
        ("alert", "error"),
        ("resolved", "info"),
        ("alert", "error"),
    ]


def test_keys_are_independent(db):
    alert(db, "x")
    assert alert(db, "y") is not None
    assert alert(db, "x") is None


def test_record_once(db):
    failed = Alert("run_failure:1", AlertSeverity.ERROR, "run 1 failed")
    assert record_once(db, failed) is not None
    assert record_once(db, failed) is None
    assert len(kinds(db)) == 1
