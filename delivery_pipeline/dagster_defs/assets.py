"""Assets: the delivery backlog, counts and oldest age per state."""

import pandas as pd
from dagster import AssetExecutionContext, MetadataValue, Output, asset

from delivery_pipeline.dagster_defs.resources import AppDatabase
from delivery_pipeline.watch.backlog import backlog_frame, backlog_numbers, markdown_table


@asset(
    group_name="monitoring",
    kinds={"postgres", "pandas"},
    description=(
        "Documents per state with the age of the oldest: pending and generating (owner: "
        "generator), undelivered (delivery), awaiting a knock reply (the person), "
        "generation failed (ops); delivered and abandoned-by-reason today (UTC). "
        "A full queue is not progress: watch the oldest ages."
    ),
)
def delivery_backlog(context: AssetExecutionContext, app_db: AppDatabase) -> Output[pd.DataFrame]:
    with app_db.connect() as conn:
        frame = backlog_frame(conn)
    numbers = backlog_numbers(frame)
    return Output(
        frame,
        metadata={"backlog": MetadataValue.md(markdown_table(frame)), **numbers},
    )
