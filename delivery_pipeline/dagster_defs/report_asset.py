"""The delivery report asset: one partition per UTC day, yesterday's made at 00:15 UTC.

Today's partition exists too (``end_offset=1``), so the day so far can be
materialised by hand from the UI. ``REPORT_START_DATE`` (YYYY-MM-DD) is the
first day.
"""

import datetime as dt
import os

import pandas as pd
from dagster import (
    AssetExecutionContext,
    DailyPartitionsDefinition,
    DefaultScheduleStatus,
    MetadataValue,
    Output,
    RunRequest,
    ScheduleEvaluationContext,
    asset,
    define_asset_job,
    in_process_executor,
    schedule,
)

from delivery_pipeline.dagster_defs.asset_checks import metadata_values
from delivery_pipeline.dagster_defs.resources import AppDatabase
from delivery_pipeline.watch.report import delivery_report as build_report

REPORT_DAYS = DailyPartitionsDefinition(
    start_date=os.environ.get("REPORT_START_DATE") or "2026-01-01",
    timezone="UTC",
    end_offset=1,
)


@asset(
    group_name="monitoring",
    partitions_def=REPORT_DAYS,
    kinds={"postgres", "pandas"},
    description=(
        "Per UTC day: documents generated and delivered, generated→delivered p50/p95, chunks "
        "delivered and read, knocks sent / delivered / seen / answered, abandoned by reason."
    ),
)
def delivery_report(context: AssetExecutionContext, app_db: AppDatabase) -> Output[pd.DataFrame]:
    day = dt.date.fromisoformat(context.partition_key)
    with app_db.connect() as conn:
        report = build_report(conn, day)
    return Output(
        report.by_kind,
        metadata={
            "report": MetadataValue.md(report.markdown()),
            **metadata_values(report.numbers),
            "abandoned_by_reason": MetadataValue.json(report.abandoned_by_reason),
        },
    )


delivery_report_job = define_asset_job(
    "delivery_report_job",
    selection=[delivery_report],
    executor_def=in_process_executor,
    description="Materialise one day of the delivery report.",
)


@schedule(
    name="daily_delivery_report",
    job=delivery_report_job,
    cron_schedule=os.environ.get("REPORT_CRON") or "15 0 * * *",
    execution_timezone="UTC",
    default_status=DefaultScheduleStatus.RUNNING,
    description="Materialises yesterday's (UTC) delivery report shortly after midnight.",
)
def daily_delivery_report(context: ScheduleEvaluationContext) -> RunRequest:
    yesterday = (
        context.scheduled_execution_time.astimezone(dt.UTC).date() - dt.timedelta(days=1)
    ).isoformat()
    return RunRequest(run_key=f"delivery_report-{yesterday}", partition_key=yesterday)
