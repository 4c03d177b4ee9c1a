"""``Settings.service``: the webhook service: where it is, its tokens, its limits on
requests and connections, the proxies it believes."""

from pydantic import Field, SecretStr, field_validator

from delivery_pipeline.settings.parsing import parse_trusted_proxies
from delivery_pipeline.settings.section import (
    Section,
    env,
    long_enough,
    parsed_by,
    without_trailing_slash,
)

SERVICE_DEFAULT_PORT = 8766
REVIEW_PAGE_PATH = "/review"


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

    _proxies = field_validator("trusted_proxies")(parsed_by(parse_trusted_proxies))

    _long_internal_token = field_validator("internal_token")(long_enough)

    @property
    def trusted_proxy_list(self) -> list[str]:
        """``DELIVERY_TRUSTED_PROXIES`` as uvicorn's ``forwarded_allow_ips`` takes it."""
        return parse_trusted_proxies(self.trusted_proxies)

    _no_trailing_slash = field_validator("service_url", "dagster_webserver_url")(
        without_trailing_slash
    )

    @property
    def review_page_url(self) -> str:
        """The reviewers' page on the webhook service (linked from their alerts)."""
        return self.service_url + REVIEW_PAGE_PATH
