"""Several business numbers (sql/migrations/027, docs/design/numbers.md): each person bound to one
number, each document whole from its person's number, a pause per number.

Real Postgres, the sandbox over HTTP playing three numbers, and for the race
real sweep processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.delivery.sweep import SweepNotStarted, run_sweep
from delivery_pipeline.reports.report import delivery_report
from delivery_pipeline.settings import DEV_PHONE_NUMBER_ID
from delivery_pipeline.store.intake import InputError, add_person, new_person
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.plans import plan_body
from delivery_pipeline.testing.service import start_service
from delivery_pipeline_tests.support import data
from delivery_pipeline_tests.support.cli import sweep_process
from delivery_pipeline_tests.support.engine import hooked_service, sweep
from delivery_pipeline_tests.support.inbox import texts
from delivery_pipeline_tests.support.waiting import wait_for

pytestmark = pytest.mark.engine

US, BR = "200000000000001", "300000000000001"
NUMBERS = json.dumps(
    [
        {"id": US, "limit": 1000, "countries": ["+1"]},
        {"id": BR, "limit": 80, "countries": ["+55"], "knock_templates": "en=document_waiting:en"},
    ]
)
ALL = (DEV_PHONE_NUMBER_ID, US, BR)


def _settings(settings):
    return settings.replace(whatsapp={"numbers": NUMBERS})


def _sandbox_plays_three_numbers(sandbox) -> None:
    sandbox.faults(numbers={US: 1000, BR: 80}, pair_rate_enabled=False, throughput_limit=0)


def _doc(db, doc_id):
    return db.execute("SELECT * FROM documents WHERE id = %s", (doc_id,)).fetchone()


def test_a_person_is_bound_by_calling_code_explicitly_or_to_the_default(db, settings):
    whatsapp = _settings(settings).whatsapp
    american = add_person(db, new_person(phone="+12025550101", whatsapp=whatsapp))
    brazilian = add_person(db, new_person(phone="+5511911110000", whatsapp=whatsapp))
    british = add_person(db, new_person(phone="+447700900123", whatsapp=whatsapp))
    chosen = add_person(
        db, new_person(phone="+5511922220000", whatsapp=whatsapp, phone_number_id=US)
    )
    username = add_person(db, new_person(phone=None, user_id="US.1349120865", whatsapp=whatsapp))
    assert (american.phone_number_id, brazilian.phone_number_id) == (US, BR)
    # Bound to the default, the row names none: it follows WHATSAPP_PHONE_NUMBER_ID.
    assert british.phone_number_id is None and username.phone_number_id is None
    assert chosen.phone_number_id == US
    with pytest.raises(InputError, match="not configured"):
        new_person(phone="+5511933330000", whatsapp=whatsapp, phone_number_id="999")


def test_every_document_and_knock_goes_out_from_its_persons_number(db, sandbox, settings):
    _sandbox_plays_three_numbers(sandbox)
    s = _settings(settings)
    bodies, people = {}, []
    for number in ALL:
        for _ in range(3):
            person = data.add_person(db, phone_number_id=None if number == ALL[0] else number)
            sandbox.say(person["phone"], "hi", to=number)
            body = plan_body(3, chunk_limit=300, tag=f"{person['id']} ")
            data.add_document(db, person["id"], body)
            bodies[person["phone"]] = body
            people.append((person, number))
    # A person whose window is closed is knocked from their number, with its templates.
    closed = data.add_person(db, phone_number_id=BR, inbound_age_seconds=None)
    knocked = data.add_document(db, closed["id"], "A plan that needs a knock.")

    result = sweep(s.replace(delivery={"chunk_limit": 300}))

    assert result.stopped_by is None
    for person, number in people:
        inbox = sandbox.inbox(person["phone"])
        assert texts(inbox) == delivery_messages(bodies[person["phone"]], 300)
        assert {m["from_phone_number_id"] for m in inbox} == {number}
    numbers = db.execute(
        "SELECT d.phone_number_id, count(*) AS n FROM documents d "
        "WHERE d.delivered_at IS NOT NULL GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert {r["phone_number_id"]: r["n"] for r in numbers} == dict.fromkeys(ALL, 3)
    [knock] = sandbox.inbox(closed["phone"])
    assert knock["from_phone_number_id"] == BR and knock["template"]["name"] == "document_waiting"
    row = db.execute("SELECT phone_number_id FROM knocks WHERE person_id = %s", (closed["id"],))
    assert row.fetchone()["phone_number_id"] == BR
    assert _doc(db, knocked["id"])["phone_number_id"] == BR
    assert sandbox.stats()["accepted_by_number"].keys() == set(ALL)
    today = db.execute("SELECT (now() AT TIME ZONE 'UTC')::date AS d").fetchone()["d"]
    by_number = delivery_report(db, today).by_number.set_index("phone_number_id")
    assert by_number["delivered"].to_dict() == dict.fromkeys(ALL, 3)
    assert by_number["chunks_sent"].to_dict() == dict.fromkeys(ALL, 9)
    assert by_number.loc[BR, "knocks_left"] == 1


def test_a_paused_number_stops_its_own_documents_and_no_others(db, sandbox, settings):
    """133010 (the number is not registered) from one number: its documents wait
    behind its own pause and alert; the other numbers deliver in the same sweep; the
    number's probe, once it is fixed, resumes it alone."""
    _sandbox_plays_three_numbers(sandbox)
    s = _settings(settings).replace(delivery={"pause_probe_seconds": 60})
    docs: dict[str, list[int]] = {number: [] for number in ALL}
    for number in ALL:
        for _ in range(4):
            person = data.add_person(db, phone_number_id=None if number == ALL[0] else number)
            sandbox.say(person["phone"], "hi", to=number)
            docs[number].append(data.add_document(db, person["id"], "A short plan.")["id"])
    sandbox.refuse(133010, "sync", phone_number_id=US)

    result = sweep(s)

    assert result.stopped_by is None, "a bad number never stops the others"
    for number in (DEV_PHONE_NUMBER_ID, BR):
        assert all(_doc(db, d)["delivered_at"] is not None for d in docs[number]), number
    waiting = [_doc(db, d) for d in docs[US]]
    assert all(d["delivered_at"] is None and d["delivery_attempts"] == 0 for d in waiting)
    states = {r.phone_number_id: r for r in QUERIES.sender_state.all(db, {})}
    assert states[US].paused_at is not None and states[US].pause_code == 133010
    assert states["*"].paused_at is None
    assert db.execute(QUERIES.guard_exists.sql, s.guard).fetchone()["eligible"] is False
    alerts = db.execute(
        "SELECT kind FROM ops_alerts WHERE dedup_key = %s ORDER BY id", (f"number_paused:{US}",)
    ).fetchall()
    assert [a["kind"] for a in alerts] == ["alert"]

    sandbox.clear_refusals()
    db.execute("UPDATE sender_state SET next_probe_at = now() WHERE phone_number_id = %s", (US,))
    sweep(s)

    assert all(_doc(db, d)["delivered_at"] is not None for d in docs[US])
    assert QUERIES.sender_state.all(db, {})[0].paused_at is None
    alerts = db.execute(
        "SELECT kind FROM ops_alerts WHERE dedup_key = %s ORDER BY id", (f"number_paused:{US}",)
    ).fetchall()
    assert [a["kind"] for a in alerts] == ["alert", "resolved"]


