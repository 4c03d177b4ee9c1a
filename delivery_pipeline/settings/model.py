"""The one settings model: every knob, read from the environment in one place.

``Settings.from_env()`` is the only reader of the process environment for
application settings; nothing reads it at import time. Each section is a
plain pydantic model whose fields name their environment variable (the
section's prefix plus the field name, or an explicit ``env``) and says what it
means (its ``description``), so the settings reference (generated from this
file), the run launcher (``dagster_defs/launcher.py``) and the Dagster resources
all follow it. Secrets are ``SecretStr`` (the database URL: text kept out of
``repr``, because every connection needs it as text): their values never
appear in a ``repr``, a log line or an error message, nor on Dagster's
resources page (``dagster_defs/resources.py``: each process reads its own
environment; no value is run configuration). Neither does any URL setting
that carries a password in its userinfo (``https://user:key@…``).
Surrounding whitespace is never part of a value: a secret copied from a file
keeps no trailing newline.

Bad values fail with one format, naming the variable: ``SettingsError``.

Annotations are evaluated, not postponed: pydantic would compile each field's
string again when it builds the models, at every process's start-up
(docs/benchmarks.md, "Start-up").
"""

import datetime as dt
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from delivery_pipeline.settings.eligibility import Eligibility, Guard
from delivery_pipeline.settings.numbers import BusinessNumber, bind_number, parse_numbers
from delivery_pipeline.settings.parsing import (
    DOCUMENT_PARAMETERS,
    PLATFORM_TTL_SECONDS,
    QUIET_HOURS,
    REVIEW_TOKEN_MIN_LENGTH,
    REVIEWABLE_KINDS,
    parse_api_tokens,
    parse_api_webhooks,
    parse_document_parameters,
    parse_file_kinds,
    parse_person_tokens,
    parse_review_kinds,
    parse_template_choices,
    parse_template_ttls,
    parse_templates,
    parse_trusted_proxies,
    parse_webhook_secrets,
)
from delivery_pipeline.settings.section import Section, SettingsError, describe, env, formerly
from delivery_pipeline.settings.urls import plain_http_elsewhere, secret

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_DATA_DIR = PROJECT_ROOT / ".data"

SANDBOX_DEFAULT_PORT = 8765
SERVICE_DEFAULT_PORT = 8766
DOCS_DEFAULT_PORT = 8000  # ./dev docs serves the site here

# The identity a sender and the sandbox share when no credentials are
# configured: local development and tests. A real number sets both variables.
DEV_PHONE_NUMBER_ID = "100000000000001"
DEV_ACCESS_TOKEN = "sandbox-access-token"
# What the sandbox signs its webhooks with unless SANDBOX_APP_SECRET says otherwise:
# never WHATSAPP_APP_SECRET, so a sandbox cannot sign what a real service accepts.
DEV_APP_SECRET = "sandbox-development-app-secret"

DEFAULT_KNOCK_TEMPLATES = "en=document_ready:en,es=document_ready:es,pt=document_ready:pt_BR"

# DELIVERY_INTERNAL_TOKEN and WHATSAPP_VERIFY_TOKEN at least: shorter is guessable, and
# too short to be told apart from ordinary text when logs are scrubbed of secrets.
SHARED_TOKEN_MIN_LENGTH = 16

# DELIVERY_SWEEPERS at most (each sweeper is a process with its own connections).
MAX_SWEEPERS = 64
REVIEW_PAGE_PATH = "/review"


# ── the sections ────────────────────────────────────────────────────────


