"""The ``record_delivery_events`` sensor: the outbox onto ``delivered_documents``.

Every delivery, knock and abandonment is an outbox row in our database
(``sql/migrations/008``). The webhook service pushes its own at once; this sensor
reports everything else as runless asset events, once each: what decides
which rows are its to take, and how a row already on the timeline is
recognised, is ``watch/delivery_events.drain``. Here are only Dagster's
answers to its two questions: which outbox ids do the asset's events since a
time name, and which runs are still in flight.

The sensor daemon looks at sensors every 5 seconds at best, so a row this
sensor reports reaches the timeline up to about 5 s after its delivery; the
service's push is what keeps the webhook service's deliveries faster than that.
"""

import datetime as dt

import dagster as dg

from delivery_pipeline.dagster_defs.database_skip import skip_when_database_unavailable
from delivery_pipeline.dagster_defs.metadata import as_metadata
from delivery_pipeline.dagster_defs.resources import AppDatabase
from delivery_pipeline.dagster_defs.sensors import IN_FLIGHT
from delivery_pipeline.watch.delivery_events import (
    DELIVERED_DOCUMENTS,
    OUTBOX_IDS,
    drain,
    expand_ids,
)

DELIVERED_KEY = dg.AssetKey(DELIVERED_DOCUMENTS)
_PAGE = 500


def outbox_ids_on_timeline(instance: dg.DagsterInstance, since: dt.datetime) -> set[int]:
    """The outbox ids named by ``delivered_documents`` events stored since ``since``."""
    ids: set[int] = set()
    cursor = None
    while True:
        result = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=DELIVERED_KEY, after_timestamp=since.timestamp()),
            limit=_PAGE,
            cursor=cursor,
            ascending=True,
        )
        for record in result.records:
            materialization = record.asset_materialization
            entry = materialization.metadata.get(OUTBOX_IDS) if materialization else None
            if entry is not None:
                ids |= expand_ids(str(entry.value))
        if not result.has_more:
            return ids
        cursor = result.cursor


def runs_in_flight(instance: dg.DagsterInstance, run_ids: set[str]) -> set[str]:
    records = instance.get_run_records(
        dg.RunsFilter(run_ids=sorted(run_ids), statuses=IN_FLIGHT), limit=len(run_ids)
    )
    return {record.dagster_run.run_id for record in records}


def to_event(description: str, metadata: dict[str, object]) -> dg.AssetMaterialization:
    return dg.AssetMaterialization(
        asset_key=DELIVERED_KEY, description=description, metadata=as_metadata(metadata)
    )


@dg.sensor(
    name="record_delivery_events",
    minimum_interval_seconds=1,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Records on delivered_documents, as runless events, every delivery, knock and "
        "abandonment that the webhook service did not push itself (CLI sweeps, the briefs "
        "schedule, pushes that failed while Dagster was unreachable, runs that crashed): "
        "each exactly once, from the delivery_events outbox in the app database."
    ),
)
@skip_when_database_unavailable
def record_delivery_events(
    context: dg.SensorEvaluationContext, app_db: dg.ResourceParam[AppDatabase]
) -> dg.SensorResult:
    instance = context.instance
    with app_db.connect() as conn:
        outcome = drain(
            conn,
            on_timeline=lambda since: outbox_ids_on_timeline(instance, since),
            runs_in_flight=lambda run_ids: runs_in_flight(instance, run_ids),
        )
    return dg.SensorResult(
        asset_events=[to_event(r.description, r.metadata) for r in outcome.records],
        skip_reason=dg.SkipReason(outcome.summary()),
    )
