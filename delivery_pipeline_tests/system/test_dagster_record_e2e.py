"""Dagster as the system of record, for real: the sandbox, the webhook service,
``dagster-webserver`` and ``dagster-daemon run`` as processes, Dagster's storage
on Postgres. Asked through Dagster's own API (its instance, its GraphQL):

* a person replies, the service delivers, and an event for that document is
  on ``delivered_documents``, pushed by the service itself (the fast path);
* the lineage has its edges, owners and kinds;
* with Dagster's storage down the service still delivers, and once it is back
  every delivery reaches the timeline exactly once;
* the daemon's process stops: the service alerts ops once, reminds, and posts
  "resolved" when the daemon is started again.

How fast the event follows the delivery is measured, not asserted:
``bench/record_latency.py``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from delivery_pipeline.store.db import connect
from delivery_pipeline.watch.daemon_heartbeats import ALERT_KEY
from delivery_pipeline.watch.delivery_events import DELIVERED_DOCUMENTS, OUTBOX_IDS, expand_ids
from delivery_pipeline_tests.support import ops
from delivery_pipeline_tests.support.dagster_deployment import (
    Deployment,
    dagster_deployment,
    eventually,
)
from delivery_pipeline_tests.support.dagster_support import materializations
from delivery_pipeline_tests.support.inbox import texts

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

STALE_SECONDS = 15
REMINDER_SECONDS = 10


@pytest.fixture(scope="module")
def deployment(pg_admin_url: str, template_database: str) -> Iterator[Deployment]:
    with dagster_deployment(
        pg_admin_url,
        template_database,
        WATCHDOG_STALE_SECONDS=str(STALE_SECONDS),
        OPS_ALERT_REMINDER_SECONDS=str(REMINDER_SECONDS),
        DELIVERY_HEARTBEAT_SECONDS="1",
    ) as running:
        with connect(running.database_url) as db:
            eventually(
                lambda: db.execute("SELECT 1 FROM dagster_heartbeats").fetchone(),
                "the daemon's first heartbeat",
                timeout=180,
            )
        yield running


def knocked_person(deployment: Deployment) -> tuple[int, str]:
    """A plan knocked for and waiting on the person's reply: (document id, phone)."""
    with connect(deployment.database_url) as db:
        return ops.knocked_phone(db, 600)


def delivered(deployment: Deployment, docs: list[int]) -> bool:
    with connect(deployment.database_url) as db:
        row = db.execute(
            "SELECT count(*) AS n FROM documents "
            "WHERE id = ANY(%(ids)s) AND delivered_at IS NOT NULL",
            {"ids": docs},
        ).fetchone()
    return row["n"] == len(docs)


def events_for(deployment: Deployment, doc: int) -> list[Any]:
    """The delivered_documents events that list ``doc`` as delivered."""
    from dagster import AssetKey

    found = []
    for record in materializations(deployment.instance, AssetKey(DELIVERED_DOCUMENTS)):
        listed = record.asset_materialization.metadata["documents"].value
        if any(d["document"] == doc and d["event"] == "delivered" for d in listed):
            found.append(record)
    return found


def outbox_rows(deployment: Deployment, docs: list[int]) -> list[dict[str, Any]]:
    with connect(deployment.database_url) as db:
        return db.execute(
            "SELECT * FROM delivery_events WHERE document_id = ANY(%(ids)s) ORDER BY id",
            {"ids": docs},
        ).fetchall()


SENSOR_TICKS = """
query Ticks($name: String!) {
  sensorOrError(sensorSelector: {
    repositoryName: "__repository__", repositoryLocationName: "delivery_pipeline",
    sensorName: $name
  }) {
    ... on Sensor { sensorState { ticks(limit: 3) { timestamp status } } }
  }
}
"""


def sensor_ticked_after(deployment: Deployment, name: str, timestamp: float, times: int) -> bool:
    data = deployment.graphql(SENSOR_TICKS, {"name": name})
    ticks = data["sensorOrError"]["sensorState"]["ticks"]
    done = [t for t in ticks if t["timestamp"] > timestamp and t["status"] != "STARTED"]
    return len(done) >= times


# ── the timeline ────────────────────────────────────────────────────────


def test_a_reply_delivered_by_the_service_is_on_delivered_documents(deployment):
    doc, phone = knocked_person(deployment)
    deployment.sandbox.say(phone, "oi")
    eventually(lambda: delivered(deployment, [doc]), "the plan to be delivered")

    [event] = eventually(lambda: events_for(deployment, doc), "its event on delivered_documents")
    metadata = event.asset_materialization.metadata
    assert metadata["source"].value == "delivery-service"
    assert metadata["delivered"].value >= 1 and metadata["chunks_delivered"].value >= 1
    assert event.run_id == "", "a runless event: no Dagster run delivered it"
    # the service pushed it itself, the moment it delivered (not the 5-second sensor)
    [row] = [r for r in outbox_rows(deployment, [doc]) if r["event"] == "delivered"]
    assert row["claimed_by"].startswith("push:") and row["reported_at"] is not None
    assert row["id"] in expand_ids(str(metadata[OUTBOX_IDS].value))


LINEAGE = """
query Lineage {
  assetNodes {
    assetKey { path }
    dependencyKeys { path }
    kinds
    owners { ... on TeamAssetOwner { team } }
    assetChecksOrError { ... on AssetChecks { checks { name } } }
  }
}
"""


