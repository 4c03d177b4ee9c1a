"""The sandbox's configuration: what it starts with, and what may change at runtime.

``SandboxConfig`` is immutable and holds every knob's type, default and
bounds, once: a runtime change (``POST /_sandbox/faults``) builds a new one
with ``with_faults`` and the startup values (``SANDBOX_*``, read as typed
values by ``settings.SandboxSettings`` under the same field names) go
through ``config_from_settings``; both are validated here, so a typo in a
test or a deployment fails loudly instead of silently doing nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from delivery_pipeline.sandbox.document_templates import DOCUMENT_TEMPLATE_SPECS
from delivery_pipeline.sandbox.knock_templates import KNOCK_BUTTON_SPECS
from delivery_pipeline.settings import (
    DEV_ACCESS_TOKEN,
    DEV_APP_SECRET,
    DEV_PHONE_NUMBER_ID,
    SandboxSettings,
    Settings,
)
from delivery_pipeline.settings.urls import secret

MESSAGE_TYPES = ("text", "template")
Rate = Annotated[float, Field(ge=0, le=1)]
Duration = Annotated[float, Field(ge=0)]


@dataclass(frozen=True)
class Template:
    """An approved template: name + language, a fixed text with ``{{n}}`` body parameters
    (or ``{{name}}``, when it names them: ``parameter_names``)."""

    name: str
    language: str
    text: str
    param_count: int
    # Quick-reply buttons' texts, in order (a press comes back as a ``button`` message).
    buttons: tuple[str, ...] = ()
    # A header the send fills in: "DOCUMENT" (a file chosen per send), or none.
    header: str | None = None
    # Named body parameters, in the order the send's values are kept (sandbox/documents.py).
    parameter_names: tuple[str, ...] = ()
    # message_send_ttl_seconds: an undelivered message is dropped after it (None: 30 days).
    ttl_seconds: int | None = None

    def render(self, parameters: list[str]) -> str:
        text = self.text
        keys = self.parameter_names or [str(i) for i in range(1, len(parameters) + 1)]
        for key, value in zip(keys, parameters, strict=False):
            text = text.replace("{{" + key + "}}", value)
        return text


DEFAULT_TEMPLATES: tuple[Template, ...] = (
    Template(
        "document_ready",
        "en",
        "Hi {{1}}, your document is ready. Reply to this message to receive it.",
        1,
    ),
    Template(
        "document_ready",
        "es",
        "Hola {{1}}, tu documento está listo. Responde a este mensaje para recibirlo.",
        1,
    ),
    Template(
        "document_ready",
        "pt_BR",
        "Olá {{1}}, seu documento está pronto. Responda a esta mensagem para recebê-lo.",
        1,
    ),
    # A second approved knock template per language: the fallback of
    # DELIVERY_KNOCK_TEMPLATES (document_ready:en|document_waiting:en).
    Template(
        "document_waiting",
        "en",
        "{{1}}, something you asked for is waiting for you. Reply to get it.",
        1,
    ),
    Template(
        "document_waiting",
        "es",
        "{{1}}, lo que pediste te está esperando. Responde para recibirlo.",
        1,
    ),
    Template(
        "document_waiting",
        "pt_BR",
        "{{1}}, o que você pediu está esperando por você. Responda para recebê-lo.",
        1,
    ),
    # The knock with buttons (docs/how-to/whatsapp.md), {{2}}: how many wait.
    *(Template(*spec) for spec in KNOCK_BUTTON_SPECS),
    # Templates that carry the document itself as a file (DOCUMENT header).
    *(
        Template(name, language, text, len(names), (), "DOCUMENT", names, ttl)
        for name, language, text, names, ttl in DOCUMENT_TEMPLATE_SPECS
    ),
)


class SandboxConfig(BaseModel):
    """Everything the sandbox does differently from one run to the next."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    phone_number_id: str = DEV_PHONE_NUMBER_ID
    access_token: str = Field(DEV_ACCESS_TOKEN, min_length=1, repr=False)
    display_phone_number: str = "15550000000"
    waba_id: str = "100000000000002"
    templates: tuple[Template, ...] = DEFAULT_TEMPLATES
    window_seconds: int = 24 * 3600

    # Refusals and limits
    refusal_mode: Literal["sync", "async"] = "sync"
    throughput_limit: int | None = Field(80, ge=0)  # 0 or None: unlimited
    # The token's other business numbers, each with its own throughput limit
    # (messages/s; 0 or None: unlimited): sends from them are accepted and paced
    # apart from phone_number_id's.
    numbers: dict[str, int | None] = Field(default_factory=dict)
    pair_rate_enabled: bool = True
    pair_burst: int = Field(45, ge=1)
    pair_refill_seconds: float = Field(6.0, gt=0)

    # Fault injection
    latency_ms: Duration = 0.0
    latency_spike_rate: Rate = 0.0
    latency_spike_ms: Duration = 0.0
    error_5xx_rate: Rate = 0.0
    drop_after_accept_rate: Rate = 0.0
    # accepted, then the answer trickles a byte at a time for stall_ms: every read
    # gets data, so only a client's total timeout ends the wait
    stall_after_accept_rate: Rate = 0.0
    stall_ms: Duration = 30_000.0
    seed: int | None = None

    # Webhooks out
    webhook_url: str | None = None
    app_secret: str | None = Field(None, repr=False)
    statuses_enabled: bool = True
    status_delay_ms: Duration = 50.0
    read_rate: Rate = 0.0
    status_batch: int = Field(1, ge=1)
    webhook_retries: int = Field(3, ge=0)
    webhook_backoff_ms: Duration = 100.0
    webhook_timeout_seconds: float = 5.0

    # Pricing and identity (2025-26)
    # in-window free-form (service) messages and templates are billable: reported
    # from 2026-10-01; off plays the earlier rule (free inside the window)
    service_billable: bool = False
    # message types ("text", "template") refused with 131062 when addressed to a
    # business-scoped user id (``recipient``)
    bsuid_refused_types: tuple[Literal["text", "template"], ...] = ()

    # Media (sandbox/media.py): how long an uploaded media id lasts, the largest file
    # taken (documents: 100 MB on the platform)
    media_ttl_seconds: Duration = 30 * 24 * 3600.0
    media_max_bytes: int = Field(100 * 1024 * 1024, ge=1)

    def serves(self, phone_number_id: str) -> bool:
        """Is this a number the token may send from?"""
        return phone_number_id == self.phone_number_id or phone_number_id in self.numbers

    def display_of(self, phone_number_id: str) -> str:
        """The number as people see it: ``display_phone_number`` for the default one; the
        others, which the settings name by id alone, get one made from their id."""
        if phone_number_id == self.phone_number_id:
            return self.display_phone_number
        return "1555" + phone_number_id[-7:].rjust(7, "0")

    def limit_of(self, phone_number_id: str) -> int | None:
        """The number's throughput limit (None: unlimited)."""
        if phone_number_id == self.phone_number_id:
            return self.throughput_limit
        return self.numbers.get(phone_number_id)

    def template(self, name: str, language: str) -> Template | None:
        for template in self.templates:
            if template.name == name and template.language == language:
                return template
        return None

    def with_faults(self, changes: Mapping[str, Any]) -> SandboxConfig:
        """A copy with runtime ``changes`` applied; ValueError lists every bad key or value."""
        unknown = sorted(set(changes) - set(RUNTIME_KEYS))
        if unknown:
            raise ValueError(f"unknown keys: {', '.join(unknown)}")
        values = dict(changes)
        if isinstance(values.get("bsuid_refused_types"), list):
            values["bsuid_refused_types"] = tuple(values["bsuid_refused_types"])
        return _validated({**dict(self), **values})

    def public(self) -> dict[str, Any]:
        """The runtime view, without secrets (whether they are set is shown instead)."""
        view = {key: getattr(self, key) for key in RUNTIME_KEYS if key not in SECRET_KEYS}
        view["access_token_set"] = bool(self.access_token)
        view["app_secret_set"] = bool(self.app_secret)
        view["phone_number_id"] = self.phone_number_id
        view["templates"] = [
            {"name": t.name, "language": t.language, "param_count": t.param_count}
            for t in self.templates
        ]
        return view