class DatabaseSettings(Section):
    # A password in it is routine (postgresql://user:password@host/db, or password=…).
    text_secrets: ClassVar[frozenset[str]] = frozenset(
        {"database_url", "migration_database_url", "listen_url"}
    )

    database_url: str | None = Field(
        None,
        repr=False,
        json_schema_extra=env("DATABASE_URL"),
        description=(
            "the app database (any Postgres ≥ 14; a password in it is never shown); unset: an "
            "embedded Postgres under DELIVERY_DATA_DIR"
        ),
    )
    migration_database_url: str | None = Field(
        None,
        repr=False,
        json_schema_extra=env("DELIVERY_MIGRATION_DATABASE_URL"),
        description=(
            "the app database as the role that owns the schema, for `delivery-pipeline db "
            "upgrade` alone (everything else connects with DATABASE_URL, a role that may read "
            "and write rows but not change tables: docs/how-to/deploy.md); unset: DATABASE_URL"
        ),
    )
    data_dir: str = Field(
        str(DEFAULT_DATA_DIR),
        json_schema_extra=env("DELIVERY_DATA_DIR"),
        description="where the embedded Postgres lives",
    )
    connect_timeout_seconds: int = Field(
        10,
        ge=2,
        json_schema_extra=env("DATABASE_CONNECT_TIMEOUT_SECONDS"),
        description="Dagster's sensors, checks and ops give up reaching the app database "
        "after this long (libpq's connect_timeout; 2 at least)",
    )
    statement_timeout_seconds: float = Field(
        30.0,
        gt=0,
        json_schema_extra=env("DATABASE_STATEMENT_TIMEOUT_SECONDS"),
        description="a statement of Dagster's sensors, checks and ops (a lock wait included) "
        "is cancelled after this long: a sensor skips, a run fails; keep it under Dagster's "
        "60 s sensor deadline",
    )
    pool_mode: Literal["session", "transaction"] = Field(
        "session",
        json_schema_extra=env("DATABASE_POOL_MODE"),
        description=(
            "what DATABASE_URL reaches: session (Postgres itself, or a pooler in session mode) or "
            "transaction (a pooler such as PgBouncer in transaction mode: no session state, no "
            "server-side prepared statements, no startup options, no LISTEN on it)"
        ),
    )
    listen_url: str | None = Field(
        None,
        repr=False,
        json_schema_extra=env("DATABASE_LISTEN_URL"),
        description=(
            "where the webhook service LISTENs for notifications (a session: Postgres itself or "
            "a session-mode pool; a password in it is never shown); unset: DATABASE_URL, or no "
            "listening when DATABASE_POOL_MODE is transaction (the service then looks at its "
            "intervals)"
        ),
    )
    embedded_os_user: str = Field(
        "embedded_postgres",
        pattern=r"^[a-z_][a-z0-9_-]{0,31}$",
        json_schema_extra=env("DELIVERY_EMBEDDED_OS_USER"),
        description=(
            "the system user the embedded Postgres runs as when started by root (created on first "
            "use)"
        ),
    )

    @field_validator("database_url", "migration_database_url", "listen_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        """Refused here, in one line, rather than as a driver error on first use."""
        import psycopg  # only when a URL is set: the sandbox needs no driver

        if value is not None:
            try:
                psycopg.conninfo.conninfo_to_dict(value)
            except psycopg.ProgrammingError:
                # psycopg's text quotes the value, password and all: not shown.
                raise ValueError(
                    "not a PostgreSQL URL (like postgresql://user@host:5432/delivery)"
                ) from None
        return value

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir)

    @property
    def transaction_pooled(self) -> bool:
        """Does DATABASE_URL reach a pooler that hands each transaction any server session?"""
        return self.pool_mode == "transaction"


class WhatsAppSettings(Section):
    env_prefix: ClassVar[str] = "WHATSAPP_"

    api_base_url: str = Field(
        f"http://127.0.0.1:{SANDBOX_DEFAULT_PORT}",
        description=(
            "the Cloud API's base URL (https://graph.facebook.com in production); the default is "
            "the sandbox"
        ),
    )
    api_version: str = Field("v25.0", description="Graph API version")
    phone_number_id: str = Field(
        DEV_PHONE_NUMBER_ID,
        description=(
            "the default business phone number's id (the sandbox takes it too); the default is the "
            "development identity"
        ),
    )
    access_token: SecretStr = Field(
        SecretStr(DEV_ACCESS_TOKEN),
        description=(
            "the Cloud API access token (the sandbox takes it too); the default is the development "
            "identity"
        ),
    )
    send_timeout: float = Field(
        10.0,
        gt=0,
        description=(
            "seconds per send: the answer's longest silence, and the whole send at most this plus "
            "the connect (≤ 5 s); a timeout after the request left is an unknown outcome"
        ),
    )
    throughput_limit: float = Field(
        80.0,
        gt=0,
        description=(
            "messages per second of the default number, shared by every sender (service replicas, "
            "Dagster runs, CLI sweeps) through Postgres: set it to the number's limit, never "
            "divide it"
        ),
    )
    app_secret: SecretStr | None = Field(
        None,
        description=(
            "the key the webhook service checks webhook signatures with (the sandbox signs with "
            "SANDBOX_APP_SECRET)"
        ),
    )
    verify_token: SecretStr | None = Field(
        None, description="the token of Meta's verification handshake"
    )
    numbers: str = Field(
        "",
        description=(
            'the business numbers besides WHATSAPP_PHONE_NUMBER_ID, a JSON list of {"id", "limit" '
            '(messages/s, default 80), "countries" (calling codes whose new people it serves), '
            '"knock_templates" (DELIVERY_KNOCK_TEMPLATES\' format)}; unset: one number'
        ),
    )

    @field_validator("api_base_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @field_validator("verify_token")
    @classmethod
    def _long_verify_token(cls, value: SecretStr | None) -> SecretStr | None:
        return long_enough(value)

    @model_validator(mode="after")
    def _no_real_token_in_clear(self) -> Self:
        if not self.uses_dev_identity and plain_http_elsewhere(self.api_base_url):
            raise ValueError(
                "WHATSAPP_API_BASE_URL is plain http:// to another machine, and "
                "WHATSAPP_ACCESS_TOKEN would travel in clear text: use https:// "
                "(https://graph.facebook.com), or http:// only to a sandbox on this machine"
            )
        return self

    @field_validator("numbers")
    @classmethod
    def _numbers(cls, value: str, info: ValidationInfo) -> str:
        parse_numbers(value, str(info.data.get("phone_number_id", DEV_PHONE_NUMBER_ID)))
        return value

    @property
    def business_numbers(self) -> tuple[BusinessNumber, ...]:
        """Every number we send from, the default (``WHATSAPP_PHONE_NUMBER_ID``) first."""
        default = BusinessNumber(id=self.phone_number_id, limit=self.throughput_limit)
        return (default, *parse_numbers(self.numbers, self.phone_number_id))

    def business_number(self, phone_number_id: str | None) -> BusinessNumber | None:
        """The configured number of this id (None: the default); None when not configured."""
        wanted = phone_number_id or self.phone_number_id
        return next((n for n in self.business_numbers if n.id == wanted), None)

    def number_for(self, phone: str | None) -> str:
        """The number a person is bound to when added without one: the number whose
        calling-code prefix is the longest match of their phone, else the default."""
        return bind_number(self.business_numbers, phone)

    @property
    def uses_dev_identity(self) -> bool:
        return self.access_token.get_secret_value() == DEV_ACCESS_TOKEN


class DeliverySettings(Section):
    env_prefix: ClassVar[str] = "DELIVERY_"

    lease_seconds: int = Field(
        600,
        ge=1,
        description="a delivery claim's lease: a crashed sender's claim is taken over after it",
    )
    window_margin_seconds: int = Field(
        900,
        ge=0,
        lt=24 * 3600,
        description=(
            "safety margin before the 24 h window ends: free-form text only until 24 h minus this"
        ),
    )
    max_attempts: int = Field(
        5,
        ge=1,
        description=(
            "send attempts failed by the message's own error (refused at once or failed later) "
            "before the document is abandoned max_attempts"
        ),
    )
    backoff_base_seconds: float = Field(
        30.0, ge=0, description="the first retry delay (doubling, ±25 % jitter)"
    )
    backoff_max_seconds: float = Field(3600.0, ge=0, description="the retry delay's cap")
    rate_limit: float | None = Field(
        None,
        gt=0,
        description=(
            "an optional cap, messages per second, for one process (the number's limit is "
            "WHATSAPP_THROUGHPUT_LIMIT)"
        ),
    )
    concurrency: int = Field(16, ge=1, description="documents in flight per sweep")
    sweepers: int = Field(
        2, ge=1, le=MAX_SWEEPERS, description="parallel sweeper ops per deliver_documents run"
    )
    executor: Literal["multiprocess", "docker", "k8s"] = Field(
        "multiprocess",
        description="where a deliver_documents run's sweepers run: processes of the run, "
        "Docker containers (dagster-docker) or Kubernetes pods (dagster-k8s)",
    )
    chunk_limit: int = Field(
        4096,
        ge=16,
        le=4096,
        description=(
            "UTF-16 code units per message (16–4096): the strictest reading of the platform's "
            "characters, so an emoji counts two; chunks are cut only between grapheme clusters"
        ),
    )
    chunk_interval_seconds: float = Field(
        0.0, ge=0, description="pause between the parts of one document"
    )
    unknown_policy: Literal["resend", "abandon"] = Field(
        "resend",
        description=(
            "a send whose outcome never settled: resend (at least once: a possible duplicate part) "
            "or abandon (at most once: abandoned unknown_outcome)"
        ),
    )
    unknown_grace_seconds: int = Field(
        300,
        ge=0,
        description=(
            "how long an unknown send outcome waits for a status webhook before the policy decides"
        ),
    )
    knock_templates: str = Field(
        DEFAULT_KNOCK_TEMPLATES,
        description=(
            "each locale's approved knock templates, locale=name:language, comma-separated, "
            "fallbacks in order after '|' (en=document_ready:en|document_waiting:en); en is "
            "required (the fallback locale)"
        ),
    )
    template_ttls: str = Field(
        "",
        description=(
            "the time to live each template was created with (its message_send_ttl_seconds), "
            "name=seconds or name:language=seconds, comma-separated; a template not named has "
            "the platform's default, 30 days. A template message not delivered within it was "
            "dropped by the platform: a brief it carried ends expired"
        ),
    )
    template_ttl_grace_seconds: float = Field(
        600,
        gt=0,
        description=(
            "how long past a template message's time to live a late delivered status is still "
            "awaited before the message is taken as dropped"
        ),
    )
    document_templates: str = Field(
        "",
        description=(
            "each locale's approved document templates (a utility template with a DOCUMENT "
            "header), in DELIVERY_KNOCK_TEMPLATES' format: outside the window a document goes "
            "as one PDF on the first healthy one, no reply needed; none healthy, the knock; "
            "unset: always the knock"
        ),
    )
    brief_document_templates: str = Field(
        "",
        description=(
            "a daily brief's own document templates, in the same format (one created with a "
            "time to live that ends with the day); unset: DELIVERY_DOCUMENT_TEMPLATES"
        ),
    )
    document_template_parameters: str = Field(
        "brief_attached=name|date",
        description=(
            "each document template's named body parameters, name=param|param, comma-separated, "
            "from name (the person's), kind (plan, brief…, in their language) and date (the "
            "document's day); a template not listed takes name|kind|date"
        ),
    )
    file_outside_window: str = Field(
        "plan,daily_brief",
        description=(
            "kinds that go as a file on a document template outside the window, comma-separated, "
            "or none (only the people whose own choice is a file); the others knock (only with "
            "DELIVERY_DOCUMENT_TEMPLATES set)"
        ),
    )
    file_in_window: str = Field(
        "",
        description=(
            "kinds that go as one document message (the PDF with a short caption) inside the "
            "window, comma-separated, or none; the others go as text parts; unset: every kind as "
            "parts"
        ),
    )
    template_recheck_seconds: float = Field(
        900,
        gt=0,
        description=(
            "a template one of our sends found refused (a template-scoped error) is avoided "
            "this long, fleet-wide, then tried again, unless a lifecycle webhook approves it "
            "sooner; a send that named it, a held knock and a document bound to a number not "
            "configured here look again at least this often"
        ),
    )
    knock_param_max: int = Field(
        60, ge=1, description="the cap of the knock's name parameter (characters)"
    )
    knock_button_templates: str = Field(
        "documents_ready",
        description=(
            "knock templates approved with the count parameter {{2}} and the quick replies Send it "
            "/ Later / Stop, comma-separated names; any other knock template is sent with the name "
            "alone"
        ),
    )
    no_reply_seconds: float = Field(
        24 * 3600,
        gt=0,
        description=(
            "a document still unanswered this long after its knock's one reminder is abandoned "
            "no_reply"
        ),
    )
    later_seconds: float | None = Field(
        None,
        gt=0,
        description=(
            "a Later press snoozes the person's waiting documents this long; unset: until their "
            "next morning (the end of their quiet hours, or 08:00 where they live)"
        ),
    )
    heartbeat_seconds: int = Field(30, ge=1, description="the delivery_heartbeat sensor's interval")
    pause_probe_seconds: float = Field(
        10.0,
        gt=0,
        description=(
            "the first probe after a sender-wide pause; the interval doubles with each refused "
            "probe"
        ),
    )
    pause_probe_max_seconds: float = Field(
        300.0,
        gt=0,
        description=(
            "the probe interval's cap: the longest wait after a fix nobody announced with `resume`"
        ),
    )
    review_kinds: str = Field(
        "",
        description=(
            "kinds a reviewer approves before delivery, comma-separated (plan, daily_brief); "
            "unset: none"
        ),
    )
    resends_per_day: int = Field(
        3,
        ge=1,
        description=(
            "resends of one document within 24 hours, whoever asks (the review page, the CLI, "
            "the API, the operate_document job); the next is refused until the oldest of them "
            "is 24 hours old"
        ),
    )

    quiet_hours: str = Field(
        "21:00-08:00",
        description=(
            "local quiet hours, in each person's own time zone, in which nothing they did not just "
            "ask for is sent (no knock either); off for none; a person's own (people add "
            "--quiet-hours) wins"
        ),
    )
    rate_table: str = Field(
        "",
        description=(
            "a CSV file of prices per billable message (category,country,price) for the delivery "
            "report's costs; unset: counts only, without money"
        ),
    )

    @field_validator("review_kinds")
    @classmethod
    def _review_kinds(cls, value: str) -> str:
        parse_review_kinds(value)
        return value

    @property
    def review_kind_set(self) -> frozenset[str]:
        """The kinds whose documents wait for a reviewer before delivery."""
        return parse_review_kinds(self.review_kinds)

    @field_validator("knock_templates")
    @classmethod
    def _templates(cls, value: str) -> str:
        parse_templates(value)
        return value

    @field_validator("template_ttls")
    @classmethod
    def _ttls(cls, value: str) -> str:
        parse_template_ttls(value)
        return value

    def template_ttl_seconds(self, name: str, language: str) -> float:
        """The time to live the template ``name`` in ``language`` was created with: its
        own entry, else its name's, else the platform's default."""
        ttls = parse_template_ttls(self.template_ttls)
        return ttls.get(f"{name}:{language}", ttls.get(name, PLATFORM_TTL_SECONDS))

    @field_validator("document_templates", "brief_document_templates")
    @classmethod
    def _document_templates(cls, value: str) -> str:
        if value.strip():
            parse_template_choices(value)
        return value

    @field_validator("document_template_parameters")
    @classmethod
    def _document_parameters(cls, value: str) -> str:
        parse_document_parameters(value)
        return value

    @field_validator("file_outside_window", "file_in_window")
    @classmethod
    def _file_kinds(cls, value: str) -> str:
        parse_file_kinds(value)
        return value

    def document_template_choices(self, kind: str) -> dict[str, list[tuple[str, str]]]:
        """Each locale's document templates for ``kind``, the preferred first (empty:
        none configured, the knock)."""
        raw = self.document_templates
        if kind == "daily_brief" and self.brief_document_templates.strip():
            raw = self.brief_document_templates
        return parse_template_choices(raw) if raw.strip() else {}

    def document_template_parameter_names(self, name: str) -> tuple[str, ...]:
        """The named body parameters document template ``name`` takes."""
        return parse_document_parameters(self.document_template_parameters).get(
            name, DOCUMENT_PARAMETERS
        )

    @property
    def file_outside_window_kinds(self) -> frozenset[str]:
        return parse_file_kinds(self.file_outside_window)

    @property
    def file_in_window_kinds(self) -> frozenset[str]:
        return parse_file_kinds(self.file_in_window)

    @field_validator("quiet_hours")
    @classmethod
    def _quiet(cls, value: str) -> str:
        if value.lower() in ("", "off", "none"):
            return ""
        if not QUIET_HOURS.match(value):
            raise ValueError("must be local HH:MM-HH:MM (like 21:00-08:00), or off")
        return value

    @property
    def eligibility(self) -> Eligibility:
        """The eligibility function's parameters (sql/migrations/013: lease, window, quiet)."""
        return {
            "lease": self.lease,
            "service_window": self.window,
            "quiet_hours": self.quiet_hours or None,
        }

    @property
    def knock_template_map(self) -> dict[str, tuple[str, str]]:
        """Each locale's first knock template."""
        return parse_templates(self.knock_templates)

    @property
    def knock_button_template_set(self) -> frozenset[str]:
        """Knock templates with the count parameter and the three quick replies."""
        return frozenset(n.strip() for n in self.knock_button_templates.split(",") if n.strip())

    @property
    def knock_template_choices(self) -> dict[str, list[tuple[str, str]]]:
        """Each locale's knock templates, the preferred first, then its fallbacks."""
        return parse_template_choices(self.knock_templates)

    @property
    def window_seconds(self) -> int:
        """How long after the person's last message we still send free-form."""
        return 24 * 3600 - self.window_margin_seconds

    @property
    def window(self) -> dt.timedelta:
        return dt.timedelta(seconds=self.window_seconds)

    @property
    def lease(self) -> dt.timedelta:
        return dt.timedelta(seconds=self.lease_seconds)


