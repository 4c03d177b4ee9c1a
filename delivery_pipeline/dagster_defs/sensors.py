"""Sensors: each asks one cheap question and requests at most one run.

* ``delivery_heartbeat`` (trigger 3): one indexed ``EXISTS`` over the
  eligibility view; a ``deliver_documents`` run only when there is work and
  no sweep run is already queued or running.
* ``pending_generation``: one range probe on the generation queue; a
  ``generate_documents`` run on the same terms.

Run keys are time buckets, never document ids: a document stranded again
later must be able to trigger a later run.
"""

import os
import time

from dagster import (
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)

from delivery_pipeline.dagster_defs.jobs import deliver_documents, generate_documents
from delivery_pipeline.dagster_defs.resources import AppDatabase
from delivery_pipeline.delivery.engine import eligible_now
from delivery_pipeline.generation.worker import generation_due
from delivery_pipeline.settings import Settings

IN_FLIGHT = [
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
]


def interval_seconds(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be a whole number of seconds, got {raw!r}") from exc
    if value < 1:
        raise ValueError(f"{name} must be at least 1")
    return value


HEARTBEAT_SECONDS = interval_seconds("DELIVERY_HEARTBEAT_SECONDS", 30)
GENERATION_SENSOR_SECONDS = interval_seconds("GENERATION_SENSOR_SECONDS", 30)


def run_in_flight(instance: DagsterInstance, job_name: str) -> DagsterRun | None:
    """A run of this job that is queued or running, if any."""
    records = instance.get_run_records(RunsFilter(job_name=job_name, statuses=IN_FLIGHT), limit=1)
    return records[0].dagster_run if records else None


def _bucket_key(prefix: str, seconds: int) -> str:
    return f"{prefix}-{int(time.time()) // seconds}"


@sensor(
    job=deliver_documents,
    minimum_interval_seconds=HEARTBEAT_SECONDS,
    default_status=DefaultSensorStatus.RUNNING,
    description=(
        "Trigger 3, the backstop: asks the eligibility view whether a sweep would act on "
        "anything now, and if so requests one deliver_documents run (none while one is "
        "queued or running). Documents waiting on a knock reply are not eligible, so it "
        "stays quiet for them."
    ),
)
def delivery_heartbeat(context: SensorEvaluationContext, app_db: AppDatabase):
    with app_db.connect() as conn:
        eligible = eligible_now(conn, Settings.from_env())
    if not eligible:
        return SkipReason(
            "Nothing eligible for delivery: no document is generated, undelivered, due and "
            "unclaimed (documents waiting on a knock reply are not counted)."
        )
    running = run_in_flight(context.instance, deliver_documents.name)
    if running is not None:
        return SkipReason(
            f"Documents are eligible, but deliver_documents run {running.run_id} is "
            f"{running.status.value.lower()}; it will deliver them."
        )
    return RunRequest(
        run_key=_bucket_key("heartbeat", HEARTBEAT_SECONDS),
        tags={"delivery_pipeline/trigger": "heartbeat"},
    )


@sensor(
    job=generate_documents,
    minimum_interval_seconds=GENERATION_SENSOR_SECONDS,
    default_status=DefaultSensorStatus.RUNNING,
    description=(
        "Requests a generate_documents run when a document is due for generation (pending, "
        "or its generation claim expired), unless one is already queued or running."
    ),
)
def pending_generation(context: SensorEvaluationContext, app_db: AppDatabase):
    with app_db.connect() as conn:
        due = generation_due(conn)
    if not due:
        return SkipReason("Nothing to generate: no pending document is due.")
    running = run_in_flight(context.instance, generate_documents.name)
    if running is not None:
        return SkipReason(
            f"Documents are pending, but generate_documents run {running.run_id} is "
            f"{running.status.value.lower()}; it will generate them."
        )
    return RunRequest(
        run_key=_bucket_key("generation", GENERATION_SENSOR_SECONDS),
        tags={"delivery_pipeline/trigger": "pending_generation"},
    )


SENSORS = [delivery_heartbeat, pending_generation]
