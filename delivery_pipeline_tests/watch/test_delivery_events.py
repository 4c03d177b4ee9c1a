"""Dagster as the system of record, against real Postgres and a real Dagster
instance: the outbox trigger writes one row per transition, the sensor and the
service's push report every row once (also when a push's answer was lost, a
run crashed, or the daemon dropped a tick's events), the claims hold against
concurrent processes, and the dead-man's switch alerts once, reminds and
resolves."""

from __future__ import annotations

import asyncio
import datetime as dt
import multiprocessing
import uuid
from collections import Counter

import pytest
from dagster import DagsterInstance, DagsterRunStatus, SensorResult, build_sensor_context
from hypothesis import given
from hypothesis import strategies as st

from delivery_pipeline.dagster_defs.outbox_sensor import DELIVERED_KEY, record_delivery_events
from delivery_pipeline.service.timeline_push import TimelinePush
from delivery_pipeline.store.db import async_pool, connect, with_application_name
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.watch import daemon_heartbeats
from delivery_pipeline.watch.alerts import AlertKind
from delivery_pipeline.watch.delivery_events import (
    CLI_SOURCE,
    OUTBOX_IDS,
    OUTBOX_KEEP,
    SERVICE_SOURCE,
    claim_source,
    compact_ids,
    drain,
    expand_ids,
    forget_reported,
    run_source,
)
from delivery_pipeline.watch.ops_channel import OpsNotifier, send_pending
from delivery_pipeline_tests.support.dagster_support import add_run, materializations, resources_for
from delivery_pipeline_tests.support.data import add_document, add_person
from delivery_pipeline_tests.support.fake_http import Answer, FakeHttpServer

pytestmark = pytest.mark.filterwarnings("ignore::dagster.BetaWarning")


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


def transitions(database_url: str, writer: str, count: int = 1) -> list[int]:
    """``count`` documents delivered by a session named ``writer``: one outbox row each."""
    with connect(database_url) as conn:
        person = add_person(conn)
        ids = [add_document(conn, person["id"], "A plan.")["id"] for _ in range(count)]
    with connect(with_application_name(database_url, writer)) as conn:
        conn.execute(
            "UPDATE documents SET delivered_at = now() WHERE id = ANY(%(ids)s)", {"ids": ids}
        )
    return ids


def outbox(db) -> list[dict]:
    return db.execute("SELECT * FROM delivery_events ORDER BY id").fetchall()


def tick(instance, database_url) -> SensorResult:
    """One sensor tick, and what the daemon does with its result: store the events."""
    context = build_sensor_context(instance=instance, resources=resources_for(database_url))
    result = record_delivery_events(context)
    assert isinstance(result, SensorResult)
    for event in result.asset_events:
        instance.report_runless_asset_event(event)
    return result


def recorded_ids(instance) -> Counter[int]:
    """How many events on delivered_documents name each outbox row."""
    counts: Counter[int] = Counter()
    for record in materializations(instance, DELIVERED_KEY):
        metadata = record.asset_materialization.metadata
        counts.update(expand_ids(str(metadata[OUTBOX_IDS].value)))
    return counts


# ── the outbox trigger ──────────────────────────────────────────────────


