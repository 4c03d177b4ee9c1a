"""Alert sensors: failing checks and failing jobs reach the ops channel, once per episode.

Dagster OSS does not alert on a failed asset check, so ``ops_check_alerts``
reads each check's latest completed evaluation from the instance and hands
what it says about each episode to ``watch.episodes`` (``note``): one alert
when a cause starts, a reminder every ``OPS_ALERT_REMINDER_SECONDS`` while it
lasts, a new alert on escalation from WARN to ERROR, one resolved message
when it ends. An evaluation speaks for the moment it was observed (its
``observed_at``), so one read after the episode was resolved meanwhile (a
``resume``) reopens nothing, and the reports of a tick are applied in the
order they were observed. Then it posts every unsent row (the engine's too);
what the channel did not take is retried on the next tick.

A check the reviewers own (``awaiting_review_too_long``) goes to their
channel (``REVIEW_WEBHOOK_URL``, else the ops channel), reminded every
``REVIEW_REMINDER_SECONDS``; ops gets an episode of its own while that check
is at ERROR (the escalation).

``ops_run_failures`` reports each failed run on its job's episode
(``run_failure:<job>``: one alert however many runs fail, a reminder while they
keep failing), and ``ops_run_successes`` resolves it with the job's next
successful run. A run failed only by its blocking checks at ERROR is the
checks' to tell, not a run failure.
"""

import dataclasses
import datetime as dt
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import dagster as dg

from delivery_pipeline.dagster_defs.asset_checks import EPISODES, FROM_DAGSTER, OBSERVED_AT
from delivery_pipeline.dagster_defs.resources import (
    AppDatabase,
    OpsChannelResource,
    ReviewResource,
)
from delivery_pipeline.model import Severity
from delivery_pipeline.settings import OpsSettings
from delivery_pipeline.store.rows.core import OpsAlert
from delivery_pipeline.watch.alerts import Alert, AlertChannel
from delivery_pipeline.watch.checks.registry import lookup
from delivery_pipeline.watch.episodes import Report, Said, check_episode, note
from delivery_pipeline.watch.ops_channel import send_pending

# What Dagster raises when a blocking check fails at ERROR: the checks' own alert.
CHECKS_FAILED = "DagsterAssetCheckFailedError"


class Evaluated(NamedTuple):
    evaluation: dg.AssetCheckEvaluation
    observed_at: dt.datetime


def latest_evaluation(instance: dg.DagsterInstance, key: dg.AssetCheckKey) -> Evaluated | None:
    """The check's latest completed evaluation and when it was observed; None if never run
    (or one is in progress)."""
    record = instance.get_latest_asset_check_evaluation_record(key)
    if record is None or record.event is None:
        return None
    if record.status.value not in ("SUCCEEDED", "FAILED"):
        return None
    evaluation = record.event.asset_check_evaluation
    if evaluation is None:
        return None
    observed = evaluation.metadata.get(OBSERVED_AT)
    seconds = observed.value if observed is not None else record.event.timestamp
    if not isinstance(seconds, int | float):
        seconds = record.event.timestamp
    return Evaluated(evaluation, dt.datetime.fromtimestamp(seconds, dt.UTC))


def _text(evaluation: dg.AssetCheckEvaluation, name: str, default: str = "") -> str:
    value = evaluation.metadata.get(name)
    return str(value.value) if value is not None else default


def said_by(key: dg.AssetCheckKey, evaluation: dg.AssetCheckEvaluation) -> list[Said]:
    """What the evaluation says about each episode; a result without it (Dagster's own
    freshness check) speaks of the check's own."""
    carried = evaluation.metadata.get(EPISODES)
    values = carried.value if carried is not None else None
    said = [Said.from_json(value) for value in values] if isinstance(values, list) else []
    found = [s for s in said if s is not None]
    if found:
        return found
    severity = FROM_DAGSTER.get(evaluation.severity, Severity.WARNING)
    return [Said(check_episode(key.name), not evaluation.passed, severity)]


