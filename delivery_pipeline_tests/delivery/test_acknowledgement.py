"""The answer to Later and Stop, in fleets and failures: at most once per press.

Real processes throughout: the sandbox plays the person and the platform, the
webhook service applies the press (two replicas where it matters) and sends the
answer through the engine, ``delivery-pipeline sweep`` processes race for answers
owed while sending was paused. What the person's phone received is counted in
the sandbox's inbox.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import psycopg
import pytest

from delivery_pipeline.delivery.outcomes import ACKNOWLEDGEMENT_ATTEMPTS
from delivery_pipeline.settings import DEV_PHONE_NUMBER_ID
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.sandbox import WebhookReceiver
from delivery_pipeline.testing.service import APP_SECRET
from delivery_pipeline_tests.delivery.test_inbound import (
    BUTTONS,
    STOP_ANSWER,
    answers,
    knocked,
    replies,
)
from delivery_pipeline_tests.support.cli import run, sweep_process
from delivery_pipeline_tests.support.data import add_person
from delivery_pipeline_tests.support.engine import BUTTON_KNOCKS, sweep, unhooked_service
from delivery_pipeline_tests.support.inbox import texts
from delivery_pipeline_tests.support.waiting import wait_for

pytestmark = pytest.mark.slow


def test_a_press_redelivered_to_two_replicas_is_answered_once(db, sandbox, knock_settings):
    person, doc, _ = knocked(db, sandbox, knock_settings, "es")
    # The platform's webhook for the press, as it would be redelivered.
    with WebhookReceiver() as platform:
        sandbox.faults(webhook_url=platform.url, app_secret=APP_SECRET, statuses_enabled=False)
        sandbox.press(person["phone"], "Parar")
        [press] = platform.wait_for(lambda got: any(w.messages() for w in got))
    assert press.messages()[0]["type"] == "button"

    url = knock_settings.database.database_url
    with (
        unhooked_service(sandbox, url, DELIVERY_KNOCK_TEMPLATES=BUTTON_KNOCKS) as one,
        unhooked_service(sandbox, url, DELIVERY_KNOCK_TEMPLATES=BUTTON_KNOCKS) as two,
    ):
        answered_200: list[int] = []

        def deliver(replica: Any) -> None:
            for _ in range(3):
                answered_200.append(replica.post_webhook(press.body).status_code)

        posts = [threading.Thread(target=deliver, args=(r,)) for r in (one, two, one, two)]
        for post in posts:
            post.start()
        for post in posts:
            post.join()
        assert answered_200 == [200] * 12
        [answer] = wait_for(
            lambda: [a for a in answers(db, person["id"]) if a["state"] == "sent"],
            what="the answer sent",
        )
        # Whatever else runs now finds nothing more to send.
        sweep(knock_settings)

    assert len(replies(db, person["id"])) == 1
    assert texts(sandbox.inbox(person["phone"])) == [STOP_ANSWER["es"]]
    [received] = [m for m in sandbox.inbox(person["phone"]) if m["type"] == "text"]
    assert received["id"] == answer["wa_message_id"]
    assert received["callback_data"] == f"dp:answer:{answer['reply_id']}"


def test_answers_owed_while_paused_go_once_each_when_sweeps_race_for_them(
    db, sandbox, knock_settings, service
):
    people = []
    for i, locale in enumerate(("en", "es", "pt") * 2):
        person, _, _ = knocked(db, sandbox, knock_settings, locale, chunks=1)
        people.append((person, BUTTONS[locale][1 + i % 2]))  # Later, then Stop
    db.execute(
        "UPDATE sender_state SET paused_at = now(), pause_code = 190, "
        "next_probe_at = now() + interval '1 hour' WHERE phone_number_id = '*'"
    )
    for person, button in people:
        sandbox.press(person["phone"], button)
    owed = wait_for(
        lambda: (
            (rows := [a for p, _ in people for a in answers(db, p["id"])])
            and len(rows) == len(people)
            and rows
        ),
        what="every press applied",
    )
    assert {row["state"] for row in owed} == {"due"}, "nothing leaves while paused"
    assert all(texts(sandbox.inbox(p["phone"])) == [] for p, _ in people)

    resumed = run(knock_settings.database.database_url, "resume", "--by", "test")
    assert resumed.returncode == 0, resumed.stderr
    sweeps = [sweep_process(knock_settings) for _ in range(3)]
    results = [json.loads(s.communicate(timeout=60)[0]) for s in sweeps]

    for person, _ in people:
        assert len(texts(sandbox.inbox(person["phone"]))) == 1, person["locale"]
        [row] = answers(db, person["id"])
        assert row["state"] == "sent" and row["attempts"] == 1
    assert sum(r["acknowledged"] for r in results) == len(people)


def test_an_answer_whose_outcome_is_unknown_is_never_sent_again(
    db, sandbox, knock_settings, service
):
    person, _, _ = knocked(db, sandbox, knock_settings, "pt")
    # Accepted by the platform, and the answer to our request lost on the way back.
    sandbox.faults(drop_after_accept_rate=1.0)

    sandbox.press(person["phone"], "Mais tarde")

    [row] = wait_for(
        lambda: [a for a in answers(db, person["id"]) if a["state"] == "unknown"],
        what="the answer's outcome unknown",
    )
    sandbox.faults(drop_after_accept_rate=0.0)
    sweep(knock_settings)
    assert row["wa_message_id"] is None
    assert len(texts(sandbox.inbox(person["phone"]))) == 1
    assert [a["state"] for a in answers(db, person["id"])] == ["unknown"]


def test_a_passing_refusal_is_tried_again_soon_and_answered_once(
    db, sandbox, knock_settings, service
):
    person, _, _ = knocked(db, sandbox, knock_settings, "en")
    sandbox.refuse(131000, to=person["phone"], message_type="text", count=1)

    sandbox.press(person["phone"], "Stop")

    [row] = wait_for(
        lambda: [a for a in answers(db, person["id"]) if a["state"] == "sent"],
        what="the answer sent on its second try",
    )
    assert row["attempts"] == 2 < ACKNOWLEDGEMENT_ATTEMPTS
    assert row["error_code"] == 131000
    assert texts(sandbox.inbox(person["phone"])) == [STOP_ANSWER["en"]]


def test_an_answer_refused_for_the_person_is_the_persons_new_state_and_never_retried(
    db, sandbox, knock_settings, service
):
    """The completer carries the answer's refusal out as any send's: the person who
    stopped our messages is opted out, the answer ends failed on its one try."""
    person, _, _ = knocked(db, sandbox, knock_settings, "en")
    sandbox.refuse(131050, to=person["phone"], message_type="text", count=1)

    sandbox.press(person["phone"], "Later")

    [row] = wait_for(
        lambda: [a for a in answers(db, person["id"]) if a["state"] == "failed"],
        what="the answer given up",
    )
    assert (row["attempts"], row["error_code"]) == (1, 131050)
    opted = db.execute(
        "SELECT opted_out_at IS NOT NULL AS opted FROM people WHERE id = %s", (person["id"],)
    ).fetchone()
    assert opted["opted"], "the platform's word about the person is carried out"
    assert texts(sandbox.inbox(person["phone"])) == []


# ── the fence, one statement at a time ──────────────────────────────────


def _owed(db, person_id: int, *, expires_in: str = "10 minutes") -> int:
    """An answer owed to a Later press of ``person_id`` (as answer_inbound leaves it)."""
    reply = db.execute(
        "INSERT INTO knock_replies (inbound_message_id, person_id, action, via, documents) "
        "VALUES (gen_random_uuid()::text, %s, 'later', 'button', 0) RETURNING id",
        (person_id,),
    ).fetchone()
    db.execute(
        "INSERT INTO acknowledgements (reply_id, expires_at) VALUES (%s, now() + %s::interval)",
        (reply["id"], expires_in),
    )
    return int(reply["id"])


def _claim(conn: psycopg.Connection[Any], person_id: int) -> list[Any]:
    return QUERIES.claim_acknowledgements.all(
        conn,
        {
            "limit": 16,
            "person_id": person_id,
            "number": None,
            "default_number": DEV_PHONE_NUMBER_ID,
        },
    )


def test_one_sender_takes_an_answer_and_another_skips_it_without_waiting(db, database_url):
    person = add_person(db)
    reply_id = _owed(db, person["id"])
    with connect(database_url) as first, connect(database_url) as second:
        first.autocommit = second.autocommit = False
        [taken] = _claim(first, person["id"])
        assert taken.reply_id == reply_id and taken.attempts == 1
        # Taken but not committed: the other sender skips it rather than wait for it.
        second.execute("SET lock_timeout = '2s'")
        assert _claim(second, person["id"]) == []
        second.rollback()
        first.commit()
        # Committed, it is being sent: nobody takes it again.
        assert _claim(second, person["id"]) == []
        second.commit()
    assert answers(db, person["id"])[0]["state"] == "sending"


def test_an_answer_is_not_taken_late_nor_from_a_paused_number(db):
    person = add_person(db)
    _owed(db, person["id"], expires_in="-1 second")
    assert _claim(db, person["id"]) == [], "too late to answer"
    _owed(db, person["id"])
    db.execute(
        "UPDATE sender_state SET paused_at = now(), pause_code = 190 WHERE phone_number_id = '*'"
    )
    assert _claim(db, person["id"]) == [], "sending is paused"
    db.execute("UPDATE sender_state SET paused_at = NULL WHERE phone_number_id = '*'")
    assert len(_claim(db, person["id"])) == 1
