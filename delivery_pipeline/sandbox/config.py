"""The sandbox's configuration: what it starts with, and what may change at runtime.

``SandboxConfig`` is immutable; a runtime change (``POST /_sandbox/faults``)
builds a new one with ``with_faults``, which validates every key and value so
a typo in a test fails loudly instead of silently doing nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from delivery_pipeline.sandbox.knock_templates import KNOCK_BUTTON_SPECS
from delivery_pipeline.settings import DEV_ACCESS_TOKEN, DEV_PHONE_NUMBER_ID, Settings, secret

REFUSAL_MODES = ("sync", "async")


@dataclass(frozen=True)
class Template:
    """An approved template: name + language, a fixed text with ``{{n}}`` body parameters."""

    name: str
    language: str
    text: str
    param_count: int
    # Quick-reply buttons' texts, in order (a press comes back as a ``button`` message).
    buttons: tuple[str, ...] = ()

    def render(self, parameters: list[str]) -> str:
        text = self.text
        for index, value in enumerate(parameters, start=1):
            text = text.replace("{{" + str(index) + "}}", value)
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
    # The knock with buttons (README: the template to submit), {{2}}: how many wait.
    *(Template(*spec) for spec in KNOCK_BUTTON_SPECS),
)


@dataclass(frozen=True)
class SandboxConfig:
    """Everything the sandbox does differently from one run to the next."""

    phone_number_id: str = DEV_PHONE_NUMBER_ID
    access_token: str = field(default=DEV_ACCESS_TOKEN, repr=False)
    display_phone_number: str = "15550000000"
    waba_id: str = "100000000000002"
    templates: tuple[Template, ...] = DEFAULT_TEMPLATES
    window_seconds: int = 24 * 3600

    # Refusals and limits
    refusal_mode: str = "sync"
    throughput_limit: int | None = 80
    pair_rate_enabled: bool = True
    pair_burst: int = 45
    pair_refill_seconds: float = 6.0

    # Fault injection
    latency_ms: float = 0.0
    latency_spike_rate: float = 0.0
    latency_spike_ms: float = 0.0
    error_5xx_rate: float = 0.0
    drop_after_accept_rate: float = 0.0
    # accepted, then the answer trickles a byte at a time for stall_ms: every read
    # gets data, so only a client's total timeout ends the wait
    stall_after_accept_rate: float = 0.0
    stall_ms: float = 30_000.0
    seed: int | None = None

    # Webhooks out
    webhook_url: str | None = None
    app_secret: str | None = field(default=None, repr=False)
    statuses_enabled: bool = True
    status_delay_ms: float = 50.0
    read_rate: float = 0.0
    status_batch: int = 1
    webhook_retries: int = 3
    webhook_backoff_ms: float = 100.0
    webhook_timeout_seconds: float = 5.0

    # Pricing and identity (2025-26)
    # in-window free-form (service) messages and templates are billable: reported
    # from 2026-10-01; off plays the earlier rule (free inside the window)
    service_billable: bool = False
    # message types ("text", "template") refused with 131062 when addressed to a
    # business-scoped user id (``recipient``)
    bsuid_refused_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        problems = _problems(asdict(self))
        if problems:
            raise ValueError("; ".join(problems))

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
        problems = _problems(changes)
        if problems:
            raise ValueError("; ".join(problems))
        values = dict(changes)
        if "bsuid_refused_types" in values:
            values["bsuid_refused_types"] = tuple(values["bsuid_refused_types"])
        return replace(self, **values)

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

RUNTIME_KEYS: tuple[str, ...] = (
    "latency_ms",
    "latency_spike_rate",
    "latency_spike_ms",
    "error_5xx_rate",
    "drop_after_accept_rate",
    "stall_after_accept_rate",
    "stall_ms",
    "throughput_limit",
    "pair_burst",
    "pair_refill_seconds",
    "pair_rate_enabled",
    "refusal_mode",
    "access_token",
    "webhook_url",
    "app_secret",
    "status_delay_ms",
    "read_rate",
    "statuses_enabled",
    "status_batch",
    "webhook_retries",
    "webhook_backoff_ms",
    "seed",
    "service_billable",
    "bsuid_refused_types",
)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_RATES = (
    "latency_spike_rate",
    "error_5xx_rate",
    "drop_after_accept_rate",
    "stall_after_accept_rate",
    "read_rate",
)
_DURATIONS = ("latency_ms", "latency_spike_ms", "stall_ms", "status_delay_ms", "webhook_backoff_ms")
_FLAGS = ("pair_rate_enabled", "statuses_enabled", "service_billable")
MESSAGE_TYPES = ("text", "template")
_OPTIONAL_STRINGS = ("webhook_url", "app_secret")


def _problems(values: Mapping[str, Any]) -> list[str]:
    """What is wrong with the given config values (only the keys present are checked)."""
    problems: list[str] = []
    for key, value in values.items():
        if key in _RATES and not (_is_number(value) and 0 <= value <= 1):
            problems.append(f"{key} must be a number between 0 and 1")
        elif key in _DURATIONS and not (_is_number(value) and value >= 0):
            problems.append(f"{key} must be a number >= 0")
        elif key in _FLAGS and not isinstance(value, bool):
            problems.append(f"{key} must be true or false")
        elif key in _OPTIONAL_STRINGS and not (value is None or isinstance(value, str)):
            problems.append(f"{key} must be a string or null")
        elif key == "throughput_limit" and not (value is None or (_is_int(value) and value >= 0)):
            problems.append("throughput_limit must be an integer >= 0 or null (0/null: unlimited)")
        elif key in ("pair_burst", "status_batch") and not (_is_int(value) and value >= 1):
            problems.append(f"{key} must be an integer >= 1")
        elif key == "pair_refill_seconds" and not (_is_number(value) and value > 0):
            problems.append("pair_refill_seconds must be a number > 0")
        elif key == "refusal_mode" and value not in REFUSAL_MODES:
            problems.append(f"refusal_mode must be one of {', '.join(REFUSAL_MODES)}")
        elif key == "access_token" and not (isinstance(value, str) and value):
            problems.append("access_token must be a non-empty string")
        elif key == "seed" and not (value is None or _is_int(value)):
            problems.append("seed must be an integer or null")
        elif key == "webhook_retries" and not (_is_int(value) and value >= 0):
            problems.append("webhook_retries must be an integer >= 0")
        elif key == "bsuid_refused_types" and not (
            isinstance(value, list | tuple) and all(v in MESSAGE_TYPES for v in value)
        ):
            problems.append(f"bsuid_refused_types must be a list of {', '.join(MESSAGE_TYPES)}")
    return problems


def config_from_settings(settings: Settings) -> SandboxConfig:
    """The startup config: the configured identity (``WHATSAPP_ACCESS_TOKEN``,
    ``WHATSAPP_PHONE_NUMBER_ID``, ``WHATSAPP_APP_SECRET``; the development identity
    when unset) and the ``SANDBOX_*`` start values."""
    start = settings.sandbox
    changes: dict[str, Any] = {
        key: value
        for key, value in {
            "webhook_url": start.webhook_url,
            "refusal_mode": start.refusal_mode,
            "latency_ms": start.latency_ms,
            "throughput_limit": start.throughput_limit,
            "read_rate": start.read_rate,
            "pair_rate_enabled": start.pair_rate,
            "status_delay_ms": start.status_delay_ms,
            "status_batch": start.status_batch,
            "seed": start.seed,
            "service_billable": start.service_billable,
            "app_secret": secret(settings.whatsapp.app_secret),
        }.items()
        if value is not None
    }
    return replace(
        SandboxConfig().with_faults(changes),
        phone_number_id=settings.whatsapp.phone_number_id,
        access_token=settings.whatsapp.access_token.get_secret_value(),
    )


def config_from_env(env: Mapping[str, str] | None = None) -> SandboxConfig:
    """``config_from_settings`` over ``Settings.from_env(env)``."""
    return config_from_settings(Settings.from_env(env))