def test_a_token_refused_still_pauses_every_number(db, sandbox, settings):
    _sandbox_plays_three_numbers(sandbox)
    s = _settings(settings)
    for number in ALL:
        person = data.add_person(db, phone_number_id=None if number == ALL[0] else number)
        sandbox.say(person["phone"], "hi", to=number)
        data.add_document(db, person["id"], "A short plan.")
    sandbox.refuse(190, "sync")

    result = sweep(s)

    assert result.stopped_by and result.delivered == 0
    [paused] = [r for r in QUERIES.sender_state.all(db, {}) if r.paused_at]
    assert paused.phone_number_id == "*"


def _sweep_process(
    settings, *args: str, extra_env: dict[str, str] | None = None
) -> subprocess.Popen:
    """A sweep process that knows the three numbers."""
    env = {"WHATSAPP_NUMBERS": NUMBERS, "DELIVERY_CHUNK_LIMIT": "300", **(extra_env or {})}
    return sweep_process(settings, *args, **env)


def test_a_killed_senders_document_is_finished_from_the_number_it_began_on(db, sandbox, settings):
    """SIGKILL mid-document, then the person rebound to another number: the rest of
    the document still goes from the number it began on, each part once."""
    _sandbox_plays_three_numbers(sandbox)
    person = data.add_person(db, phone_number_id=BR)
    sandbox.say(person["phone"], "hi", to=BR)
    body = plan_body(8)
    doc = data.add_document(db, person["id"], body)

    proc = _sweep_process(
        settings,
        extra_env={"DELIVERY_CHUNK_INTERVAL_SECONDS": "1", "DELIVERY_CHUNK_LIMIT": "4096"},
    )
    try:
        # Killed once three parts are recorded sent, between two parts: a kill
        # between a send and its record leaves an outcome that waits for a status
        # webhook, which test_faults covers with the service wired.
        deadline = time.monotonic() + 30
        while sum(c["state"] == "sent" for c in data.chunks(db, doc["id"])) < 3:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    sent_before = len(sandbox.inbox(person["phone"]))
    assert 3 <= sent_before < 8
    db.execute("UPDATE people SET phone_number_id = %s WHERE id = %s", (US, person["id"]))
    db.execute(
        "UPDATE documents SET claimed_at = now() - interval '1 hour' WHERE id = %s", (doc["id"],)
    )

    result = sweep(_settings(settings))

    assert result.delivered == 1 and result.chunks_sent == 8 - sent_before
    inbox = sandbox.inbox(person["phone"])
    assert texts(inbox) == delivery_messages(body)
    assert {m["from_phone_number_id"] for m in inbox} == {BR}


