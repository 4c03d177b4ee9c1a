"""Assets: the delivery backlog (counts and oldest age per state), the daily report."""

import datetime as dt

import dagster as dg
import pandas as pd

from delivery_pipeline.dagster_defs.metadata import as_metadata
from delivery_pipeline.dagster_defs.resources import AppDatabase
from delivery_pipeline.watch.backlog import backlog_frame, backlog_numbers, markdown_table
from delivery_pipeline.watch.report import delivery_report as build_report


@dg.asset(
    group_name="monitoring",
    kinds={"postgres", "pandas"},
    description=(
        "Documents per state with the age of the oldest: pending and generating (owner: "
        "generator), undelivered (delivery), awaiting a knock reply (the person), "
        "generation failed (ops); delivered and abandoned-by-reason today (UTC). "
        "A full queue is not progress: watch the oldest ages."
    ),
)
def delivery_backlog(app_db: AppDatabase) -> dg.Output[pd.DataFrame]:
    with app_db.connect() as conn:
        frame = backlog_frame(conn)
    return dg.Output(
        frame,
        metadata={"backlog": dg.MetadataValue.md(markdown_table(frame)), **backlog_numbers(frame)},
    )


def build_report_asset(start_date: dt.date) -> dg.AssetsDefinition:
    """The delivery report, one partition per UTC day from ``REPORT_START_DATE``.

    Today's partition exists too (``end_offset=1``), so the day so far can be
    materialised by hand from the UI.
    """

    @dg.asset(
        name="delivery_report",
        group_name="monitoring",
        partitions_def=dg.DailyPartitionsDefinition(
            start_date=start_date.isoformat(), timezone="UTC", end_offset=1
        ),
        kinds={"postgres", "pandas"},
        description=(
            "Per UTC day: documents generated and delivered, generated→delivered p50/p95, "
            "chunks delivered and read, knocks sent / delivered / seen / answered, abandoned "
            "by reason."
        ),
    )
    def delivery_report(
        context: dg.AssetExecutionContext, app_db: AppDatabase
    ) -> dg.Output[pd.DataFrame]:
        day = dt.date.fromisoformat(context.partition_key)
        with app_db.connect() as conn:
            report = build_report(conn, day)
        return dg.Output(
            report.by_kind,
            metadata={
                "report": dg.MetadataValue.md(report.markdown()),
                **as_metadata(report.numbers),
                "abandoned_by_reason": dg.MetadataValue.json(report.abandoned_by_reason),
            },
        )

    return delivery_report
