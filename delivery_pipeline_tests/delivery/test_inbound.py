"""The knock as a conversation: Send it / Later / Stop, as buttons and as words, in
en, es and pt, the answer Later and Stop get, and one knock for several documents.

Through the production path: the engine knocks on the sandbox over HTTP, the
person taps a quick reply in the sandbox (or writes), the sandbox posts the
signed webhook into the webhook service (a real process), which applies it on
real Postgres and sweeps the person.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.delivery.knock import waiting_phrase
from delivery_pipeline.delivery.reply import BUTTON_PAYLOADS
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.whatsapp.errors import CloudApiError
from delivery_pipeline_tests.sandbox.test_app import send_template
from delivery_pipeline_tests.support.cli import run
from delivery_pipeline_tests.support.data import (
    add_document,
    add_person,
    document,
    plan_body,
    state_of,
)
from delivery_pipeline_tests.support.engine import BUTTON_KNOCKS, hooked_service, sweep
from delivery_pipeline_tests.support.inbox import knocks, texts
from delivery_pipeline_tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

LANGUAGE = {"en": "en", "es": "es", "pt": "pt_BR"}
BUTTONS = {
    "en": ("Send it", "Later", "Stop"),
    "es": ("Enviar", "Más tarde", "Parar"),
    "pt": ("Enviar", "Mais tarde", "Parar"),
}
# What the person reads after Later (one document waiting; {when} on their clock)
# and after Stop.
LATER_ANSWER = {
    "en": "OK, later: you will get it {when}. Write to us any time to get it sooner.",
    "es": "De acuerdo, más tarde: lo recibirás {when}. Escríbenos cuando quieras para "
    "recibirlo antes.",
    "pt": "Combinado, mais tarde: você vai recebê-lo {when}. Escreva para nós a qualquer "
    "momento para recebê-lo antes.",
}
AT_EIGHT = {
    "en": ("today at 08:00", "tomorrow at 08:00"),
    "es": ("hoy a las 08:00", "mañana a las 08:00"),
    "pt": ("hoje às 08:00", "amanhã às 08:00"),
}
STOP_ANSWER = {
    "en": "Done: you will get no more of these messages. Write START to get them again.",
    "es": "Listo: ya no recibirás estos mensajes. Escribe VOLVER para recibirlos de nuevo.",
    "pt": "Pronto: você não vai mais receber estas mensagens. Escreva VOLTAR para "
    "recebê-las de novo.",
}


def replies(db: psycopg.Connection, person_id: int) -> list[dict[str, Any]]:
    return db.execute(
        "SELECT * FROM knock_replies WHERE person_id = %s ORDER BY id", (person_id,)
    ).fetchall()


def person_row(db: psycopg.Connection, person_id: int) -> dict[str, Any]:
    return db.execute("SELECT * FROM people WHERE id = %s", (person_id,)).fetchone()


def knock_id_of(db: psycopg.Connection, person_id: int) -> int:
    return db.execute(
        "SELECT id FROM knocks WHERE person_id = %s ORDER BY id DESC LIMIT 1", (person_id,)
    ).fetchone()["id"]


def answers(db: psycopg.Connection, person_id: int) -> list[dict[str, Any]]:
    return db.execute(
        "SELECT a.* FROM acknowledgements a JOIN knock_replies kr ON kr.id = a.reply_id "
        "WHERE kr.person_id = %s ORDER BY a.reply_id",
        (person_id,),
    ).fetchall()


def answered(db, sandbox, person: dict[str, Any], count: int = 1) -> list[str]:
    """The texts the person got once ``count`` answers went; each answer's row says
    'sent' with the message id of one text in their inbox."""
    rows = wait_for(
        lambda: (r := answers(db, person["id"])) and all(a["state"] == "sent" for a in r) and r,
        what="the answer sent",
    )
    assert len(rows) == count
    inbox = sandbox.inbox(person["phone"])
    ids = {m["id"] for m in inbox if m["type"] == "text"}
    assert {a["wa_message_id"] for a in rows} <= ids
    return texts(inbox)


def at_eight(locale: str, until: dt.datetime, zone: str) -> str:
    """08:00 on the person's clock, said as today or tomorrow."""
    local = ZoneInfo(zone)
    tomorrow = until.astimezone(local).date() > dt.datetime.now(local).date()
    return AT_EIGHT[locale][tomorrow]


