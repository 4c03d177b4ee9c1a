"""The knock's end-to-end tests: the engine's settings and the webhook service knock
with ``knock_templates`` (the button knock unless a module says otherwise), and the
service receives the sandbox's webhooks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from delivery_pipeline.settings import Settings
from delivery_pipeline.testing.sandbox import SandboxProcess
from delivery_pipeline.testing.service import ServiceProcess
from delivery_pipeline_tests.support.engine import BUTTON_KNOCKS, hooked_service


@pytest.fixture
def knock_templates() -> str:
    """DELIVERY_KNOCK_TEMPLATES for the engine and the service."""
    return BUTTON_KNOCKS


@pytest.fixture
def knock_settings(settings: Settings, knock_templates: str) -> Settings:
    return settings.replace(delivery={"knock_templates": knock_templates})


@pytest.fixture
def service(
    sandbox: SandboxProcess, knock_settings: Settings, knock_templates: str
) -> Iterator[ServiceProcess]:
    with hooked_service(
        sandbox, knock_settings.database.database_url, DELIVERY_KNOCK_TEMPLATES=knock_templates
    ) as svc:
        yield svc
