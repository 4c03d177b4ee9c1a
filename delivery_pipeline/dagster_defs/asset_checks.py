"""Asset checks, each on the asset it judges (``watch/checks/`` holds the checks).

* ``generated_documents``: pending too long, generating too long (owner: generator),
  awaiting review too long (owner: the reviewers);
* ``delivered_documents``: stranded, awaiting a reply, tier headroom, sender
  paused, deliveries not yet on its own timeline, and the reverse watch:
  whether the webhook service answers its ``/healthz``;
* ``delivered_documents`` too, owner the template: one check per knock template
  and language, knocks held for a template, knocks never delivered;
* ``delivery_backlog``: abandoned or failed in the last day, and its freshness
  (materialized within ``CHECK_BACKLOG_STALE_SECONDS``).

All run together on the ``delivery_checks`` job and schedule (``CHECKS_CRON``,
every 5 minutes); the backlog's also run with each materialisation of the
backlog. Each is *blocking*: a check at ERROR fails its step, so the
``delivery_checks`` run fails and the bad day is red on the Overview timeline
and the Runs list, its failure naming the checks (a WARN fails nothing). That
failed run is not alerted as a run (``alert_sensors``): the failing checks
are, by the ``ops_check_alerts`` sensor, once per episode.

A check never crashes: what its evaluator returns goes through the one
``metadata.as_metadata``, and an evaluator that raises anyway is an ERROR result
of its own naming the check (``registry.could_not_evaluate``), its traceback in
the run's log. Each result carries when it was observed (the database's now
before it read anything: ``observed_at``) and what it says about each episode
(``episodes``), which the alert sensor reads. Each evaluation leaves a heartbeat
in our database for the webhook service's dead-man's switch
(``watch/daemon_heartbeats.py``).
"""

import datetime as dt
import logging
import traceback
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
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
from delivery_pipeline.model import Severity
from delivery_pipeline.settings import DEFAULT_KNOCK_TEMPLATES, CheckSettings, Settings
from delivery_pipeline.settings.parsing import knock_template_list
from delivery_pipeline.watch.checks import registry, templates
from delivery_pipeline.watch.checks.evaluators import EVALUATORS, Evaluate
from delivery_pipeline.watch.checks.probe import check_service_reachable
from delivery_pipeline.watch.checks.registry import Check, CheckResult, Judged, could_not_evaluate
from delivery_pipeline.watch.daemon_heartbeats import CHECKS, beat

# The one severity and Dagster's: translated here, both ways, and nowhere else.
TO_DAGSTER = {
    Severity.WARNING: dg.AssetCheckSeverity.WARN,
    Severity.ERROR: dg.AssetCheckSeverity.ERROR,
}
FROM_DAGSTER = {dagster: ours for ours, dagster in TO_DAGSTER.items()}

_ASSETS: dict[Judged, dg.AssetsDefinition] = {
    Judged.GENERATED: generated_documents,
    Judged.DELIVERED: delivered_documents,
    Judged.BACKLOG: delivery_backlog,
}


OBSERVED_AT = "observed_at"
EPISODES = "episodes"


def as_check_result(
    result: CheckResult, observed_at: dt.datetime | None = None
) -> dg.AssetCheckResult:
    """A result as Dagster's, with what the alert sensor reads back: when it was observed
    and what it says about each episode."""
    metadata = {
        "summary": result.summary,
        **result.metadata,
        EPISODES: [said.as_json() for said in result.said],
    }
    if observed_at is not None:
        metadata[OBSERVED_AT] = observed_at
    return dg.AssetCheckResult(
        passed=result.passed,
        severity=TO_DAGSTER[result.severity] if result.severity else dg.AssetCheckSeverity.WARN,
        description=result.summary,
        metadata=as_metadata(metadata),
    )


