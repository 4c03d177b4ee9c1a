"""Assets: what happened to the documents, as one lineage graph.

    generated_documents → delivered_documents → delivery_backlog
                                              ↘ delivery_report (daily)

``generated_documents`` is materialized by each generation run (what it
generated and what failed, by kind and locale). ``delivered_documents`` is
materialized by each delivery run *and* recorded, as runless events, for
every delivery, knock and abandonment made anywhere else (the webhook
service, a CLI sweep, the briefs schedule): its timeline is every delivery
(``watch/delivery_events.py``; ``record.py`` has the sensor). The backlog and
the report are read from the documents those two assets stand for.
"""

import datetime as dt
from typing import Any

import dagster as dg
import pandas as pd
from pydantic import Field

from delivery_pipeline.dagster_defs.metadata import (
    COLUMN_SCHEMA,
    ROW_COUNT,
    as_metadata,
    records,
    schema,
    table,
)
from delivery_pipeline.dagster_defs.resources import (
    AppDatabase,
    CloudApiResource,
    DeliveryResource,
    DeliveryServiceResource,
    GeneratorResource,
    engine_settings,
)
from delivery_pipeline.dagster_defs.run_config import OpConfig, parsed, plain_config
from delivery_pipeline.delivery.result import SweepResult
from delivery_pipeline.delivery.sweep import sweep_sync
from delivery_pipeline.generation.worker import generate_pending, outcomes_by_kind_and_locale
from delivery_pipeline.model import Way
from delivery_pipeline.reports.costs import cost_report, load_rate_table
from delivery_pipeline.reports.report import delivery_report as build_report
from delivery_pipeline.store.db import with_application_name
from delivery_pipeline.watch.applications import applications_record
from delivery_pipeline.watch.backlog import backlog_frame, backlog_numbers, sending_pause
from delivery_pipeline.watch.delivery_events import (
    DELIVERED_DOCUMENTS,
    RUN_CLAIMANT_PREFIX,
    RUN_LISTED_DOCUMENTS,
    claim_source,
    record_for,
    run_source,
)

GROUP = "delivery"

GENERATED_SCHEMA = schema(
    ("kind", "string", "plan or daily_brief"),
    ("locale", "string", "the person's locale: en, es, pt"),
    ("generated", "int", "bodies stored by this run"),
    ("failed", "int", "failed for good (generation_failed, alerted)"),
    ("retrying", "int", "failed this time, retried after a backoff"),
)
DELIVERED_SCHEMA = schema(
    ("document", "int", "document id (`delivery-pipeline documents show ID`)"),
    ("person", "int", "person id"),
    ("kind", "string", "plan or daily_brief"),
    ("event", "string", "delivered, knocked, abandoned, or undelivered (failed after acceptance)"),
    ("reason", "string", "abandon reason, or why it was undelivered"),
    ("chunks", "int", "messages the delivered document took"),
    ("at", "string", "when (UTC)"),
)
BACKLOG_SCHEMA = schema(
    ("state", "string", "document state (document_states view); *_today: since 00:00 UTC"),
    ("reason", "string", "abandon reason (abandoned_today rows)"),
    ("owner", "string", "who moves a document out of this state"),
    ("count", "int", "documents in the state"),
    ("oldest_age_seconds", "float", "how long the oldest has been in it"),
)
APPLICATIONS_SCHEMA = schema(
    ("application", "string", "an application of DELIVERY_API_TOKENS"),
    ("handed_over_24h", "int", "documents it handed over in the last 24 h"),
    ("delivered", "int", "of those, delivered"),
    ("abandoned", "int", "of those, abandoned"),
    ("open", "int", "of those, still on their way"),
    ("events_waiting", "int", "events not yet taken by its endpoint"),
    ("oldest_event_age_seconds", "float", "how long the oldest has waited"),
    ("events_given_up_24h", "int", "events past the retry horizon (alerted)"),
    ("endpoint", "string", "answering, failing, or none"),
)
REPORT_SCHEMA = schema(
    ("kind", "string", "plan or daily_brief"),
    ("generated", "int", "documents generated that day"),
    ("delivered", "int", "documents delivered that day"),
)
NUMBER_SCHEMA = schema(
    ("phone_number_id", "string", "the business number it went out from"),
    ("delivered", "int", "documents delivered that day from it"),
    ("chunks_sent", "int", "parts accepted that day from it"),
    ("knocks_left", "int", "knocks that left that day from it"),
)
COSTS_SCHEMA = schema(
    ("category", "string", "the platform's pricing category (utility, service, …)"),
    ("messages", "int", "messages priced that day"),
    ("billable", "int", "of which billable"),
    ("cost", "float", "their cost from DELIVERY_RATE_TABLE (empty without one)"),
)
WAYS_SCHEMA = schema(
    ("way", "string", "how the documents went (documents.way): " + ", ".join(Way)),
    ("delivered", "int", "documents delivered that day that went this way"),
    ("billable", "int", "their billable messages, of any day"),
    ("billable_per_document", "float", "billable messages per document (empty: none)"),
)


