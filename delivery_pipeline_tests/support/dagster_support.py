"""Helpers for testing the Dagster layer against real Postgres and the sandbox."""

from __future__ import annotations

import uuid
from typing import Any

from dagster import (
    AssetKey,
    DagsterInstance,
    DagsterRunStatus,
    Definitions,
    EventLogRecord,
    ExecuteInProcessResult,
    JobDefinition,
)
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)
from dagster._core.remote_origin import (
    InProcessCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.storage.dagster_run import DagsterRun
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from pydantic import SecretStr

from delivery_pipeline.dagster_defs.assets import (
    delivered_documents,
    delivery_backlog,
    generated_documents,
)
from delivery_pipeline.dagster_defs.resources import (
    CloudApiResource,
    DeliveryServiceResource,
    build_resources,
)
from delivery_pipeline.settings import (
    DEV_ACCESS_TOKEN,
    ServiceSettings,
    Settings,
    WhatsAppSettings,
)

# Nothing listens on the discard port: a resource pointed here reaches nobody.
NOWHERE = "http://127.0.0.1:9"


def resources_for(
    database_url: str,
    sandbox_url: str | None = None,
    *,
    service_url: str | None = None,
    internal_token: str | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """Every resource the definitions use (``build_resources``), from ``settings``
    (default: the defaults, never the process environment), pointed at the test
    database, the sandbox and the webhook service (each unset: nowhere)."""
    settings = (settings or Settings().replace(delivery={"quiet_hours": ""})).replace(
        database={"database_url": database_url}
    )
    whatsapp = settings.whatsapp.model_dump(exclude=set(WhatsAppSettings.secret_fields()))
    service = settings.service.model_dump(exclude=set(ServiceSettings.secret_fields()))
    return {
        **build_resources(settings),
        "cloud_api": CloudApiResource(
            WhatsAppSettings(
                **{**whatsapp, "api_base_url": sandbox_url or NOWHERE},
                access_token=SecretStr(DEV_ACCESS_TOKEN),
            )
        ),
        "delivery_service": DeliveryServiceResource(
            ServiceSettings(
                **{**service, "service_url": service_url or NOWHERE},
                internal_token=SecretStr(internal_token) if internal_token else None,
            )
        ),
    }


def add_run(instance: DagsterInstance, job_name: str, status: DagsterRunStatus) -> DagsterRun:
    """A run of ``job_name`` in ``status``, as the daemon would have recorded it."""
    # a queued run must say where its code lives
    origin = RemoteJobOrigin(
        repository_origin=RemoteRepositoryOrigin(
            code_location_origin=InProcessCodeLocationOrigin(
                loadable_target_origin=LoadableTargetOrigin(
                    module_name="delivery_pipeline.dagster_defs.definitions"
                )
            ),
            repository_name="__repository__",
        ),
        job_name=job_name,
    )
    run = DagsterRun(
        job_name=job_name, run_id=str(uuid.uuid4()), status=status, remote_job_origin=origin
    )
    return instance.add_run(run)


def execute(
    job: JobDefinition | UnresolvedAssetJobDefinition,
    *,
    resources: dict[str, Any],
    instance: DagsterInstance,
    **kwargs: Any,
) -> ExecuteInProcessResult:
    """Run a job of the definitions in process (an asset job resolved against its assets)."""
    defs = Definitions(
        assets=[generated_documents, delivered_documents, delivery_backlog],
        jobs=[job],
        resources=resources,
    )
    return defs.resolve_job_def(job.name).execute_in_process(instance=instance, **kwargs)


def materializations(instance: DagsterInstance, key: AssetKey) -> list[EventLogRecord]:
    """Every materialization of ``key`` in ``instance``, oldest first (runless ones too)."""
    return list(instance.fetch_materializations(key, limit=10_000, ascending=True).records)
