"""Resources: what ops, checks and sensors are handed, from the environment of the process
that runs them.

Endpoints, secrets and thresholds are not run configuration. Each resource is a
plain object built by ``build_resources`` from ``Settings.from_env()`` when the
code location loads: in the code server (sensors), and again in every run
worker and step process, from that process's own environment. Dagster gets
each as a resource whose config schema is empty: the launchpad has no field for
a URL, a token or a threshold, so it can neither show nor override one, and
Dagster's ``{"env": NAME}`` has no field to be resolved into (a resource config
given at launch is refused). What a run may be told is its ops' own config
(``run_config.py``: plain values only).

No value is run configuration, thresholds included: a lease, a window margin,
quiet hours or a throughput limit changed for one run would break a rule every
other sender keeps, and a check's threshold changed for one evaluation would
pass what the fleet calls failing. A deployment changes them in its
environment, for every process at once.

The UI's resources page shows each resource's description: what it is and the
values in force where the code location loaded (``Section.effective``: a
secret or a URL with a password shows as ``(set)``, never its value). Each
resource holds only the fields its users read: the Cloud API resource has no
webhook app secret or verify token, the reviewers' no review or operator token;
a generation run gets ``generator``, ``app_db`` and ``delivery_service``,
never ``cloud_api``.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import dagster as dg
import psycopg
from psycopg.rows import DictRow

from delivery_pipeline.dagster_defs.run_config import NO_CONFIG
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
from delivery_pipeline.settings.urls import secret
from delivery_pipeline.store.db import (
    connect,
    resolve_database_url,
    with_application_name,
    with_timeouts,
)
from delivery_pipeline.watch.ops_channel import OpsNotifier


@dataclass(frozen=True)
class AppDatabase:
    """The app database: ``DATABASE_URL``, else the project's embedded Postgres."""

    settings: DatabaseSettings = field(default_factory=DatabaseSettings)

    def url(self) -> str:
        return resolve_database_url(self.settings)

    @contextmanager
    def connect(self, application_name: str | None = None) -> Iterator[psycopg.Connection[DictRow]]:
        """A connection that gives up (``DATABASE_CONNECT_TIMEOUT_SECONDS``,
        ``DATABASE_STATEMENT_TIMEOUT_SECONDS``): a database that hangs fails the sensor
        tick, check or op, never stalls it. ``application_name`` names the writer in the
        delivery-events outbox."""
        url = with_timeouts(
            self.url(),
            connect_seconds=self.settings.connect_timeout_seconds,
            statement_seconds=self.settings.statement_timeout_seconds,
            pooled=self.settings.transaction_pooled,
        )
        with connect(
            with_application_name(url, application_name) if application_name else url,
            pooled=self.settings.transaction_pooled,
        ) as conn:
            yield conn


@dataclass(frozen=True)
class CloudApiResource:
    """The WhatsApp Cloud API, for delivery only (the local sandbox by default)."""

    settings: WhatsAppSettings = field(default_factory=WhatsAppSettings)


@dataclass(frozen=True)
class DeliveryResource:
    """How the engine delivers: lease, window margin, retries, pacing, knock templates."""

    settings: DeliverySettings = field(default_factory=DeliverySettings)


@dataclass(frozen=True)
class GeneratorResource:
    """The document generator and generation's claim, retries and batch."""

    settings: GenerationSettings = field(default_factory=GenerationSettings)

    def build(self) -> Generator:
        return build_generator(self.settings)


@dataclass(frozen=True)
class DeliveryServiceResource:
    """The webhook service's ``/internal/sweep`` (trigger 1), for generation's poke."""

    settings: ServiceSettings = field(default_factory=ServiceSettings)

    def poke(self) -> SweepPoke:
        return SweepPoke.from_settings(self.settings)


@dataclass(frozen=True)
class OpsChannelResource:
    """A Slack-compatible incoming webhook (``OPS_WEBHOOK_URL``); unset: log only."""

    settings: OpsSettings = field(default_factory=OpsSettings)

    def notifier(self) -> OpsNotifier:
        return OpsNotifier(url=secret(self.settings.webhook_url), docs_url=self.settings.docs_url)


