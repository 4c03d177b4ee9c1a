"""Resources: the settings sections, as Dagster shows and hands them to ops.

Each resource *is* a section of ``delivery_pipeline.settings`` (it inherits
the section's fields, defaults and validation), built from the effective
settings when the code location loads, so the UI's resource page shows the
values in force. A secret set in the environment (``Section.hidden_fields``:
the secrets, the database URL, any URL with a password in it) is passed as
``EnvVar``: the UI, the launchpad's default run config and every run's config
show the variable's name, never its value; a run reads the value itself.

Each op asks only for the resources it needs: generation gets ``generator``,
``app_db`` and ``delivery_service`` (the internal poke), never ``cloud_api``;
the generator section has no field that could hold a WhatsApp credential.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import dagster as dg
import psycopg
from psycopg.rows import DictRow
from pydantic import SecretStr, field_validator

from delivery_pipeline.generation.backends import build_generator
from delivery_pipeline.generation.generator import Generator
from delivery_pipeline.generation.worker import SweepPoke
from delivery_pipeline.settings import (
    CheckSettings,
    DatabaseSettings,
    DeliverySettings,
    GenerationSettings,
    OpsSettings,
    RetentionSettings,
    ReviewSettings,
    Section,
    ServiceSettings,
    Settings,
    WhatsAppSettings,
)
from delivery_pipeline.store.db import (
    connect,
    resolve_database_url,
    with_application_name,
    with_timeouts,
)
from delivery_pipeline.watch.ops_channel import OpsNotifier

# ConfigurableResource is generic in what ``create_resource`` returns, which for
# these resources is the resource itself: a parameter its typing cannot express
# (dagster-io/dagster#32027), and subscripting it at runtime would build a new
# pydantic class. Spelled out for the type checker only; bare at runtime.
if TYPE_CHECKING:
    ConfigurableResource: TypeAlias = dg.ConfigurableResource[Any]
else:
    ConfigurableResource = dg.ConfigurableResource

S = TypeVar("S", bound=Section)


def _section(resource: ConfigurableResource, section: type[S]) -> S:
    """The resource's values as the plain section (secrets become ``SecretStr`` again)."""
    return section.model_validate(resource.model_dump(include=set(section.model_fields)))


class AppDatabase(ConfigurableResource, DatabaseSettings):
    """The app database: ``DATABASE_URL``, else the project's embedded Postgres."""

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        # Here the variable's name (EnvVar) until a run resolves it; ``url`` checks the
        # value through the section.
        return value

    def url(self) -> str:
        return resolve_database_url(_section(self, DatabaseSettings))

    @contextmanager
    def connect(self, application_name: str | None = None) -> Iterator[psycopg.Connection[DictRow]]:
        """A connection that gives up (``DATABASE_CONNECT_TIMEOUT_SECONDS``,
        ``DATABASE_STATEMENT_TIMEOUT_SECONDS``): a database that hangs fails the sensor
        tick, check or op, never stalls it. ``application_name`` names the writer in the
        delivery-events outbox."""
        url = with_timeouts(
            self.url(),
            connect_seconds=self.connect_timeout_seconds,
            statement_seconds=self.statement_timeout_seconds,
        )
        with connect(
            with_application_name(url, application_name) if application_name else url
        ) as conn:
            yield conn


class CloudApiResource(ConfigurableResource, WhatsAppSettings):
    """The WhatsApp Cloud API, for delivery only (the local sandbox by default)."""

    access_token: str  # type: ignore[assignment]
    app_secret: str | None = None  # type: ignore[assignment]
    verify_token: str | None = None  # type: ignore[assignment]

    def section(self) -> WhatsAppSettings:
        return _section(self, WhatsAppSettings)


class DeliveryResource(ConfigurableResource, DeliverySettings):
    """How the engine delivers: lease, window margin, retries, pacing, knock templates."""

    unknown_policy: str = "resend"  # type: ignore[assignment]

    def section(self) -> DeliverySettings:
        return _section(self, DeliverySettings)