SECRET_KEYS = frozenset({"access_token", "app_secret"})
# What is fixed for a run (identity, templates, the window, timeouts); every other knob
# may change at runtime.
_STARTUP_ONLY = frozenset(
    {
        "phone_number_id",
        "display_phone_number",
        "waba_id",
        "templates",
        "window_seconds",
        "webhook_timeout_seconds",
    }
)
RUNTIME_KEYS: tuple[str, ...] = tuple(
    name for name in SandboxConfig.model_fields if name not in _STARTUP_ONLY
)


def _validated(values: Mapping[str, Any], names: Mapping[str, str] | None = None) -> SandboxConfig:
    """``SandboxConfig`` of ``values``; ValueError names each bad one (by ``names``, if given:
    the environment variables it came from)."""
    try:
        return SandboxConfig.model_validate(values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else "?"
            shown = (names or {}).get(field, field)
            got = "" if field in SECRET_KEYS else f" (got {error.get('input')!r})"
            problems.append(f"{shown}: {error['msg']}{got}")
        raise ValueError("; ".join(problems)) from None


def config_from_settings(settings: Settings) -> SandboxConfig:
    """The startup config: the configured identity (``WHATSAPP_ACCESS_TOKEN``,
    ``WHATSAPP_PHONE_NUMBER_ID``; the development identity when unset), the signing key
    (``SANDBOX_APP_SECRET``, else ``DEV_APP_SECRET``) and the ``SANDBOX_*`` start values
    (unset: the sandbox's own default)."""
    start = {
        name: value
        for name, value in settings.sandbox
        if value is not None and name not in SECRET_KEYS
    }
    # Its own key, said explicitly, or the development one: a sandbox started beside a
    # real deployment's environment must not sign what the real service accepts.
    app_secret = secret(settings.sandbox.app_secret) or DEV_APP_SECRET
    numbers = {n.id: int(n.limit) for n in settings.whatsapp.business_numbers[1:]}
    identity = {
        **({"numbers": numbers} if numbers else {}),
        "phone_number_id": settings.whatsapp.phone_number_id,
        "access_token": settings.whatsapp.access_token.get_secret_value(),
        "app_secret": app_secret,
    }
    return _validated({**start, **identity}, SandboxSettings.env_names())


def config_from_env(env: Mapping[str, str] | None = None) -> SandboxConfig:
    """``config_from_settings`` over ``Settings.from_env(env)``."""
    return config_from_settings(Settings.from_env(env))