# ── generated_documents ─────────────────────────────────────────────────


class GenerateConfig(OpConfig):
    document_id: int | None = Field(default=None, description="only this document")
    limit: int | None = Field(default=None, description="generate at most this many")


@dg.asset(
    group_name=GROUP,
    owners=["team:generation"],
    kinds={"python", "postgres"},
    metadata={COLUMN_SCHEMA: GENERATED_SCHEMA},
    config_schema=plain_config(GenerateConfig),
    description=(
        "Documents generated: each generation run claims the pending documents that are due, "
        "stores their bodies and pokes the webhook service to deliver each. Its "
        "materialization counts what it generated and what failed, by kind and locale."
    ),
)
def generated_documents(
    context: dg.AssetExecutionContext,
    app_db: dg.ResourceParam[AppDatabase],
    generator: dg.ResourceParam[GeneratorResource],
    delivery_service: dg.ResourceParam[DeliveryServiceResource],
    delivery: dg.ResourceParam[DeliveryResource],
) -> dg.MaterializeResult[None]:
    config = parsed(GenerateConfig, context.op_execution_context.op_config)
    result = generate_pending(
        app_db.url(),
        generator.build(),
        policy=generator.settings,
        poke=delivery_service.poke(),
        document_id=config.document_id,
        limit=config.limit,
        review_kinds=delivery.settings.review_kind_set,
    )
    summary = result.as_dict()
    if result.stopped_by:
        raise dg.Failure(
            description=f"The generator is misconfigured: {result.stopped_by}",
            metadata=as_metadata(summary),
        )
    outcomes = outcomes_by_kind_and_locale(result)
    return dg.MaterializeResult(
        metadata={
            **as_metadata(summary),
            "by_kind_and_locale": table(outcomes, GENERATED_SCHEMA),
            ROW_COUNT: len(outcomes),
        }
    )


# ── delivered_documents ─────────────────────────────────────────────────


@dg.op(
    ins={"after": dg.In(dg.Nothing)},
    out=dg.DynamicOut(int),
    description="One sweeper per DELIVERY_SWEEPERS, each its own process.",
)
def plan_sweepers(delivery: dg.ResourceParam[DeliveryResource]) -> Any:
    for sweeper in range(delivery.settings.sweepers):
        yield dg.DynamicOutput(sweeper, mapping_key=f"sweeper_{sweeper}")


@dg.op(description="One delivery sweep over what is eligible now.")
def sweep_documents(
    context: dg.OpExecutionContext,
    sweeper: int,
    app_db: dg.ResourceParam[AppDatabase],
    cloud_api: dg.ResourceParam[CloudApiResource],
    delivery: dg.ResourceParam[DeliveryResource],
) -> dg.Output[dict[str, Any]]:
    # The sweep's sessions name this run, so the outbox rows it causes are the run's to report.
    url = with_application_name(app_db.url(), run_source(context.run.run_id))
    result = sweep_sync(engine_settings(app_db, cloud_api, delivery), url)
    if result.stopped_by:
        context.log.error(
            f"sweeper {sweeper} stopped by a global error: {result.stopped_by}. Sending is "
            "paused and an ops alert is recorded; the next sweep tries again."
        )
    summary = result.as_dict()
    return dg.Output(summary, metadata=as_metadata(summary))


@dg.op(description="What the sweepers did together, and every document: the materialization.")
def record_sweep(
    context: dg.OpExecutionContext,
    results: list[dict[str, Any]],
    app_db: dg.ResourceParam[AppDatabase],
) -> dg.Output[None]:
    run_id = context.run.run_id
    with app_db.connect() as conn:
        rows = claim_source(conn, run_source(run_id), RUN_CLAIMANT_PREFIX + run_id)
    # A sweep that found nothing (the service took it first) is an event too, of zeros.
    record = record_for(rows, listed_limit=RUN_LISTED_DOCUMENTS)
    return dg.Output(
        None,
        metadata={
            **as_metadata(record.metadata),
            "sweep": dg.MetadataValue.json(SweepResult.total(results)),
        },
    )