def check_alert(
    key: dg.AssetCheckKey, evaluation: dg.AssetCheckEvaluation, said: Said | None = None
) -> Alert:
    """The alert an evaluation stands for on one episode (written or not is
    ``episodes.decide``'s call).

    Owner, runbook and channel are the registry's (``watch/checks/registry.py``);
    only what the evaluation found (summary, count, ids) comes from Dagster.
    """
    check = lookup(key.name)
    owner = check.owner.value if check is not None else "ops"
    runbook = check.runbook if check is not None else ""
    summary = evaluation.description or _text(evaluation, "summary")
    said = said or said_by(key, evaluation)[0]
    if said.failing:
        message = f"Check `{key.name}` (owner: {owner}): {summary} What to do: {runbook}"
    elif evaluation.passed:
        message = f"Check `{key.name}` (owner: {owner}) passes again. {summary}"
    else:
        message = f"Check `{key.name}` (owner: {owner}) evaluates again. {summary}"
    severity = said.severity or FROM_DAGSTER.get(evaluation.severity, Severity.WARNING)
    details = {
        "check": key.name,
        "asset": key.asset_key.to_user_string(),
        "owner": owner,
        "passed": evaluation.passed,
        "severity": severity,
        "count": _text(evaluation, "count"),
        "oldest_ids": _text(evaluation, "oldest_ids"),
    }
    channel = check.channel if check is not None else AlertChannel.OPS
    return Alert(said.key, severity, message, details, channel)


def escalation(alert: Alert, *, failing: bool) -> Alert:
    """Ops' own episode of a check another channel owns: failing only at ERROR."""
    if failing:
        message = f"Escalated to ops (the {alert.channel} did not act): {alert.message}"
    else:
        message = f"No longer at ERROR for the {alert.channel}: {alert.message}"
    return dataclasses.replace(
        alert, key=f"{alert.key}:escalated", message=message, channel=AlertChannel.OPS
    )


def check_reports(
    key: dg.AssetCheckKey,
    evaluated: Evaluated,
    *,
    reminder_seconds: float,
    reviewer_reminder_seconds: float | None = None,
) -> Iterator[Report]:
    """Each report of one evaluation, one per episode it speaks of (two for a check
    another channel owns: that channel's, and ops' escalation at ERROR)."""
    evaluation, observed_at = evaluated
    for said in said_by(key, evaluation):
        alert = check_alert(key, evaluation, said)
        if alert.channel is AlertChannel.OPS:
            yield Report(alert, said.failing, observed_at, said.closes, reminder_seconds)
            continue
        at_error = said.failing and alert.severity is Severity.ERROR
        reviewers = reviewer_reminder_seconds or reminder_seconds
        yield Report(alert, said.failing, observed_at, said.closes, reviewers)
        yield Report(
            escalation(alert, failing=at_error),
            at_error,
            observed_at,
            said.closes,
            reminder_seconds,
        )


def alert_on_checks(
    instance: dg.DagsterInstance,
    app_db: AppDatabase,
    *,
    reminder_seconds: float,
    keys: list[dg.AssetCheckKey],
    reviewer_reminder_seconds: float | None = None,
) -> list[OpsAlert]:
    """Apply what each check's latest evaluation says, in the order observed; returns
    the rows written."""
    reports: list[Report] = []
    for key in keys:
        evaluated = latest_evaluation(instance, key)
        if evaluated is not None:
            reports += check_reports(
                key,
                evaluated,
                reminder_seconds=reminder_seconds,
                reviewer_reminder_seconds=reviewer_reminder_seconds,
            )
    reports.sort(key=lambda report: report.observed_at or dt.datetime.max.replace(tzinfo=dt.UTC))
    written = []
    with app_db.connect() as conn:
        for report in reports:
            row = note(conn, report)
            if row is not None:
                written.append(row)
    return written


def run_episode(job_name: str) -> str:
    return f"run_failure:{job_name}"


def failed_only_by_checks(failures: Sequence[dg.DagsterEvent]) -> bool:
    """The run failed because blocking checks are at ERROR, and for nothing else."""
    errors = [event.step_failure_data.error for event in failures]
    return bool(errors) and all(e is not None and e.cls_name == CHECKS_FAILED for e in errors)


