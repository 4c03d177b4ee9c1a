"""Making document text: the generator interface and its two implementations.

``OfflineGenerator`` (the default) writes a real six-week plan (several
WhatsApp messages long) and a short daily brief, in the person's language,
deterministically from their profile and the date. ``OpenAIGenerator`` asks
any OpenAI-compatible chat-completions endpoint over httpx, with timeouts and
bounded retries.

A generator holds no messaging credentials: its settings are read from the
``GENERATOR_*`` and ``OPENAI_*`` variables only, never from the
``WHATSAPP_*`` ones. No Dagster here.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import httpx

from delivery_pipeline.envvars import env_number
from delivery_pipeline.generation.texts import DATE_FORMAT, FRAME, MONTHS, THEMES, WEEKDAYS

log = logging.getLogger(__name__)

KINDS = ("plan", "daily_brief")
LANGUAGE_NAMES = {"en": "English", "es": "Spanish", "pt": "Brazilian Portuguese"}
BACKENDS = ("offline", "openai")
RETRY_AFTER_CAP_SECONDS = 30.0


# ── what to write, and how it can fail ──────────────────────────────────


@dataclass(frozen=True)
class DocumentSpec:
    """Everything a generator may know: the document and the person's profile.

    ``for_date`` is the day a brief describes, or the day a plan starts, in
    the person's time zone.
    """

    document_id: int
    kind: str
    name: str
    locale: str
    time_zone: str
    for_date: dt.date

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")


class GenerationError(Exception):
    """The generator could not write this document now; worth retrying later."""


class GeneratorUnavailable(GenerationError):
    """Network trouble, a timeout, throttling or a 5xx: retry with backoff."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class GeneratorRejected(GenerationError):
    """The backend refused this document (a 4xx about the request): retrying won't help."""


class GeneratorMisconfigured(GenerationError):
    """No document can be generated (bad key, unknown model or URL): stop and tell ops."""


class Generator(Protocol):
    """Writes the body of one document."""

    name: str

    def generate(self, spec: DocumentSpec) -> str: ...


# ── offline: deterministic, multilingual ────────────────────────────────


def format_date(day: dt.date, locale: str) -> str:
    """``Monday 3 March`` / ``lunes 3 de marzo`` / ``segunda-feira, 3 de março``."""
    return DATE_FORMAT[locale].format(
        weekday=WEEKDAYS[locale][day.weekday()], day=day.day, month=MONTHS[locale][day.month - 1]
    )


def _seed(*parts: object) -> int:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


class OfflineGenerator:
    """No network, no model: the same profile and date always give the same text."""

    name = "offline"

    def generate(self, spec: DocumentSpec) -> str:
        locale = spec.locale if spec.locale in FRAME else "en"
        name = " ".join(spec.name.split()) or {"en": "friend", "es": "amigo", "pt": "amigo"}[locale]
        if spec.kind == "plan":
            return self._plan(spec, locale, name)
        return self._brief(spec, locale, name)

    def _plan(self, spec: DocumentSpec, locale: str, name: str) -> str:
        frame = FRAME[locale]
        themes = THEMES[locale]
        # Rest and reflection looks back on the others, so it stays last; the
        # first five rotate per person and document.
        rotation = _seed(spec.document_id, spec.name, spec.for_date) % (len(themes) - 1)
        order = [*themes[:-1][rotation:], *themes[:-1][:rotation], themes[-1]]
        start = spec.for_date
        paragraphs = [
            frame["plan_title"].format(name=name),
            frame["plan_intro"].format(start=format_date(start, locale)),
            frame["plan_how"],
        ]
        for number, theme in enumerate(order, start=1):
            week_start = start + dt.timedelta(days=7 * (number - 1))
            days = [week_start + dt.timedelta(days=i) for i in range(7)]
            paragraphs.append(
                frame["week_heading"].format(
                    number=number,
                    start=format_date(days[0], locale),
                    end=format_date(days[-1], locale),
                    title=_capitalize(theme["title"]),
                )
            )
            paragraphs.append(theme["why"])
            paragraphs.append(
                "\n".join(
                    f"• {_capitalize(format_date(day, locale))}: {_capitalize(action)}"
                    for day, action in zip(days, theme["actions"], strict=True)
                )
            )
            paragraphs.append(frame["hard"].format(text=_capitalize(theme["hard"])))
            paragraphs.append(frame["question"].format(text=_capitalize(theme["question"])))
            paragraphs.append(frame["check"].format(number=number))
        paragraphs.append(frame["plan_closing"].format(name=name))
        return "\n\n".join(paragraphs)

    def _brief(self, spec: DocumentSpec, locale: str, name: str) -> str:
        frame = FRAME[locale]
        day = spec.for_date
        theme = THEMES[locale][(day.toordinal() + _seed(spec.name)) % len(THEMES[locale])]
        return "\n\n".join(
            [
                frame["brief_greeting"].format(name=name, date=format_date(day, locale)),
                frame["brief_focus"].format(
                    title=theme["title"], action=theme["actions"][day.weekday()]
                ),
                frame["brief_question"].format(question=theme["question"]),
                frame["brief_closing"],
            ]
        )


# ── OpenAI-compatible chat completions ──────────────────────────────────