def knocked(db, sandbox, knock_settings, locale: str, chunks: int = 2) -> tuple[dict, dict, str]:
    """A person of ``locale`` whose window is closed, knocked about one document."""
    person = add_person(db, inbound_age_seconds=None, locale=locale, name="Ana")
    body = plan_body(chunks, tag=f"{locale}-")
    doc = add_document(db, person["id"], body)
    sweep(knock_settings)
    assert state_of(db, doc["id"]) == "awaiting_reply"
    return person, doc, body


# ── the knock itself ────────────────────────────────────────────────────


@pytest.mark.parametrize("locale", ["en", "es", "pt"])
def test_the_knock_carries_the_three_buttons_with_their_payloads(
    db, sandbox, knock_settings, service, locale
):
    person, _, _ = knocked(db, sandbox, knock_settings, locale)
    [message] = sandbox.inbox(person["phone"])
    assert message["template"] == {
        "name": "documents_ready",
        "language": LANGUAGE[locale],
        "parameters": ["Ana", waiting_phrase(locale, 1)],
    }
    assert [b["text"] for b in message["buttons"]] == list(BUTTONS[locale])
    assert [b["payload"] for b in message["buttons"]] == list(BUTTON_PAYLOADS)


# ── each button in each language ────────────────────────────────────────


@pytest.mark.parametrize("locale", ["en", "es", "pt"])
def test_send_it_delivers_now(db, sandbox, knock_settings, service, locale):
    person, doc, body = knocked(db, sandbox, knock_settings, locale)
    knock_id = knock_id_of(db, person["id"])

    sandbox.press(person["phone"], BUTTONS[locale][0])

    wait_for(lambda: document(db, doc["id"])["delivered_at"], what="delivery after Send it")
    assert texts(sandbox.inbox(person["phone"])) == delivery_messages(body)
    [reply] = replies(db, person["id"])
    assert (reply["action"], reply["via"], reply["knock_id"], reply["documents"]) == (
        "send",
        "button",
        knock_id,
        1,
    )


@pytest.mark.parametrize("locale", ["en", "es", "pt"])
def test_later_snoozes_until_the_persons_next_morning(db, sandbox, knock_settings, service, locale):
    person, doc, _ = knocked(db, sandbox, knock_settings, locale)
    db.execute("UPDATE people SET time_zone = 'America/Sao_Paulo' WHERE id = %s", (person["id"],))

    sandbox.press(person["phone"], BUTTONS[locale][1])

    wait_for(lambda: replies(db, person["id"]), what="the Later press applied")
    [reply] = replies(db, person["id"])
    assert (reply["action"], reply["via"], reply["documents"]) == ("later", "button", 1)
    row = document(db, doc["id"])
    assert row["awaiting_reply_since"] is None and row["delivered_at"] is None
    # Quiet hours are off in tests: the next morning is the next 08:00 where they live.
    expected = db.execute(
        "SELECT next_morning(%s, 'America/Sao_Paulo', NULL) AS at", (reply["at"],)
    ).fetchone()["at"]
    assert row["quiet_until"] == row["next_attempt_at"] == reply["snoozed_until"] == expected
    sao_paulo = expected.astimezone(ZoneInfo("America/Sao_Paulo"))
    assert (sao_paulo.hour, sao_paulo.minute) == (8, 0)
    assert dt.timedelta(0) < expected - reply["at"] <= dt.timedelta(days=1)
    assert state_of(db, doc["id"]) == "quiet_hours"
    # The person hears when, on their clock, and nothing else goes now.
    answer = LATER_ANSWER[locale].format(when=at_eight(locale, expected, "America/Sao_Paulo"))
    assert answered(db, sandbox, person) == [answer]
    sweep(knock_settings)
    assert texts(sandbox.inbox(person["phone"])) == [answer]
    assert document(db, doc["id"])["delivered_at"] is None


