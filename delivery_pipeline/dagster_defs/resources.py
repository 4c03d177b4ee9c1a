"""Resources: what each job may touch, with secrets from ``EnvVar``.

Each op asks only for the resources it needs, and an op sees only what it
asked for: generation gets ``generator``, ``app_db`` and ``delivery_service``
(the internal poke), never ``cloud_api``. The generator resource has no field
that could hold a WhatsApp credential.
"""

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from dagster import ConfigurableResource, EnvVar

from delivery_pipeline.generation.generator import Generator, GeneratorSettings
from delivery_pipeline.generation.worker import GenerationPolicy, SweepPoke
from delivery_pipeline.settings import (
    DEFAULT_DATA_DIR,
    SANDBOX_ACCESS_TOKEN,
    SANDBOX_PHONE_NUMBER_ID,
    Settings,
)
from delivery_pipeline.store.db import connect, resolve_database_url
from delivery_pipeline.watch.ops_channel import OpsChannelError, OpsNotifier

log = logging.getLogger(__name__)

_DEFAULTS = Settings()
_GENERATOR_DEFAULTS = GeneratorSettings()


def env_or(name: str, default: Any) -> Any:
    """``EnvVar(name)`` when the variable is set, else ``default``.

    Optional settings stay optional (an unset ``EnvVar`` is an error), and a
    set secret is still shown in the UI as coming from the environment, never
    as its value.
    """
    return EnvVar(name) if os.environ.get(name) else default


class AppDatabase(ConfigurableResource):
    """The app database: ``DATABASE_URL``, else the project's embedded Postgres."""

    database_url: str | None = None
    data_dir: str = str(DEFAULT_DATA_DIR)

    def url(self) -> str:
        return resolve_database_url(
            Settings(database_url=self.database_url, data_dir=Path(self.data_dir))
        )

    @contextmanager
    def connect(self) -> Iterator[psycopg.Connection]:
        with connect(self.url()) as conn:
            yield conn


class CloudApiResource(ConfigurableResource):
    """The WhatsApp Cloud API, for delivery only. Defaults to the local sandbox."""

    base_url: str = _DEFAULTS.api_base_url
    api_version: str = _DEFAULTS.api_version
    phone_number_id: str = SANDBOX_PHONE_NUMBER_ID
    access_token: str = SANDBOX_ACCESS_TOKEN

    def settings(self) -> Settings:
        """The one settings object, with this resource's endpoint and credentials."""
        return Settings.from_env().with_(
            api_base_url=self.base_url.rstrip("/"),
            api_version=self.api_version,
            phone_number_id=self.phone_number_id,
            access_token=self.access_token,
        )


class GeneratorResource(ConfigurableResource):
    """The document generator: ``GENERATOR_BACKEND`` (offline|openai) and ``OPENAI_*``.

    Holds no messaging credentials, by construction: it has no field for one.
    """

    backend: str = _GENERATOR_DEFAULTS.backend
    openai_base_url: str = _GENERATOR_DEFAULTS.openai_base_url
    openai_model: str = _GENERATOR_DEFAULTS.openai_model
    openai_api_key: str | None = None
    timeout_seconds: float = _GENERATOR_DEFAULTS.timeout_seconds
    max_retries: int = _GENERATOR_DEFAULTS.max_retries

    def generator_settings(self) -> GeneratorSettings:
        return GeneratorSettings(
            backend=self.backend.strip().lower(),
            openai_base_url=self.openai_base_url,
            openai_model=self.openai_model,
            openai_api_key=self.openai_api_key,
            timeout_seconds=self.timeout_seconds,
            max_retries=self.max_retries,
        )

    def build(self) -> Generator:
        return self.generator_settings().build()

    def policy(self) -> GenerationPolicy:
        return GenerationPolicy.from_env()


class DeliveryServiceResource(ConfigurableResource):
    """The webhook service's ``/internal/sweep`` (trigger 1), for generation's poke."""

    service_url: str = _DEFAULTS.service_url
    internal_token: str | None = None
    timeout_seconds: float = 2.0

    def poke(self) -> SweepPoke:
        return SweepPoke(self.service_url, self.internal_token, self.timeout_seconds)


class OpsChannelResource(ConfigurableResource):
    """A Slack-compatible incoming webhook (``OPS_WEBHOOK_URL``); unset: log only."""

    webhook_url: str | None = None
    timeout_seconds: float = 5.0
    max_retries: int = 2

    def notifier(self) -> OpsNotifier:
        """The one notifier (``ops_channel.OpsNotifier``) with this resource's settings."""
        return OpsNotifier(
            url=self.webhook_url, timeout_seconds=self.timeout_seconds, max_retries=self.max_retries
        )

    def post(self, text: str) -> bool:
        """Post one message; True when the channel took it. Never raises."""
        if not self.webhook_url:
            log.warning("ops alert (no OPS_WEBHOOK_URL): %s", text)
            return False
        try:
            self.notifier().post(text)
        except OpsChannelError as exc:
            log.warning("ops channel did not take the alert (%s): %s", exc, text)
            return False
        return True


def default_resources() -> dict[str, ConfigurableResource]:
    """The resources of the code location, from the environment."""
    return {
        "app_db": AppDatabase(
            database_url=env_or("DATABASE_URL", None),
            data_dir=env_or("DELIVERY_DATA_DIR", str(DEFAULT_DATA_DIR)),
        ),
        "cloud_api": CloudApiResource(
            base_url=env_or("WHATSAPP_API_BASE_URL", _DEFAULTS.api_base_url),
            api_version=env_or("WHATSAPP_API_VERSION", _DEFAULTS.api_version),
            phone_number_id=env_or("WHATSAPP_PHONE_NUMBER_ID", SANDBOX_PHONE_NUMBER_ID),
            access_token=env_or("WHATSAPP_ACCESS_TOKEN", SANDBOX_ACCESS_TOKEN),
        ),
        "generator": GeneratorResource(
            backend=env_or("GENERATOR_BACKEND", _GENERATOR_DEFAULTS.backend),
            openai_base_url=env_or("OPENAI_BASE_URL", _GENERATOR_DEFAULTS.openai_base_url),
            openai_model=env_or("OPENAI_MODEL", _GENERATOR_DEFAULTS.openai_model),
            openai_api_key=env_or("OPENAI_API_KEY", None),
        ),
        "delivery_service": DeliveryServiceResource(
            service_url=env_or("DELIVERY_SERVICE_URL", _DEFAULTS.service_url),
            internal_token=env_or("DELIVERY_INTERNAL_TOKEN", None),
        ),
        "ops_channel": OpsChannelResource(webhook_url=env_or("OPS_WEBHOOK_URL", None)),
    }