@pytest.mark.slow
def test_six_processes_race_over_three_numbers_and_a_paused_one(db, sandbox, settings):
    """Six sweep processes, three numbers, 150 people with two plans each, one number
    refusing a third of the run: every person's parts arrive from their number, each
    whole, once, in order; nothing lost once the number is fixed."""
    _sandbox_plays_three_numbers(sandbox)
    people = []
    for i in range(150):
        number = ALL[i % 3]
        person = data.add_person(db, phone_number_id=None if number == ALL[0] else number)
        people.append((person, number))
        sandbox.say(person["phone"], "hi", to=number)
    expected: dict[str, list[str]] = {}
    for n in range(2):
        for person, _ in people:
            body = plan_body(3, chunk_limit=300, tag=f"P{person['id']} plan {n} ")
            data.add_document(
                db, person["id"], body, for_date=f"2030-01-0{n + 1}"
            )  # two days: neither supersedes the other
            expected.setdefault(person["phone"], []).extend(delivery_messages(body, 300))
    sandbox.refuse(131037, "sync", phone_number_id=BR, count=3)

    procs = [_sweep_process(settings, "--concurrency", "8") for _ in range(6)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outputs]
    # The number is fixed (the refusals still left, if the pause came soon enough to
    # leave some, are cleared): its probe passes and one more sweep delivers it.
    sandbox.clear_refusals()
    db.execute("UPDATE sender_state SET next_probe_at = now() WHERE paused_at IS NOT NULL")
    final = _sweep_process(settings)
    assert final.wait(timeout=300) == 0, final.stderr.read() if final.stderr else ""

    inboxes = sandbox.inboxes()
    for person, number in people:
        inbox = inboxes.get(person["phone"], [])
        assert texts(inbox) == expected[person["phone"]], person["phone"]
        assert {m["from_phone_number_id"] for m in inbox} == {number}
    delivered = db.execute(
        "SELECT count(*) AS n FROM documents WHERE delivered_at IS NOT NULL"
    ).fetchone()
    assert delivered["n"] == 300
    assert not any(r.paused_at for r in QUERIES.sender_state.all(db, {}))
    # The number was paused on its own meanwhile, and only it.
    assert sandbox.stats()["rejected_by_code"].get("131037", 0) >= 1
    paused = db.execute(
        "SELECT DISTINCT dedup_key FROM ops_alerts WHERE dedup_key LIKE '%%paused%%'"
    ).fetchall()
    assert [r["dedup_key"] for r in paused] == [f"number_paused:{BR}"]