def test_later_with_a_setting_snoozes_that_long_then_delivers(db, sandbox, knock_settings):
    with hooked_service(
        sandbox,
        knock_settings.database.database_url,
        DELIVERY_KNOCK_TEMPLATES=BUTTON_KNOCKS,
        DELIVERY_LATER_SECONDS="2",
    ):
        person, doc, body = knocked(db, sandbox, knock_settings, "es")

        sandbox.press(person["phone"], "Más tarde", interactive=True)

        [reply] = wait_for(lambda: replies(db, person["id"]), what="the Later press applied")
        assert (reply["action"], reply["via"]) == ("later", "button")
        # Two seconds from when it was applied (the message's own time is whole seconds).
        assert (
            dt.timedelta(seconds=1) < reply["snoozed_until"] - reply["at"] < dt.timedelta(seconds=4)
        )
        sweep(knock_settings)
        assert document(db, doc["id"])["delivered_at"] is None, "not before it is due"
        wait_for(
            lambda: db.execute("SELECT now() >= %s AS due", (reply["snoozed_until"],)).fetchone()[
                "due"
            ],
            what="the snooze to end",
        )
        sweep(knock_settings)
        # The press opened their window: the document goes free-form, no second knock,
        # after the answer that said it would.
        assert document(db, doc["id"])["delivered_at"] is not None
        [answer, *delivered] = texts(sandbox.inbox(person["phone"]))
        assert answer.startswith("De acuerdo, más tarde: lo recibirás hoy a las ")
        assert delivered == delivery_messages(body)
        assert len(knocks(sandbox.inbox(person["phone"]))) == 1


@pytest.mark.parametrize("locale", ["en", "es", "pt"])
def test_stop_opts_the_person_out_of_knocks_and_briefs(
    db, sandbox, knock_settings, service, locale
):
    person, doc, _ = knocked(db, sandbox, knock_settings, locale)

    sandbox.press(person["phone"], BUTTONS[locale][2])

    wait_for(lambda: document(db, doc["id"])["abandoned_at"], what="abandoned by Stop")
    assert document(db, doc["id"])["abandon_reason"] == "opted_out"
    assert person_row(db, person["id"])["knocks_stopped_at"] is not None
    [reply] = replies(db, person["id"])
    assert (reply["action"], reply["via"], reply["documents"]) == ("stop", "button", 1)
    assert answered(db, sandbox, person) == [STOP_ANSWER[locale]]
    _assert_stopped(db, sandbox, knock_settings, person)


def _assert_stopped(db, sandbox, knock_settings, person) -> None:
    """No brief is enqueued for them, and a document that would need a knock is
    abandoned `opted_out` without one (a day later, their window closed)."""
    db.execute(
        "UPDATE people SET brief_opt_in = true, brief_local_time = '00:00', "
        "last_inbound_at = now() - interval '2 days', last_knock_at = NULL WHERE id = %s",
        (person["id"],),
    )
    db.execute(QUERIES.enqueue_daily_briefs.sql, {"at": None})
    briefs = db.execute(
        "SELECT count(*) AS n FROM documents WHERE person_id = %s AND kind = 'daily_brief'",
        (person["id"],),
    ).fetchone()
    assert briefs["n"] == 0, "no brief for a person who pressed Stop"
    before = len(knocks(sandbox.inbox(person["phone"])))
    later = add_document(db, person["id"], plan_body(1, tag="after-stop-"))
    sweep(knock_settings)
    assert document(db, later["id"])["abandon_reason"] == "opted_out"
    assert len(knocks(sandbox.inbox(person["phone"]))) == before, "no knock after Stop"


# ── the same by keyword, and the way back in ────────────────────────────


@pytest.mark.parametrize(
    ("locale", "word"),
    [
        ("en", "STOP"),
        ("en", "stop."),
        ("es", "PARAR"),
        ("es", "Baja"),
        ("es", "cancelar"),
        ("pt", "SAIR"),
        ("pt", "Parar"),
    ],
)
def test_a_stop_keyword_does_what_the_button_does(
    db, sandbox, knock_settings, service, locale, word
):
    person, doc, _ = knocked(db, sandbox, knock_settings, locale, chunks=1)

    sandbox.say(person["phone"], word)

    wait_for(lambda: document(db, doc["id"])["abandoned_at"], what="abandoned by the keyword")
    assert document(db, doc["id"])["abandon_reason"] == "opted_out"
    [reply] = replies(db, person["id"])
    assert (reply["action"], reply["via"]) == ("stop", "keyword")
    assert answered(db, sandbox, person) == [STOP_ANSWER[locale]]