class ServiceSettings(Section):
    service_url: str = Field(
        f"http://127.0.0.1:{SERVICE_DEFAULT_PORT}",
        json_schema_extra=env("DELIVERY_SERVICE_URL"),
        description="where the generator pokes the webhook service",
    )
    internal_token: SecretStr | None = Field(
        None,
        json_schema_extra=env("DELIVERY_INTERNAL_TOKEN"),
        description="bearer token of /internal/sweep",
    )
    metrics_token: SecretStr | None = Field(
        None,
        json_schema_extra=env("DELIVERY_METRICS_TOKEN"),
        description=(
            "bearer token of the webhook service's /metrics (Prometheus' bearer_token); unset: "
            "/metrics answers loopback clients only"
        ),
    )
    webhook_max_body_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        json_schema_extra=env("WEBHOOK_MAX_BODY_BYTES"),
        description=(
            "the webhook body limit (above Meta's largest batches: a 413 makes Meta retry for days)"
        ),
    )
    max_header_bytes: int = Field(
        64 * 1024,
        ge=4096,
        json_schema_extra=env("DELIVERY_SERVICE_MAX_HEADER_BYTES"),
        description=(
            "the webhook service's limit on a request's line and headers together (431 above it)"
        ),
    )
    header_timeout_seconds: float = Field(
        10.0,
        gt=0,
        json_schema_extra=env("DELIVERY_SERVICE_HEADER_TIMEOUT_SECONDS"),
        description=(
            "the webhook service: seconds a connection has to send a request's headers (408 and "
            "closed after)"
        ),
    )
    body_timeout_seconds: float = Field(
        30.0,
        gt=0,
        json_schema_extra=env("DELIVERY_SERVICE_BODY_TIMEOUT_SECONDS"),
        description=(
            "the webhook service: seconds a request has to send its whole body (408 and closed "
            "after)"
        ),
    )
    max_connections: int = Field(
        512,
        ge=8,
        json_schema_extra=env("DELIVERY_SERVICE_MAX_CONNECTIONS"),
        description=(
            "the webhook service's open connections at most, per process: a request beyond them "
            "is answered 503 (Meta redelivers)"
        ),
    )
    listen: bool = Field(
        True,
        json_schema_extra=env("DELIVERY_LISTEN"),
        description=(
            "the webhook service sweeps when Postgres notifies that a document became deliverable"
        ),
    )
    dagster_webserver_url: str | None = Field(
        None,
        json_schema_extra=env("DAGSTER_WEBSERVER_URL"),
        description=(
            "the Dagster webserver, where the webhook service reports each delivery as it happens; "
            "unset: the record_delivery_events sensor reports them, within about 5 s"
        ),
    )
    trusted_proxies: str = Field(
        "127.0.0.1",
        json_schema_extra=env("DELIVERY_TRUSTED_PROXIES"),
        description=(
            "addresses or networks (10.0.0.0/8, comma-separated; not *, which would let any "
            "client choose its address) whose X-Forwarded-For and X-Forwarded-Proto the service "
            "believes: behind a load balancer, its addresses"
        ),
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, value: str) -> str:
        parse_trusted_proxies(value)
        return value

    @field_validator("internal_token")
    @classmethod
    def _long_internal_token(cls, value: SecretStr | None) -> SecretStr | None:
        return long_enough(value)

    @property
    def trusted_proxy_list(self) -> list[str]:
        """``DELIVERY_TRUSTED_PROXIES`` as uvicorn's ``forwarded_allow_ips`` takes it."""
        return parse_trusted_proxies(self.trusted_proxies)

    @field_validator("service_url", "dagster_webserver_url")
    @classmethod
    def _no_trailing_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") if value else None

    @property
    def review_page_url(self) -> str:
        """The reviewers' page on the webhook service (linked from their alerts)."""
        return self.service_url + REVIEW_PAGE_PATH