def test_a_sweep_of_one_number_sends_only_that_numbers_documents(db, sandbox, settings):
    """``sweep --number``, as processes: only the documents of the people bound to
    that number go (the default number's takes the people bound to none), from it;
    the other numbers' wait, and a pause of another number is not probed by it."""
    _sandbox_plays_three_numbers(sandbox)
    docs: dict[str, list[int]] = {number: [] for number in ALL}
    for number in ALL:
        for _ in range(3):
            person = data.add_person(db, phone_number_id=None if number == ALL[0] else number)
            sandbox.say(person["phone"], "hi", to=number)
            docs[number].append(data.add_document(db, person["id"], "A short plan.")["id"])
    # A document that began on BR stays BR's, whatever its person is bound to now.
    began = data.add_person(db, phone_number_id=US)
    sandbox.say(began["phone"], "hi", to=BR)
    docs[BR].append(data.add_document(db, began["id"], "Begun on BR.")["id"])
    db.execute("UPDATE documents SET phone_number_id = %s WHERE id = %s", (BR, docs[BR][-1]))
    # The default number is paused, its probe due: a sweep of US leaves it alone.
    db.execute(
        "INSERT INTO sender_state (phone_number_id, paused_at, pause_code, next_probe_at) "
        "VALUES (%s, now(), 133010, now() - interval '1 second')",
        (DEV_PHONE_NUMBER_ID,),
    )

    def delivered() -> dict[str, int]:
        return {
            number: sum(_doc(db, d)["delivered_at"] is not None for d in ids)
            for number, ids in docs.items()
        }

    proc = _sweep_process(settings, "--number", US)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    assert json.loads(out)["delivered"] == 3
    assert delivered() == {DEV_PHONE_NUMBER_ID: 0, US: 3, BR: 0}
    assert sandbox.stats()["accepted_by_number"].keys() == {US}
    untouched = db.execute(
        "SELECT probe_token, probes, next_probe_at < now() AS due FROM sender_state "
        "WHERE phone_number_id = %s",
        (DEV_PHONE_NUMBER_ID,),
    ).fetchone()
    assert untouched == {"probe_token": None, "probes": 0, "due": True}

    db.execute("DELETE FROM sender_state WHERE phone_number_id = %s", (DEV_PHONE_NUMBER_ID,))
    proc = _sweep_process(settings, "--number", DEV_PHONE_NUMBER_ID)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    assert delivered() == {DEV_PHONE_NUMBER_ID: 3, US: 3, BR: 0}

    proc = _sweep_process(settings, "--number", BR)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    assert delivered() == {DEV_PHONE_NUMBER_ID: 3, US: 3, BR: 4}
    assert {m["from_phone_number_id"] for m in sandbox.inbox(began["phone"])} == {BR}
    assert sandbox.stats()["accepted_by_number"] == {DEV_PHONE_NUMBER_ID: 3, US: 3, BR: 4}

    proc = _sweep_process(settings, "--number", "999")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "--number 999 is not one of our business numbers" in err


def test_a_number_the_token_may_not_use_stops_an_operators_sweep_before_any_claim(
    db, sandbox, settings
):
    """The sandbox serves US but not BR: an operator's sweep over every number says
    which number and which variable, and claims nothing (a 100 on a send would pause
    BR for the whole fleet); a sweep of US alone goes ahead."""
    sandbox.faults(numbers={US: 1000}, pair_rate_enabled=False, throughput_limit=0)
    s = _settings(settings)
    person = data.add_person(db, phone_number_id=US)
    sandbox.say(person["phone"], "hi", to=US)
    doc = data.add_document(db, person["id"], "A short plan.")

    with pytest.raises(SweepNotStarted) as refused:
        sweep(s, check_identity_first=True)

    assert f"phone number id {BR}" in str(refused.value)
    assert "WHATSAPP_NUMBERS" in str(refused.value)
    assert _doc(db, doc["id"])["claimed_at"] is None
    assert sandbox.inbox(person["phone"]) == []
    assert not [r for r in QUERIES.sender_state.all(db, {}) if r.paused_at]

    result = asyncio.run(
        run_sweep(s, s.database.database_url, number=US, check_identity_first=True)
    )

    assert result.delivered == 1