@pytest.mark.parametrize(
    ("locale", "word"),
    [
        ("en", "later"),
        ("es", "Más tarde"),
        ("es", "después"),
        ("pt", "Depois"),
        ("pt", "mais tarde"),
    ],
)
def test_a_later_keyword_snoozes(db, sandbox, knock_settings, service, locale, word):
    person, doc, _ = knocked(db, sandbox, knock_settings, locale, chunks=1)

    sandbox.say(person["phone"], word)

    [reply] = wait_for(lambda: replies(db, person["id"]), what="the keyword applied")
    assert (reply["action"], reply["via"], reply["documents"]) == ("later", "keyword", 1)
    assert state_of(db, doc["id"]) == "quiet_hours"
    assert document(db, doc["id"])["quiet_until"] == reply["snoozed_until"]
    when = at_eight(locale, reply["snoozed_until"], person["time_zone"])
    assert answered(db, sandbox, person) == [LATER_ANSWER[locale].format(when=when)]


@pytest.mark.parametrize(
    ("locale", "stop", "start"),
    [("en", "STOP", "START"), ("es", "BAJA", "VOLVER"), ("pt", "SAIR", "VOLTAR")],
)
def test_start_brings_a_stopped_person_back(
    db, sandbox, knock_settings, service, locale, stop, start
):
    person, doc, _ = knocked(db, sandbox, knock_settings, locale, chunks=1)
    sandbox.say(person["phone"], stop)
    wait_for(lambda: person_row(db, person["id"])["knocks_stopped_at"], what="stopped")

    sandbox.say(person["phone"], start)

    wait_for(lambda: person_row(db, person["id"])["knocks_stopped_at"] is None, what="back in")
    assert [r["action"] for r in replies(db, person["id"])] == ["stop", "start"]
    # Stop was answered, with the word they then wrote; Start needs no answer.
    assert answered(db, sandbox, person) == [STOP_ANSWER[locale]]
    assert start in STOP_ANSWER[locale]
    # Knocked again like anyone: a day later, with their window closed.
    db.execute(
        "UPDATE people SET last_inbound_at = now() - interval '2 days', "
        "last_knock_at = now() - interval '2 days' WHERE id = %s",
        (person["id"],),
    )
    again = add_document(db, person["id"], plan_body(1, tag="again-"))
    sweep(knock_settings)
    assert state_of(db, again["id"]) == "awaiting_reply"
    assert len(knocks(sandbox.inbox(person["phone"]))) == 2


def test_any_other_reply_still_delivers_and_records_no_press(db, sandbox, knock_settings, service):
    person, doc, body = knocked(db, sandbox, knock_settings, "pt")

    sandbox.say(person["phone"], "oi, pode mandar, não vou parar de ler")

    wait_for(lambda: document(db, doc["id"])["delivered_at"], what="delivery after a reply")
    assert texts(sandbox.inbox(person["phone"])) == delivery_messages(body)
    assert replies(db, person["id"]) == []


def test_a_template_without_buttons_keeps_working_and_its_words_still_count(
    db, sandbox, settings, service
):
    # The default templates (document_ready) have no buttons and one parameter.
    person = add_person(db, inbound_age_seconds=None, locale="es")
    doc = add_document(db, person["id"], plan_body(1))
    sweep(settings)
    [knock] = knocks(sandbox.inbox(person["phone"]))
    assert knock["name"] == "document_ready" and len(knock["parameters"]) == 1
    assert "buttons" not in sandbox.inbox(person["phone"])[0]

    sandbox.say(person["phone"], "Parar")

    wait_for(lambda: document(db, doc["id"])["abandoned_at"], what="abandoned by the keyword")
    assert document(db, doc["id"])["abandon_reason"] == "opted_out"


# ── one knock for several documents ─────────────────────────────────────