@dg.graph_asset(
    name=DELIVERED_DOCUMENTS,
    ins={"generated": dg.AssetIn(generated_documents.key, dagster_type=dg.Nothing)},
    group_name=GROUP,
    owners=["team:delivery"],
    kinds={"whatsapp", "postgres"},
    metadata={COLUMN_SCHEMA: DELIVERED_SCHEMA},
    description=(
        "Documents delivered on WhatsApp. Materialized by each deliver_documents run "
        "(DELIVERY_SWEEPERS sweepers at once), and recorded as a runless event for every "
        "delivery, knock and abandonment made elsewhere (the webhook service when a person "
        "replies, generation pokes or a document becomes ready; a CLI sweep; a reviewer's "
        "rejection; the briefs schedule). Each event counts what happened (the UI plots "
        "them) and lists the documents."
    ),
)
def delivered_documents(generated: None) -> Any:
    return record_sweep(plan_sweepers(after=generated).map(sweep_documents).collect())


# ── delivery_backlog ────────────────────────────────────────────────────


@dg.asset(
    deps=[delivered_documents],
    group_name=GROUP,
    owners=["team:ops"],
    kinds={"postgres", "pandas"},
    metadata={COLUMN_SCHEMA: BACKLOG_SCHEMA},
    description=(
        "Documents per state with the age of the oldest: pending and generating (owner: "
        "generator), undelivered (delivery), awaiting a knock reply (the person), "
        "generation failed (ops); delivered and abandoned-by-reason today (UTC). "
        "A full queue is not progress: watch the oldest ages (plotted per state). "
        "Whether sending is paused for every sender: its cause, since when, the next probe. "
        "The applications (the /v1 API): what each handed over in 24 h and where it is, "
        "and its events outbox (waiting, oldest, endpoint answering or failing)."
    ),
)
def delivery_backlog(app_db: dg.ResourceParam[AppDatabase]) -> dg.Output[pd.DataFrame]:
    with app_db.connect() as conn:
        frame = backlog_frame(conn)
        pause = sending_pause(conn)
        applications = applications_record(conn)
    return dg.Output(
        frame,
        metadata={
            "backlog": table(records(frame), BACKLOG_SCHEMA),
            ROW_COUNT: len(frame),
            **backlog_numbers(frame),
            **pause,
            "applications": table(applications.rows, APPLICATIONS_SCHEMA),
            **applications.numbers,
        },
    )


# ── delivery_report ─────────────────────────────────────────────────────


def build_report_asset(start_date: dt.date) -> dg.AssetsDefinition:
    """The delivery report, one partition per UTC day from ``REPORT_START_DATE``.

    Today's partition exists too (``end_offset=1``), so the day so far can be
    materialised by hand from the UI.
    """

    @dg.asset(
        name="delivery_report",
        deps=[delivered_documents],
        group_name=GROUP,
        owners=["team:ops"],
        partitions_def=dg.DailyPartitionsDefinition(
            start_date=start_date.isoformat(), timezone="UTC", end_offset=1
        ),
        kinds={"postgres", "pandas"},
        metadata={COLUMN_SCHEMA: REPORT_SCHEMA},
        description=(
            "Per UTC day: documents generated and delivered, generated→delivered p50/p95, "
            "chunks delivered and read, knocks sent / delivered / seen / answered, every knock "
            "that left by what came of it (never delivered, not seen, not wanted, Later, Stop, "
            "answered) and each press, abandoned by reason; messages and billable messages "
            "by pricing category, their cost "
            "(DELIVERY_RATE_TABLE), cost per delivered document, billable messages per "
            "delivered document by way (text parts, knock + parts, one file, knock + file), "
            "spend on "
            "documents that never arrived."
        ),
    )
    def delivery_report(
        context: dg.AssetExecutionContext,
        app_db: dg.ResourceParam[AppDatabase],
        delivery: dg.ResourceParam[DeliveryResource],
    ) -> dg.Output[pd.DataFrame]:
        day = dt.date.fromisoformat(context.partition_key)
        # What it cost: a bad rate table fails the run with what to fix.
        rate_table = delivery.settings.rate_table
        rates = load_rate_table(rate_table) if rate_table else None
        with app_db.connect() as conn:
            report = build_report(conn, day)
            costs = cost_report(conn, day, rates)
        return dg.Output(
            report.by_kind,
            metadata={
                "report": dg.MetadataValue.md(report.markdown() + "\n" + costs.markdown()),
                "by_kind": table(records(report.by_kind), REPORT_SCHEMA),
                ROW_COUNT: len(report.by_kind),
                "by_number": table(records(report.by_number), NUMBER_SCHEMA),
                **as_metadata(report.numbers),
                "abandoned_by_reason": dg.MetadataValue.json(report.abandoned_by_reason),
                # One materialization per day: each number below is plotted per partition.
                "costs_by_category": table(records(costs.by_category), COSTS_SCHEMA),
                "billable_by_way": table(records(costs.by_way), WAYS_SCHEMA),
                **as_metadata(costs.numbers),
            },
        )

    return delivery_report
