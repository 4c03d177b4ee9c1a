"""A database that hangs, as Dagster's side meets it: every connection of a sensor, a
check or an op gives up within DATABASE_STATEMENT_TIMEOUT_SECONDS, a sensor skips
naming the database, a run fails; nothing waits for the lock's holder."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg
import psycopg
import pytest

from delivery_pipeline.dagster_defs.asset_checks import STATE_CHECKS
from delivery_pipeline.dagster_defs.assets import (
    delivered_documents,
    delivery_backlog,
    generated_documents,
)
from delivery_pipeline.dagster_defs.jobs import refresh_backlog
from delivery_pipeline.dagster_defs.outbox_sensor import record_delivery_events
from delivery_pipeline.dagster_defs.sensors import build_sensors
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import with_timeouts
from delivery_pipeline_tests.support.dagster_support import execute, resources_for

STATEMENT_SECONDS = 2
# What the test allows on top: a connection, Dagster's own work, a busy shared machine.
SLACK_SECONDS = 6
# Far past the bound: a thread still waiting then would wait for the lock's holder.
GIVE_UP_SECONDS = 60


def test_timeouts_travel_in_the_startup_packet_after_the_urls_own_options() -> None:
    url = "postgresql://app@db.internal/delivery?options=-c%20search_path%3Dapp"
    info = psycopg.conninfo.conninfo_to_dict(
        with_timeouts(url, connect_seconds=3, statement_seconds=1.5)
    )
    assert info["connect_timeout"] == "3"
    assert info["options"] == "-c search_path=app -c statement_timeout=1500"
    assert (info["host"], info["dbname"], info["user"]) == ("db.internal", "delivery", "app")


@pytest.fixture
def locked(database_url: str) -> Iterator[None]:
    """Another session holds the documents and the outbox: every read of them waits."""
    holder = psycopg.connect(database_url)
    holder.execute("LOCK TABLE documents, delivery_events IN ACCESS EXCLUSIVE MODE")
    try:
        yield
    finally:
        holder.rollback()
        holder.close()


@pytest.fixture
def resources(database_url: str) -> dict[str, Any]:
    settings = Settings().replace(
        database={"statement_timeout_seconds": STATEMENT_SECONDS, "connect_timeout_seconds": 2},
        delivery={"quiet_hours": ""},
    )
    return resources_for(database_url, settings=settings)


def bounded(work: Callable[[], Any]) -> tuple[Any, float]:
    """``work``'s result and how long it took; fails (rather than hangs) past GIVE_UP."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the test below
            outcome["error"] = exc

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GIVE_UP_SECONDS)
    elapsed = time.monotonic() - started
    assert not thread.is_alive(), f"still waiting on the locked table after {elapsed:.0f} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"], elapsed


@pytest.mark.parametrize(
    "sensor", ["delivery_heartbeat", "pending_generation", "record_delivery_events"]
)
def test_a_sensor_skips_naming_the_database_within_the_timeout(
    locked, resources, sensor: str
) -> None:
    sensors = {s.name: s for s in [*build_sensors(Settings()), record_delivery_events]}
    with dg.DagsterInstance.ephemeral() as instance:
        context = dg.build_sensor_context(instance=instance, resources=resources)
        outcome, elapsed = bounded(lambda: sensors[sensor](context))
    reason = outcome.skip_reason if isinstance(outcome, dg.SensorResult) else outcome
    assert isinstance(reason, dg.SkipReason), outcome
    assert "app database did not answer" in (reason.skip_message or "")
    assert "statement timeout" in (reason.skip_message or "")
    assert STATEMENT_SECONDS <= elapsed < STATEMENT_SECONDS + SLACK_SECONDS


def test_a_periodic_run_fails_within_the_timeout(locked, resources) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        result, elapsed = bounded(
            lambda: execute(
                refresh_backlog, resources=resources, instance=instance, raise_on_error=False
            )
        )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert "statement timeout" in str(failure.step_failure_data.error)
    assert STATEMENT_SECONDS <= elapsed < STATEMENT_SECONDS + SLACK_SECONDS


def test_a_check_fails_within_the_timeout(locked, resources) -> None:
    check = STATE_CHECKS[0]
    job = dg.define_asset_job(
        "one_check",
        selection=dg.AssetSelection.checks(check),
        executor_def=dg.in_process_executor,
    )
    defs = dg.Definitions(
        assets=[generated_documents, delivered_documents, delivery_backlog],
        asset_checks=[check],
        jobs=[job],
        resources=resources,
    )
    with dg.DagsterInstance.ephemeral() as instance:
        result, elapsed = bounded(
            lambda: defs.resolve_job_def("one_check").execute_in_process(
                instance=instance, raise_on_error=False
            )
        )
    # The check cannot evaluate: an ERROR result of its own, naming it and the timeout
    # (what ops is told), which fails its run as any check at ERROR does.
    assert not result.success
    (evaluation,) = result.get_asset_check_evaluations()
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert f"Check {next(iter(check.check_keys)).name} could not evaluate" in (
        evaluation.description or ""
    )
    assert "statement timeout" in (evaluation.description or "")
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_failure_data.error.cls_name == "DagsterAssetCheckFailedError"
    assert STATEMENT_SECONDS <= elapsed < STATEMENT_SECONDS + SLACK_SECONDS