def test_each_transition_is_one_row_naming_its_writer(db, database_url):
    person = add_person(db)
    doc = add_document(db, person["id"], "A plan.")["id"]
    db.execute(
        "INSERT INTO delivery_chunks (document_id, chunk_index, state, callback_data) "
        "VALUES (%(d)s, 0, 'sent', 'a'), (%(d)s, 1, 'sent', 'b')",
        {"d": doc},
    )
    with connect(with_application_name(database_url, "someone")) as conn:
        conn.execute("UPDATE documents SET next_attempt_at = now() WHERE id = %(d)s", {"d": doc})
        conn.execute("UPDATE documents SET knock_sent_at = now() WHERE id = %(d)s", {"d": doc})
        conn.execute("UPDATE documents SET delivered_at = now() WHERE id = %(d)s", {"d": doc})
        conn.execute(
            "UPDATE documents SET delivered_at = NULL, last_delivery_error = 'failed later' "
            "WHERE id = %(d)s",
            {"d": doc},
        )
        conn.execute(
            "UPDATE documents SET abandoned_at = now(), abandon_reason = 'undeliverable' "
            "WHERE id = %(d)s",
            {"d": doc},
        )
    rows = outbox(db)
    assert [(r["event"], r["reason"], r["chunks"]) for r in rows] == [
        ("knocked", None, None),
        ("delivered", None, 2),
        ("undelivered", "failed later", None),
        ("abandoned", "undeliverable", None),
    ]
    assert {(r["document_id"], r["person_id"], r["source"]) for r in rows} == {
        (doc, person["id"], "someone")
    }
    assert all(r["reported_at"] is None and r["claimed_by"] is None for r in rows)


@given(st.sets(st.integers(min_value=1, max_value=10_000), max_size=200))
def test_outbox_ids_compact_and_expand_back(ids):
    assert expand_ids(compact_ids(ids)) == ids


# ── the sensor: once each ───────────────────────────────────────────────


def test_sensor_records_other_writers_rows_once(db, database_url, instance):
    docs = transitions(database_url, CLI_SOURCE, 3)
    first = tick(instance, database_url)
    [event] = first.asset_events
    assert event.asset_key == DELIVERED_KEY
    assert event.metadata["delivered"].value == 3
    assert event.metadata["source"].value == CLI_SOURCE
    assert [d["document"] for d in event.metadata["documents"].value] == docs
    assert {r["claimed_by"] for r in outbox(db)} == {"sensor"}

    second = tick(instance, database_url)  # finds them on the timeline: marks, emits nothing
    assert second.asset_events == []
    assert all(r["reported_at"] is not None for r in outbox(db))
    assert recorded_ids(instance) == Counter({r["id"]: 1 for r in outbox(db)})


def test_the_sensor_forgets_rows_reported_long_ago_and_nothing_else(db, database_url, instance):
    transitions(database_url, CLI_SOURCE, 4)
    tick(instance, database_url)
    tick(instance, database_url)  # all four on the timeline and marked reported
    old, just_kept, fresh, _ = [r["id"] for r in outbox(db)]
    hour = dt.timedelta(hours=1)
    for row_id, ago in ((old, OUTBOX_KEEP + hour), (just_kept, OUTBOX_KEEP - hour)):
        db.execute(
            "UPDATE delivery_events SET reported_at = now() - %(ago)s WHERE id = %(id)s",
            {"ago": ago, "id": row_id},
        )
    [waiting_doc] = transitions(database_url, CLI_SOURCE, 1)
    # Old but never reported (Dagster was away for weeks): it must stay until it is.
    db.execute(
        "UPDATE delivery_events SET occurred_at = now() - %(ago)s WHERE reported_at IS NULL",
        {"ago": 4 * OUTBOX_KEEP},
    )

    result = tick(instance, database_url)

    assert result.skip_reason is not None and "1 reported over 7 days ago forgotten" in str(
        result.skip_reason.skip_message
    )
    left = outbox(db)
    assert old not in {r["id"] for r in left}
    assert {just_kept, fresh} <= {r["id"] for r in left}
    assert [r["document_id"] for r in left if r["reported_at"] is None] == [waiting_doc]
    assert len(result.asset_events) == 1  # the waiting row is reported, not forgotten


def test_forgetting_takes_the_oldest_first_a_bounded_batch_at_a_time(db, database_url):
    transitions(database_url, CLI_SOURCE, 3)
    ids = [r["id"] for r in outbox(db)]
    for days, row_id in zip((30, 20, 10), ids, strict=True):
        db.execute(
            "UPDATE delivery_events SET reported_at = now() - make_interval(days => %(d)s) "
            "WHERE id = %(id)s",
            {"d": days, "id": row_id},
        )
    with connect(database_url) as conn:
        assert forget_reported(conn, limit=2) == 2
        assert [r["id"] for r in outbox(db)] == [ids[2]]  # reported 10 days ago: the newest
        assert forget_reported(conn, limit=2) == 1
        assert forget_reported(conn, limit=2) == 0
    assert outbox(db) == []


