"""The sandbox's own tests: a sandbox process of each module's own, reset before
every test, and a receiver for the webhooks it posts, cleared before every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from delivery_pipeline.testing.sandbox import SandboxProcess, WebhookReceiver, start_sandbox


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxProcess]:
    with start_sandbox() as process:
        yield process


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as server:
        yield server


@pytest.fixture(autouse=True)
def clean(sandbox: SandboxProcess, receiver: WebhookReceiver) -> None:
    sandbox.reset()
    receiver.clear()
