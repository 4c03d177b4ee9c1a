"""``Settings.api`` (``DELIVERY_API_*``): the applications' door."""

from typing import ClassVar

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from delivery_pipeline.settings.parsing import (
    parse_api_tokens,
    parse_api_webhooks,
    parse_webhook_secrets,
)
from delivery_pipeline.settings.section import Section, parsed_by
from delivery_pipeline.settings.urls import secret


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

    _tokens = field_validator("tokens")(parsed_by(parse_api_tokens))

    _webhooks = field_validator("webhooks")(parsed_by(parse_api_webhooks))

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
