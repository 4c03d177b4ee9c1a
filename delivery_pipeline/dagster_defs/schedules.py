"""Schedules: the daily briefs, the backlog, the checks, yesterday's report, retention.

Each run a schedule starts carries a maximum runtime (Dagster's
``dagster/max_runtime`` tag, enforced by the daemon's run monitoring): a run
stuck on a database that hangs is failed, not left to pile up under the next
ones. Each bound is below its default schedule's period; the checks and the
backlog are cheap, the report and retention do a day's work.
"""

import datetime as dt
from typing import TYPE_CHECKING

import dagster as dg

from delivery_pipeline.dagster_defs.asset_checks import delivery_checks
from delivery_pipeline.dagster_defs.jobs import (
    delivery_report_job,
    enqueue_daily_briefs,
    prune_history_job,
    refresh_backlog,
)
from delivery_pipeline.settings import ScheduleSettings

if TYPE_CHECKING:
    # What define_asset_job returns; Dagster exports no public name for it.
    from dagster._core.definitions.unresolved_asset_job_definition import (
        UnresolvedAssetJobDefinition,
    )

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


def _every(
    name: str,
    job: "dg.JobDefinition | UnresolvedAssetJobDefinition",
    cron: str,
    description: str,
) -> dg.ScheduleDefinition:
    """A schedule as each of ours is: on UTC, running from the start, its runs bounded."""
    return dg.ScheduleDefinition(
        name=name,
        tags=max_runtime(name),
        job=job,
        cron_schedule=cron,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=description,
    )


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
        _every(
            "daily_briefs",
            enqueue_daily_briefs,
            settings.daily_briefs_cron,
            "Enqueues a pending brief for each opted-in person whose local brief time has "
            "passed today (idempotent), and abandons earlier days' briefs still undelivered.",
        ),
        _every(
            "backlog_every_5_minutes",
            refresh_backlog,
            settings.backlog_cron,
            "Materialises delivery_backlog so its counts and ages plot over time.",
        ),
        _every(
            "checks_every_5_minutes",
            delivery_checks,
            settings.checks_cron,
            "Runs the backlog's asset checks; the ops_check_alerts sensor posts failures.",
        ),
        daily_delivery_report,
        _every(
            "prune_history_daily",
            prune_history_job,
            settings.retention_cron,
            "Deletes raw webhooks, statuses, inbound messages and ops alerts past their "
            "retention (RETENTION_*_DAYS), keeping what something still reads.",
        ),
    ]
