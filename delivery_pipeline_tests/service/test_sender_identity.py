"""Identity without a phone number: found by number or BSUID, sent to with
``recipient``, 131062, and a number change that moves the person, not their
history. Through the production path: the sandbox over HTTP posts signed
webhooks into the webhook service (a real process) on real Postgres."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.model import bsuid, country_of
from delivery_pipeline.service.ingest import apply_payload
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.db import connect_async
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing import payloads
from delivery_pipeline.whatsapp.client import addressed
from delivery_pipeline_tests.support.cli import run
from delivery_pipeline_tests.support.data import add_document, add_person, document, plan_body
from delivery_pipeline_tests.support.engine import hooked_service, sweep
from delivery_pipeline_tests.support.inbox import knocks, texts
from delivery_pipeline_tests.support.waiting import wait_for

FIXTURES = Path(__file__).parents[1] / "fixtures" / "meta-webhooks"
_ids = itertools.count(1)


def new_user_id() -> str:
    return f"BR.{int(time.time() * 1000) % 10**13:013d}{next(_ids):06d}"


def add_username_person(db: psycopg.Connection, **fields: Any) -> dict[str, Any]:
    """A person we know only by BSUID (they use a WhatsApp username)."""
    person = db.execute(
        QUERIES.insert_person.sql,
        {
            "phone": None,
            "name": fields.get("name", "Bia"),
            "locale": fields.get("locale", "pt"),
            "time_zone": "UTC",
            "brief_opt_in": False,
            "brief_local_time": "07:00",
            "phone_number_id": None,
        },
    ).fetchone()
    return db.execute(
        QUERIES.set_person_user_id.sql,
        {"person_id": person["id"], "user_id": fields.get("user_id") or new_user_id()},
    ).fetchone()


def person_row(db: psycopg.Connection, person_id: int) -> dict[str, Any]:
    return db.execute(QUERIES.person_by_id.sql, {"id": person_id}).fetchone()


def identity_changes(db: psycopg.Connection, person_id: int) -> list[tuple[Any, ...]]:
    rows = db.execute(QUERIES.identity_changes.sql, {"person_id": person_id}).fetchall()
    return [(r["field"], r["old_value"], r["new_value"], r["cause"]) for r in rows]


@pytest.fixture
def service(sandbox, settings) -> Iterator[object]:
    with hooked_service(sandbox, settings.database.database_url) as svc:
        yield svc


# ── pure rules ──────────────────────────────────────────────────────────


def test_a_bsuid_is_addressed_with_recipient_and_a_number_with_to() -> None:
    assert addressed("+5511987654321") == {"to": "+5511987654321"}
    assert addressed("US.13491208655302741918") == {"recipient": "US.13491208655302741918"}
    assert bsuid("US.13491208655302741918") == "US.13491208655302741918"
    assert bsuid("US.ENT.11815799212886844830") is None  # a parent id is no address
    assert bsuid("+5511987654321") is None
    assert country_of(None, "BR.123") == "BR"
    assert country_of("+351912345678", None) == "PT"
    assert country_of("+5511987654321", None) == "BR"
    assert country_of("+19995550000", None) == "US"
    assert country_of("+99912345678", None) is None


def test_an_operator_adds_a_username_person_by_bsuid(database_url, db) -> None:
    user_id = new_user_id()
    result = run(database_url, "people", "add", "--user-id", user_id, "--name", "Bia")
    assert result.returncode == 0, result
    assert user_id in result.stdout
    again = run(database_url, "people", "add", "--user-id", user_id)
    assert again.returncode == 2 and "already exists" in again.stderr
    listed = run(database_url, "people", "list")
    assert user_id in listed.stdout
    found = run(database_url, "documents", "add", "--person", user_id, "--kind", "plan", stdin="x")
    assert found.returncode == 0, found


# ── the production path ─────────────────────────────────────────────────


def test_a_bsuid_only_person_is_knocked_replies_and_gets_the_document(
    db, sandbox, settings, service
):
    person = add_username_person(db)
    user_id = person["user_id"]
    body = plan_body(3)
    doc = add_document(db, person["id"], body)

    sweep(settings)

    inbox = sandbox.inbox(user_id)
    assert len(knocks(inbox)) == 1, "knocked at their BSUID"
    assert inbox[0]["to"] == user_id
    assert document(db, doc["id"])["awaiting_reply_since"] is not None

    sandbox.say(user_id, "manda", username="@bia.dev")

    wait_for(lambda: document(db, doc["id"])["delivered_at"], what="delivery after the reply")
    assert texts(sandbox.inbox(user_id)) == delivery_messages(body)
    inbound = db.execute(
        "SELECT person_id, from_number, from_user_id, unknown_sender FROM inbound_messages "
        "WHERE from_user_id = %s",
        (user_id,),
    ).fetchall()
    assert [(r["person_id"], r["from_number"], r["unknown_sender"]) for r in inbound] == [
        (person["id"], None, False)
    ]
    assert person_row(db, person["id"])["username"] == "@bia.dev"
    # Statuses name the recipient by BSUID only; they still settle the ledger.
    wait_for(
        lambda: db.execute(
            "SELECT bool_and(delivered_at IS NOT NULL) AS ok FROM delivery_chunks "
            "WHERE document_id = %s",
            (doc["id"],),
        ).fetchone()["ok"],
        what="delivered statuses",
    )


def test_a_person_known_by_number_learns_their_bsuid_and_keeps_the_number_as_address(
    db, sandbox, settings, service
):
    person = add_person(db, inbound_age_seconds=None)
    sandbox.say(person["phone"], "hi")
    expected = sandbox.person(person["phone"])["user_id"]
    wait_for(lambda: person_row(db, person["id"])["user_id"], what="the BSUID learned")
    assert person_row(db, person["id"])["user_id"] == expected
    assert identity_changes(db, person["id"]) == [("user_id", None, expected, "learned")]

    doc = add_document(db, person["id"], plan_body(2))
    sweep(settings)  # or the service's sweep for the person who wrote, if it claims first
    wait_for(lambda: document(db, doc["id"])["delivered_at"], what="delivered")
    assert [m["to"] for m in sandbox.inbox(person["phone"])] == [person["phone"]] * 2


def test_a_number_change_moves_the_person_not_their_history(db, sandbox, settings, service):
    person = add_person(db, inbound_age_seconds=None)
    old, new = person["phone"], person["phone"][:-4] + "9" + person["phone"][-3:]
    sandbox.say(old, "hi")
    wait_for(lambda: person_row(db, person["id"])["user_id"], what="the BSUID learned")
    old_user_id = person_row(db, person["id"])["user_id"]
    first = add_document(db, person["id"], plan_body(2, tag="before"))
    sweep(settings)  # or the service's sweep for the person who wrote, if it claims first
    wait_for(lambda: document(db, first["id"])["delivered_at"], what="delivered")

    sandbox.change_number(old, new)

    wait_for(lambda: person_row(db, person["id"])["phone"] == new, what="the number moved")
    assert ("phone", old, new, "user_changed_number") in identity_changes(db, person["id"])
    # History stays as it happened: the same person, what was sent where it was sent.
    assert document(db, first["id"])["person_id"] == person["id"]
    inbound = db.execute(
        "SELECT from_number, message_type FROM inbound_messages WHERE person_id = %s "
        "ORDER BY received_at",
        (person["id"],),
    ).fetchall()
    assert [(r["from_number"], r["message_type"]) for r in inbound] == [
        (old, "text"),
        (old, "system"),
    ]
    assert (
        db.execute("SELECT count(*) AS n FROM people WHERE phone = %s", (old,)).fetchone()["n"] == 0
    ), "no copy of the person is left at the old number"

    second = add_document(db, person["id"], plan_body(2, tag="after"))
    sweep(settings)  # or the service's sweep for the person who wrote, if it claims first
    wait_for(lambda: document(db, second["id"])["delivered_at"], what="delivered")
    assert sandbox.inbox(old) == [], "nothing goes to the old number"
    # The phone (its inbox moved with the person) got the first at the old number.
    assert [m["to"] for m in sandbox.inbox(new)] == [old, old, new, new]

    # Their next message carries the new number's new BSUID: taken, by number.
    sandbox.say(new, "thanks")
    new_user_id = sandbox.person(new)["user_id"]
    assert new_user_id != old_user_id
    wait_for(lambda: person_row(db, person["id"])["user_id"] == new_user_id, what="the new BSUID")


def test_131062_on_the_knock_waits_for_the_person_without_counting_a_knock(
    db, sandbox, settings, service
):
    sandbox.faults(bsuid_refused_types=["template"])
    person = add_username_person(db)
    user_id = person["user_id"]
    body = plan_body(2)
    doc = add_document(db, person["id"], body)

    sweep(settings)

    assert sandbox.inbox(user_id) == []
    assert sandbox.stats()["rejected_by_code"] == {"131062": 1}
    row = document(db, doc["id"])
    assert row["awaiting_reply_since"] is not None and row["knock_sent_at"] is None
    assert row["abandoned_at"] is None and row["delivery_attempts"] == 0
    assert person_row(db, person["id"])["last_knock_at"] is None, "the reservation given back"
    alerts = db.execute(
        "SELECT dedup_key FROM ops_alerts WHERE dedup_key = %s", (f"bsuid_refused:{person['id']}",)
    ).fetchall()
    assert len(alerts) == 1
    paused = db.execute("SELECT paused_at FROM sender_state").fetchall()
    assert all(r["paused_at"] is None for r in paused), "never a fleet pause"

    sandbox.say(user_id, "oi")

    wait_for(lambda: document(db, doc["id"])["delivered_at"], what="delivery after they wrote")
    assert texts(sandbox.inbox(user_id)) == delivery_messages(body)


def test_131062_on_a_text_abandons_the_document_as_undeliverable(db, sandbox, settings, service):
    sandbox.faults(bsuid_refused_types=["text"])
    person = add_username_person(db)
    sandbox.say(person["user_id"], "oi")
    wait_for(lambda: person_row(db, person["id"])["last_inbound_at"], what="the window opened")
    doc = add_document(db, person["id"], plan_body(2))

    sweep(settings)

    # Whoever sent it (this sweep, or the service's sweep for the person who
    # just wrote, which may claim the new document first) abandons it.
    row = wait_for(lambda: (r := document(db, doc["id"]))["abandoned_at"] and r, what="abandoned")
    assert row["abandon_reason"] == "undeliverable"
    assert "131062" in row["last_delivery_error"]
    assert sandbox.inbox(person["user_id"]) == []


# ── the platform's own shapes (Meta's fixtures) ─────────────────────────


def _apply_fixture(database_url: str, name: str, wamid: str | None = None) -> Any:
    payload = json.loads((FIXTURES / name).read_text())
    if wamid is not None:  # two of Meta's examples share one message id
        payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"] = wamid

    async def go() -> Any:
        async with await connect_async(database_url) as conn:
            return await apply_payload(conn, payload, DeliverySettings())

    return asyncio.run(go())


def test_meta_shapes_find_and_move_a_person_by_bsuid(db, database_url):
    # The fixtures' own ids; one person per test database.
    person = add_username_person(db, user_id="US.13491208655302741918")
    outcome = _apply_fixture(database_url, "webhook-incoming-message-text-bsuid.json")
    assert outcome.inbound_stored == 1
    stored = db.execute(
        "SELECT person_id, unknown_sender FROM inbound_messages WHERE from_user_id = %s",
        ("US.13491208655302741918",),
    ).fetchone()
    assert (stored["person_id"], stored["unknown_sender"]) == (person["id"], False)
    assert person_row(db, person["id"])["username"] == "@realsheenanelson"

    # user_changed_user_id: the new BSUID named, the old one only in the body.
    db.execute(
        "UPDATE people SET user_id = 'US.10101010101010101010' WHERE id = %s", (person["id"],)
    )
    _apply_fixture(database_url, "webhook-incoming-message-system-bsuid.json", "wamid.system-1")
    assert person_row(db, person["id"])["user_id"] == "US.13491208655302741918"

    # user_id_update: previous → current, for the number too.
    db.execute(
        "UPDATE people SET user_id = 'US.10101010101010101010', phone = '+16505551234' "
        "WHERE id = %s",
        (person["id"],),
    )
    outcome = _apply_fixture(database_url, "webhook-userIdUpdate.json")
    assert outcome.unhandled == []
    assert person_row(db, person["id"])["user_id"] == "US.13491208655302741918"
    # Applied again (Meta redelivers): nothing more moves.
    outcome = _apply_fixture(database_url, "webhook-userIdUpdate.json")
    assert outcome.unhandled == ["user-id-update-unmatched"]
    causes = [c[3] for c in identity_changes(db, person["id"]) if c[0] == "user_id"]
    assert causes == ["user_changed_user_id", "user_id_update"]


def test_an_unknown_bsuid_sender_is_stored_and_flagged(db, database_url):
    outcome = _apply_fixture(database_url, "webhook-incoming-message-contacts-request-bsuid.json")
    assert outcome.inbound_stored == 1
    row = db.execute(
        "SELECT person_id, from_user_id, unknown_sender FROM inbound_messages"
    ).fetchone()
    assert (row["person_id"], row["from_user_id"], row["unknown_sender"]) == (
        None,
        "US.13491208655302741918",
        True,
    )


def test_a_bsuid_taken_meanwhile_by_another_person_costs_the_message_nothing(db, database_url):
    """Two rows race for one BSUID: the loser's write waits on the unique index and
    is skipped when the winner commits; the message it came with is stored."""
    winner, loser = add_person(db), add_person(db)
    user_id = new_user_id()
    payload = json.loads(payloads.inbound(loser["phone"], "wamid.race-1", "hi"))
    payload["entry"][0]["changes"][0]["value"]["messages"][0]["from_user_id"] = user_id
    with psycopg.connect(database_url) as taker:
        taker.execute("UPDATE people SET user_id = %s WHERE id = %s", (user_id, winner["id"]))
        applying = threading.Thread(
            target=lambda: asyncio.run(_apply(database_url, payload)), daemon=True
        )
        applying.start()
        wait_for(
            lambda: db.execute(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            ).fetchone()["n"],
            what="the loser waiting on the winner's row",
        )
        taker.commit()
        applying.join(timeout=20)
    assert not applying.is_alive()
    stored = db.execute(
        "SELECT person_id, from_user_id FROM inbound_messages WHERE wa_message_id = 'wamid.race-1'"
    ).fetchone()
    assert (stored["person_id"], stored["from_user_id"]) == (loser["id"], user_id)
    assert person_row(db, winner["id"])["user_id"] == user_id
    assert person_row(db, loser["id"])["user_id"] is None
    assert person_row(db, loser["id"])["last_inbound_at"] is not None, "their window opened"


async def _apply(database_url: str, payload: Any) -> Any:
    async with await connect_async(database_url) as conn:
        return await apply_payload(conn, payload, DeliverySettings())


def test_sandbox_say_writes_as_a_username_user(database_url, sandbox) -> None:
    user_id = new_user_id()
    result = run(database_url, "sandbox", "say", user_id, "oi", "--sandbox-url", sandbox.url)
    assert result.returncode == 0, result
    person = sandbox.person(user_id)
    assert (person["phone"], person["user_id"]) == (None, user_id)
    assert [w["text"] for w in person["written"]] == ["oi"]
