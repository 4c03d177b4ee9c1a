"""``Settings.generation`` (``GENERATION_*``): the generator backend, its claims and
retries."""

import datetime as dt
from typing import ClassVar, Literal

from pydantic import Field, SecretStr, field_validator

from delivery_pipeline.settings.section import Section, env, formerly, lower_case


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

    _lower = field_validator("backend", mode="before")(lower_case)

    @property
    def lease(self) -> dt.timedelta:
        return dt.timedelta(seconds=self.lease_seconds)