class ApiSettings(Section):
    """The applications' door (``/v1``, ``service/api/``): who may hand documents over,
    how fast, and where each application hears what became of them."""

    env_prefix: ClassVar[str] = "DELIVERY_API_"

    tokens: SecretStr | None = Field(
        None,
        description="application=token, comma-separated; an application may have several "
        "(rotation); unset: the API answers 401",
    )
    webhooks: SecretStr | None = Field(
        None, description="application=url, comma-separated: where each hears its events"
    )
    webhook_secrets: SecretStr | None = Field(
        None,
        validate_default=True,
        description="application=whsec_..., comma-separated: Standard Webhooks signing "
        "secrets; several for one application sign with each (rotation)",
    )
    max_body_bytes: int = Field(
        1024 * 1024, ge=1024, description="a request body over this is refused (413)"
    )
    rate_per_second: float = Field(
        50.0, gt=0, description="requests per second per token, shared by every replica"
    )
    rate_burst: int = Field(100, ge=1, description="requests a token may make at once")
    events_backoff_scale: float = Field(
        1.0,
        gt=0,
        description="the retry schedule of events, scaled (tests); 1: about 27 h of retries",
    )
    events_alert_seconds: float = Field(
        900, gt=0, description="an application's endpoint failing this long is alerted"
    )
    events_timeout_seconds: float = Field(10.0, gt=0, description="per event sent")
    events_concurrency: int = Field(
        16, ge=1, description="events in flight per application and service process"
    )

    @field_validator("tokens")
    @classmethod
    def _tokens(cls, value: SecretStr | None) -> SecretStr | None:
        if isinstance(value, SecretStr):
            parse_api_tokens(value.get_secret_value())
        return value

    @field_validator("webhooks")
    @classmethod
    def _webhooks(cls, value: SecretStr | None) -> SecretStr | None:
        if isinstance(value, SecretStr):
            parse_api_webhooks(value.get_secret_value())
        return value

    @field_validator("webhook_secrets")
    @classmethod
    def _secrets(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        secrets = parse_webhook_secrets(value.get_secret_value()) if value else {}
        webhooks = info.data.get("webhooks")
        hooks = parse_api_webhooks(webhooks.get_secret_value()) if webhooks else {}
        unsigned = sorted(set(hooks) - set(secrets))
        if unsigned:
            raise ValueError(
                f"no signing secret for {', '.join(unsigned)} (DELIVERY_API_WEBHOOKS names "
                "them): give application=whsec_<base64> for each"
            )
        return value

    @property
    def applications_by_token(self) -> dict[str, str]:
        """Each valid token → its application."""
        return parse_api_tokens(secret(self.tokens) or "")

    @property
    def endpoints(self) -> dict[str, str]:
        """Each application with an endpoint → its URL."""
        return parse_api_webhooks(secret(self.webhooks) or "")

    @property
    def signing_secrets(self) -> dict[str, list[bytes]]:
        """Each application → its signing keys (decoded), in the order given."""
        return parse_webhook_secrets(secret(self.webhook_secrets) or "")


class GenerationSettings(Section):
    env_prefix: ClassVar[str] = "GENERATION_"

    # backend, timeout_seconds and max_retries were GENERATOR_*: those names still work.
    backend: Literal["offline", "openai"] = Field(
        "offline",
        json_schema_extra=formerly("GENERATOR_BACKEND"),
        description="offline (deterministic, en/es/pt) or openai (any chat-completions API)",
    )
    openai_base_url: str = Field(
        "https://api.openai.com/v1",
        json_schema_extra=env("OPENAI_BASE_URL"),
        description="the openai backend's API base URL",
    )
    openai_model: str = Field(
        "gpt-4o-mini",
        json_schema_extra=env("OPENAI_MODEL"),
        description="the openai backend's model",
    )
    openai_api_key: SecretStr | None = Field(
        None, json_schema_extra=env("OPENAI_API_KEY"), description="the openai backend's key"
    )
    timeout_seconds: float = Field(
        60.0,
        gt=0,
        json_schema_extra=formerly("GENERATOR_TIMEOUT_SECONDS"),
        description="seconds per request to the generator backend",
    )
    max_retries: int = Field(
        2,
        ge=0,
        json_schema_extra=formerly("GENERATOR_MAX_RETRIES"),
        description="retries per request to the generator backend",
    )
    lease_seconds: int = Field(600, ge=1, description="a generation claim's lease")
    max_attempts: int = Field(3, ge=1, description="generation attempts per document")
    backoff_base_seconds: float = Field(60.0, ge=0, description="the first generation retry delay")
    backoff_max_seconds: float = Field(3600.0, ge=0, description="the generation retry delay's cap")
    batch_size: int = Field(4, ge=1, description="documents claimed per generation batch")
    misconfigured_pause_seconds: float = Field(
        300.0,
        ge=0,
        description=(
            "pending work pauses this long when the generator is misconfigured (bad key, model, "
            "URL)"
        ),
    )
    sensor_seconds: int = Field(30, ge=1, description="pending_generation sensor interval")

    @field_validator("backend", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @property
    def lease(self) -> dt.timedelta:
        return dt.timedelta(seconds=self.lease_seconds)


class CheckSettings(Section):
    """When each ops check warns and errs. Ages in seconds; shares in 0..1."""

    env_prefix: ClassVar[str] = "CHECK_"

    # pending and generating (owner: the generator)
    pending_warn_seconds: float = Field(
        15 * 60,
        gt=0,
        description="pending_too_long: WARN when a document waits for generation this long",
    )
    pending_error_seconds: float = Field(60 * 60, gt=0, description="pending_too_long: ERROR")
    generating_warn_seconds: float = Field(
        15 * 60,
        gt=0,
        description=(
            "generating_too_long: WARN when a generation claim is this old (a dead or stuck "
            "generator)"
        ),
    )
    generating_error_seconds: float = Field(60 * 60, gt=0, description="generating_too_long: ERROR")
    # undelivered (owner: delivery): eligible and due this long is stranded
    undelivered_warn_seconds: float = Field(
        30 * 60,
        gt=0,
        description=(
            "undelivered_stranded: WARN when a document a sweep would deliver now was not taken "
            "for this long"
        ),
    )
    undelivered_error_seconds: float = Field(
        2 * 60 * 60, gt=0, description="undelivered_stranded: ERROR"
    )
    # undelivered this long since generation, even while retrying: WARN only
    undelivered_slow_seconds: float = Field(
        2 * 60 * 60,
        gt=0,
        description=(
            "undelivered_stranded: WARN when a document is still undelivered this long after "
            "generation while retrying"
        ),
    )
    # awaiting a knock reply (owner: the person): alerts only on abnormal shares
    knock_settle_seconds: float = Field(
        15 * 60, gt=0, description="awaiting_reply: a knock should show delivered by then"
    )
    knock_answer_grace_seconds: float = Field(
        60 * 60, gt=0, description="awaiting_reply: and answered by then"
    )
    knock_min_sample: int = Field(
        5, ge=1, description="awaiting_reply: knocks needed before the shares count"
    )
    knock_unanswered_share: float = Field(
        0.5, ge=0, le=1, description="awaiting_reply: WARN above this share of knocks unanswered"
    )
    knock_undelivered_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description=(
            "awaiting_reply: ERROR above this share of knocks never delivered (a template that "
            "stopped working)"
        ),
    )
    # one knock accepted and never reported delivered (owner: the template):
    # statuses come in seconds; an hour without one is a dropped send (template
    # pacing), not a person who has not answered yet
    knock_undelivered_seconds: float = Field(
        60 * 60,
        gt=0,
        description=(
            "knock_not_delivered: a knock accepted and never reported delivered, read or failed "
            "this long (a dropped send)"
        ),
    )
    # abandoned or generation failed in the last day (owner: ops)
    abandoned_warn_count: int = Field(
        1,
        ge=1,
        description=(
            "abandoned_or_failed: WARN at this many documents lost in the last 24 h (abandoned for "
            "an unexpected reason, or failed generation)"
        ),
    )
    abandoned_error_count: int = Field(10, ge=1, description="abandoned_or_failed: ERROR")
    # messaging tier use (owner: ops)
    tier_warn_share: float = Field(
        0.8,
        gt=0,
        description="messaging_tier_headroom: WARN at this share of WHATSAPP_MESSAGING_TIER",
    )
    tier_error_share: float = Field(1.0, gt=0, description="messaging_tier_headroom: ERROR")
    sample_size: int = Field(5, ge=1, description="ids of the oldest rows each check lists")
    # Dagster's own record (owner: ops): the backlog refreshed, deliveries on the timeline
    backlog_stale_seconds: float = Field(
        15 * 60,
        gt=0,
        description=(
            "freshness_check: WARN when delivery_backlog was not materialized for this long"
        ),
    )
    events_warn_seconds: float = Field(
        5 * 60,
        gt=0,
        description=(
            "delivery_events_unrecorded: WARN when a delivery is not on the delivered_documents "
            "timeline after this long"
        ),
    )
    events_error_seconds: float = Field(
        30 * 60, gt=0, description="delivery_events_unrecorded: ERROR"
    )
    messaging_tier: str = Field(
        "250",
        json_schema_extra=env("WHATSAPP_MESSAGING_TIER"),
        description=(
            "unique people reached outside the window per 24 h: 250, 2000 (2k), 10000, 100000 or "
            "unlimited (the tier check)"
        ),
    )

    @field_validator("messaging_tier", mode="before")
    @classmethod
    def _tier(cls, value: Any) -> str:
        """``250``, ``2000`` (``2k``, ``TIER_2K``), …, ``unlimited``."""
        text = str(value).strip().lower().removeprefix("tier_").replace(",", "").replace("_", "")
        if text.endswith("k") and text[:-1].isdigit():
            text = str(int(text[:-1]) * 1000)
        if text != "unlimited" and not (text.isdigit() and int(text) > 0):
            raise ValueError("must be 250, 2000, 10000, 100000 or unlimited")
        return text

    @property
    def tier_limit(self) -> int | None:
        return None if self.messaging_tier == "unlimited" else int(self.messaging_tier)


class OpsSettings(Section):
    env_prefix: ClassVar[str] = "OPS_"

    webhook_url: SecretStr | None = Field(
        None,
        description=(
            "the ops channel: a Slack-compatible incoming webhook; unset: alerts go to the log and "
            "the ops_alerts table only"
        ),
    )
    alert_sensor_seconds: int = Field(
        60, ge=1, description="the ops_check_alerts sensor's interval"
    )
    alert_reminder_seconds: int = Field(
        4 * 3600,
        ge=1,
        description="a failing check or an open alert episode is reminded this often",
    )
    watchdog_stale_seconds: int = Field(
        600,
        ge=1,
        json_schema_extra=env("WATCHDOG_STALE_SECONDS"),
        description=(
            "the webhook service alerts when Dagster's daemon has been silent this long (no "
            "heartbeat tick, no check evaluation)"
        ),
    )
    # Local like every other default URL: where `./dev docs` serves the site.
    docs_url: str = Field(
        f"http://127.0.0.1:{DOCS_DEFAULT_PORT}",
        json_schema_extra=env("DELIVERY_DOCS_URL"),
        description=(
            "where the documentation site is published: every alert links its runbook there "
            "(default: where ./dev docs serves it)"
        ),
    )

    @field_validator("docs_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")


class ReviewSettings(Section):
    """The review page's sign-in (reviewers, and operators who may also cancel and
    resend), the reviewers' channel, how long a document may wait."""

    env_prefix: ClassVar[str] = "REVIEW_"

    token: SecretStr | None = Field(
        None,
        description=(
            "the review page's shared sign-in token for reviewers (at least 16 characters), who "
            "each give their name; unset (and no REVIEW_TOKENS or OPERATOR_TOKENS): the page "
            "answers 404"
        ),
    )
    tokens: SecretStr | None = Field(
        None,
        description=(
            "name=token, comma-separated: each reviewer's own sign-in token (at least 16 "
            "characters); the name their decisions are kept under comes from the token"
        ),
    )
    operator_tokens: SecretStr | None = Field(
        None,
        json_schema_extra=env("OPERATOR_TOKENS"),
        description=(
            "name=token, comma-separated: who may also cancel and resend any document on the "
            "review page (an operator's right, apart from reviewing); the name comes from the "
            "token"
        ),
    )
    webhook_url: SecretStr | None = Field(
        None,
        description=(
            "the reviewers' Slack-compatible incoming webhook; unset: their alerts go to the ops "
            "channel"
        ),
    )
    warn_seconds: float = Field(
        30 * 60,
        gt=0,
        description=(
            "awaiting_review_too_long: WARN to the reviewers when a document awaits review this "
            "long"
        ),
    )
    error_seconds: float = Field(
        2 * 60 * 60, gt=0, description="awaiting_review_too_long: ERROR, escalated to ops"
    )
    reminder_seconds: int = Field(
        30 * 60,
        ge=1,
        description="the reviewers are reminded this often while documents wait too long",
    )
    sign_in_client_failures: int = Field(
        10,
        ge=1,
        description=(
            "wrong tokens one client may send within the window; then it waits (429) until the "
            "oldest leaves the window"
        ),
    )
    sign_in_failures: int = Field(
        100,
        ge=1,
        description=(
            "wrong tokens from all clients together within the window; then every client that has "
            "not signed in within 30 days waits (429)"
        ),
    )
    sign_in_window_seconds: int = Field(
        15 * 60, ge=1, description="the sliding window both sign-in limits count over"
    )
    cookie_secure: Literal["auto", "always"] = Field(
        "auto",
        description=(
            "auto: the session cookie is Secure when the request came over HTTPS (as a trusted "
            "proxy says); always: always Secure (the page then works only over HTTPS)"
        ),
    )

    @field_validator("cookie_secure", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("tokens", "operator_tokens")
    @classmethod
    def _named_tokens(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        """Each item name=token; and a token signs in one person with one right (the same
        token twice would make the name or the right a matter of which list is read)."""
        if value is None:
            return value
        tokens = parse_person_tokens(value.get_secret_value())
        taken = {secret(info.data.get("token")) or ""}
        if info.field_name == "operator_tokens":
            taken |= set(parse_person_tokens(secret(info.data.get("tokens")) or ""))
        if set(tokens) & taken:
            raise ValueError(
                "shares a token with REVIEW_TOKEN or REVIEW_TOKENS: give each person, and "
                "the shared reviewer token, a token of their own"
            )
        return value

    def people_by_token(self, *, operators: bool) -> dict[str, str]:
        """Each personal token → the name it signs in (``OPERATOR_TOKENS`` or
        ``REVIEW_TOKENS``)."""
        raw = self.operator_tokens if operators else self.tokens
        return parse_person_tokens(secret(raw) or "")

    @property
    def page_on(self) -> bool:
        """Is any sign-in token configured (else the review page answers 404)?"""
        return any(t is not None for t in (self.token, self.tokens, self.operator_tokens))

    @field_validator("token")
    @classmethod
    def _long_token(cls, value: SecretStr | None) -> SecretStr | None:
        if not isinstance(value, SecretStr):
            return value
        if len(value.get_secret_value().strip()) < REVIEW_TOKEN_MIN_LENGTH:
            raise ValueError(
                f"must be at least {REVIEW_TOKEN_MIN_LENGTH} characters: the review page is "
                "as safe as this token (use a long random string)"
            )
        return value


# A finished document's rendered file is kept this long after it was drawn: as long
# as a media id uploaded from it lasts (30 days), after which a resend uploads
# again and may as well draw it again from the body, which is never pruned.
DOCUMENT_FILES_DAYS = 30


class RetentionSettings(Section):
    """How long history is kept (the prune_history job). Raw bodies are the largest and
    read by no code: shortest. Statuses and inbound messages must outlive Meta's
    redelivery (up to 7 days: their once-only storage depends on them) and the
    report's and the checks' windows. Alerts are small, and a quarter of them is
    what an incident review looks back on."""

    env_prefix: ClassVar[str] = "RETENTION_"

    raw_webhooks_days: float = Field(
        7,
        ge=1,
        description="days a raw webhook body is kept after it was last received (at least 1)",
    )
    status_events_days: float = Field(
        30,
        ge=7,
        description=(
            "days a status webhook is kept (at least 7: Meta redelivers for up to 7 days); a knock "
            "still waiting on its person keeps its statuses"
        ),
    )
    inbound_messages_days: float = Field(
        30,
        ge=7,
        description=(
            "days an inbound message is kept (at least 7); each person's newest message stays"
        ),
    )
    ops_alerts_days: float = Field(
        90,
        ge=2,
        description=(
            "days an ops alert is kept (at least 2: unsent alerts are retried for a day); an open "
            "check episode stays whole"
        ),
    )

    def keep(self) -> dict[str, dt.timedelta]:
        """Table → how long its rows are kept."""
        return {
            "raw_webhooks": dt.timedelta(days=self.raw_webhooks_days),
            "status_events": dt.timedelta(days=self.status_events_days),
            "inbound_messages": dt.timedelta(days=self.inbound_messages_days),
            "ops_alerts": dt.timedelta(days=self.ops_alerts_days),
            "document_files": dt.timedelta(days=DOCUMENT_FILES_DAYS),
        }


class LogSettings(Section):
    """How every process of the project writes its log lines (``delivery_pipeline/logs.py``)."""

    env_prefix: ClassVar[str] = "DELIVERY_LOG_"

    format: Literal["text", "json"] = Field(
        "text",
        description=(
            "text: one readable line per record; json: one JSON object per line (time, level, "
            "logger, message, process, traceback), for a log shipper; secrets redacted either way"
        ),
    )


class ScheduleSettings(Section):
    daily_briefs_cron: str = Field(
        "*/15 * * * *",
        json_schema_extra=env("DAILY_BRIEFS_CRON"),
        description="the daily_briefs schedule",
    )
    backlog_cron: str = Field(
        "*/5 * * * *",
        json_schema_extra=env("BACKLOG_CRON"),
        description="the backlog_every_5_minutes schedule",
    )
    checks_cron: str = Field(
        "*/5 * * * *",
        json_schema_extra=env("CHECKS_CRON"),
        description="the checks_every_5_minutes schedule",
    )
    report_cron: str = Field(
        "15 0 * * *",
        json_schema_extra=env("REPORT_CRON"),
        description="the daily_delivery_report schedule",
    )
    report_start_date: dt.date = Field(
        dt.date(2026, 1, 1),
        json_schema_extra=env("REPORT_START_DATE"),
        description="the delivery report's first partition",
    )
    retention_cron: str = Field(
        "45 3 * * *",
        json_schema_extra=env("RETENTION_CRON"),
        description="the prune_history_daily schedule",
    )

    @field_validator(
        "daily_briefs_cron", "backlog_cron", "checks_cron", "report_cron", "retention_cron"
    )
    @classmethod
    def _cron(cls, value: str) -> str:
        if len(value.split()) != 5:
            raise ValueError("must be a five-field cron expression like '*/5 * * * *'")
        return value


class SandboxSettings(Section):
    """The sandbox's start values (its identity is ``WhatsAppSettings``'): typed here, and
    validated with every other knob by ``sandbox.config.SandboxConfig``, whose field names
    these are. Unset: the sandbox's own default."""

    env_prefix: ClassVar[str] = "SANDBOX_"

    webhook_url: str | None = Field(
        None, description="the sandbox: where it posts signed status and inbound webhooks"
    )
    app_secret: SecretStr | None = Field(
        None,
        description=(
            "the sandbox: the key it signs its webhooks with (the service's WHATSAPP_APP_SECRET "
            "must be the same to accept them); unset: a development key, never "
            "WHATSAPP_APP_SECRET"
        ),
    )
    refusal_mode: str | None = Field(
        None,
        description=(
            "the sandbox: a closed window refused on the send (sync) or accepted and failed later "
            "(async)"
        ),
    )
    latency_ms: float | None = Field(
        None, description="the sandbox: milliseconds before it answers a send"
    )
    throughput_limit: int | None = Field(
        None, description="the sandbox: the default number's messages per second (0: unlimited)"
    )
    read_rate: float | None = Field(
        None, description="the sandbox: the share of delivered messages it reports read"
    )
    pair_rate_enabled: bool | None = Field(
        None,
        json_schema_extra=env("SANDBOX_PAIR_RATE"),
        description="the sandbox: the per-person pair rate (131056), on or off",
    )
    status_delay_ms: float | None = Field(
        None, description="the sandbox: milliseconds before it posts a status webhook"
    )
    status_batch: int | None = Field(None, description="the sandbox: statuses per webhook body")
    seed: int | None = Field(None, description="the sandbox: its random seed")
    service_billable: bool | None = Field(
        None,
        description=(
            "the sandbox: in-window service messages (and templates) billable, as reported from "
            "2026-10 (on/off)"
        ),
    )

    @field_validator("refusal_mode", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


# ── the model ───────────────────────────────────────────────────────────


class Settings(BaseModel):
    """Every setting of every part, by section."""

    model_config = ConfigDict(frozen=True)

    database: DatabaseSettings = DatabaseSettings()
    whatsapp: WhatsAppSettings = WhatsAppSettings()
    delivery: DeliverySettings = DeliverySettings()
    service: ServiceSettings = ServiceSettings()
    generation: GenerationSettings = GenerationSettings()
    checks: CheckSettings = CheckSettings()
    ops: OpsSettings = OpsSettings()
    review: ReviewSettings = ReviewSettings()
    retention: RetentionSettings = RetentionSettings()
    schedules: ScheduleSettings = ScheduleSettings()
    api: ApiSettings = ApiSettings()
    sandbox: SandboxSettings = SandboxSettings()
    logs: LogSettings = LogSettings()

    @classmethod
    def sections(cls) -> dict[str, type[Section]]:
        return {
            name: info.annotation
            for name, info in cls.model_fields.items()
            if isinstance(info.annotation, type) and issubclass(info.annotation, Section)
        }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """Every section from the environment; ``SettingsError`` names each bad variable."""
        environ = os.environ if environ is None else environ
        values: dict[str, Section] = {}
        problems: list[str] = []
        for name, section in cls.sections().items():
            try:
                values[name] = section.from_environ(environ)
            except ValidationError as exc:
                problems.extend(describe(section, exc))
        if problems:
            raise SettingsError("bad settings: " + "; ".join(problems))
        return cls(**values)

    def secret_texts(self) -> dict[str, str]:
        """Every secret text in force → the variable it came from (for scrubbing logs)."""
        texts: dict[str, str] = {}
        for name in self.sections():
            section: Section = getattr(self, name)
            texts.update(section.secret_texts())
        return texts

    @classmethod
    def env_names(cls) -> Iterator[str]:
        """Every environment variable the model reads, older names of renamed fields too."""
        for section in cls.sections().values():
            yield from section.env_names().values()
            for older in section.env_aliases().values():
                yield from older

    @classmethod
    def secret_env_names(cls) -> frozenset[str]:
        """Every variable that always holds a secret (``Section.secret_fields``)."""
        names: set[str] = set()
        for section in cls.sections().values():
            env_names, aliases = section.env_names(), section.env_aliases()
            for field in section.secret_fields():
                names.update((env_names[field], *aliases.get(field, ())))
        return frozenset(names)

    @property
    def guard(self) -> Guard:
        """The heartbeat guard's parameters: the eligibility's, and the default number."""
        return {**self.delivery.eligibility, "default_number": self.whatsapp.phone_number_id}

    def replace(self, **sections: Any) -> Self:
        """A copy with some sections' fields changed: ``replace(delivery={"rate_limit": 5})``."""
        changed = {}
        for name, fields in sections.items():
            current: Section = getattr(self, name)
            changed[name] = type(current).model_validate(
                {**current.model_dump(exclude_unset=True), **fields}
            )
        return self.model_copy(update=changed)


def document_template_list(settings: DeliverySettings) -> list[tuple[str, str]]:
    """Every distinct (name, language) of the document templates, in order."""
    seen: list[tuple[str, str]] = []
    for kind in REVIEWABLE_KINDS:
        for choices in settings.document_template_choices(kind).values():
            seen.extend(choice for choice in choices if choice not in seen)
    return seen


def transport_warnings(settings: Settings) -> list[str]:
    """What start-up says loudly, once: a secret that would travel in clear text, or go
    somewhere it is not meant for. (A real token over http:// to another machine is
    refused outright: ``WhatsAppSettings``.)"""
    warnings = []
    whatsapp = settings.whatsapp
    if not whatsapp.uses_dev_identity and whatsapp.api_base_url.startswith("http://"):
        warnings.append(
            f"WHATSAPP_ACCESS_TOKEN is set, but WHATSAPP_API_BASE_URL is {whatsapp.api_base_url}, "
            "a sandbox on this machine: nothing reaches WhatsApp. In production set "
            "WHATSAPP_API_BASE_URL=https://graph.facebook.com"
        )
    generation = settings.generation
    if (
        generation.backend == "openai"
        and generation.openai_api_key is not None
        and plain_http_elsewhere(generation.openai_base_url)
    ):
        warnings.append(
            f"OPENAI_BASE_URL is plain http:// to another machine ({generation.openai_base_url}): "
            "OPENAI_API_KEY and every prompt travel in clear text. Use https://"
        )
    return warnings


def long_enough(value: SecretStr | None) -> SecretStr | None:
    """A shared token of at least ``SHARED_TOKEN_MIN_LENGTH`` characters (a validator)."""
    if isinstance(value, SecretStr) and len(value.get_secret_value()) < SHARED_TOKEN_MIN_LENGTH:
        raise ValueError(
            f"must be at least {SHARED_TOKEN_MIN_LENGTH} characters (use a long random string, "
            "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return value
