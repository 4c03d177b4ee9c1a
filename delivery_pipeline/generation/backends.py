"""The configured generator (``GENERATION_BACKEND``): the one place that knows every backend.

Apart from ``generator.py`` so the interface does not import its
implementations (they import it): the factory sits above both.
"""

from __future__ import annotations

from delivery_pipeline.generation.generator import Generator
from delivery_pipeline.generation.offline import OfflineGenerator
from delivery_pipeline.generation.openai import OpenAIGenerator
from delivery_pipeline.settings import GenerationSettings
from delivery_pipeline.settings.urls import secret


def build_generator(settings: GenerationSettings) -> Generator:
    """The configured generator: OpenAI-compatible, or the offline one (the default)."""
    if settings.backend == "openai":
        return OpenAIGenerator(
            settings.openai_base_url,
            settings.openai_model,
            secret(settings.openai_api_key),
            timeout_seconds=settings.timeout_seconds,
            max_retries=settings.max_retries,
        )
    return OfflineGenerator()
