"""The sandbox's configuration: what it starts with, and what may change at runtime.

``SandboxConfig`` is immutable; a runtime change (``POST /_sandbox/faults``)
builds a new one with ``with_faults``, which validates every key and value so
a typo in a test fails loudly instead of silently doing nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from delivery_pipeline.settings import SANDBOX_ACCESS_TOKEN, SANDBOX_PHONE_NUMBER_ID

REFUSAL_MODES = ("sync", "async")


@dataclass(frozen=True)
class Template:
    """An approved template: name + language, a fixed text with ``{{n}}`` body parameters."""

    name: str
    language: str
    text: str
    param_count: int

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
)


@dataclass(frozen=True)
class SandboxConfig:
    """Everything the sandbox does differently from one run to the next."""

    phone_number_id: str = SANDBOX_PHONE_NUMBER_ID
    access_token: str = field(default=SANDBOX_ACCESS_TOKEN, repr=False)
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

    def __post_init__(self) -> None:
        problems = _problems(asdict(self))
        if problems:
            raise ValueError("; ".join(problems))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SandboxConfig:
        """The startup config read from the environment (see ``config_from_env``)."""
        return config_from_env(env)

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
        return replace(self, **dict(changes))

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
)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_RATES = ("latency_spike_rate", "error_5xx_rate", "drop_after_accept_rate", "read_rate")
_DURATIONS = ("latency_ms", "latency_spike_ms", "status_delay_ms", "webhook_backoff_ms")
_FLAGS = ("pair_rate_enabled", "statuses_enabled")
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
    return problems


def _env_number(env: Mapping[str, str], name: str, kind: type) -> Any:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        return kind(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be a number, got {raw!r}") from exc


def config_from_env(env: Mapping[str, str] | None = None) -> SandboxConfig:
    """The startup config: defaults, overridden by ``SANDBOX_*`` / ``WHATSAPP_APP_SECRET``."""
    env = os.environ if env is None else env
    changes: dict[str, Any] = {}
    if env.get("SANDBOX_WEBHOOK_URL"):
        changes["webhook_url"] = env["SANDBOX_WEBHOOK_URL"]
    if env.get("WHATSAPP_APP_SECRET"):
        changes["app_secret"] = env["WHATSAPP_APP_SECRET"]
    if env.get("SANDBOX_REFUSAL_MODE"):
        changes["refusal_mode"] = env["SANDBOX_REFUSAL_MODE"].strip().lower()
    pair_rate = env.get("SANDBOX_PAIR_RATE", "").strip().lower()
    if pair_rate:
        if pair_rate not in ("on", "off", "true", "false", "1", "0"):
            raise ValueError(f"SANDBOX_PAIR_RATE must be on or off, got {pair_rate!r}")
        changes["pair_rate_enabled"] = pair_rate in ("on", "true", "1")
    numbers = {
        "latency_ms": ("SANDBOX_LATENCY_MS", float),
        "throughput_limit": ("SANDBOX_THROUGHPUT_LIMIT", int),
        "read_rate": ("SANDBOX_READ_RATE", float),
        "status_delay_ms": ("SANDBOX_STATUS_DELAY_MS", float),
        "status_batch": ("SANDBOX_STATUS_BATCH", int),
        "seed": ("SANDBOX_SEED", int),
    }
    for key, (name, kind) in numbers.items():
        value = _env_number(env, name, kind)
        if value is not None:
            changes[key] = value
    return SandboxConfig().with_faults(changes)
