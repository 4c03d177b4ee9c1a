"""The OpenAI-compatible generator: any ``/chat/completions`` endpoint over httpx.

Timeouts and bounded retries per request; a 401/403/404 is a configuration
error (no document can be generated), another 4xx a refusal of this one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from delivery_pipeline.backoff import backoff_seconds
from delivery_pipeline.generation.generator import (
    DocumentSpec,
    GenerationError,
    GeneratorMisconfigured,
    GeneratorRejected,
    GeneratorUnavailable,
)
from delivery_pipeline.model import Kind
from delivery_pipeline.settings.urls import without_password

LANGUAGE_NAMES = {"en": "English", "es": "Spanish", "pt": "Brazilian Portuguese"}
RETRY_AFTER_CAP_SECONDS = 30.0


def _prompts(spec: DocumentSpec) -> list[dict[str, str]]:
    language = LANGUAGE_NAMES.get(spec.locale, "English")
    if spec.kind == Kind.PLAN:
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
        # what errors name: they are stored with the document and shown in Dagster
        self._shown_url = without_password(self.url)
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
                last = GeneratorUnavailable(
                    f"timed out after the request to {self._shown_url}: {exc!r}"
                )
                continue
            except httpx.TransportError as exc:
                last = GeneratorUnavailable(f"could not reach {self._shown_url}: {exc!r}")
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
                    f"{status} from {self._shown_url}: {detail}", _retry_after(response)
                )
                continue
            if status in (401, 403, 404):
                raise GeneratorMisconfigured(
                    f"{status} from {self._shown_url} (check OPENAI_API_KEY, OPENAI_MODEL, "
                    f"OPENAI_BASE_URL): {detail}"
                )
            raise GeneratorRejected(f"{status} from {self._shown_url}: {detail}")
        assert last is not None
        raise last

    def _delay(self, attempt: int, last: GenerationError | None) -> float:
        if isinstance(last, GeneratorUnavailable) and last.retry_after is not None:
            return min(last.retry_after, RETRY_AFTER_CAP_SECONDS)
        return backoff_seconds(attempt, self.retry_base_seconds, RETRY_AFTER_CAP_SECONDS)

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