def test_the_lineage_has_its_edges_owners_kinds_and_checks(deployment):
    nodes = {
        node["assetKey"]["path"][0]: node for node in deployment.graphql(LINEAGE)["assetNodes"]
    }
    edges = {
        (upstream["path"][0], name)
        for name, node in nodes.items()
        for upstream in node["dependencyKeys"]
    }
    assert edges == {
        ("generated_documents", "delivered_documents"),
        ("delivered_documents", "delivery_backlog"),
        ("delivered_documents", "delivery_report"),
    }
    owners = {name: [o["team"] for o in node["owners"]] for name, node in nodes.items()}
    assert owners == {
        "generated_documents": ["generation"],
        "delivered_documents": ["delivery"],
        "delivery_backlog": ["ops"],
        "delivery_report": ["ops"],
    }
    assert "whatsapp" in nodes["delivered_documents"]["kinds"]
    checks = {
        name: {c["name"] for c in node["assetChecksOrError"]["checks"]}
        for name, node in nodes.items()
    }
    assert checks["generated_documents"] == {
        "pending_too_long",
        "generating_too_long",
        "awaiting_review_too_long",
    }
    assert {"webhook_service_reachable", "delivery_events_unrecorded"} <= checks[
        "delivered_documents"
    ]
    assert checks["delivery_backlog"] == {"abandoned_or_failed", "freshness_check"}


def test_with_dagster_storage_down_delivery_goes_on_and_each_event_is_recorded_once(
    deployment,
):
    # Away before the knocks exist: their outbox rows, too, are born while Dagster
    # is away (a sensor tick could otherwise record one just before the block).
    deployment.block_storage()
    try:
        people = [knocked_person(deployment) for _ in range(3)]
        docs = [doc for doc, _ in people]
        for _, phone in people:
            deployment.sandbox.say(phone, "oi")
        eventually(lambda: delivered(deployment, docs), "delivery while Dagster is away")
        for _, phone in people:
            assert texts(deployment.sandbox.inbox(phone)), "the plan is on the phone"
        assert all(r["reported_at"] is None for r in outbox_rows(deployment, docs))
    finally:
        deployment.unblock_storage()

    rows = eventually(
        lambda: (
            (rows := outbox_rows(deployment, docs))
            and all(r["reported_at"] is not None for r in rows)
            and rows
        ),
        "every delivery recorded once Dagster is back",
        timeout=240,
    )
    last = max(r["reported_at"] for r in rows).timestamp()
    # two more ticks of the sensor that would record a row again, if anything did
    eventually(
        lambda: sensor_ticked_after(deployment, "record_delivery_events", last, 2),
        "two more record_delivery_events ticks",
    )
    events = {}
    for doc in docs:
        [event] = events_for(deployment, doc)  # each delivered document is on one event
        events[event.storage_id] = event
    named: Counter[int] = Counter()
    for event in events.values():
        named.update(expand_ids(str(event.asset_materialization.metadata[OUTBOX_IDS].value)))
    delivered_rows = {r["id"] for r in rows if r["event"] == "delivered"}
    assert {i: named[i] for i in delivered_rows} == dict.fromkeys(delivered_rows, 1)


# ── the watcher watched ─────────────────────────────────────────────────


def watchdog_alerts(deployment: Deployment, after: int) -> list[dict[str, Any]]:
    with connect(deployment.database_url) as db:
        return db.execute(
            "SELECT id, kind, message, sent_at FROM ops_alerts "
            "WHERE dedup_key = %(key)s AND id > %(after)s ORDER BY id",
            {"key": ALERT_KEY, "after": after},
        ).fetchall()


def posted(deployment: Deployment, words: str) -> list[str]:
    return [p["text"] for p in deployment.sandbox.ops_alerts() if words in p["text"]]


def test_the_dead_mans_switch_fires_once_reminds_and_resolves(deployment):
    with connect(deployment.database_url) as db:
        # whatever came before (the storage outage above also silenced the daemon)
        eventually(
            lambda: (
                (rows := watchdog_alerts(deployment, 0)) == [] or rows[-1]["kind"] == "resolved"
            ),
            "no open watchdog episode",
        )
        marker = db.execute("SELECT coalesce(max(id), 0) AS m FROM ops_alerts").fetchone()["m"]
    first_alert = ":red_circle: *ERROR* Dagster's daemon looks stopped"
    already_posted = len(posted(deployment, first_alert))

    deployment.stop_daemon()
    try:
        eventually(
            lambda: any(
                r["kind"] == "reminder" and r["sent_at"]
                for r in watchdog_alerts(deployment, marker)
            ),
            "an alert, then a reminder, posted by the service",
        )
        episode = watchdog_alerts(deployment, marker)
        assert [r["kind"] for r in episode if r["kind"] == "alert"] == ["alert"], "once"
        assert episode[0]["kind"] == "alert" and episode[0]["sent_at"] is not None
        assert len(posted(deployment, first_alert)) == already_posted + 1
        assert posted(deployment, "still failing")
    finally:
        deployment.start_daemon()

    eventually(
        lambda: (
            (rows := watchdog_alerts(deployment, marker))
            and rows[-1]["kind"] == "resolved"
            and rows[-1]["sent_at"]
        ),
        "resolved once the daemon ticks again",
        timeout=180,
    )
    assert [r["kind"] for r in watchdog_alerts(deployment, marker)].count("alert") == 1
    assert posted(deployment, "alive again")
