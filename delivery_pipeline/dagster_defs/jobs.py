"""Jobs: delivery and generation materialize the documents assets; the rest are ops.

Most jobs run in process (one or two small steps; a subprocess per step
would only add latency). Delivery fans out: ``delivered_documents`` runs
``DELIVERY_SWEEPERS`` sweeper ops at once on the executor ``DELIVERY_EXECUTOR``
chooses (``executors.py``: a process, a Docker container or a Kubernetes pod
each), which the ``Definitions`` give every job that names none. They need no
coordination: the claim gives each person's documents
to one sender at a time and the pacer shares the number's limit (sql/migrations/007).
Runs that sweep carry ``SWEEP_TAG``, so a deployment can still limit them
with a tag concurrency limit; nothing requires one.
"""

import datetime as dt
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import Field

from delivery_pipeline.dagster_defs.assets import (
    delivered_documents,
    delivery_backlog,
    generated_documents,
)
from delivery_pipeline.dagster_defs.metadata import as_metadata, schema, table
from delivery_pipeline.dagster_defs.operator_jobs import operate_document_job
from delivery_pipeline.dagster_defs.resources import (
    AppDatabase,
    DeliveryResource,
    DeliveryServiceResource,
    RetentionResource,
)
from delivery_pipeline.dagster_defs.run_config import OpConfig, parsed, plain_config
from delivery_pipeline.generation.briefs import run_briefs
from delivery_pipeline.model import ReviewDecision
from delivery_pipeline.store.intake import InputError, request_document
from delivery_pipeline.store.retention import prune_history
from delivery_pipeline.store.review import Decided, Decision, decide
from delivery_pipeline.watch.delivery_events import run_source

if TYPE_CHECKING:
    # What define_asset_job returns; Dagster exports no public name for it.
    from dagster._core.definitions.unresolved_asset_job_definition import (
        UnresolvedAssetJobDefinition,
    )

SWEEP_TAG = "delivery_pipeline/sweep"
SWEEP_TAGS = {SWEEP_TAG: "delivery"}
# The sweeping jobs name no executor: the Definitions' (DELIVERY_EXECUTOR) is theirs.
SETTINGS_EXECUTOR = None


def _asset_job(
    name: str,
    assets: "list[dg.AssetsDefinition]",
    description: str,
    executor: dg.ExecutorDefinition | None = dg.in_process_executor,
    **kwargs: Any,
) -> "UnresolvedAssetJobDefinition":
    # Without the assets' checks: they run on their own schedule (CHECKS_CRON), not
    # with every sweep the heartbeat requests.
    return dg.define_asset_job(
        name,
        selection=dg.AssetSelection.assets(*assets).without_checks(),
        executor_def=executor,
        description=description,
        **kwargs,
    )


# ── delivery and generation: materialize the documents assets ───────────

deliver_documents = _asset_job(
    "deliver_documents",
    [delivered_documents],
    "Deliver every eligible document with DELIVERY_SWEEPERS sweepers in parallel, "
    "materializing delivered_documents (requested by the heartbeat sensor).",
    executor=SETTINGS_EXECUTOR,
    tags=SWEEP_TAGS,
)
generate_documents = _asset_job(
    "generate_documents",
    [generated_documents],
    "Generate pending documents, materializing generated_documents (requested by the "
    "pending-generation sensor); each generated document is poked to the webhook service.",
)
generate_and_deliver = _asset_job(
    "generate_and_deliver",
    [generated_documents, delivered_documents],
    "Generate pending documents, then sweep: for running by hand.",
    executor=SETTINGS_EXECUTOR,
    tags=SWEEP_TAGS,
)


class RequestConfig(OpConfig):
    person: str = Field(description="person id or E.164 number")
    kind: str = Field(default="plan", description="plan or daily_brief")
    for_date: str | None = Field(
        default=None, description="YYYY-MM-DD; a brief defaults to the person's local today"
    )


@dg.op(
    config_schema=plain_config(RequestConfig),
    description="Create a pending document; the pending-generation sensor picks it up.",
)
def request_document_op(
    context: dg.OpExecutionContext, app_db: dg.ResourceParam[AppDatabase]
) -> dg.Output[int]:
    config = parsed(RequestConfig, context.op_config)
    try:
        for_date = dt.date.fromisoformat(config.for_date) if config.for_date else None
        with app_db.connect() as conn:
            doc = request_document(conn, config.person, config.kind, for_date)
    except ValueError as exc:  # InputError, or a date that is not YYYY-MM-DD
        detail = str(exc) if isinstance(exc, InputError) else f"for_date {config.for_date!r}"
        raise dg.Failure(description=f"cannot request the document: {detail}") from None
    context.log.info(f"document {doc.id}: {doc.kind} for person {doc.person_id}, pending")
    return dg.Output(
        doc.id, metadata={"document_id": doc.id, "person_id": doc.person_id, "kind": doc.kind}
    )


@dg.job(
    name="request_document",
    executor_def=dg.in_process_executor,
    description="Request a document for a person (config: person, kind).",
)
def request_document_job() -> None:
    request_document_op()


# ── review ──────────────────────────────────────────────────────────────


class ReviewConfig(OpConfig):
    document_id: int = Field(description="the document awaiting review")
    decision: str = Field(description="approve or reject")
    reason: str | None = Field(
        default=None, description="why (required to reject; a note when approving)"
    )
    body: str | None = Field(
        default=None, description="approve this edited text instead of the generated one"
    )
    reviewer: str = Field(default="dagster", description="who decides (kept with the document)")