def evaluated(
    check: Check,
    evaluate: Evaluate,
    connect: Callable[[], AbstractContextManager[psycopg.Connection[Any]]],
    settings: Settings,
    log: logging.Logger | dg.DagsterLogManager,
) -> dg.AssetCheckResult:
    """The check's result, whatever happens: a database that cannot be reached, an
    evaluator or its metadata that raises, is an ERROR result of its own naming the
    check, and the traceback goes to the run's log."""
    observed_at: dt.datetime | None = None
    try:
        with connect() as conn:
            observed_at = beat(conn, CHECKS)
            return as_check_result(evaluate(conn, settings), observed_at)
    except Exception as exc:  # a watcher that went blind must say so, not crash
        log.error(f"check {check.name} could not evaluate:\n{traceback.format_exc()}")
        return as_check_result(could_not_evaluate(check, exc), observed_at)


def _on_asset(check: Check, evaluate: Evaluate) -> dg.AssetChecksDefinition:
    """The asset check of a registry entry: its name, asset, owner and runbook."""

    @dg.asset_check(
        asset=_ASSETS[check.judges],
        name=check.name,
        blocking=True,
        description=f"{check.description} Owner: {check.owner}.",
        metadata={"owner": check.owner.value, "runbook": check.runbook},
    )
    def _check(
        context: dg.AssetCheckExecutionContext,
        app_db: dg.ResourceParam[AppDatabase],
        checks: dg.ResourceParam[ChecksResource],
        delivery: dg.ResourceParam[DeliveryResource],
        review: dg.ResourceParam[ReviewResource],
        delivery_service: dg.ResourceParam[DeliveryServiceResource],
    ) -> dg.AssetCheckResult:
        settings = check_settings(checks, delivery, review, delivery_service)
        return evaluated(check, evaluate, app_db.connect, settings, context.log)

    return _check


def _probe_service(conn: psycopg.Connection[Any], settings: Settings) -> CheckResult:
    # the heartbeat is left by `evaluated`; the probe itself needs only the URL
    return check_service_reachable(settings.service.service_url)


# One per waiting state (and the outbox), and the reverse watch.
STATE_CHECKS: list[dg.AssetChecksDefinition] = [
    _on_asset(check, evaluate) for check, evaluate in EVALUATORS.items()
]
webhook_service_reachable = _on_asset(registry.SERVICE, _probe_service)


def build_template_checks(knock_templates: str) -> list[dg.AssetChecksDefinition]:
    """One check per knock template and language of ``DELIVERY_KNOCK_TEMPLATES``, and
    the knocks' own two (held for a template; accepted and never delivered)."""
    built = [
        _on_asset(registry.KNOCK_HELD, templates.check_knock_held),
        _on_asset(registry.KNOCK_NOT_DELIVERED, templates.check_knocks_not_delivered),
    ]
    for name, language in knock_template_list(knock_templates):
        built.append(
            _on_asset(
                registry.template_check(name, language),
                partial(templates.check_knock_template, name=name, language=language),
            )
        )
    return built


def build_document_template_checks(
    document_templates: list[tuple[str, str]],
) -> list[dg.AssetChecksDefinition]:
    """One check per document template and language (``DELIVERY_DOCUMENT_TEMPLATES``,
    ``DELIVERY_BRIEF_DOCUMENT_TEMPLATES``)."""
    return [
        _on_asset(
            registry.document_template_check(name, language),
            partial(templates.check_document_template, name=name, language=language),
        )
        for name, language in document_templates
    ]


def build_checks(
    checks: CheckSettings,
    knock_templates: str = DEFAULT_KNOCK_TEMPLATES,
    document_templates: list[tuple[str, str]] | None = None,
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
    templates = [
        *build_template_checks(knock_templates),
        *build_document_template_checks(document_templates or []),
    ]
    return [*STATE_CHECKS, webhook_service_reachable, *templates, *freshness]


def check_keys(definitions: list[dg.AssetChecksDefinition]) -> list[dg.AssetCheckKey]:
    return [key for check in definitions for key in check.check_keys]


delivery_checks = dg.define_asset_job(
    "delivery_checks",
    selection=dg.AssetSelection.all_asset_checks(),
    executor_def=dg.in_process_executor,
    description="Evaluate every asset check (every 5 minutes); failures reach ops by sensor.",
)