def test_one_knock_for_three_documents_and_one_reply_delivers_all_three_in_order(
    db, sandbox, knock_settings, service
):
    person = add_person(db, inbound_age_seconds=None, locale="en", name="Ana")
    bodies = [plan_body(2, tag=f"doc{i}-") for i in range(3)]
    # Plans for three days: three documents (a newer plan for the same day would
    # supersede the older one).
    days = [dt.date(2026, 12, 7) + dt.timedelta(days=i) for i in range(3)]
    docs = [
        add_document(db, person["id"], body, for_date=day)
        for body, day in zip(bodies, days, strict=True)
    ]

    sweep(knock_settings)

    inbox = sandbox.inbox(person["phone"])
    assert [k["parameters"] for k in knocks(inbox)] == [["Ana", "you have 3 documents ready"]]
    assert [state_of(db, d["id"]) for d in docs] == ["awaiting_reply"] * 3
    linked = db.execute(
        "SELECT array_agg(document_id ORDER BY document_id) AS ids FROM knock_documents "
        "WHERE knock_id = %s",
        (knock_id_of(db, person["id"]),),
    ).fetchone()["ids"]
    assert linked == [d["id"] for d in docs]

    sandbox.press(person["phone"], "Send it")

    wait_for(
        lambda: all(document(db, d["id"])["delivered_at"] for d in docs),
        what="all three delivered",
    )
    expected = [m for body in bodies for m in delivery_messages(body)]
    assert texts(sandbox.inbox(person["phone"])) == expected
    [reply] = replies(db, person["id"])
    assert (reply["action"], reply["documents"]) == ("send", 3)


def test_the_cli_presses_a_button_in_the_sandbox(db, sandbox, knock_settings, service):
    person, doc, body = knocked(db, sandbox, knock_settings, "es")

    result = run(
        knock_settings.database.database_url,
        "sandbox",
        "press",
        person["phone"],
        "Enviar",
        "--sandbox-url",
        sandbox.url,
    )

    assert result.returncode == 0, result.stderr
    assert "pressed 'Enviar'" in result.stdout
    wait_for(lambda: document(db, doc["id"])["delivered_at"], what="delivery after the press")
    missing = run(
        knock_settings.database.database_url,
        "sandbox",
        "press",
        person["phone"],
        "Nope",
        "--sandbox-url",
        sandbox.url,
    )
    assert missing.returncode != 0 and "no button 'Nope'" in missing.stderr


@pytest.mark.parametrize(
    ("at", "zone", "quiet", "morning"),
    [
        ("2026-06-10 10:00+00", "UTC", "21:00-08:00", "2026-06-11 08:00+00"),
        ("2026-06-10 05:00+00", "UTC", "21:00-08:00", "2026-06-10 08:00+00"),
        ("2026-06-10 05:00+00", "UTC", None, "2026-06-10 08:00+00"),
        ("2026-06-10 10:00+00", "UTC", "22:00-06:30", "2026-06-11 06:30+00"),
        ("2026-06-10 12:00+00", "America/Sao_Paulo", "21:00-08:00", "2026-06-11 11:00+00"),
        # The night DST starts in New York: 08:00 is EDT (UTC-4), not EST.
        ("2026-03-08 03:00+00", "America/New_York", "21:00-08:00", "2026-03-08 12:00+00"),
    ],
)
def test_next_morning_is_the_end_of_their_quiet_hours_where_they_live(db, at, zone, quiet, morning):
    row = db.execute(
        "SELECT next_morning(%s::timestamptz, %s, %s) = %s::timestamptz AS same, "
        "next_morning(%s::timestamptz, %s, %s) AS got",
        (at, zone, quiet, morning, at, zone, quiet),
    ).fetchone()
    assert row["same"], row["got"]


def test_the_sandbox_refuses_buttons_a_template_does_not_have(sandbox):
    with pytest.raises(CloudApiError) as refused:
        send_template(sandbox, "+15550109901", button_payloads=BUTTON_PAYLOADS)
    assert refused.value.code == 132000
    # Sent without payloads, a press comes back with the button's text.
    send_template(
        sandbox, "+15550109902", ["Ana", "you have 2 documents ready"], name="documents_ready"
    )
    [message] = sandbox.inbox("+15550109902")
    assert [b["payload"] for b in message["buttons"]] == ["Send it", "Later", "Stop"]
    assert message["text"].startswith("Hi Ana, you have 2 documents ready. Tap Send it")
