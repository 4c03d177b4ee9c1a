"""``Settings.whatsapp`` (``WHATSAPP_*``): the Cloud API we send through, the
business numbers we send from, the webhook's keys."""

from typing import ClassVar, Self

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator

from delivery_pipeline.settings.numbers import BusinessNumber, bind_number, parse_numbers
from delivery_pipeline.settings.section import Section, long_enough, without_trailing_slash
from delivery_pipeline.settings.urls import plain_http_elsewhere

SANDBOX_DEFAULT_PORT = 8765

# The identity a sender and the sandbox share when no credentials are
# configured: local development and tests. A real number sets both variables.
DEV_PHONE_NUMBER_ID = "100000000000001"
DEV_ACCESS_TOKEN = "sandbox-access-token"


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

    _no_trailing_slash = field_validator("api_base_url")(without_trailing_slash)

    _long_verify_token = field_validator("verify_token")(long_enough)

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