@dataclass(frozen=True)
class ReviewResource:
    """The reviewers: their channel (``REVIEW_WEBHOOK_URL``, else the ops channel), how
    long a document may await review, and the review job's decisions."""

    settings: ReviewSettings = field(default_factory=ReviewSettings)

    def notifier(self) -> OpsNotifier:
        return OpsNotifier.for_reviewers(secret(self.settings.webhook_url))


@dataclass(frozen=True)
class ChecksResource:
    """The ops checks' thresholds (``CHECK_*``, ``WHATSAPP_MESSAGING_TIER``)."""

    settings: CheckSettings = field(default_factory=CheckSettings)


@dataclass(frozen=True)
class RetentionResource:
    """How long history is kept (``RETENTION_*_DAYS``): the prune_history job's."""

    settings: RetentionSettings = field(default_factory=RetentionSettings)


# What no Dagster process reads stays out of its resources, and off the resources page:
# the webhook's app secret and verify token, the Dagster webserver's URL (the webhook
# service's), the review page's tokens.
WITHHELD: dict[str, frozenset[str]] = {
    "whatsapp": frozenset({"app_secret", "verify_token"}),
    "service": frozenset({"dagster_webserver_url"}),
    "review": frozenset({"token", "tokens", "operator_tokens"}),
}

S = TypeVar("S", bound=Section)


def _withheld(name: str, section: S) -> S:
    return section.model_copy(update=dict.fromkeys(WITHHELD.get(name, ()), None))


def _described(resource: object, name: str, section: Section) -> dg.ResourceDefinition:
    """``resource`` as Dagster gets it: no config, and a description that says what it is
    and which values are in force (secrets as "(set)")."""
    names = section.env_names()
    lines = [" ".join((type(resource).__doc__ or "").split()), ""]
    lines.append("In force where the code location loaded (a run reads its own environment):")
    for field_name, value in section.effective().items():
        if field_name not in WITHHELD.get(name, ()):
            lines.append(f"- `{names[field_name]}`: {'unset' if value is None else value}")
    return dg.ResourceDefinition(
        resource_fn=lambda _: resource, config_schema=NO_CONFIG, description="\n".join(lines)
    )


def build_resources(settings: Settings) -> dict[str, dg.ResourceDefinition]:
    """The resources of the code location, from ``settings`` (the process's own)."""
    database, delivery, generation = settings.database, settings.delivery, settings.generation
    whatsapp = _withheld("whatsapp", settings.whatsapp)
    service = _withheld("service", settings.service)
    review = _withheld("review", settings.review)
    resources: dict[str, tuple[object, str, Section]] = {
        "app_db": (AppDatabase(database), "database", database),
        "cloud_api": (CloudApiResource(whatsapp), "whatsapp", whatsapp),
        "delivery": (DeliveryResource(delivery), "delivery", delivery),
        "generator": (GeneratorResource(generation), "generation", generation),
        "delivery_service": (DeliveryServiceResource(service), "service", service),
        "ops_channel": (OpsChannelResource(settings.ops), "ops", settings.ops),
        "checks": (ChecksResource(settings.checks), "checks", settings.checks),
        "review": (ReviewResource(review), "review", review),
        "retention": (RetentionResource(settings.retention), "retention", settings.retention),
    }
    return {key: _described(*described) for key, described in resources.items()}


def engine_settings(
    app_db: AppDatabase, cloud_api: CloudApiResource, delivery: DeliveryResource
) -> Settings:
    """What a delivery sweep needs, from the resources the op was given."""
    return Settings(
        database=app_db.settings, whatsapp=cloud_api.settings, delivery=delivery.settings
    )


def check_settings(
    checks: ChecksResource,
    delivery: DeliveryResource,
    review: ReviewResource,
    delivery_service: DeliveryServiceResource,
) -> Settings:
    """What the ops checks read: thresholds, the eligibility parameters, the review page."""
    return Settings(
        checks=checks.settings,
        delivery=delivery.settings,
        review=review.settings,
        service=delivery_service.settings,
    )