def test_events_the_daemon_dropped_are_recorded_again(db, database_url, instance):
    transitions(database_url, CLI_SOURCE, 2)
    context = build_sensor_context(instance=instance, resources=resources_for(database_url))
    lost = record_delivery_events(context)  # evaluated, never stored (storage went away)
    assert len(lost.asset_events) == 1

    again = tick(instance, database_url)
    assert len(again.asset_events) == 1
    tick(instance, database_url)
    assert recorded_ids(instance) == Counter({r["id"]: 1 for r in outbox(db)})
    assert all(r["reported_at"] is not None for r in outbox(db))


def test_a_push_whose_answer_was_lost_is_not_recorded_twice(db, database_url, instance):
    transitions(database_url, SERVICE_SOURCE, 2)
    pushed = claim_source(db, SERVICE_SOURCE, "push:lost-answer")
    # the webserver stored the event; the service never heard back
    from delivery_pipeline.dagster_defs.outbox_sensor import to_event
    from delivery_pipeline.watch.delivery_events import record_for

    record = record_for(pushed)
    instance.report_runless_asset_event(to_event(record.description, record.metadata))

    held = tick(instance, database_url)
    assert held.asset_events == [] and "Nothing to record" in held.skip_reason.skip_message
    db.execute("UPDATE delivery_events SET claimed_at = claimed_at - interval '11 minutes'")
    lapsed = tick(instance, database_url)  # the claim lapsed: on the timeline already
    assert lapsed.asset_events == []
    assert "2 found already on the timeline" in lapsed.skip_reason.skip_message
    assert recorded_ids(instance) == Counter({r["id"]: 1 for r in outbox(db)})
    assert all(r["reported_at"] is not None for r in outbox(db))


def test_a_push_that_never_landed_is_recorded_by_the_sensor_once_its_claim_lapses(
    db, database_url, instance
):
    transitions(database_url, SERVICE_SOURCE, 1)
    claim_source(db, SERVICE_SOURCE, "push:no-answer")
    assert tick(instance, database_url).asset_events == []
    db.execute("UPDATE delivery_events SET claimed_at = claimed_at - interval '11 minutes'")
    assert len(tick(instance, database_url).asset_events) == 1
    tick(instance, database_url)
    assert recorded_ids(instance) == Counter({r["id"]: 1 for r in outbox(db)})


def test_a_running_delivery_runs_rows_are_its_own_and_a_crashed_ones_the_sensors(
    db, database_url, instance
):
    run = add_run(instance, "deliver_documents", DagsterRunStatus.STARTED)
    transitions(database_url, run_source(run.run_id), 2)
    assert tick(instance, database_url).asset_events == []  # the run will report them

    instance.report_run_failed(run)  # it crashed before materializing
    [event] = tick(instance, database_url).asset_events
    assert event.metadata["source"].value == run_source(run.run_id)
    tick(instance, database_url)
    assert recorded_ids(instance) == Counter({r["id"]: 1 for r in outbox(db)})


# ── the claims across processes ─────────────────────────────────────────


def _push_claims(database_url: str, rounds: int, queue, ready, go) -> None:
    claimed: list[int] = []
    with connect(database_url) as conn:
        ready.release()
        go.wait(timeout=60)
        for _ in range(rounds):
            rows = claim_source(conn, SERVICE_SOURCE, f"push:{uuid.uuid4()}", limit=3)
            claimed.extend(row.id for row in rows)
    queue.put(claimed)


