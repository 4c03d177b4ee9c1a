"""``Settings.sandbox`` (``SANDBOX_*``): the sandbox's start values."""

from typing import ClassVar

from pydantic import Field, SecretStr, field_validator

from delivery_pipeline.settings.section import Section, env, lower_case

# What the sandbox signs its webhooks with unless SANDBOX_APP_SECRET says otherwise:
# never WHATSAPP_APP_SECRET, so a sandbox cannot sign what a real service accepts.
DEV_APP_SECRET = "sandbox-development-app-secret"


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

    _lower = field_validator("refusal_mode", mode="before")(lower_case)
