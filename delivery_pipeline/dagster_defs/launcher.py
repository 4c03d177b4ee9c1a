"""The Docker run launcher, forwarding the settings a deployment actually set.

Dagster's ``DockerRunLauncher`` copies each name of its ``env_vars`` from the
launching process (the daemon) into the run's container, and refuses to launch
when one is unset ("Tried to load environment variable …, but it was not
set"). A list of every setting therefore fails on the first optional one a
deployment leaves out, and a list of the required ones alone runs every optional
setting at its default, whatever the deployment chose.

``SettingsDockerRunLauncher`` forwards, by name, every variable of the settings
model that is set and not empty in the daemon's environment (an empty value
means the default, here as everywhere), with the storage's ``DAGSTER_PG_*`` and
libpq's own connection variables, plus whatever ``env_vars`` lists. Values are
read when a run is launched, never written to the YAML or to Dagster's storage.
The ``docker_executor``'s step containers get the same list: it reads the run
launcher's ``env_vars`` too.
"""

import os
from collections.abc import Iterable, Mapping, Sequence

from dagster_docker import DockerRunLauncher

from delivery_pipeline.settings import Settings

# Dagster's storage (deploy/dagster.yaml) and libpq's connection defaults: a run loads
# the instance, and a DATABASE_URL may leave its host, port or TLS to these.
STORAGE_VARIABLES = (
    "DAGSTER_PG_HOST",
    "DAGSTER_PG_PORT",
    "DAGSTER_PG_USER",
    "DAGSTER_PG_PASSWORD",
    "DAGSTER_PG_DB",
    "PGHOST",
    "PGHOSTADDR",
    "PGPORT",
    "PGDATABASE",
    "PGUSER",
    "PGPASSWORD",
    "PGPASSFILE",
    "PGSERVICE",
    "PGSERVICEFILE",
    "PGSSLMODE",
    "PGSSLROOTCERT",
    "PGSSLCERT",
    "PGSSLKEY",
    "PGCONNECT_TIMEOUT",
    "PGTZ",
)


def run_variables() -> list[str]:
    """Every variable a run reads: the settings (the sandbox's aside), then the storage's."""
    settings = [name for name in Settings.env_names() if not name.startswith("SANDBOX_")]
    return [*dict.fromkeys([*settings, *STORAGE_VARIABLES])]


def forwarded(environ: Mapping[str, str], configured: Iterable[str] = ()) -> list[str]:
    """The ``env_vars`` of a run launched from ``environ``: ``configured`` as given, then
    each run variable set there and not empty (and not already configured)."""
    configured = list(configured)
    named = {entry.split("=", 1)[0] for entry in configured}
    present = [
        name for name in run_variables() if name not in named and environ.get(name, "").strip()
    ]
    return [*configured, *present]


class SettingsDockerRunLauncher(DockerRunLauncher):
    """``DockerRunLauncher`` whose ``env_vars`` are ``forwarded(os.environ, env_vars)``."""

    @property
    def env_vars(self) -> list[str]:
        return forwarded(os.environ, self._configured_env_vars)

    @env_vars.setter
    def env_vars(self, configured: Sequence[str] | None) -> None:
        self._configured_env_vars = list(configured or [])
