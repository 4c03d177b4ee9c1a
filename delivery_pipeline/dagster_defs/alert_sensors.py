"""Alert sensors: failed checks and failed runs reach the ops channel.

Dagster OSS does not alert on a failed asset check (and a failed check does
not fail its run), so ``ops_check_alerts`` reads each check's latest
completed evaluation from the instance and records what it calls for in
``ops_alerts`` (``watch.alerts.note_check``): an alert when a check starts
failing, a reminder every ``OPS_ALERT_REMINDER_SECONDS`` while it keeps
failing, a new alert on escalation from WARN to ERROR, a resolved message
when it passes again. Then it posts every unsent row (the engine's alerts
too); what the channel did not take is retried on the next tick.

A check the reviewers own (``awaiting_review_too_long``) goes to their
channel (``REVIEW_WEBHOOK_URL``, else the ops channel), reminded every
``REVIEW_REMINDER_SECONDS``; ops gets an episode of its own while that check
is at ERROR (the escalation).

``ops_run_failures`` posts once per failed run of any job.
"""

import dataclasses

import dagster as dg

from delivery_pipeline.dagster_defs.asset_checks import FROM_DAGSTER
from delivery_pipeline.dagster_defs.resources import (
    AppDatabase,
    OpsChannelResource,
    ReviewResource,
)
from delivery_pipeline.model import Severity
from delivery_pipeline.settings import OpsSettings
from delivery_pipeline.store.rows import OpsAlert
from delivery_pipeline.watch.alerts import Alert, AlertChannel, note_check, record_once
from delivery_pipeline.watch.checks.registry import lookup
from delivery_pipeline.watch.ops_channel import send_pending


def latest_evaluation(
    instance: dg.DagsterInstance, key: dg.AssetCheckKey
) -> dg.AssetCheckEvaluation | None:
    """The check's latest completed evaluation; None if never run (or one is in progress)."""
    record = instance.get_latest_asset_check_evaluation_record(key)
    if record is None or record.event is None:
        return None
    if record.status.value not in ("SUCCEEDED", "FAILED"):
        return None
    return record.event.asset_check_evaluation


def _text(evaluation: dg.AssetCheckEvaluation, name: str, default: str = "") -> str:
    value = evaluation.metadata.get(name)
    return str(value.value) if value is not None else default


def check_alert(key: dg.AssetCheckKey, evaluation: dg.AssetCheckEvaluation) -> Alert:
    """The alert an evaluation stands for (sent or not is ``note_check``'s call).

    Owner, runbook and channel are the registry's (``watch/checks/registry.py``);
    only what the evaluation found (summary, count, ids) comes from Dagster.
    """
    check = lookup(key.name)
    owner = check.owner.value if check is not None else "ops"
    runbook = check.runbook if check is not None else ""
    summary = evaluation.description or _text(evaluation, "summary")
    if evaluation.passed:
        message = f"Check `{key.name}` (owner: {owner}) passes again. {summary}"
    else:
        message = f"Check `{key.name}` (owner: {owner}): {summary} What to do: {runbook}"
    severity = FROM_DAGSTER.get(evaluation.severity, Severity.WARNING)
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
    return Alert(f"check:{key.name}", severity, message, details, channel)


def escalation(alert: Alert, *, failing: bool) -> Alert:
    """Ops' own episode of a check another channel owns: failing only at ERROR."""
    if failing:
        message = f"Escalated to ops (the {alert.channel} did not act): {alert.message}"
    else:
        message = f"No longer at ERROR for the {alert.channel}: {alert.message}"
    return dataclasses.replace(
        alert, key=f"{alert.key}:escalated", message=message, channel=AlertChannel.OPS
    )


def alert_on_checks(
    instance: dg.DagsterInstance,
    app_db: AppDatabase,
    *,
    reminder_seconds: float,
    keys: list[dg.AssetCheckKey],
    reviewer_reminder_seconds: float | None = None,
) -> list[OpsAlert]:
    """Record what each check's latest evaluation calls for; returns the rows written.

    A check owned by another channel than ops (the reviewers') is that
    channel's episode, reminded every ``reviewer_reminder_seconds``, and a
    second episode for ops that fails only while the check is at ERROR.
    """
    written = []
    with app_db.connect() as conn:
        for key in keys:
            evaluation = latest_evaluation(instance, key)
            if evaluation is None:
                continue
            alert = check_alert(key, evaluation)
            failing = not evaluation.passed
            episodes = [(alert, failing, reminder_seconds)]
            if alert.channel is not AlertChannel.OPS:
                at_error = failing and alert.severity is Severity.ERROR
                episodes = [
                    (alert, failing, reviewer_reminder_seconds or reminder_seconds),
                    (escalation(alert, failing=at_error), at_error, reminder_seconds),
                ]
            for episode, episode_failing, reminder in episodes:
                row = note_check(conn, episode, failing=episode_failing, reminder_seconds=reminder)
                if row is not None:
                    written.append(row)
    return written


def build_alert_sensors(
    ops: OpsSettings, check_keys: list[dg.AssetCheckKey]
) -> list[dg.SensorDefinition]:
    @dg.sensor(
        name="ops_check_alerts",
        minimum_interval_seconds=ops.alert_sensor_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            "Posts each failing asset check to the ops channel once when it starts failing, "
            "a reminder while it keeps failing (OPS_ALERT_REMINDER_SECONDS), and a resolved "
            "message when it passes; the reviewers' check goes to their channel "
            "(REVIEW_WEBHOOK_URL) and to ops at ERROR. Every alert is recorded in ops_alerts "
            "first, and unsent ones (the engine's too) are retried each tick."
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

    @dg.run_failure_sensor(
        name="ops_run_failures",
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Posts once to the ops channel for each failed run of any job.",
    )
    def ops_run_failures(
        context: dg.RunFailureSensorContext,
        app_db: dg.ResourceParam[AppDatabase],
        ops_channel: dg.ResourceParam[OpsChannelResource],
        review: dg.ResourceParam[ReviewResource],
    ) -> None:
        run = context.dagster_run
        failures = context.get_step_failure_events()
        steps = [event.step_key or "?" for event in failures]
        errors = [
            event.step_failure_data.error.message.strip().splitlines()[0]
            for event in failures
            if event.step_failure_data.error is not None
        ]
        message = f"Run of `{run.job_name}` failed (run {run.run_id})"
        if steps:
            message += f" in {', '.join(steps)}"
        message += f": {errors[0][:300]}" if errors else f": {context.failure_event.message}"
        alert = Alert(
            f"run_failure:{run.run_id}",
            Severity.ERROR,
            message,
            {"run_id": run.run_id, "job": run.job_name, "steps": steps},
        )
        with app_db.connect() as conn:
            record_once(conn, alert)
            send_pending(conn, ops_channel.notifier(), reviewers=review.notifier())

    return [ops_check_alerts, ops_run_failures]
