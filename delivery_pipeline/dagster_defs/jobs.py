"""Jobs: each a few lines over the engine, generation or briefs modules.

Every job runs in process (one or two small steps; a subprocess per step
would only add latency). Runs that sweep carry ``SWEEP_TAG``; ``dagster.yaml``
lets one such run at a time through the run queue (exclusivity per document
still comes from the claim, this only keeps sweeps from piling up).
"""

import datetime as dt
from typing import Any

from dagster import (
    Config,
    Failure,
    In,
    MetadataValue,
    Nothing,
    OpExecutionContext,
    Output,
    define_asset_job,
    in_process_executor,
    job,
    op,
)
from pydantic import Field

from delivery_pipeline.dagster_defs.assets import delivery_backlog
from delivery_pipeline.dagster_defs.resources import (
    AppDatabase,
    CloudApiResource,
    DeliveryServiceResource,
    GeneratorResource,
)
from delivery_pipeline.delivery.engine import sweep_sync
from delivery_pipeline.generation.briefs import run_briefs
from delivery_pipeline.generation.worker import RequestError, generate_pending, request_document
from delivery_pipeline.settings import Settings

SWEEP_TAG = "delivery_pipeline/sweep"
SWEEP_TAGS = {SWEEP_TAG: "delivery"}


def as_metadata(values: dict[str, Any]) -> dict[str, Any]:
    """A result's ``as_dict()`` as Dagster metadata (numbers stay numbers, to plot)."""
    metadata: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            metadata[key] = MetadataValue.null()
        elif isinstance(value, bool):
            metadata[key] = MetadataValue.bool(value)
        elif isinstance(value, (int, float, str)):
            metadata[key] = value
        else:
            metadata[key] = MetadataValue.json(value)
    return metadata


# ── delivery ────────────────────────────────────────────────────────────


@op(ins={"after": In(Nothing)}, description="One delivery sweep over what is eligible now.")
def sweep_documents(
    context: OpExecutionContext, app_db: AppDatabase, cloud_api: CloudApiResource
) -> Output[dict]:
    result = sweep_sync(cloud_api.settings(), app_db.url())
    if result.stopped_by:
        context.log.error(
            f"sweep stopped by a global error: {result.stopped_by}. Sending is paused and an "
            "ops alert is recorded; the next sweep tries again."
        )
    return Output(result.as_dict(), metadata=as_metadata(result.as_dict()))


@job(
    tags=SWEEP_TAGS,
    executor_def=in_process_executor,
    description="Deliver every eligible document (requested by the heartbeat sensor).",
)
def deliver_documents() -> None:
    sweep_documents()


# ── generation ──────────────────────────────────────────────────────────


class GenerateConfig(Config):
    document_id: int | None = Field(default=None, description="only this document")
    limit: int | None = Field(default=None, description="generate at most this many")


@op(description="Generate pending documents; poke the webhook service for each.")
def generate_documents_op(
    context: OpExecutionContext,
    config: GenerateConfig,
    app_db: AppDatabase,
    generator: GeneratorResource,
    delivery_service: DeliveryServiceResource,
) -> Output[dict]:
    result = generate_pending(
        app_db.url(),
        generator.build(),
        policy=generator.policy(),
        poke=delivery_service.poke(),
        document_id=config.document_id,
        limit=config.limit,
    )
    summary = result.as_dict()
    if result.stopped_by:
        raise Failure(
            description=f"The generator is misconfigured: {result.stopped_by}",
            metadata=as_metadata(summary),
        )
    return Output(summary, metadata=as_metadata(summary))


@job(
    executor_def=in_process_executor,
    description="Generate pending documents (requested by the pending-generation sensor).",
)
def generate_documents() -> None:
    generate_documents_op()


@job(
    tags=SWEEP_TAGS,
    executor_def=in_process_executor,
    description="Generate pending documents, then sweep: for running by hand.",
)
def generate_and_deliver() -> None:
    sweep_documents(after=generate_documents_op())


class RequestConfig(Config):
    person: str = Field(description="person id or E.164 number")
    kind: str = Field(default="plan", description="plan or daily_brief")
    for_date: str | None = Field(
        default=None, description="YYYY-MM-DD; a brief defaults to the person's local today"
    )


@op(description="Create a pending document; the pending-generation sensor picks it up.")
def request_document_op(
    context: OpExecutionContext, config: RequestConfig, app_db: AppDatabase
) -> Output[int]:
    try:
        for_date = dt.date.fromisoformat(config.for_date) if config.for_date else None
    except ValueError:
        raise Failure(description=f"for_date {config.for_date!r} is not YYYY-MM-DD") from None
    try:
        with app_db.connect() as conn:
            doc = request_document(conn, config.person, config.kind, for_date)
    except RequestError as exc:
        raise Failure(description=str(exc)) from None
    context.log.info(f"document {doc['id']}: {doc['kind']} for person {doc['person_id']}, pending")
    return Output(
        doc["id"],
        metadata={"document_id": doc["id"], "person_id": doc["person_id"], "kind": doc["kind"]},
    )


@job(
    name="request_document",
    executor_def=in_process_executor,
    description="Request a document for a person (config: person, kind).",
)
def request_document_job() -> None:
    request_document_op()


# ── daily briefs ────────────────────────────────────────────────────────


@op(description="Abandon earlier days' open briefs (stale); enqueue today's.")
def enqueue_briefs_op(context: OpExecutionContext, app_db: AppDatabase) -> Output[dict]:
    lease = dt.timedelta(seconds=Settings.from_env().lease_seconds)
    with app_db.connect() as conn:
        result = run_briefs(conn, lease=lease)
    summary = result.as_dict()
    return Output(summary, metadata=as_metadata(summary))


@job(
    executor_def=in_process_executor,
    description="Enqueue the daily briefs whose local time has come (every 15 minutes).",
)
def enqueue_daily_briefs() -> None:
    enqueue_briefs_op()


refresh_backlog = define_asset_job(
    "refresh_backlog",
    selection=[delivery_backlog],
    executor_def=in_process_executor,
    description="Materialise the delivery backlog (every 5 minutes).",
)

JOBS = [
    deliver_documents,
    generate_documents,
    generate_and_deliver,
    request_document_job,
    enqueue_daily_briefs,
    refresh_backlog,
]