def test_the_service_names_a_refused_number_at_start_up(db, sandbox, settings):
    sandbox.faults(numbers={US: 1000})
    with start_service(
        settings.database.database_url, sandbox.url, WHATSAPP_NUMBERS=NUMBERS
    ) as svc:
        line = wait_for(
            lambda: next((x for x in svc.log().splitlines() if "sending will not work" in x), None),
            what="the start-up line",
        )
    assert f"phone number id {BR}" in line and "WHATSAPP_NUMBERS" in line


@contextlib.contextmanager
def _wired_service(sandbox, settings) -> Iterator[None]:
    """The webhook service, knowing the three numbers, receiving the sandbox's webhooks."""
    _sandbox_plays_three_numbers(sandbox)
    with hooked_service(sandbox, settings.database.database_url, WHATSAPP_NUMBERS=NUMBERS):
        yield


def _inbound_to(db, person_id: int) -> list[str | None]:
    rows = db.execute(
        "SELECT to_phone_number_id FROM inbound_messages WHERE person_id = %s ORDER BY sent_at",
        (person_id,),
    ).fetchall()
    return [r["to_phone_number_id"] for r in rows]


def test_a_message_to_another_of_our_numbers_opens_no_window_with_theirs(db, sandbox, settings):
    """A person bound to BR, knocked from BR, writes to US: the message is stored with
    the number it went to, their window with BR stays shut and the document keeps
    waiting for a reply; when they write to BR it opens and the document goes out."""
    s = _settings(settings)
    with _wired_service(sandbox, settings):
        person = data.add_person(db, phone_number_id=BR, inbound_age_seconds=None)
        doc = data.add_document(db, person["id"], "A short plan.")
        assert sweep(s).knocks_sent == 1
        assert _doc(db, doc["id"])["awaiting_reply_since"] is not None

        sandbox.say(person["phone"], "hi", to=US)
        wait_for(lambda: _inbound_to(db, person["id"]) == [US], what="the message stored")
        row = db.execute(
            "SELECT last_inbound_at FROM people WHERE id = %s", (person["id"],)
        ).fetchone()
        assert row["last_inbound_at"] is None
        assert _doc(db, doc["id"])["awaiting_reply_since"] is not None

        sandbox.say(person["phone"], "hi", to=BR)
        wait_for(lambda: _doc(db, doc["id"])["delivered_at"], what="delivery after the reply")
    assert _inbound_to(db, person["id"]) == [US, BR]
    inbox = sandbox.inbox(person["phone"])
    assert texts(inbox) == ["A short plan."]
    assert {m["from_phone_number_id"] for m in inbox} == {BR}


def test_a_stop_to_another_of_our_numbers_still_stops_them(db, sandbox, settings):
    """Consent is the person's, whichever of our numbers heard it; that number answers."""
    s = _settings(settings)
    with _wired_service(sandbox, settings):
        person = data.add_person(db, phone_number_id=BR, inbound_age_seconds=None)
        doc = data.add_document(db, person["id"], "A short plan.")
        assert sweep(s).knocks_sent == 1
        sandbox.say(person["phone"], "STOP", to=US)
        wait_for(lambda: _doc(db, doc["id"])["abandoned_at"], what="the stop applied")
        # Answered from the number that heard it: the one whose window they opened.
        [answer] = wait_for(
            lambda: [m for m in sandbox.inbox(person["phone"]) if m["type"] == "text"],
            what="the stop answered",
        )
    assert _doc(db, doc["id"])["abandon_reason"] == "opted_out"
    row = db.execute(
        "SELECT last_inbound_at, knocks_stopped_at FROM people WHERE id = %s", (person["id"],)
    ).fetchone()
    assert row["knocks_stopped_at"] is not None and row["last_inbound_at"] is None
    assert answer["from_phone_number_id"] == US
    assert answer["text"].startswith("Done: you will get no more of these messages.")
