"""Asset checks on ``delivery_backlog``: one per waiting state (``delivery_pipeline.watch.checks``).

Non-blocking, so they run in every job that materialises the backlog
(``refresh_backlog`` selects the asset, and a selection of an asset includes
its checks), and on their own ``delivery_checks`` job and schedule (default
every 5 minutes, ``CHECKS_CRON``). Thresholds come from the environment
(``CHECK_*``, ``WHATSAPP_MESSAGING_TIER``), read at each evaluation.

A failed check does not fail its run and Dagster OSS does not alert on it:
the ``ops_check_alerts`` sensor (``alerting.py``) does.
"""

import os
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetSelection,
    DefaultScheduleStatus,
    MetadataValue,
    ScheduleDefinition,
    asset_check,
    define_asset_job,
    in_process_executor,
)

from delivery_pipeline.dagster_defs.assets import delivery_backlog
from delivery_pipeline.dagster_defs.resources import AppDatabase
from delivery_pipeline.watch.checks import SPECS, CheckResult, CheckSpec, Severity, Thresholds

BACKLOG_KEY = delivery_backlog.key

_SEVERITY = {Severity.WARN: AssetCheckSeverity.WARN, Severity.ERROR: AssetCheckSeverity.ERROR}


def metadata_values(values: dict[str, Any]) -> dict[str, Any]:
    """Plain values as Dagster metadata: numbers and text stay, the rest becomes JSON."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            out[key] = MetadataValue.null()
        elif isinstance(value, bool):
            out[key] = MetadataValue.bool(value)
        elif isinstance(value, (int, float, str)):
            out[key] = value
        else:
            out[key] = MetadataValue.json(value)
    return out


def as_check_result(result: CheckResult) -> AssetCheckResult:
    return AssetCheckResult(
        passed=result.passed,
        severity=_SEVERITY[result.severity] if result.severity else AssetCheckSeverity.WARN,
        description=result.summary,
        metadata=metadata_values({"summary": result.summary, **result.metadata}),
    )


def _build(spec: CheckSpec) -> AssetChecksDefinition:
    @asset_check(
        asset=BACKLOG_KEY,
        name=spec.name,
        blocking=False,
        description=f"{spec.description} Owner: {spec.owner}.",
        metadata={"owner": spec.owner, "runbook": spec.runbook},
    )
    def _check(app_db: AppDatabase) -> AssetCheckResult:
        with app_db.connect() as conn:
            return as_check_result(spec.evaluate(conn, Thresholds.from_env()))

    return _check


BACKLOG_CHECKS: list[AssetChecksDefinition] = [_build(spec) for spec in SPECS.values()]
CHECK_KEYS = [key for check in BACKLOG_CHECKS for key in check.check_keys]

delivery_checks = define_asset_job(
    "delivery_checks",
    selection=AssetSelection.checks_for_assets(delivery_backlog),
    executor_def=in_process_executor,
    description="Evaluate the asset checks on delivery_backlog (every 5 minutes).",
)

checks_every_5_minutes = ScheduleDefinition(
    name="checks_every_5_minutes",
    job=delivery_checks,
    cron_schedule=os.environ.get("CHECKS_CRON") or "*/5 * * * *",
    execution_timezone="UTC",
    default_status=DefaultScheduleStatus.RUNNING,
    description="Runs the backlog's asset checks; the ops_check_alerts sensor posts failures.",
)
