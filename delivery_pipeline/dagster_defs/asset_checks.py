"""Asset checks, each on the asset it judges (``watch/checks.py`` holds the checks).

* ``generated_documents``: pending too long, generating too long (owner: generator),
  awaiting review too long (owner: the reviewers);
* ``delivered_documents``: stranded, awaiting a reply, tier headroom, sender
  paused, deliveries not yet on its own timeline, and the reverse watch:
  whether the webhook service answers its ``/healthz``;
* ``delivered_documents`` too, owner the template: one check per knock template
  and language, knocks held for a template, knocks never delivered;
* ``delivery_backlog``: abandoned or failed in the last day, and its freshness
  (materialized within ``CHECK_BACKLOG_STALE_SECONDS``).

All are non-blocking and run together on the ``delivery_checks`` job and
schedule (``CHECKS_CRON``, every 5 minutes); the backlog's also run with each
materialisation of the backlog. A failed check does not fail its run and
Dagster OSS does not alert on it: the ``ops_check_alerts`` sensor does. Each
evaluation leaves a heartbeat in our database for the webhook service's
dead-man's switch (``watch/watchdog.py``).
"""

import datetime as dt
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import dagster as dg
import psycopg

from delivery_pipeline.dagster_defs.assets import (
    delivered_documents,
    delivery_backlog,
    generated_documents,
)
from delivery_pipeline.dagster_defs.metadata import as_metadata
from delivery_pipeline.dagster_defs.resources import (
    AppDatabase,
    ChecksResource,
    DeliveryResource,
    DeliveryServiceResource,
    ReviewResource,
    check_settings,
)
from delivery_pipeline.settings import (
    DEFAULT_KNOCK_TEMPLATES,
    CheckSettings,
    Settings,
    knock_template_list,
)
from delivery_pipeline.watch import template_checks
from delivery_pipeline.watch.checks import (
    SERVICE_CHECK,
    SERVICE_RUNBOOK,
    SPECS,
    CheckResult,
    CheckSpec,
    Severity,
    check_service_reachable,
)
from delivery_pipeline.watch.watchdog import CHECKS, beat

_SEVERITY = {Severity.WARN: dg.AssetCheckSeverity.WARN, Severity.ERROR: dg.AssetCheckSeverity.ERROR}

# Which asset each check judges; every check of watch/checks.py is placed once.
JUDGES: dict[str, dg.AssetsDefinition] = {
    "pending_too_long": generated_documents,
    "generating_too_long": generated_documents,
    "awaiting_review_too_long": generated_documents,
    "undelivered_stranded": delivered_documents,
    "awaiting_reply": delivered_documents,
    "messaging_tier_headroom": delivered_documents,
    "sender_paused": delivered_documents,
    "delivery_events_unrecorded": delivered_documents,
    "abandoned_or_failed": delivery_backlog,
}
if set(JUDGES) != set(SPECS):
    raise ImportError(f"checks without an asset to judge: {sorted(set(SPECS) ^ set(JUDGES))}")


def as_check_result(result: CheckResult) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=result.passed,
        severity=_SEVERITY[result.severity] if result.severity else dg.AssetCheckSeverity.WARN,
        description=result.summary,
        metadata=as_metadata({"summary": result.summary, **result.metadata}),
    )


def _build(spec: CheckSpec) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=JUDGES[spec.name],
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
            beat(conn, CHECKS)
            return as_check_result(spec.evaluate(conn, settings))

    return _check


@dg.asset_check(
    asset=delivered_documents,
    name=SERVICE_CHECK,
    blocking=False,
    description=(
        "The webhook service answers GET /healthz and reaches its database: without it, "
        "replies and generation pokes deliver nothing. Owner: ops."
    ),
    metadata={"owner": "ops", "runbook": SERVICE_RUNBOOK},
)
def webhook_service_reachable(
    app_db: AppDatabase, delivery_service: DeliveryServiceResource
) -> dg.AssetCheckResult:
    with app_db.connect() as conn:
        beat(conn, CHECKS)
    return as_check_result(check_service_reachable(delivery_service.service_url))


# One per waiting state (and the outbox), from watch/checks.py.
STATE_CHECKS: list[dg.AssetChecksDefinition] = [_build(spec) for spec in SPECS.values()]


def _template_check(
    name: str,
    description: str,
    evaluate: Callable[[psycopg.Connection[Any], Settings], CheckResult],
) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=delivered_documents,
        name=name,
        blocking=False,
        description=f"{description} Owner: {template_checks.OWNER}.",
        metadata={"owner": template_checks.OWNER, "runbook": template_checks.TEMPLATE_RUNBOOK},
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
            beat(conn, CHECKS)
            return as_check_result(evaluate(conn, settings))

    return _check


def build_template_checks(knock_templates: str) -> list[dg.AssetChecksDefinition]:
    """One check per knock template and language of ``DELIVERY_KNOCK_TEMPLATES``, and
    the knocks' own two (held for a template; accepted and never delivered)."""
    built = [
        _template_check(
            template_checks.KNOCK_HELD,
            "Documents whose knock waits because no template of their locale can be used: "
            "ERROR while any waits.",
            template_checks.check_knock_held,
        ),
        _template_check(
            template_checks.KNOCK_NOT_DELIVERED,
            "Knocks the platform accepted and never reported delivered, read or failed after "
            "CHECK_KNOCK_UNDELIVERED_SECONDS (template pacing drops sends that way): WARN, "
            "listed apart from delivered knocks nobody answered.",
            template_checks.check_knocks_not_delivered,
        ),
    ]
    for name, language in knock_template_list(knock_templates):
        built.append(
            _template_check(
                template_checks.check_name(name, language),
                f"Knock template {name} ({language}): ERROR when paused, disabled, flagged, "
                "refused, RED or no longer UTILITY; WARN on YELLOW quality, an announced "
                "re-categorisation or knocks never delivered.",
                partial(template_checks.check_knock_template, name=name, language=language),
            )
        )
    return built


def build_checks(
    checks: CheckSettings, knock_templates: str = DEFAULT_KNOCK_TEMPLATES
) -> list[dg.AssetChecksDefinition]:
    """Every check; the backlog's freshness bound comes from the settings.

    Freshness is a check, not the newer ``FreshnessPolicy``: in Dagster 1.13 the
    policy is a preview behind an instance flag, evaluated by its own daemon,
    and OSS alerts on neither; a check goes through the same evaluation, alert
    sensor, runbook and dead-man's heartbeat as every other check.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.SupersessionWarning)
        freshness = dg.build_last_update_freshness_checks(
            assets=[delivery_backlog],
            lower_bound_delta=dt.timedelta(seconds=checks.backlog_stale_seconds),
            severity=dg.AssetCheckSeverity.WARN,
        )
    templates = build_template_checks(knock_templates)
    return [*STATE_CHECKS, webhook_service_reachable, *templates, *freshness]


def check_keys(definitions: list[dg.AssetChecksDefinition]) -> list[dg.AssetCheckKey]:
    return [key for check in definitions for key in check.check_keys]


delivery_checks = dg.define_asset_job(
    "delivery_checks",
    selection=dg.AssetSelection.all_asset_checks(),
    executor_def=dg.in_process_executor,
    description="Evaluate every asset check (every 5 minutes); failures reach ops by sensor.",
)
