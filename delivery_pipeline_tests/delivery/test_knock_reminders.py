"""Not seen vs not wanted: a delivered knock nobody answered gets one reminder at
the next moment the rules allow, then its document is abandoned `no_reply`; the
delivery report splits every knock by what came of it.

Through the production path: the engine knocks on the sandbox over HTTP, the
sandbox's status webhooks (and the person's presses) go signed into the webhook
service (a real process) on real Postgres. A day passing is the test moving the
knock's and the person's times back, never the wall clock.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
import pytest

from delivery_pipeline.delivery.sweep import eligible_now
from delivery_pipeline.reports.report import delivery_report
from delivery_pipeline_tests.support.data import (
    add_document,
    add_person,
    document,
    knock_rows,
    plan_body,
    state_of,
)
from delivery_pipeline_tests.support.engine import sweep
from delivery_pipeline_tests.support.inbox import knocks
from delivery_pipeline_tests.support.waiting import wait_for

pytestmark = pytest.mark.slow


def a_day_passes(db: psycopg.Connection, person_id: int) -> None:
    """25 hours pass for this person's knocks and reminders (not for the clock)."""
    db.execute(
        "UPDATE people SET last_knock_at = last_knock_at - interval '25 hours' WHERE id = %s",
        (person_id,),
    )
    db.execute(
        "UPDATE knocks SET sent_at = sent_at - interval '25 hours' WHERE person_id = %s",
        (person_id,),
    )
    db.execute(
        "UPDATE documents SET reminded_at = reminded_at - interval '25 hours' "
        "WHERE person_id = %s AND reminded_at IS NOT NULL",
        (person_id,),
    )


def knocked_and_delivered(db, knock_settings, **person: Any) -> tuple[dict, dict]:
    someone = add_person(db, inbound_age_seconds=None, **person)
    doc = add_document(db, someone["id"], plan_body(1, tag="R-"))
    sweep(knock_settings)
    assert state_of(db, doc["id"]) == "awaiting_reply"
    wait_for(lambda: knock_rows(db, someone["id"])[0]["delivered_at"], what="the knock delivered")
    return someone, doc


def test_an_unanswered_knock_gets_one_reminder_then_no_reply(db, sandbox, knock_settings, service):
    person, doc = knocked_and_delivered(db, knock_settings)

    # Within the day: no reminder (one knock per person per 24 h).
    sweep(knock_settings)
    assert len(knocks(sandbox.inbox(person["phone"]))) == 1

    a_day_passes(db, person["id"])
    sweep(knock_settings)

    inbox = knocks(sandbox.inbox(person["phone"]))
    assert len(inbox) == 2, "one reminder"
    rows = knock_rows(db, person["id"])
    assert [r["reminder"] for r in rows] == [False, True]
    row = document(db, doc["id"])
    assert row["reminded_at"] is not None and row["awaiting_reply_since"] is not None
    # The reminder took the person's knock for the next 24 h.
    last_knock = db.execute(
        "SELECT now() - last_knock_at < interval '1 minute' AS recent FROM people WHERE id = %s",
        (person["id"],),
    ).fetchone()
    assert last_knock["recent"]
    wait_for(lambda: knock_rows(db, person["id"])[1]["delivered_at"], what="reminder delivered")

    # Another day, unanswered: never a second reminder; the heartbeat abandons it.
    a_day_passes(db, person["id"])
    with psycopg.connect(knock_settings.database.database_url, autocommit=True) as conn:
        eligible_now(conn, knock_settings)
    sweep(knock_settings)
    assert len(knocks(sandbox.inbox(person["phone"]))) == 2
    row = document(db, doc["id"])
    assert row["abandon_reason"] == "no_reply"
    assert state_of(db, doc["id"]) == "abandoned"


def test_a_reply_to_the_reminder_delivers(db, sandbox, knock_settings, service):
    person, doc = knocked_and_delivered(db, knock_settings, locale="pt")
    a_day_passes(db, person["id"])
    sweep(knock_settings)
    assert len(knocks(sandbox.inbox(person["phone"]))) == 2

    sandbox.press(person["phone"], "Enviar")

    wait_for(lambda: document(db, doc["id"])["delivered_at"], what="delivery after the reminder")