def _prompts(spec: DocumentSpec) -> list[dict[str, str]]:
    language = LANGUAGE_NAMES.get(spec.locale, "English")
    if spec.kind == "plan":
        task = (
            f"Write a six-week personal growth plan for {spec.name or 'the reader'}, starting "
            f"{spec.for_date.isoformat()}. One theme per week; for each week a short paragraph "
            "on why it matters, one small concrete action per day with its date, what to do "
            "when it gets hard, and an evening question. Open with a short introduction and "
            "close with a warm paragraph."
        )
    else:
        task = (
            f"Write a short morning brief for {spec.name or 'the reader'} for "
            f"{spec.for_date.isoformat()}: a greeting, one theme and one small action for the "
            "day, and one question for the evening. At most 600 characters."
        )
    system = (
        f"You write in {language} for a WhatsApp message. Plain text only: no markdown "
        "headings, tables or links; paragraphs separated by a blank line. The reader's "
        f"time zone is {spec.time_zone}. Address them by name, warmly and concretely."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": task}]


class OpenAIGenerator:
    """An OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, vLLM, Ollama, …)."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout_seconds: float = 60.0,
        max_retries: int = 2,
        retry_base_seconds: float = 1.0,
        temperature: float = 0.7,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be at least 0")
        self.url = f"{base_url.rstrip('/')}/chat/completions"
        self.model = model
        self.max_retries = max_retries
        self.retry_base_seconds = retry_base_seconds
        self.temperature = temperature
        self._sleep = sleep
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout_seconds, connect=min(timeout_seconds, 5.0)),
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> OpenAIGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def generate(self, spec: DocumentSpec) -> str:
        payload = {"model": self.model, "messages": _prompts(spec), "temperature": self.temperature}
        last: GenerationError | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                self._sleep(self._delay(attempt, last))
            try:
                response = self._http.post(self.url, json=payload)
            except httpx.TimeoutException as exc:
                last = GeneratorUnavailable(f"timed out after the request to {self.url}: {exc!r}")
                continue
            except httpx.TransportError as exc:
                last = GeneratorUnavailable(f"could not reach {self.url}: {exc!r}")
                continue
            status = response.status_code
            if status == 200:
                try:
                    return self._content(response)
                except GeneratorUnavailable as exc:
                    last = exc
                    continue
            detail = response.text[:300]
            if status in (408, 409, 429) or status >= 500:
                last = GeneratorUnavailable(
                    f"{status} from {self.url}: {detail}", _retry_after(response)
                )
                continue
            if status in (401, 403, 404):
                raise GeneratorMisconfigured(
                    f"{status} from {self.url} (check OPENAI_API_KEY, OPENAI_MODEL, "
                    f"OPENAI_BASE_URL): {detail}"
                )
            raise GeneratorRejected(f"{status} from {self.url}: {detail}")
        assert last is not None
        raise last

    def _delay(self, attempt: int, last: GenerationError | None) -> float:
        if isinstance(last, GeneratorUnavailable) and last.retry_after is not None:
            return min(last.retry_after, RETRY_AFTER_CAP_SECONDS)
        return self.retry_base_seconds * 2 ** (attempt - 1)

    @staticmethod
    def _content(response: httpx.Response) -> str:
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise GeneratorUnavailable(f"unexpected response shape: {response.text[:200]}") from exc
        if not isinstance(content, str) or not content.strip():
            raise GeneratorUnavailable("the model returned an empty message")
        return content.strip()


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(float(response.headers["retry-after"]), 0.0)
    except (KeyError, ValueError):
        return None


# ── settings: GENERATOR_* and OPENAI_* only ─────────────────────────────


@dataclass(frozen=True)
class GeneratorSettings:
    """Which generator, and how to reach it. Deliberately apart from ``Settings``,
    which carries the WhatsApp credentials the generator must never hold."""

    backend: str = "offline"
    openai_base_url: str = "https://api.openai.com/v1"
    openai_model: str = "gpt-4o-mini"
    openai_api_key: str | None = field(default=None, repr=False)
    timeout_seconds: float = 60.0
    max_retries: int = 2

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"GENERATOR_BACKEND must be one of {', '.join(BACKENDS)}")
        if self.timeout_seconds <= 0:
            raise ValueError("GENERATOR_TIMEOUT_SECONDS must be positive")
        if self.max_retries < 0:
            raise ValueError("GENERATOR_MAX_RETRIES must be at least 0")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GeneratorSettings:
        env = os.environ if env is None else env
        d = cls()
        return cls(
            backend=(env.get("GENERATOR_BACKEND") or d.backend).strip().lower(),
            openai_base_url=env.get("OPENAI_BASE_URL") or d.openai_base_url,
            openai_model=env.get("OPENAI_MODEL") or d.openai_model,
            openai_api_key=env.get("OPENAI_API_KEY") or None,
            timeout_seconds=env_number(env, "GENERATOR_TIMEOUT_SECONDS", d.timeout_seconds),
            max_retries=env_number(env, "GENERATOR_MAX_RETRIES", d.max_retries, int),
        )

    def build(self) -> Generator:
        if self.backend == "openai":
            return OpenAIGenerator(
                self.openai_base_url,
                self.openai_model,
                self.openai_api_key,
                timeout_seconds=self.timeout_seconds,
                max_retries=self.max_retries,
            )
        return OfflineGenerator()
