"""Schedules: the daily briefs, the backlog, the checks, yesterday's report, retention.

Each run a schedule starts carries a maximum runtime (Dagster's
``dagster/max_runtime`` tag, enforced by the daemon's run monitoring): a run
stuck on a database that hangs is failed, not left to pile up under the next
ones. Each bound is below its default schedule's period; the checks and the
backlog are cheap, the report and retention do a day's work.
"""

import datetime as dt

import dagster as dg

from delivery_pipeline.dagster_defs.asset_checks import delivery_checks
from delivery_pipeline.dagster_defs.jobs import (
    delivery_report_job,
    enqueue_daily_briefs,
    prune_history_job,
    refresh_backlog,
)
from delivery_pipeline.settings import ScheduleSettings

MAX_RUNTIME_TAG = "dagster/max_runtime"
MAX_RUNTIME_SECONDS = {
    "daily_briefs": 10 * 60,
    "backlog_every_5_minutes": 4 * 60,
    "checks_every_5_minutes": 4 * 60,
    "daily_delivery_report": 60 * 60,
    "prune_history_daily": 60 * 60,
}


def max_runtime(schedule: str) -> dict[str, str]:
    """The run tags that bound a run of ``schedule``."""
    return {MAX_RUNTIME_TAG: str(MAX_RUNTIME_SECONDS[schedule])}


def build_schedules(settings: ScheduleSettings) -> list[dg.ScheduleDefinition]:
    @dg.schedule(
        name="daily_delivery_report",
        job=delivery_report_job,
        cron_schedule=settings.report_cron,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Materialises yesterday's (UTC) delivery report shortly after midnight.",
    )
    def daily_delivery_report(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        scheduled = context.scheduled_execution_time.astimezone(dt.UTC).date()
        yesterday = (scheduled - dt.timedelta(days=1)).isoformat()
        return dg.RunRequest(
            run_key=f"delivery_report-{yesterday}",
            partition_key=yesterday,
            tags=max_runtime("daily_delivery_report"),
        )

    return [
        dg.ScheduleDefinition(
            name="daily_briefs",
            tags=max_runtime("daily_briefs"),
            job=enqueue_daily_briefs,
            cron_schedule=settings.daily_briefs_cron,
            execution_timezone="UTC",
            default_status=dg.DefaultScheduleStatus.RUNNING,
            description=(
                "Enqueues a pending brief for each opted-in person whose local brief time has "
                "passed today (idempotent), and abandons earlier days' briefs still undelivered."
            ),
        ),
        dg.ScheduleDefinition(
            name="backlog_every_5_minutes",
            tags=max_runtime("backlog_every_5_minutes"),
            job=refresh_backlog,
            cron_schedule=settings.backlog_cron,
            execution_timezone="UTC",
            default_status=dg.DefaultScheduleStatus.RUNNING,
            description="Materialises delivery_backlog so its counts and ages plot over time.",
        ),
        dg.ScheduleDefinition(
            name="checks_every_5_minutes",
            tags=max_runtime("checks_every_5_minutes"),
            job=delivery_checks,
            cron_schedule=settings.checks_cron,
            execution_timezone="UTC",
            default_status=dg.DefaultScheduleStatus.RUNNING,
            description=(
                "Runs the backlog's asset checks; the ops_check_alerts sensor posts failures."
            ),
        ),
        daily_delivery_report,
        dg.ScheduleDefinition(
            name="prune_history_daily",
            tags=max_runtime("prune_history_daily"),
            job=prune_history_job,
            cron_schedule=settings.retention_cron,
            execution_timezone="UTC",
            default_status=dg.DefaultScheduleStatus.RUNNING,
            description=(
                "Deletes raw webhooks, statuses, inbound messages and ops alerts past their "
                "retention (RETENTION_*_DAYS), keeping what something still reads."
            ),
        ),
    ]