def test_no_reminder_in_the_persons_quiet_hours(db, sandbox, knock_settings, service):
    person, doc = knocked_and_delivered(db, knock_settings)
    hour = dt.datetime.now(dt.UTC).hour
    # Their own quiet hours, around this very moment (UTC is their zone).
    db.execute(
        "UPDATE people SET quiet_hours = %s WHERE id = %s",
        (f"{hour:02d}:00-{(hour + 2) % 24:02d}:00", person["id"]),
    )
    a_day_passes(db, person["id"])
    sweep(knock_settings.replace(delivery={"quiet_hours": "21:00-08:00"}))

    assert len(knocks(sandbox.inbox(person["phone"]))) == 1, "no reminder at night"
    assert state_of(db, doc["id"]) == "quiet_hours"
    assert document(db, doc["id"])["reminded_at"] is None


def test_no_reminder_for_a_brief_whose_day_is_over(db, sandbox, knock_settings, service):
    person = add_person(db, inbound_age_seconds=None)
    today = db.execute("SELECT (now() AT TIME ZONE 'UTC')::date AS d").fetchone()["d"]
    brief = add_document(db, person["id"], plan_body(1), kind="daily_brief", for_date=today)
    sweep(knock_settings)
    wait_for(lambda: knock_rows(db, person["id"])[0]["delivered_at"], what="knock delivered")
    # The brief's day ends before the next knock may go.
    db.execute("UPDATE documents SET for_date = for_date - 1 WHERE id = %s", (brief["id"],))
    a_day_passes(db, person["id"])
    sweep(knock_settings)

    assert len(knocks(sandbox.inbox(person["phone"]))) == 1
    assert document(db, brief["id"])["abandon_reason"] == "stale"


def test_a_knock_never_delivered_gets_no_reminder(db, sandbox, knock_settings, service):
    sandbox.template("documents_ready", "en", pacing="drop")
    person = add_person(db, inbound_age_seconds=None)
    doc = add_document(db, person["id"], plan_body(1))
    sweep(knock_settings)
    a_day_passes(db, person["id"])
    sweep(knock_settings)
    assert len(knock_rows(db, person["id"])) == 1
    assert state_of(db, doc["id"]) == "awaiting_reply"


# ── the report's split ──────────────────────────────────────────────────


def test_the_report_splits_every_knock_by_what_came_of_it(db, sandbox, knock_settings, service):
    def knock_one() -> dict[str, Any]:
        person = add_person(db, inbound_age_seconds=None)
        add_document(db, person["id"], plan_body(1))
        sweep(knock_settings)
        assert len(knock_rows(db, person["id"])) == 1
        return person

    def knock_delivered() -> dict[str, Any]:
        person = knock_one()
        wait_for(lambda: knock_rows(db, person["id"])[0]["delivered_at"], what="delivered")
        return person

    # never delivered: the platform accepted the knock and dropped it (pacing).
    sandbox.template("documents_ready", "en", pacing="drop")
    dropped = knock_one()
    sandbox.template("documents_ready", "en", pacing="none")
    # not wanted: read, and no answer.
    sandbox.faults(read_rate=1.0)
    read = knock_delivered()
    wait_for(lambda: knock_rows(db, read["id"])[0]["read_at"], what="the knock read")
    sandbox.faults(read_rate=0.0)
    # not seen: delivered, never read, no answer (two of them).
    unseen = [knock_delivered(), knock_delivered()]
    # answered by Send it, by Later, by Stop (a button), and by Stop typed.
    pressed = {button: knock_delivered() for button in ("Send it", "Later", "Stop")}
    typed_stop = knock_delivered()
    for button, person in pressed.items():
        sandbox.press(person["phone"], button)
    sandbox.say(typed_stop["phone"], "STOP")
    # an ordinary reply.
    written = knock_delivered()
    sandbox.say(written["phone"], "yes please")
    wait_for(
        lambda: db.execute("SELECT count(*) AS n FROM knock_replies").fetchone()["n"] == 4,
        what="the presses applied",
    )
    wait_for(
        lambda: db.execute(
            "SELECT count(*) AS n FROM inbound_messages WHERE person_id = %s", (written["id"],)
        ).fetchone()["n"],
        what="the reply stored",
    )

    today = db.execute("SELECT (now() AT TIME ZONE 'UTC')::date AS d").fetchone()["d"]
    n = delivery_report(db, today).numbers

    assert n["knocks_left"] == 9
    assert (n["knocks_never_delivered"], n["knocks_not_seen"], n["knocks_not_wanted"]) == (1, 2, 1)
    assert n["knocks_unanswered"] == 4
    assert (n["knocks_later"], n["knocks_stop"], n["knocks_answered_any"]) == (1, 2, 2)
    assert (n["presses_send"], n["presses_later"], n["presses_stop"]) == (1, 1, 2)
    assert n["reminders_sent"] == 0
    assert dropped and unseen
    text = delivery_report(db, today).markdown()
    assert "never delivered / expired / not seen / not wanted | 1 / 0 / 2 / 1" in text
