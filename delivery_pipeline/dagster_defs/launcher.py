"""The Docker run launcher, forwarding the settings a deployment actually set.

Dagster's ``DockerRunLauncher`` copies each name of its ``env_vars`` from the
launching process (the daemon) into the run's container, and refuses to launch
when one is unset ("Tried to load environment variable …, but it was not
set"). A list of every setting therefore fails on the first optional one a
deployment leaves out, and a list of the required ones alone runs every optional
setting at its default, whatever the deployment chose.

``SettingsDockerRunLauncher`` forwards, by name, every variable of the settings
model that is set and not empty in the daemon's environment (an empty value
means the default, here as everywhere) and that a run may hold, the storage's
``DAGSTER_PG_*`` and libpq's own connection variables that are set, and
whatever ``env_vars`` lists. Values are read when a run is launched, never
written to the YAML or to Dagster's storage. The ``docker_executor``'s step
containers get the same list: it reads the run launcher's ``env_vars`` too.

A run holds only the secrets it reads (``RUN_SECRETS``). Every other secret,
and any other URL with a password in it, stays with the processes that read it:
the webhook service (the app secret, the verify token, the review and operator
tokens, the applications' tokens and webhooks, the Dagster webserver's URL) and
the code location's sensors (the ops and reviewers' webhooks). The settings
that are not secret all go: a run rebuilds the same definitions as the code
location (its checks, partitions and executor follow them).
"""

import os
from collections.abc import Iterable, Mapping, Sequence

from dagster_docker import DockerRunLauncher

from delivery_pipeline.settings import Settings
from delivery_pipeline.settings.urls import carries_credentials

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


# The secrets a run reads: its database, the Cloud API's token (a sweep sends), the
# generator's key and base URL (a gateway's password may be in it), and the webhook
# service's internal token (generation, a review and a resend poke delivery).
RUN_SECRETS = frozenset(
    {
        "DATABASE_URL",
        "WHATSAPP_ACCESS_TOKEN",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "DELIVERY_INTERNAL_TOKEN",
    }
)


# Read by the code location's sensors (the alerts), in the code server, never by a run.
SENSOR_SECRETS = frozenset({"OPS_WEBHOOK_URL", "REVIEW_WEBHOOK_URL"})


def webhook_service_only() -> frozenset[str]:
    """The secrets no Dagster process reads, the webhook service's (and the migration
    job's ``DELIVERY_MIGRATION_DATABASE_URL``): the Helm values keep them out of the
    Secret Dagster's pods get (``deploy/helm/values.yaml``)."""
    secrets = Settings.secret_env_names() - RUN_SECRETS - SENSOR_SECRETS
    # The sandbox is not deployed: its key is nobody's there.
    deployed = {name for name in secrets if not name.startswith("SANDBOX_")}
    return frozenset(deployed | {"DAGSTER_WEBSERVER_URL"})


def setting_variables() -> list[str]:
    """Every variable of the settings model but the sandbox's."""
    return [name for name in Settings.env_names() if not name.startswith("SANDBOX_")]


def withheld(name: str, value: str) -> bool:
    """Is the setting ``name`` set to ``value`` kept from runs: a secret, or a URL with a
    password, that no run reads?"""
    secret = name in Settings.secret_env_names() or carries_credentials(value.strip())
    return secret and name not in RUN_SECRETS


def forwarded(environ: Mapping[str, str], configured: Iterable[str] = ()) -> list[str]:
    """The ``env_vars`` of a run launched from ``environ``: ``configured`` as given, then
    each setting set there and not empty (empty is the default, the run's too) and not
    ``withheld``, then each storage variable set there at all (an empty
    ``DAGSTER_PG_HOST`` means a Unix socket)."""
    configured = list(configured)
    named = {entry.split("=", 1)[0] for entry in configured}
    settings = [
        name
        for name in setting_variables()
        if environ.get(name, "").strip() and not withheld(name, environ[name])
    ]
    storage = [name for name in STORAGE_VARIABLES if name in environ]
    return [*configured, *(name for name in [*settings, *storage] if name not in named)]


class SettingsDockerRunLauncher(DockerRunLauncher):
    """``DockerRunLauncher`` whose ``env_vars`` are ``forwarded(os.environ, env_vars)``."""

    @property
    def env_vars(self) -> list[str]:
        return forwarded(os.environ, self._configured_env_vars)

    @env_vars.setter
    def env_vars(self, configured: Sequence[str] | None) -> None:
        self._configured_env_vars = list(configured or [])
