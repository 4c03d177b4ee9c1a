"""The one settings model: every knob, read from the environment in one place.

``Settings.from_env()`` is the only reader of the process environment for
application settings; nothing reads it at import time. ``Settings`` is made of
sections, one a module in ``sections/``: each is a plain pydantic model whose
fields name their environment variable (the section's prefix plus the field
name, or an explicit ``env``) and say what they mean (their ``description``), so
the settings reference (generated from the sections, in ``Settings``' order),
the run launcher (``dagster_defs/launcher.py``) and the Dagster resources all
follow it. Secrets are ``SecretStr`` (the database URL: text kept out of
``repr``, because every connection needs it as text): their values never
appear in a ``repr``, a log line or an error message, nor on Dagster's
resources page (``dagster_defs/resources.py``: each process reads its own
environment; no value is run configuration). Neither does any URL setting
that carries a password in its userinfo (``https://user:key@…``).
Surrounding whitespace is never part of a value: a secret copied from a file
keeps no trailing newline.

Bad values fail with one format, naming the variable: ``SettingsError``.
"""

import os
from collections.abc import Iterator, Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from delivery_pipeline.settings.eligibility import Guard
from delivery_pipeline.settings.section import Section, SettingsError, describe
from delivery_pipeline.settings.sections.api import ApiSettings
from delivery_pipeline.settings.sections.checks import CheckSettings
from delivery_pipeline.settings.sections.database import DatabaseSettings
from delivery_pipeline.settings.sections.delivery import DeliverySettings
from delivery_pipeline.settings.sections.generation import GenerationSettings
from delivery_pipeline.settings.sections.logs import LogSettings
from delivery_pipeline.settings.sections.ops import OpsSettings
from delivery_pipeline.settings.sections.retention import RetentionSettings
from delivery_pipeline.settings.sections.review import ReviewSettings
from delivery_pipeline.settings.sections.sandbox import SandboxSettings
from delivery_pipeline.settings.sections.schedules import ScheduleSettings
from delivery_pipeline.settings.sections.service import ServiceSettings
from delivery_pipeline.settings.sections.whatsapp import WhatsAppSettings
from delivery_pipeline.settings.urls import plain_http_elsewhere


class Settings(BaseModel):
    """Every setting of every part, by section."""

    model_config = ConfigDict(frozen=True)

    database: DatabaseSettings = DatabaseSettings()
    whatsapp: WhatsAppSettings = WhatsAppSettings()
    delivery: DeliverySettings = DeliverySettings()
    service: ServiceSettings = ServiceSettings()
    generation: GenerationSettings = GenerationSettings()
    checks: CheckSettings = CheckSettings()
    ops: OpsSettings = OpsSettings()
    review: ReviewSettings = ReviewSettings()
    retention: RetentionSettings = RetentionSettings()
    schedules: ScheduleSettings = ScheduleSettings()
    api: ApiSettings = ApiSettings()
    sandbox: SandboxSettings = SandboxSettings()
    logs: LogSettings = LogSettings()

    @classmethod
    def sections(cls) -> dict[str, type[Section]]:
        return {
            name: info.annotation
            for name, info in cls.model_fields.items()
            if isinstance(info.annotation, type) and issubclass(info.annotation, Section)
        }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """Every section from the environment; ``SettingsError`` names each bad variable."""
        environ = os.environ if environ is None else environ
        values: dict[str, Section] = {}
        problems: list[str] = []
        for name, section in cls.sections().items():
            try:
                values[name] = section.from_environ(environ)
            except ValidationError as exc:
                problems.extend(describe(section, exc))
        if problems:
            raise SettingsError("bad settings: " + "; ".join(problems))
        return cls(**values)

    def secret_texts(self) -> dict[str, str]:
        """Every secret text in force → the variable it came from (for scrubbing logs)."""
        texts: dict[str, str] = {}
        for name in self.sections():
            section: Section = getattr(self, name)
            texts.update(section.secret_texts())
        return texts

    @classmethod
    def env_names(cls) -> Iterator[str]:
        """Every environment variable the model reads, older names of renamed fields too."""
        for section in cls.sections().values():
            yield from section.env_names().values()
            for older in section.env_aliases().values():
                yield from older

    @classmethod
    def secret_env_names(cls) -> frozenset[str]:
        """Every variable that always holds a secret (``Section.secret_fields``)."""
        names: set[str] = set()
        for section in cls.sections().values():
            env_names, aliases = section.env_names(), section.env_aliases()
            for field in section.secret_fields():
                names.update((env_names[field], *aliases.get(field, ())))
        return frozenset(names)

    @property
    def guard(self) -> Guard:
        """The heartbeat guard's parameters: the eligibility's, and the default number."""
        return {**self.delivery.eligibility, "default_number": self.whatsapp.phone_number_id}

    def replace(self, **sections: Any) -> Self:
        """A copy with some sections' fields changed: ``replace(delivery={"rate_limit": 5})``."""
        changed = {}
        for name, fields in sections.items():
            current: Section = getattr(self, name)
            changed[name] = type(current).model_validate(
                {**current.model_dump(exclude_unset=True), **fields}
            )
        return self.model_copy(update=changed)


def transport_warnings(settings: Settings) -> list[str]:
    """What start-up says loudly, once: a secret that would travel in clear text, or go
    somewhere it is not meant for. (A real token over http:// to another machine is
    refused outright: ``WhatsAppSettings``.)"""
    warnings = []
    whatsapp = settings.whatsapp
    if not whatsapp.uses_dev_identity and whatsapp.api_base_url.startswith("http://"):
        warnings.append(
            f"WHATSAPP_ACCESS_TOKEN is set, but WHATSAPP_API_BASE_URL is {whatsapp.api_base_url}, "
            "a sandbox on this machine: nothing reaches WhatsApp. In production set "
            "WHATSAPP_API_BASE_URL=https://graph.facebook.com"
        )
    generation = settings.generation
    if (
        generation.backend == "openai"
        and generation.openai_api_key is not None
        and plain_http_elsewhere(generation.openai_base_url)
    ):
        warnings.append(
            f"OPENAI_BASE_URL is plain http:// to another machine ({generation.openai_base_url}): "
            "OPENAI_API_KEY and every prompt travel in clear text. Use https://"
        )
    return warnings