@pytest.mark.slow
def test_pushers_in_several_processes_and_the_sensor_never_claim_one_row_twice(db, database_url):
    """Three service replicas push while the sensor drains: every row is claimed by one."""
    transitions(database_url, SERVICE_SOURCE, 300)
    ctx = multiprocessing.get_context("spawn")
    queue, ready, go = ctx.Queue(), ctx.Semaphore(0), ctx.Event()
    pushers = [
        ctx.Process(target=_push_claims, args=(database_url, 40, queue, ready, go))
        for _ in range(3)
    ]
    for process in pushers:
        process.start()
    for _ in pushers:
        assert ready.acquire(timeout=60)
    by_sensor: list[int] = []
    with connect(database_url) as conn:
        go.set()
        for _ in range(40):
            # what the sensor emitted reached the timeline (as the daemon would store it)
            outcome = drain(
                conn,
                on_timeline=lambda since: set(by_sensor),
                runs_in_flight=lambda runs: set(),
                limit=10,
            )
            by_sensor.extend(i for record in outcome.records for i in record.ids)
    by_pushers = [i for _ in pushers for i in queue.get(timeout=120)]
    for process in pushers:
        process.join(timeout=60)
    claims = Counter(by_pushers) + Counter(by_sensor)
    assert set(claims) == {r["id"] for r in outbox(db)}
    assert max(claims.values()) == 1
    assert by_pushers, "the pushers took part"


# ── the service's push ──────────────────────────────────────────────────


def test_the_service_pushes_its_rows_to_the_webserver_and_marks_them(db, database_url):
    docs = transitions(database_url, SERVICE_SOURCE, 2)
    transitions(database_url, CLI_SOURCE, 1)  # another writer's: not the service's to push

    async def push(fake_url: str) -> int:
        async with async_pool(database_url, max_size=2) as pool:
            return await TimelinePush(pool, fake_url).push()

    with FakeHttpServer(Answer(200, {})) as webserver:
        assert asyncio.run(push(webserver.url)) == 2
    [request] = webserver.requests
    assert request.path == "/report_asset_materialization/delivered_documents"
    body = request.json()
    assert body["metadata"]["delivered"] == 2
    assert [d["document"] for d in body["metadata"]["documents"]] == docs
    assert body["description"].startswith(SERVICE_SOURCE)
    rows = {r["source"]: r for r in outbox(db)}
    assert rows[SERVICE_SOURCE]["reported_at"] is not None
    assert rows[CLI_SOURCE]["reported_at"] is None and rows[CLI_SOURCE]["claimed_by"] is None


def push_twice(database_url: str, url: str, timeout: float = 5.0) -> tuple[int, int]:
    async def push() -> tuple[int, int]:
        async with async_pool(database_url, max_size=2) as pool:
            push = TimelinePush(pool, url, timeout_seconds=timeout)
            return await push.push(), await push.push()

    return asyncio.run(push())


def test_a_refused_push_frees_its_rows_for_the_sensor_and_pauses(db, database_url):
    transitions(database_url, SERVICE_SOURCE, 1)
    with FakeHttpServer(Answer(500, {"error": "storage unavailable"})) as webserver:
        assert push_twice(database_url, webserver.url) == (0, 0)
    assert len(webserver.requests) == 1, "paused after the failure"
    [row] = outbox(db)
    assert row["reported_at"] is None and row["claimed_by"] is None

    transitions(database_url, SERVICE_SOURCE, 1)
    assert push_twice(database_url, "http://127.0.0.1:9") == (0, 0)  # nobody listens
    assert [r["claimed_by"] for r in outbox(db)] == [None, None]


def test_a_push_without_an_answer_keeps_its_claim(db, database_url):
    """The event may still land: the sensor looks it up once the claim lapses."""
    transitions(database_url, SERVICE_SOURCE, 1)
    with FakeHttpServer(Answer(200, {}, delay_seconds=2.0)) as webserver:
        assert push_twice(database_url, webserver.url, timeout=0.3) == (0, 0)
    [row] = outbox(db)
    assert row["reported_at"] is None and row["claimed_by"].startswith("push:")