@dg.op(
    config_schema=plain_config(ReviewConfig),
    description="Approve or reject a document awaiting review; an approval pokes delivery.",
)
def review_document_op(
    context: dg.OpExecutionContext,
    app_db: dg.ResourceParam[AppDatabase],
    delivery_service: dg.ResourceParam[DeliveryServiceResource],
) -> dg.Output[dict[str, Any]]:
    config = parsed(ReviewConfig, context.op_config)
    try:
        if config.decision == "approve":
            decision = Decision.approve(
                config.document_id, config.reviewer, body=config.body, note=config.reason
            )
        elif config.decision == "reject":
            if config.body is not None:
                raise InputError("an edited body goes with an approval, not a rejection")
            decision = Decision.reject(config.document_id, config.reviewer, config.reason or "")
        else:
            raise InputError(f"decision must be approve or reject, got {config.decision!r}")
        # Named for this run: a rejection reaches delivered_documents' timeline as its own.
        with app_db.connect(run_source(context.run.run_id)) as conn:
            outcome = decide(conn, decision)
    except InputError as exc:
        raise dg.Failure(description=f"cannot review the document: {exc}") from None
    if not isinstance(outcome, Decided):
        # Told, not silently ignored: another reviewer won, or it does not await review.
        raise dg.Failure(description=f"not applied: {outcome}")
    poked = outcome.decision == ReviewDecision.APPROVED and delivery_service.poke()(
        outcome.document_id
    )
    context.log.info(f"{outcome}" + ("; delivery poked" if poked else ""))
    summary = {
        "document_id": outcome.document_id,
        "decision": str(outcome.decision),
        "reviewer": outcome.reviewer,
        "at": outcome.at.isoformat(),
        "poked": bool(poked),
    }
    return dg.Output(summary, metadata=as_metadata(summary))


@dg.job(
    name="review_document",
    executor_def=dg.in_process_executor,
    description="Approve or reject a document awaiting review (config: document_id, decision, "
    "reason, body, reviewer).",
)
def review_document_job() -> None:
    review_document_op()


# ── daily briefs, backlog, report ───────────────────────────────────────


@dg.op(description="Abandon earlier days' open briefs (stale); enqueue today's.")
def enqueue_briefs_op(
    context: dg.OpExecutionContext,
    app_db: dg.ResourceParam[AppDatabase],
    delivery: dg.ResourceParam[DeliveryResource],
) -> dg.Output[dict[str, Any]]:
    # Named for this run: its stale abandonments reach delivered_documents' timeline as its own.
    with app_db.connect(run_source(context.run.run_id)) as conn:
        result = run_briefs(conn, lease=delivery.settings.lease)
    summary = result.as_dict()
    return dg.Output(summary, metadata=as_metadata(summary))


@dg.job(
    executor_def=dg.in_process_executor,
    description="Enqueue the daily briefs whose local time has come (every 15 minutes).",
)
def enqueue_daily_briefs() -> None:
    enqueue_briefs_op()


refresh_backlog = dg.define_asset_job(
    "refresh_backlog",
    selection=[delivery_backlog],
    executor_def=dg.in_process_executor,
    description="Materialise the delivery backlog (every 5 minutes).",
)

delivery_report_job = dg.define_asset_job(
    "delivery_report_job",
    selection=["delivery_report"],
    executor_def=dg.in_process_executor,
    description="Materialise one day of the delivery report.",
)

# ── retention ───────────────────────────────────────────────────────────

RETENTION_SCHEMA = schema(
    ("table", "string", "the table pruned"),
    ("keep_days", "float", "RETENTION_<TABLE>_DAYS"),
    ("deleted", "int", "rows older than that, deleted by this run"),
    ("kept", "int", "rows older than that which something still reads (they stay)"),
    ("batches", "int", "statements (one short transaction each)"),
    ("more", "bool", "stopped at the run's bound: the next run goes on"),
    ("oldest_age_seconds", "float", "age of the oldest row left"),
)


@dg.op(
    description="Delete history past its retention (RETENTION_*_DAYS), oldest first, in "
    "bounded batches; keeps what something still reads (a waiting knock's statuses, each "
    "person's newest message, an open alert episode)."
)
def prune_history_op(
    context: dg.OpExecutionContext,
    app_db: dg.ResourceParam[AppDatabase],
    retention: dg.ResourceParam[RetentionResource],
) -> dg.Output[dict[str, Any]]:
    with app_db.connect() as conn:
        result = prune_history(conn, retention.settings)
    context.log.info(result.summary())
    rows = [t.as_dict() for t in result.tables]
    metadata: dict[str, Any] = {
        "deleted": result.deleted,
        **{f"deleted_{t.table}": t.deleted for t in result.tables},
        **{f"kept_{t.table}": t.kept for t in result.tables},
        "more_left": any(t.more for t in result.tables),
        "tables": table(rows, RETENTION_SCHEMA),
    }
    return dg.Output({"tables": rows}, metadata=metadata)


@dg.job(
    name="prune_history",
    executor_def=dg.in_process_executor,
    description="Delete raw webhooks, statuses, inbound messages and ops alerts past their "
    "retention (daily); the counts per table are on the run's output.",
)
def prune_history_job() -> None:
    prune_history_op()


JOBS: "list[dg.JobDefinition | UnresolvedAssetJobDefinition]" = [
    deliver_documents,
    generate_documents,
    generate_and_deliver,
    request_document_job,
    review_document_job,
    operate_document_job,
    enqueue_daily_briefs,
    refresh_backlog,
    delivery_report_job,
    prune_history_job,
]
