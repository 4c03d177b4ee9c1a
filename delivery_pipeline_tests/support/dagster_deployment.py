"""The Dagster deployment as the tests use it: the harness's processes
(``delivery_pipeline.testing.deployment``) and Dagster's instance opened in
the test process (its storage, its event log), which the harness, importing no
Dagster, leaves to its callers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from dagster import DagsterInstance

from delivery_pipeline.testing import deployment as processes
from delivery_pipeline.testing.deployment import eventually, graphql

__all__ = ["Deployment", "dagster_deployment", "eventually", "graphql"]


class Deployment(processes.Deployment):
    _instance: DagsterInstance | None = None

    @property
    def instance(self) -> DagsterInstance:
        """The deployment's instance, opened in this process (its storage, its event log)."""
        if self._instance is None:
            os.environ["DAGSTER_PG_URL"] = self.env["DAGSTER_PG_URL"]
            self._instance = DagsterInstance.from_config(self.env["DAGSTER_HOME"])
        return self._instance

    def close(self) -> None:
        super().close()
        if self._instance is not None:
            self._instance.dispose()


@contextmanager
def dagster_deployment(
    admin_url: str, template_database: str | None = None, **settings: str
) -> Iterator[Deployment]:
    """Everything up, on fresh databases on ``admin_url``'s server; ``settings`` are
    environment variables for the service and Dagster (``WATCHDOG_STALE_SECONDS=…``)."""
    with processes.deployment_of(Deployment, admin_url, template_database, settings) as deployment:
        yield deployment
