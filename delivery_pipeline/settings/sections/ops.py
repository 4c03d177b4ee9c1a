"""``Settings.ops`` (``OPS_*``): the ops channel, its alerts and reminders, the
watchdog, where the runbooks are published."""

from typing import ClassVar

from pydantic import Field, SecretStr, field_validator

from delivery_pipeline.settings.section import Section, env, without_trailing_slash

DOCS_DEFAULT_PORT = 8000  # ./dev docs serves the site here


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

    _no_trailing_slash = field_validator("docs_url")(without_trailing_slash)
