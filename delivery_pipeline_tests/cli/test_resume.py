"""The pause as an operator meets it: ``status`` shows it, ``resume`` ends it for
everybody, the alert episode is resolved; and what the listener hears meanwhile."""

from __future__ import annotations

from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline_tests.support.cli import run
from delivery_pipeline_tests.support.data import add_document, add_person
from delivery_pipeline_tests.support.engine import sweep


def paused_by_a_bad_token(db, sandbox, settings):
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    doc = add_document(db, person["id"], "A short plan.")
    bad = settings.replace(
        whatsapp={"access_token": "expired"},
        delivery={"pause_probe_seconds": 3600, "quiet_hours": ""},
    )
    result = sweep(bad)
    assert result.stopped_by and "190" in result.stopped_by
    return doc


def test_status_shows_the_pause_and_resume_ends_it_for_everybody(db, sandbox, settings):
    url = settings.database.database_url
    doc = paused_by_a_bad_token(db, sandbox, settings)

    status = run(url, "status")
    assert status.returncode == 1
    assert "PAUSED for every sender" in status.stdout and "next probe" in status.stdout
    assert "delivery-pipeline resume" in status.stdout

    # Paused and the probe an hour away: a sweep with a good token sends nothing.
    waiting = sweep(settings)
    assert waiting.claimed == 0 and "paused" in (waiting.stopped_by or "")

    resumed = run(url, "resume", "--by", "ops-on-call")
    assert resumed.returncode == 0 and "sending resumed for every sender" in resumed.stdout
    assert run(url, "status").returncode == 0
    assert run(url, "resume").stdout.startswith("sending was not paused")
    kinds = db.execute(
        "SELECT kind, message FROM ops_alerts WHERE dedup_key = 'check:sender_paused' ORDER BY id"
    ).fetchall()
    assert [k["kind"] for k in kinds] == ["alert", "resolved"]
    assert "ops-on-call" in kinds[-1]["message"]

    assert sweep(settings).delivered == 1
    assert db.execute(QUERIES.sender_state.sql).fetchone()["resumed_by"].startswith("resumed by")
    assert (
        db.execute(
            "SELECT delivery_attempts FROM documents WHERE id = %s", (doc["id"],)
        ).fetchone()["delivery_attempts"]
        == 0
    )


def test_while_paused_a_release_is_due_at_the_next_probe_not_now(db, sandbox, settings):
    paused_by_a_bad_token(db, sandbox, settings)
    state = db.execute(QUERIES.sender_state.sql).fetchone()
    [row] = db.execute(QUERIES.next_due.sql).fetchall()
    assert row["next_due"] == state["next_probe_at"], "the listener's timer: the probe"
    guard = db.execute(
        QUERIES.guard_exists.sql,
        settings.replace(delivery={"quiet_hours": ""}).guard,
    ).fetchone()
    assert guard["eligible"] is False, "the heartbeat requests no run before the probe"
