"""Sensors: each asks one cheap question and requests at most one run.

* ``delivery_heartbeat`` (trigger 4, the backstop): one indexed ``EXISTS``
  over the eligibility function; a ``deliver_documents`` run only when there
  is work and no sweep run is already queued or running. When there is none
  its tick says why (sending paused and what waits behind it, knocks held for
  a template, quiet hours), so a bad day reads on the sensor's page. Each
  tick also leaves a heartbeat for the webhook service's dead-man's switch.
* ``pending_generation``: one range probe on the generation queue; a
  ``generate_documents`` run on the same terms.

Both request through ``one_run``: at most one run in flight per job.
"""

import time

import dagster as dg

from delivery_pipeline.dagster_defs.database_skip import skip_when_database_unavailable
from delivery_pipeline.dagster_defs.jobs import deliver_documents, generate_documents
from delivery_pipeline.dagster_defs.resources import AppDatabase, DeliveryResource
from delivery_pipeline.delivery.sweep import eligible_now
from delivery_pipeline.generation.worker import generation_due
from delivery_pipeline.settings import Settings
from delivery_pipeline.watch.backlog import idle_reason
from delivery_pipeline.watch.daemon_heartbeats import HEARTBEAT_SENSOR, beat

IN_FLIGHT = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def run_in_flight(instance: dg.DagsterInstance, job_name: str) -> dg.DagsterRun | None:
    """A run of this job that is queued or running, if any."""
    records = instance.get_run_records(
        dg.RunsFilter(job_name=job_name, statuses=IN_FLIGHT), limit=1
    )
    return records[0].dagster_run if records else None


def one_run(
    context: dg.SensorEvaluationContext, job_name: str, work: str, trigger: str, seconds: int
) -> dg.RunRequest | dg.SkipReason:
    """A run of ``job_name`` for ``work`` — unless one is queued or running, which will do it.

    The run key is a time bucket, never a document id: a document stranded
    again later must be able to trigger a later run.
    """
    running = run_in_flight(context.instance, job_name)
    if running is not None:
        return dg.SkipReason(
            f"{work}, but {job_name} run {running.run_id} is "
            f"{running.status.value.lower()}; it will take them."
        )
    return dg.RunRequest(
        run_key=f"{trigger}-{int(time.time()) // seconds}",
        tags={"delivery_pipeline/trigger": trigger},
    )


def build_sensors(settings: Settings) -> list[dg.SensorDefinition]:
    heartbeat_seconds = settings.delivery.heartbeat_seconds
    generation_seconds = settings.generation.sensor_seconds

    @dg.sensor(
        job=deliver_documents,
        minimum_interval_seconds=heartbeat_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            "Trigger 4, the backstop: asks the eligibility function whether a sweep would act "
            "on anything now, and if so requests one deliver_documents run (none while one is "
            "queued or running). Documents waiting on a knock reply are not eligible, so it "
            "stays quiet for them. When nothing is eligible its tick says why: sending paused "
            "(what waits behind it), knocks held for a template, quiet hours."
        ),
    )
    @skip_when_database_unavailable
    def delivery_heartbeat(
        context: dg.SensorEvaluationContext,
        app_db: dg.ResourceParam[AppDatabase],
        delivery: dg.ResourceParam[DeliveryResource],
    ) -> dg.RunRequest | dg.SkipReason:
        with app_db.connect() as conn:
            beat(conn, HEARTBEAT_SENSOR)  # the webhook service's dead-man's switch reads it
            eligible = eligible_now(conn, Settings(delivery=delivery.settings))
            if not eligible:
                return dg.SkipReason(idle_reason(conn))
        return one_run(
            context,
            deliver_documents.name,
            "Documents are eligible",
            "heartbeat",
            heartbeat_seconds,
        )

    @dg.sensor(
        job=generate_documents,
        minimum_interval_seconds=generation_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            "Requests a generate_documents run when a document is due for generation "
            "(pending, or its generation claim expired), unless one is already queued or "
            "running."
        ),
    )
    @skip_when_database_unavailable
    def pending_generation(
        context: dg.SensorEvaluationContext, app_db: dg.ResourceParam[AppDatabase]
    ) -> dg.RunRequest | dg.SkipReason:
        with app_db.connect() as conn:
            due = generation_due(conn)
        if not due:
            return dg.SkipReason("Nothing to generate: no pending document is due.")
        return one_run(
            context,
            generate_documents.name,
            "Documents are pending",
            "pending_generation",
            generation_seconds,
        )

    return [delivery_heartbeat, pending_generation]
