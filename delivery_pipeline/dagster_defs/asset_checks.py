"""Asset checks on ``delivery_backlog``: one per waiting state (``watch/checks.py``).

Non-blocking, so they run in every job that materialises the backlog
(selecting an asset selects its checks) and on their own ``delivery_checks``
job and schedule (``CHECKS_CRON``, every 5 minutes). A failed check does not
fail its run and Dagster OSS does not alert on it: the ``ops_check_alerts``
sensor (``alert_sensors.py``) does.
"""

import dagster as dg

from delivery_pipeline.dagster_defs.assets import delivery_backlog
from delivery_pipeline.dagster_defs.metadata import as_metadata
from delivery_pipeline.dagster_defs.resources import (
    AppDatabase,
    ChecksResource,
    DeliveryResource,
    DeliveryServiceResource,
    ReviewResource,
    check_settings,
)
from delivery_pipeline.watch.checks import SPECS, CheckResult, CheckSpec, Severity

_SEVERITY = {Severity.WARN: dg.AssetCheckSeverity.WARN, Severity.ERROR: dg.AssetCheckSeverity.ERROR}


def as_check_result(result: CheckResult) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=result.passed,
        severity=_SEVERITY[result.severity] if result.severity else dg.AssetCheckSeverity.WARN,
        description=result.summary,
        metadata=as_metadata({"summary": result.summary, **result.metadata}),
    )


def _build(spec: CheckSpec) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=delivery_backlog,
        name=spec.name,
        blocking=False,
        description=f"{spec.description} Owner: {spec.owner}.",
        metadata={"owner": spec.owner, "runbook": spec.runbook},
    )
    def _check(
        app_db: AppDatabase,
        checks: ChecksResource,
        delivery: DeliveryResource,
        review: ReviewResource,
        delivery_service: DeliveryServiceResource,
    ) -> dg.AssetCheckResult:
        settings = check_settings(checks, delivery, review, delivery_service)
        with app_db.connect() as conn:
            return as_check_result(spec.evaluate(conn, settings))

    return _check


BACKLOG_CHECKS: list[dg.AssetChecksDefinition] = [_build(spec) for spec in SPECS.values()]
CHECK_KEYS = [key for check in BACKLOG_CHECKS for key in check.check_keys]

delivery_checks = dg.define_asset_job(
    "delivery_checks",
    selection=dg.AssetSelection.checks_for_assets(delivery_backlog),
    executor_def=dg.in_process_executor,
    description="Evaluate the asset checks on delivery_backlog (every 5 minutes).",
)
