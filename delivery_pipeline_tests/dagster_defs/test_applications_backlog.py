"""The applications in the Dagster UI and in ``status``: what each handed over, where it
is, and its events outbox (the backlog asset's metadata; ``status``'s lines)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from dagster import DagsterInstance, materialize
from psycopg.types.json import Jsonb

from delivery_pipeline.dagster_defs.assets import delivery_backlog
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline_tests.support.cli import run
from delivery_pipeline_tests.support.dagster_support import resources_for
from delivery_pipeline_tests.support.data import add_document, add_person


@pytest.fixture
def instance() -> Iterator[DagsterInstance]:
    with DagsterInstance.ephemeral() as ephemeral:
        yield ephemeral


def _handed_over(db, application: str, delivered: bool) -> None:
    person = add_person(db)
    doc = add_document(db, person["id"], "Body.")
    QUERIES.api_insert_document.run(
        db,
        {
            "document_id": doc["id"],
            "application": application,
            "idempotency_key": None,
            "request_hash": None,
            "replace_key": None,
            "priority": "normal",
            "metadata": Jsonb({}),
        },
    )
    if delivered:
        db.execute("UPDATE documents SET delivered_at = now() WHERE id = %s", (doc["id"],))


@pytest.fixture
def applications(db) -> None:
    """acme: two handed over, one delivered (an event waiting), its endpoint failing."""
    QUERIES.api_register_endpoint.run(db, {"application": "acme"})
    _handed_over(db, "acme", delivered=False)
    _handed_over(db, "acme", delivered=True)
    _handed_over(db, "beta", delivered=True)
    db.execute(
        "UPDATE api_endpoints SET failures = 3, failing_since = now() - interval '20 minutes', "
        "last_error = 'ConnectError'"
    )


def test_the_backlog_shows_each_application_and_its_outbox(database_url, instance, applications):
    result = materialize(
        [delivery_backlog], resources=resources_for(database_url), instance=instance
    )
    [materialization] = result.asset_materializations_for_node("delivery_backlog")
    md = materialization.metadata
    rows = {r.data["application"]: r.data for r in md["applications"].value.records}
    assert rows["acme"]["handed_over_24h"] == 2 and rows["acme"]["delivered"] == 1
    assert rows["acme"]["events_waiting"] == 1 and rows["acme"]["endpoint"] == "failing"
    assert rows["beta"]["handed_over_24h"] == 1 and rows["beta"]["endpoint"] == "none"
    assert md["handed_over_24h_acme"].value == 2
    assert md["api_handed_over_24h"].value == 3
    assert md["api_events_waiting"].value == 1
    assert md["api_endpoints_failing"].value == 1


def test_status_shows_the_outbox(database_url, applications):
    shown = run(database_url, "status")
    assert "application events (DELIVERY_API_WEBHOOKS):" in shown.stdout
    assert "acme: endpoint FAILING for 20m " in shown.stdout
    assert "(3 failures in a row: ConnectError)" in shown.stdout
    assert "1 events waiting" in shown.stdout
    as_json = json.loads(run(database_url, "status", "--json").stdout)
    [acme] = as_json["application_events"]
    assert (acme["application"], acme["waiting"], acme["failures"]) == ("acme", 1, 3)