# ── the dead-man's switch ───────────────────────────────────────────────


def look(db, started_ago: float = 0.0, stale: float = 600, reminder: float = 3600):
    return daemon_heartbeats.watch_daemon(
        db,
        stale_seconds=stale,
        reminder_seconds=reminder,
        watching_since=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=started_ago),
    )


def age_heartbeats(db, seconds: float) -> None:
    db.execute(
        "UPDATE dagster_heartbeats SET seen_at = now() - make_interval(secs => %(s)s::float8)",
        {"s": seconds},
    )


def test_the_dead_mans_switch_alerts_once_reminds_and_resolves(db):
    daemon_heartbeats.beat(db, daemon_heartbeats.HEARTBEAT_SENSOR)
    daemon_heartbeats.beat(db, daemon_heartbeats.CHECKS)
    assert look(db) is None, "alive: nothing to say"

    age_heartbeats(db, 700)
    alert = look(db)
    assert alert.kind == AlertKind.ALERT and alert.severity == "error"
    assert "delivery_heartbeat tick" in alert.message and "check evaluation" in alert.message
    assert look(db) is None, "once"
    db.execute("UPDATE ops_alerts SET created_at = created_at - interval '2 hours'")
    assert look(db).kind == AlertKind.REMINDER

    daemon_heartbeats.beat(db, daemon_heartbeats.CHECKS)  # a check ran: the daemon is back
    resolved = look(db)
    assert resolved.kind == AlertKind.RESOLVED and "alive again" in resolved.message
    assert look(db) is None


def test_a_daemon_that_never_beat_is_silent_too(db):
    assert look(db, started_ago=60) is None, "just started: give it time"
    assert "no heartbeat at all" in look(db, started_ago=700).message


def test_a_replica_that_just_started_does_not_resolve_a_silence_it_cannot_judge(db):
    assert "no heartbeat at all" in look(db, started_ago=700).message
    assert look(db, started_ago=60) is None  # a young replica, or the same one restarted
    assert look(db, started_ago=760) is None  # still the same episode: no second alert
    daemon_heartbeats.beat(db, daemon_heartbeats.HEARTBEAT_SENSOR)
    assert "alive again" in look(db, started_ago=60).message


def test_only_one_process_posts_the_unsent_alerts_at_a_time(db, database_url, sandbox):
    db.execute(
        "INSERT INTO ops_alerts (dedup_key, severity, message) VALUES ('x', 'error', 'down')"
    )
    notifier = OpsNotifier(url=f"{sandbox.url}/_sandbox/ops")
    other = {"token": uuid.uuid4(), "lease": dt.timedelta(minutes=1)}
    with connect(database_url) as conn:
        assert QUERIES.alert_poster_lease.one(conn, other)  # the other poster is posting
        busy = send_pending(db, notifier)
        assert busy.busy and sandbox.ops_alerts() == []
        QUERIES.alert_poster_release.run(conn, other)  # it is done
    assert send_pending(db, notifier).sent and len(sandbox.ops_alerts()) == 1


def test_a_dead_posters_lease_lapses_and_the_next_pass_posts(db, sandbox):
    db.execute(
        "INSERT INTO ops_alerts (dedup_key, severity, message) VALUES ('x', 'error', 'down')"
    )
    notifier = OpsNotifier(url=f"{sandbox.url}/_sandbox/ops")
    dead = {"token": uuid.uuid4(), "lease": dt.timedelta(minutes=1)}
    assert QUERIES.alert_poster_lease.one(db, dead)  # then its process was killed
    assert send_pending(db, notifier).busy
    db.execute("UPDATE ops_alert_poster SET leased_until = now() - interval '1 second'")
    assert send_pending(db, notifier).sent and len(sandbox.ops_alerts()) == 1
    # given back after the pass: free for the next poster at once
    assert db.execute("SELECT holder FROM ops_alert_poster").fetchone()["holder"] is None
