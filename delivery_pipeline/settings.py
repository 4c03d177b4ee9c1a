"""The one settings object: every knob, read from the environment once.

Secrets (access token, app secret, verify token, internal token, ops webhook
URL) are only ever read here from the environment and are never logged: the
dataclass hides them from ``repr``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from delivery_pipeline.envvars import env_number

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA_DIR = PROJECT_ROOT / ".data"

SANDBOX_DEFAULT_PORT = 8765
SERVICE_DEFAULT_PORT = 8766
SANDBOX_PHONE_NUMBER_ID = "100000000000001"
SANDBOX_ACCESS_TOKEN = "sandbox-access-token"

LOCALES = ("en", "es", "pt")


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    return env_number(env, name, default, int)


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    return env_number(env, name, default, float)


def _parse_templates(raw: str) -> dict[str, tuple[str, str]]:
    """``en=document_ready:en,es=document_ready:es`` → {locale: (name, language)}."""
    templates: dict[str, tuple[str, str]] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        locale, _, spec = item.partition("=")
        name, _, language = spec.partition(":")
        if not (locale and name and language):
            raise ValueError(f"DELIVERY_KNOCK_TEMPLATES item {item!r} is not locale=name:language")
        templates[locale.strip()] = (name.strip(), language.strip())
    return templates


DEFAULT_KNOCK_TEMPLATES = "en=document_ready:en,es=document_ready:es,pt=document_ready:pt_BR"


@dataclass(frozen=True)
class Settings:
    """Every setting the engine, client, sandbox and service read."""

    database_url: str | None = None
    data_dir: Path = DEFAULT_DATA_DIR

    # Cloud API client
    api_base_url: str = f"http://127.0.0.1:{SANDBOX_DEFAULT_PORT}"
    api_version: str = "v25.0"
    phone_number_id: str = SANDBOX_PHONE_NUMBER_ID
    access_token: str = field(default=SANDBOX_ACCESS_TOKEN, repr=False)
    send_timeout: float = 10.0

    # Delivery engine
    lease_seconds: int = 600
    window_hours: int = 24
    window_margin_seconds: int = 900
    max_attempts: int = 5
    backoff_base_seconds: float = 30.0
    backoff_max_seconds: float = 3600.0
    rate_limit: float = 80.0
    concurrency: int = 16
    chunk_limit: int = 4096
    chunk_interval_seconds: float = 0.0
    unknown_policy: str = "resend"
    unknown_grace_seconds: int = 300
    knock_templates: dict[str, tuple[str, str]] = field(
        default_factory=lambda: _parse_templates(DEFAULT_KNOCK_TEMPLATES)
    )
    knock_param_max: int = 60

    # Webhook service
    verify_token: str | None = field(default=None, repr=False)
    app_secret: str | None = field(default=None, repr=False)
    internal_token: str | None = field(default=None, repr=False)
    service_url: str = f"http://127.0.0.1:{SERVICE_DEFAULT_PORT}"
    webhook_max_body_bytes: int = 4 * 1024 * 1024

    # Ops channel
    ops_webhook_url: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.unknown_policy not in ("resend", "abandon"):
            raise ValueError("DELIVERY_UNKNOWN_POLICY must be 'resend' or 'abandon'")
        if self.chunk_limit < 16:
            raise ValueError("DELIVERY_CHUNK_LIMIT must be at least 16")
        if self.rate_limit <= 0:
            raise ValueError("DELIVERY_RATE_LIMIT must be positive")
        if self.concurrency < 1:
            raise ValueError("DELIVERY_CONCURRENCY must be at least 1")

    @property
    def window_seconds(self) -> int:
        """How long after the person's last message we still send free-form."""
        return self.window_hours * 3600 - self.window_margin_seconds

    @property
    def uses_sandbox(self) -> bool:
        return self.access_token == SANDBOX_ACCESS_TOKEN

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        d = cls()
        return cls(
            database_url=env.get("DATABASE_URL") or None,
            data_dir=Path(env.get("DELIVERY_DATA_DIR") or d.data_dir),
            api_base_url=(env.get("WHATSAPP_API_BASE_URL") or d.api_base_url).rstrip("/"),
            api_version=env.get("WHATSAPP_API_VERSION") or d.api_version,
            phone_number_id=env.get("WHATSAPP_PHONE_NUMBER_ID") or d.phone_number_id,
            access_token=env.get("WHATSAPP_ACCESS_TOKEN") or d.access_token,
            send_timeout=_env_float(env, "WHATSAPP_SEND_TIMEOUT", d.send_timeout),
            lease_seconds=_env_int(env, "DELIVERY_LEASE_SECONDS", d.lease_seconds),
            window_margin_seconds=_env_int(
                env, "DELIVERY_WINDOW_MARGIN_SECONDS", d.window_margin_seconds
            ),
            max_attempts=_env_int(env, "DELIVERY_MAX_ATTEMPTS", d.max_attempts),
            backoff_base_seconds=_env_float(
                env, "DELIVERY_BACKOFF_BASE_SECONDS", d.backoff_base_seconds
            ),
            backoff_max_seconds=_env_float(
                env, "DELIVERY_BACKOFF_MAX_SECONDS", d.backoff_max_seconds
            ),
            rate_limit=_env_float(env, "DELIVERY_RATE_LIMIT", d.rate_limit),
            concurrency=_env_int(env, "DELIVERY_CONCURRENCY", d.concurrency),
            chunk_limit=_env_int(env, "DELIVERY_CHUNK_LIMIT", d.chunk_limit),
            chunk_interval_seconds=_env_float(
                env, "DELIVERY_CHUNK_INTERVAL_SECONDS", d.chunk_interval_seconds
            ),
            unknown_policy=env.get("DELIVERY_UNKNOWN_POLICY") or d.unknown_policy,
            unknown_grace_seconds=_env_int(
                env, "DELIVERY_UNKNOWN_GRACE_SECONDS", d.unknown_grace_seconds
            ),
            knock_templates=_parse_templates(
                env.get("DELIVERY_KNOCK_TEMPLATES") or DEFAULT_KNOCK_TEMPLATES
            ),
            knock_param_max=_env_int(env, "DELIVERY_KNOCK_PARAM_MAX", d.knock_param_max),
            verify_token=env.get("WHATSAPP_VERIFY_TOKEN") or None,
            app_secret=env.get("WHATSAPP_APP_SECRET") or None,
            internal_token=env.get("DELIVERY_INTERNAL_TOKEN") or None,
            service_url=(env.get("DELIVERY_SERVICE_URL") or d.service_url).rstrip("/"),
            webhook_max_body_bytes=_env_int(
                env, "WEBHOOK_MAX_BODY_BYTES", d.webhook_max_body_bytes
            ),
            ops_webhook_url=env.get("OPS_WEBHOOK_URL") or None,
        )


SETTING_NAMES = tuple(f.name for f in fields(Settings))