def run_failure_alert(context: dg.RunFailureSensorContext) -> Alert:
    run = context.dagster_run
    failures = context.get_step_failure_events()
    steps = [event.step_key or "?" for event in failures]
    errors = [
        event.step_failure_data.error.message.strip().splitlines()[0]
        for event in failures
        if event.step_failure_data.error is not None
    ]
    message = f"Runs of `{run.job_name}` fail (run {run.run_id}"
    message += f" in {', '.join(steps)}): " if steps else "): "
    message += errors[0][:300] if errors else context.failure_event.message or "no message"
    message += ". One alert until a run of the job succeeds again; its run page has the traceback."
    return Alert(
        run_episode(run.job_name),
        Severity.ERROR,
        message,
        {"run_id": run.run_id, "job": run.job_name, "steps": steps},
    )


def build_alert_sensors(
    ops: OpsSettings, check_keys: list[dg.AssetCheckKey]
) -> list[dg.SensorDefinition]:
    @dg.sensor(
        name="ops_check_alerts",
        minimum_interval_seconds=ops.alert_sensor_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            "Posts each episode the checks see (a pause, a template's trouble, a stranded "
            "queue…) to the ops channel once when it starts, a reminder while it lasts "
            "(OPS_ALERT_REMINDER_SECONDS), and one resolved message when it ends; a result "
            "older than the episode's resolution reopens nothing. The reviewers' check goes "
            "to their channel (REVIEW_WEBHOOK_URL) and to ops at ERROR. Every alert is "
            "recorded in ops_alerts first, and unsent ones (the engine's too) are retried "
            "each tick."
        ),
    )
    def ops_check_alerts(
        context: dg.SensorEvaluationContext,
        app_db: dg.ResourceParam[AppDatabase],
        ops_channel: dg.ResourceParam[OpsChannelResource],
        review: dg.ResourceParam[ReviewResource],
    ) -> dg.SkipReason:
        written = alert_on_checks(
            context.instance,
            app_db,
            reminder_seconds=ops_channel.settings.alert_reminder_seconds,
            keys=check_keys,
            reviewer_reminder_seconds=review.settings.reminder_seconds,
        )
        with app_db.connect() as conn:
            report = send_pending(conn, ops_channel.notifier(), reviewers=review.notifier())
        kinds = ", ".join(f"{r.kind} {r.dedup_key}" for r in written) or "nothing new"
        return dg.SkipReason(f"Recorded: {kinds}. Ops channel: {report.summary()}.")

    return [ops_check_alerts, *_run_sensors()]


def _run_sensors() -> list[dg.SensorDefinition]:
    """A job's failing runs: alerted until a run of it succeeds again."""

    @dg.run_failure_sensor(
        name="ops_run_failures",
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            "Tells the ops channel when runs of a job fail: one alert per job until a run "
            "of it succeeds again (reminded while they keep failing). A run failed only by "
            "its checks at ERROR is left to the check alerts."
        ),
    )
    def ops_run_failures(
        context: dg.RunFailureSensorContext,
        app_db: dg.ResourceParam[AppDatabase],
        ops_channel: dg.ResourceParam[OpsChannelResource],
        review: dg.ResourceParam[ReviewResource],
    ) -> None:
        if failed_only_by_checks(context.get_step_failure_events()):
            return
        report = Report(
            run_failure_alert(context),
            failing=True,
            reminder_seconds=ops_channel.settings.alert_reminder_seconds,
        )
        with app_db.connect() as conn:
            note(conn, report)
            send_pending(conn, ops_channel.notifier(), reviewers=review.notifier())

    @dg.run_status_sensor(
        name="ops_run_successes",
        run_status=dg.DagsterRunStatus.SUCCESS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Resolves a job's failing-runs alert when a run of it succeeds.",
    )
    def ops_run_successes(
        context: dg.RunStatusSensorContext, app_db: dg.ResourceParam[AppDatabase]
    ) -> None:
        run = context.dagster_run
        alert = Alert(
            run_episode(run.job_name),
            Severity.INFO,
            f"Runs of `{run.job_name}` succeed again (run {run.run_id}).",
            {"run_id": run.run_id, "job": run.job_name},
        )
        with app_db.connect() as conn:
            note(conn, Report(alert, failing=False))

    return [ops_run_failures, ops_run_successes]
