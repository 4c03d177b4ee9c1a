"""Schedules: the daily briefs every 15 minutes, the backlog every 5."""

import os

from dagster import DefaultScheduleStatus, ScheduleDefinition

from delivery_pipeline.dagster_defs.jobs import enqueue_daily_briefs, refresh_backlog

daily_briefs = ScheduleDefinition(
    name="daily_briefs",
    job=enqueue_daily_briefs,
    cron_schedule=os.environ.get("DAILY_BRIEFS_CRON") or "*/15 * * * *",
    execution_timezone="UTC",
    default_status=DefaultScheduleStatus.RUNNING,
    description=(
        "Enqueues a pending brief for each opted-in person whose local brief time has "
        "passed today (idempotent), and abandons earlier days' briefs still undelivered."
    ),
)

backlog_every_5_minutes = ScheduleDefinition(
    name="backlog_every_5_minutes",
    job=refresh_backlog,
    cron_schedule=os.environ.get("BACKLOG_CRON") or "*/5 * * * *",
    execution_timezone="UTC",
    default_status=DefaultScheduleStatus.RUNNING,
    description="Materialises delivery_backlog so its counts and ages plot over time.",
)

SCHEDULES = [daily_briefs, backlog_every_5_minutes]
