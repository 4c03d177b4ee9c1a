"""The delivery engine against real Postgres and the sandbox over HTTP."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import signal
import time

import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.delivery.progress import FINISHED, Event
from delivery_pipeline.delivery.result import SweepResult
from delivery_pipeline.delivery.sweep import run_sweep
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline_tests.support.cli import sweep_process
from delivery_pipeline_tests.support.data import (
    add_document,
    add_person,
    chunks,
    document,
    person_writes,
    plan_body,
)
from delivery_pipeline_tests.support.engine import first_part_unknown, sweep, wrote_and_waiting
from delivery_pipeline_tests.support.inbox import knocks, texts

pytestmark = pytest.mark.engine


def test_delivers_every_chunk_once_in_order(db, sandbox, settings):
    person = add_person(db)
    sandbox.say(person["phone"], "hello")
    body = plan_body(9)
    doc = add_document(db, person["id"], body)

    result = sweep(settings)

    assert result.delivered == 1 and result.chunks_sent == 9
    assert texts(sandbox.inbox(person["phone"])) == delivery_messages(body)
    row = document(db, doc["id"])
    assert row["delivered_at"] is not None and row["claim_token"] is None
    assert [c["state"] for c in chunks(db, doc["id"])] == ["sent"] * 9
    assert all(c["wa_message_id"].startswith("wamid.") for c in chunks(db, doc["id"]))
    # A second sweep finds nothing to do and sends nothing.
    again = sweep(settings)
    assert again.claimed == 0 and len(sandbox.inbox(person["phone"])) == 9


def test_the_observer_hears_every_step_and_the_result_is_their_sum(db, sandbox, settings):
    open_window = [add_person(db) for _ in range(3)]
    for person in open_window:
        sandbox.say(person["phone"], "hi")
        add_document(db, person["id"], plan_body(2))
    unreachable = add_person(db)
    sandbox.say(unreachable["phone"], "hi")
    sandbox.set_unreachable(unreachable["phone"])
    add_document(db, unreachable["id"], "Never arrives.")
    add_document(db, add_person(db, inbound_age_seconds=None)["id"], "Needs a knock.")
    heard = []

    result = sweep(settings, observer=heard.append)

    assert result.claimed == 5
    assert sum(1 for e in heard if e.kind in FINISHED) == result.claimed, "one outcome per claim"
    rebuilt = SweepResult()
    for event in heard:
        rebuilt.add(event)
    assert rebuilt.as_dict() == result.as_dict()
    assert result.send_errors == {"RecipientUnreachable": 1}
    assert [e.kind for e in heard if e.document_id is None] == [Event.CLAIMED] * len(
        [e for e in heard if e.kind == Event.CLAIMED]
    )


def test_a_failing_observer_does_not_stop_the_sweep(db, sandbox, settings):
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    add_document(db, person["id"], plan_body(3))

    def broken(event):
        raise RuntimeError("the progress display fell over")

    assert sweep(settings, observer=broken).delivered == 1


def test_window_closed_knocks_once_then_delivers_after_reply(db, sandbox, settings):
    person = add_person(db, inbound_age_seconds=None, name="Ana\tMaria\n      Silva")
    first = add_document(db, person["id"], plan_body(3))

    result = sweep(settings)

    inbox = sandbox.inbox(person["phone"])
    assert result.knocks_sent == 1 and texts(inbox) == []
    [knock] = knocks(inbox)
    assert knock["parameters"] == ["Ana Maria    Silva"]
    assert document(db, first["id"])["awaiting_reply_since"] is not None
    with db.cursor() as cur:
        assert (
            cur.execute(QUERIES.guard_exists.sql, _window_params(settings)).fetchone()["eligible"]
            is False
        )

    # A second document for the same person the same day: no second knock. (A plan
    # for another day: a newer one for the same day would supersede the first, sql/migrations/025.)
    second = add_document(db, person["id"], plan_body(2), for_date=dt.date(2030, 1, 1))
    result = sweep(settings)
    assert result.knocks_sent == 0 and result.awaiting_reply == 1
    assert len(knocks(sandbox.inbox(person["phone"]))) == 1

    person_writes(settings.database.database_url, sandbox, person)
    result = sweep(settings)

    assert result.delivered == 2
    inbox = sandbox.inbox(person["phone"])
    assert len(knocks(inbox)) == 1
    expected = delivery_messages(document(db, first["id"])["body"]) + delivery_messages(
        document(db, second["id"])["body"]
    )
    assert sorted(texts(inbox)) == sorted(expected)


def test_knock_uses_locale_template(db, sandbox, settings):
    people = {
        loc: add_person(db, locale=loc, inbound_age_seconds=None) for loc in ("en", "es", "pt")
    }
    for p in people.values():
        add_document(db, p["id"], "A short plan.")
    sweep(settings)
    languages = {loc: knocks(sandbox.inbox(p["phone"]))[0]["language"] for loc, p in people.items()}
    assert languages == {"en": "en", "es": "es", "pt": "pt_BR"}


def test_stale_brief_is_abandoned_without_a_send(db, sandbox, settings):
    person = add_person(db, time_zone="Pacific/Kiritimati", inbound_age_seconds=None)
    local_today = db.execute(
        "SELECT (now() AT TIME ZONE 'Pacific/Kiritimati')::date AS d"
    ).fetchone()["d"]
    stale = add_document(
        db,
        person["id"],
        "Yesterday's brief.",
        kind="daily_brief",
        for_date=local_today - dt.timedelta(days=1),
    )

    result = sweep(settings)

    assert result.abandoned == {"stale": 1} and result.knocks_sent == 0
    assert sandbox.inbox(person["phone"]) == []
    assert document(db, stale["id"])["abandon_reason"] == "stale"


def test_todays_brief_is_delivered(db, sandbox, settings):
    person = add_person(db, time_zone="America/Sao_Paulo")
    sandbox.say(person["phone"], "bom dia")
    today = db.execute("SELECT (now() AT TIME ZONE 'America/Sao_Paulo')::date AS d").fetchone()["d"]
    add_document(db, person["id"], "Today's brief.", kind="daily_brief", for_date=today)
    assert sweep(settings).delivered == 1


def test_sync_reengagement_mid_document_knocks_and_resumes_after_reply(db, sandbox, settings):
    """Our clock says the window is open; the platform closes it mid-document."""
    person = add_person(db, inbound_age_seconds=60)
    sandbox.say(person["phone"], "hi")
    body = plan_body(9, tag="S")
    doc = add_document(db, person["id"], body)
    # The platform's view: the person wrote 24 h minus 2 s ago.
    sandbox.set_window(person["phone"], 24 * 3600 - 2)

    result = sweep(settings.replace(delivery={"chunk_interval_seconds": 0.5}))

    inbox = sandbox.inbox(person["phone"])
    sent_before = texts(inbox)
    assert result.knocks_sent == 1 and result.delivered == 0
    assert 0 < len(sent_before) < 9, "the refusal came mid-document"
    assert document(db, doc["id"])["awaiting_reply_since"] is not None

    person_writes(settings.database.database_url, sandbox, person)
    result = sweep(settings)

    assert result.delivered == 1
    all_texts = texts(sandbox.inbox(person["phone"]))
    assert all_texts == delivery_messages(body), "each chunk exactly once, in order"
    assert len(knocks(sandbox.inbox(person["phone"]))) == 1


def test_transient_faults_are_retried_with_backoff_until_delivered(db, sandbox, settings):
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    body = plan_body(5)
    doc = add_document(db, person["id"], body)
    sandbox.faults(error_5xx_rate=0.5, seed=7)
    fast = settings.replace(
        delivery={"backoff_base_seconds": 0.05, "backoff_max_seconds": 0.2, "max_attempts": 100}
    )

    saw_backoff = False
    for _ in range(200):
        # A sweep waits out short backoffs of its own documents before it ends.
        result = sweep(fast)
        saw_backoff |= any(r.after_seconds > 0 for r in result.retries)
        row = document(db, doc["id"])
        if row["delivered_at"]:
            break
        time.sleep(0.05)

    row = document(db, doc["id"])
    assert row["delivered_at"] is not None
    assert row["delivery_attempts"] > 0 and saw_backoff
    assert texts(sandbox.inbox(person["phone"])) == delivery_messages(body)
    assert sandbox.stats()["injected_5xx"] > 0


def test_transient_faults_exhaust_attempts_then_abandon(db, sandbox, settings):
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    doc = add_document(db, person["id"], "One message.")
    sandbox.faults(error_5xx_rate=1.0)
    tight = settings.replace(
        delivery={"max_attempts": 3, "backoff_base_seconds": 0.0, "backoff_max_seconds": 0.0}
    )
    for _ in range(5):
        sweep(tight)
    row = document(db, doc["id"])
    # The attempt that reached the limit counts, as when a status webhook fails it.
    assert row["abandon_reason"] == "max_attempts" and row["delivery_attempts"] == 3
    alerts = db.execute(
        "SELECT * FROM ops_alerts WHERE dedup_key = %s", (f"max_attempts:{doc['id']}",)
    ).fetchall()
    assert len(alerts) == 1


def test_permanent_error_abandons_with_reason(db, sandbox, settings):
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    sandbox.set_unreachable(person["phone"])
    doc = add_document(db, person["id"], plan_body(2))

    result = sweep(settings)

    assert result.abandoned == {"undeliverable": 1}
    assert document(db, doc["id"])["abandon_reason"] == "undeliverable"
    assert (
        db.execute(
            "SELECT count(*) AS n FROM ops_alerts WHERE dedup_key = %s",
            (f"recipient:{person['id']}",),
        ).fetchone()["n"]
        == 1
    )
    # Never retried.
    assert sweep(settings).claimed == 0


def test_expired_token_stops_the_sweep_without_burning_attempts(db, sandbox, settings):
    people = [add_person(db) for _ in range(5)]
    for p in people:
        sandbox.say(p["phone"], "hi")
        add_document(db, p["id"], plan_body(2))
    bad = settings.replace(
        whatsapp={"access_token": "expired-token"},
        delivery={"concurrency": 2, "pause_probe_seconds": 0.5},
    )

    first = sweep(bad)
    second = sweep(bad)

    assert first.stopped_by and "190" in first.stopped_by
    assert second.stopped_by and "paused" in second.stopped_by, "read before claiming"
    assert second.claimed == 0
    assert sandbox.stats()["rejected_by_code"]["190"] <= 2, "one refusal per sender in flight"
    assert sandbox.inboxes() == {} or all(v == [] for v in sandbox.inboxes().values())
    docs = db.execute("SELECT * FROM documents").fetchall()
    assert all(d["delivery_attempts"] == 0 and d["claim_token"] is None for d in docs)
    assert all(d["abandoned_at"] is None for d in docs)
    assert alert_kinds(db) == ["alert"]
    assert db.execute(QUERIES.sender_state.sql).fetchone()["paused_at"] is not None

    time.sleep(0.6)  # the probe is due
    fixed = sweep(settings.replace(delivery={"pause_probe_seconds": 0.5}))

    assert fixed.delivered == 5
    assert db.execute(QUERIES.sender_state.sql).fetchone()["paused_at"] is None
    assert alert_kinds(db) == ["alert", "resolved"]


def alert_kinds(db) -> list[str]:
    rows = db.execute(
        "SELECT kind FROM ops_alerts WHERE dedup_key = 'check:sender_paused' ORDER BY id"
    ).fetchall()
    return [r["kind"] for r in rows]


def test_drop_after_accept_is_unknown_and_not_resent_blindly(db, sandbox, settings):
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    body = plan_body(3)
    doc = add_document(db, person["id"], body)
    sandbox.faults(drop_after_accept_rate=1.0)

    result = sweep(settings)

    assert result.unknown_outcomes == 1
    # The ledger holds every chunk from the first claim on; only chunk 0 was fenced.
    assert [c["state"] for c in chunks(db, doc["id"])] == ["unknown", "pending", "pending"]
    assert len(sandbox.inbox(person["phone"])) == 1, "the platform did take it"

    sandbox.faults(drop_after_accept_rate=0.0)
    # Within the grace period: nothing is re-sent, even when forced due now.
    db.execute("UPDATE documents SET next_attempt_at = now() WHERE id = %s", (doc["id"],))
    sweep(settings)
    assert len(sandbox.inbox(person["phone"])) == 1
    assert (
        document(db, doc["id"])["next_attempt_at"] > db.execute("SELECT now() AS n").fetchone()["n"]
    )


def test_unknown_outcome_policy_after_grace(db, sandbox, settings):
    person, resend_doc = first_part_unknown(db, sandbox, settings)
    _age_out_unknown(db, resend_doc["id"], settings)

    sweep(settings)  # policy "resend": at-least-once after the grace period

    assert document(db, resend_doc["id"])["delivered_at"] is not None
    assert len(texts(sandbox.inbox(person["phone"]))) == 3, "chunk 0 twice: the documented cost"

    other, abandon_doc = first_part_unknown(db, sandbox, settings)
    _age_out_unknown(db, abandon_doc["id"], settings)

    sweep(settings.replace(delivery={"unknown_policy": "abandon"}))

    assert document(db, abandon_doc["id"])["abandon_reason"] == "unknown_outcome"
    assert len(sandbox.inbox(other["phone"])) == 1


def _age_out_unknown(db, document_id, settings):
    db.execute(
        "UPDATE delivery_chunks SET unknown_since = now() - make_interval(secs => %s) "
        "WHERE document_id = %s AND state = 'unknown'",
        (settings.delivery.unknown_grace_seconds + 1, document_id),
    )
    db.execute("UPDATE documents SET next_attempt_at = now() WHERE id = %s", (document_id,))


def test_taken_over_sender_sends_nothing_more(db, sandbox, settings):
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    body = plan_body(6)
    doc = add_document(db, person["id"], body)
    slow = settings.replace(delivery={"lease_seconds": 1, "chunk_interval_seconds": 2.0})
    fast = settings.replace(delivery={"lease_seconds": 1})

    async def race():
        first = asyncio.create_task(run_sweep(slow, settings.database.database_url))
        # Wait until the first sender has sent chunk 0 and sleeps; its lease
        # (1 s) lapses while it sleeps, and a second sender takes over.
        for _ in range(100):
            await asyncio.sleep(0.05)
            if any(c["state"] == "sent" for c in chunks(db, doc["id"])):
                break
        await asyncio.sleep(1.2)
        second = await run_sweep(fast, settings.database.database_url)
        return await first, second

    first, second = asyncio.run(race())

    assert second.delivered == 1 and first.lost_claims == 1 and first.delivered == 0
    assert first.chunks_sent == 1 and second.chunks_sent == 5
    assert texts(sandbox.inbox(person["phone"])) == delivery_messages(body)


def test_killed_sender_resumes_from_first_unsent_chunk(db, sandbox, settings):
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    body = plan_body(8)
    doc = add_document(db, person["id"], body)

    proc = sweep_process(settings, DELIVERY_CHUNK_INTERVAL_SECONDS="1")
    try:
        deadline = time.monotonic() + 30
        while sum(c["state"] == "sent" for c in chunks(db, doc["id"])) < 3:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    sent_before = len(texts(sandbox.inbox(person["phone"])))
    assert 3 <= sent_before < 8
    # The dead sender's lease lapses (the clock, moved through the data).
    db.execute(
        "UPDATE documents SET claimed_at = now() - interval '1 hour' WHERE id = %s", (doc["id"],)
    )

    result = sweep(settings)

    assert result.delivered == 1 and result.chunks_sent == 8 - sent_before
    assert texts(sandbox.inbox(person["phone"])) == delivery_messages(body)


@pytest.mark.slow
def test_eight_processes_race_for_500_documents(db, sandbox, settings):
    sandbox.faults(pair_rate_enabled=False, throughput_limit=0)
    people = wrote_and_waiting(db, sandbox, 500, "D")

    procs = [
        sweep_process(settings, "--concurrency", "8", DELIVERY_CHUNK_LIMIT="300") for _ in range(8)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outputs]

    inboxes = sandbox.inboxes()
    for i, person in enumerate(people):
        body = plan_body(3, chunk_limit=300, tag=f"D{i} ")
        assert texts(inboxes.get(person["phone"], [])) == delivery_messages(body, 300), person[
            "phone"
        ]
    delivered = db.execute(
        "SELECT count(*) AS n FROM documents WHERE delivered_at IS NOT NULL"
    ).fetchone()
    assert delivered["n"] == 500


def _window_params(settings):
    return settings.guard


@pytest.mark.slow
def test_eight_processes_never_interleave_a_persons_plans(db, sandbox, settings):
    """8 sweep processes, 30 people with 3 plans each: every inbox holds plan 0, then
    plan 1, then plan 2, each whole and in order; nothing twice, nothing missing."""
    # Enough latency and concurrency that all 90 documents can be in flight at once.
    sandbox.faults(pair_rate_enabled=False, throughput_limit=0, latency_ms=100)
    people = [add_person(db) for _ in range(30)]
    plans: dict[str, list[list[str]]] = {}
    for person in people:
        sandbox.say(person["phone"], "hi")
        plans[person["phone"]] = []
    for n in range(3):  # generated in this order: plan 0 of everybody first
        for i, person in enumerate(people):
            body = plan_body(3, chunk_limit=300, tag=f"P{i} plan {n} ")
            # Plans for three different days: a newer plan for the same day would
            # supersede an older one not begun (sql/migrations/025).
            day = dt.date(2030, 1, 1) + dt.timedelta(days=n)
            add_document(db, person["id"], body, for_date=day)
            plans[person["phone"]].append(delivery_messages(body, 300))
    db.execute("UPDATE people SET last_inbound_at = now()")

    procs = [
        sweep_process(settings, "--concurrency", "16", DELIVERY_CHUNK_LIMIT="300") for _ in range(8)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outputs]

    inboxes = sandbox.inboxes()
    interleaved = duplicated = missing = out_of_order = 0
    for phone, expected in plans.items():
        got = texts(inboxes.get(phone, []))
        expected_all = [c for plan in expected for c in plan]
        duplicated += len(got) - len(set(got))
        missing += len(set(expected_all) - set(got))
        # Which plan each message belongs to, in arrival order: contiguous runs only.
        owner = [next(n for n, plan in enumerate(expected) if text in plan) for text in got]
        runs = [o for k, o in enumerate(owner) if k == 0 or owner[k - 1] != o]
        interleaved += len(runs) != len(set(runs))
        out_of_order += got != expected_all
    assert (interleaved, duplicated, missing, out_of_order) == (0, 0, 0, 0)
    claimed = sum(json.loads(out)["claimed"] for out, _ in outputs)
    assert (
        claimed >= 90
        and db.execute(
            "SELECT count(*) AS n FROM documents WHERE delivered_at IS NOT NULL"
        ).fetchone()["n"]
        == 90
    )


@pytest.mark.slow
def test_pair_rate_backoff_holds_across_processes(db, sandbox, settings):
    """One person, three plans, three sweep processes, a pair-rate budget of 4 messages
    refilled one a second. The plan that meets 131056 is due again only 6-9 s later and,
    being the person's oldest, holds back the others in every process: each refusal is
    followed by silence to that person, none lands in an empty budget again, and the
    plans still arrive whole and in order."""
    from delivery_pipeline.whatsapp.errors import PAIR_RATE_RETRY_SECONDS

    sandbox.faults(
        pair_rate_enabled=True, pair_burst=4, pair_refill_seconds=1.0, throughput_limit=0
    )
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    expected = []
    for n in range(3):
        body = plan_body(3, chunk_limit=300, tag=f"pair plan {n} ")
        # Three days' plans: a newer one for the same day would supersede (sql/migrations/025).
        add_document(db, person["id"], body, for_date=dt.date(2030, 1, 1) + dt.timedelta(n))
        expected += delivery_messages(body, 300)

    procs = [sweep_process(settings, DELIVERY_CHUNK_LIMIT="300") for _ in range(3)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outputs]

    inbox = [m for m in sandbox.inbox(person["phone"]) if m["type"] == "text"]
    refusals = int(sandbox.stats()["rejected_by_code"].get("131056", 0))
    times = [dt.datetime.fromisoformat(m["time"]).timestamp() for m in inbox]
    silences = sum(
        1 for a, b in zip(times, times[1:], strict=False) if b - a >= PAIR_RATE_RETRY_SECONDS
    )
    assert texts(inbox) == expected
    # 9 messages, a budget of 4 refilled during each 6 s pause: two refusals at most.
    assert 1 <= refusals <= 2 and silences == refusals
