"""The watcher as Dagster runs it, in a test: every check of the definitions (the
knock templates' family and Dagster's freshness check included) executed into an
ephemeral instance by the ``delivery_checks`` job, and the alert sensors ticked
by hand against the test's database and the sandbox's ops endpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    DagsterInstance,
    Definitions,
    ExecuteInProcessResult,
    SkipReason,
    build_run_status_sensor_context,
    build_sensor_context,
)

from delivery_pipeline.dagster_defs.alert_sensors import build_alert_sensors
from delivery_pipeline.dagster_defs.asset_checks import build_checks, check_keys, delivery_checks
from delivery_pipeline.dagster_defs.assets import (
    delivered_documents,
    delivery_backlog,
    generated_documents,
)
from delivery_pipeline.dagster_defs.jobs import refresh_backlog
from delivery_pipeline.dagster_defs.resources import OpsChannelResource
from delivery_pipeline.settings import OpsSettings, Settings
from delivery_pipeline.testing.sandbox import SandboxProcess
from delivery_pipeline_tests.support.dagster_support import resources_for


@dataclass
class Watcher:
    instance: DagsterInstance
    settings: Settings
    sandbox: SandboxProcess
    service_url: str | None = None  # the webhook service the reverse watch probes

    def __post_init__(self) -> None:
        self.checks = build_checks(self.settings.checks, self.settings.delivery.knock_templates)
        self.keys = check_keys(self.checks)

    @property
    def sensors(self) -> dict[str, Any]:
        """The alert sensors, over the checks' keys as they are now."""
        return {s.name: s for s in build_alert_sensors(self.settings.ops, self.keys)}

    @property
    def ops_url(self) -> str:
        return f"{self.sandbox.url}/_sandbox/ops"

    def resources(self) -> dict[str, Any]:
        return {
            **resources_for(
                self.settings.database.database_url,
                self.sandbox.url,
                service_url=self.service_url,
                settings=self.settings,
            ),
            "ops_channel": OpsChannelResource(OpsSettings(webhook_url=self.ops_url)),
        }

    def definitions(self) -> Definitions:
        return Definitions(
            assets=[generated_documents, delivered_documents, delivery_backlog],
            asset_checks=self.checks,
            jobs=[delivery_checks, refresh_backlog],
            resources=self.resources(),
        )

    def run_checks(self) -> tuple[ExecuteInProcessResult, dict[str, AssetCheckEvaluation]]:
        """One ``delivery_checks`` run; its result and each check's evaluation by name."""
        result = (
            self.definitions()
            .resolve_job_def("delivery_checks")
            .execute_in_process(instance=self.instance, raise_on_error=False)
        )
        return result, {e.check_name: e for e in result.get_asset_check_evaluations()}

    def refresh_backlog(self) -> ExecuteInProcessResult:
        """The backlog's schedule: a materialisation (its freshness check passes then)."""
        return (
            self.definitions()
            .resolve_job_def("refresh_backlog")
            .execute_in_process(instance=self.instance, raise_on_error=False)
        )

    def tick(self) -> str:
        """One tick of ``ops_check_alerts``; what it says it recorded and sent."""
        context = build_sensor_context(instance=self.instance, resources=self.resources())
        outcome = self.sensors["ops_check_alerts"](context)
        assert isinstance(outcome, SkipReason)
        return outcome.skip_message or ""

    def run_ended(self, result: ExecuteInProcessResult) -> None:
        """What the run-status sensors do about a run that ended as ``result`` did."""
        sensor = self.sensors["ops_run_successes" if result.success else "ops_run_failures"]
        event = result.get_run_success_event() if result.success else result.get_run_failure_event()
        context = build_run_status_sensor_context(
            sensor_name=sensor.name,
            dagster_instance=self.instance,
            dagster_run=result.dagster_run,
            dagster_event=event,
            resources=self.resources(),
        )
        sensor(context)

    def posts(self) -> list[str]:
        """The text of every post the ops channel (the sandbox's endpoint) received."""
        return [post["text"] for post in self.sandbox.ops_alerts()]
