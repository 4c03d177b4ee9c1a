"""Making document text: what a generator is given, what it returns, how it fails.

Two implementations: ``offline.OfflineGenerator`` (the default: a real
six-week plan and a short daily brief in the person's language,
deterministic) and ``openai.OpenAIGenerator`` (any OpenAI-compatible
chat-completions endpoint). A generator holds no messaging credentials:
``backends.build_generator`` reads only the generation section of the settings. No
Dagster here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

from delivery_pipeline.model import Kind

# ── what to write, and how it can fail ──────────────────────────────────


@dataclass(frozen=True)
class DocumentSpec:
    """Everything a generator may know: the document and the person's profile.

    ``for_date`` is the day a brief describes, or the day a plan starts, in
    the person's time zone.
    """

    document_id: int
    kind: Kind
    name: str
    locale: str
    time_zone: str
    for_date: dt.date

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", Kind(self.kind))


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
