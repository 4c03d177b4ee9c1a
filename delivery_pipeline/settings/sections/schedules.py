"""``Settings.schedules``: the Dagster schedules' cron expressions."""

import datetime as dt

from pydantic import Field, field_validator

from delivery_pipeline.settings.section import Section, env


class ScheduleSettings(Section):
    daily_briefs_cron: str = Field(
        "*/15 * * * *",
        json_schema_extra=env("DAILY_BRIEFS_CRON"),
        description="the daily_briefs schedule",
    )
    backlog_cron: str = Field(
        "*/5 * * * *",
        json_schema_extra=env("BACKLOG_CRON"),
        description="the backlog_every_5_minutes schedule",
    )
    checks_cron: str = Field(
        "*/5 * * * *",
        json_schema_extra=env("CHECKS_CRON"),
        description="the checks_every_5_minutes schedule",
    )
    report_cron: str = Field(
        "15 0 * * *",
        json_schema_extra=env("REPORT_CRON"),
        description="the daily_delivery_report schedule",
    )
    report_start_date: dt.date = Field(
        dt.date(2026, 1, 1),
        json_schema_extra=env("REPORT_START_DATE"),
        description="the delivery report's first partition",
    )
    retention_cron: str = Field(
        "45 3 * * *",
        json_schema_extra=env("RETENTION_CRON"),
        description="the prune_history_daily schedule",
    )

    @field_validator(
        "daily_briefs_cron", "backlog_cron", "checks_cron", "report_cron", "retention_cron"
    )
    @classmethod
    def _cron(cls, value: str) -> str:
        if len(value.split()) != 5:
            raise ValueError("must be a five-field cron expression like '*/5 * * * *'")
        return value