class GeneratorResource(ConfigurableResource, GenerationSettings):
    """The document generator and generation's claim, retries and batch."""

    backend: str = "offline"  # type: ignore[assignment]
    openai_api_key: str | None = None  # type: ignore[assignment]

    def section(self) -> GenerationSettings:
        return _section(self, GenerationSettings)

    def build(self) -> Generator:
        return build_generator(self.section())


class DeliveryServiceResource(ConfigurableResource, ServiceSettings):
    """The webhook service's ``/internal/sweep`` (trigger 1), for generation's poke."""

    internal_token: str | None = None  # type: ignore[assignment]

    def section(self) -> ServiceSettings:
        return _section(self, ServiceSettings)

    def poke(self) -> SweepPoke:
        return SweepPoke.from_settings(self.section())


class OpsChannelResource(ConfigurableResource, OpsSettings):
    """A Slack-compatible incoming webhook (``OPS_WEBHOOK_URL``); unset: log only."""

    webhook_url: str | None = None  # type: ignore[assignment]

    def notifier(self) -> OpsNotifier:
        return OpsNotifier(url=self.webhook_url, docs_url=self.docs_url)


class ReviewResource(ConfigurableResource, ReviewSettings):
    """The reviewers: their channel (``REVIEW_WEBHOOK_URL``, else the ops channel), how
    long a document may await review, and the review job's decisions."""

    token: str | None = None  # type: ignore[assignment]
    webhook_url: str | None = None  # type: ignore[assignment]
    cookie_secure: str = "auto"  # type: ignore[assignment]

    def section(self) -> ReviewSettings:
        return _section(self, ReviewSettings)

    def notifier(self) -> OpsNotifier:
        return OpsNotifier.for_reviewers(self.webhook_url)


class ChecksResource(ConfigurableResource, CheckSettings):
    """The ops checks' thresholds (``CHECK_*``, ``WHATSAPP_MESSAGING_TIER``)."""

    def section(self) -> CheckSettings:
        return _section(self, CheckSettings)


class RetentionResource(ConfigurableResource, RetentionSettings):
    """How long history is kept (``RETENTION_*_DAYS``): the prune_history job's."""

    def section(self) -> RetentionSettings:
        return _section(self, RetentionSettings)


R = TypeVar("R", bound=ConfigurableResource)


def _from_section(resource: type[R], section: Section) -> R:
    """``resource`` with the section's effective values; a secret that came from the
    environment as ``EnvVar`` (the UI shows the variable, never the value)."""
    env_names = section.env_names()
    hidden = section.hidden_fields()
    values: dict[str, Any] = {}
    for name, value in section.model_dump().items():
        if name in hidden and name in section.from_environment:
            values[name] = dg.EnvVar(env_names[name])
        elif isinstance(value, SecretStr):
            values[name] = value.get_secret_value()
        else:
            values[name] = value
    return resource(**values)


def build_resources(settings: Settings) -> dict[str, ConfigurableResource]:
    """The resources of the code location, from the effective settings."""
    return {
        "app_db": _from_section(AppDatabase, settings.database),
        "cloud_api": _from_section(CloudApiResource, settings.whatsapp),
        "delivery": _from_section(DeliveryResource, settings.delivery),
        "generator": _from_section(GeneratorResource, settings.generation),
        "delivery_service": _from_section(DeliveryServiceResource, settings.service),
        "ops_channel": _from_section(OpsChannelResource, settings.ops),
        "checks": _from_section(ChecksResource, settings.checks),
        "review": _from_section(ReviewResource, settings.review),
        "retention": _from_section(RetentionResource, settings.retention),
    }


def engine_settings(
    app_db: AppDatabase, cloud_api: CloudApiResource, delivery: DeliveryResource
) -> Settings:
    """What a delivery sweep needs, from the resources the op was given."""
    return Settings(
        database=_section(app_db, DatabaseSettings),
        whatsapp=cloud_api.section(),
        delivery=delivery.section(),
    )


def check_settings(
    checks: ChecksResource,
    delivery: DeliveryResource,
    review: ReviewResource,
    delivery_service: DeliveryServiceResource,
) -> Settings:
    """What the ops checks read: thresholds, the eligibility parameters, the review page."""
    return Settings(
        checks=checks.section(),
        delivery=delivery.section(),
        review=review.section(),
        service=delivery_service.section(),
    )
