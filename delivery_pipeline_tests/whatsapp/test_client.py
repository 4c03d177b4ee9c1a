"""A send's ``ready``: awaited right before the request's bytes are written, and
when it raises or takes too long, nothing reaches the platform (the sandbox,
over HTTP) and the send is "not attempted", never "outcome unknown"."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from delivery_pipeline.testing.sandbox import SandboxProcess
from delivery_pipeline.whatsapp import client as client_module
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline.whatsapp.errors import SendNotAttempted

T = TypeVar("T")
TO = "+15550100090"


def with_client(sandbox: SandboxProcess, use: Callable[[CloudApiClient], Awaitable[T]]) -> T:
    async def run() -> T:
        async with CloudApiClient(
            sandbox.url, sandbox.phone_number_id, sandbox.access_token, timeout=5.0
        ) as client:
            return await use(client)

    return asyncio.run(run())


def texts(sandbox: SandboxProcess) -> list[str]:
    return [m["text"] for m in sandbox.inbox(TO)]


def test_the_body_leaves_after_ready_returns(sandbox: SandboxProcess) -> None:
    sandbox.set_window(TO, 60)
    seen: list[list[str]] = []

    async def use(client: CloudApiClient) -> str:
        async def ready() -> None:
            await asyncio.sleep(0.05)
            seen.append(await asyncio.to_thread(texts, sandbox))

        return await client.send_text(TO, "after ready", ready=ready)

    wamid = with_client(sandbox, use)
    assert seen == [[]], "the sandbox had the message before ready returned"
    assert [m["id"] for m in sandbox.inbox(TO)] == [wamid]


def test_a_ready_that_raises_sends_nothing_and_the_next_send_goes(
    sandbox: SandboxProcess,
) -> None:
    sandbox.set_window(TO, 60)

    async def use(client: CloudApiClient) -> str:
        async def refuse() -> None:
            raise RuntimeError("slot missed")

        with pytest.raises(SendNotAttempted, match="slot missed"):
            await client.send_text(TO, "never", ready=refuse)
        return await client.send_text(TO, "next")

    with_client(sandbox, use)
    assert texts(sandbox) == ["next"]


def test_a_ready_that_keeps_the_connection_too_long_sends_nothing(
    sandbox: SandboxProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection held while ``ready`` waits could be closed by the server under
    it (turning a send into an unknown outcome): past READY_SECONDS, no send."""
    sandbox.set_window(TO, 60)
    monkeypatch.setattr(client_module, "READY_SECONDS", 0.05)

    async def use(client: CloudApiClient) -> None:
        async def slow() -> None:
            await asyncio.sleep(1.0)

        with pytest.raises(SendNotAttempted, match="TimeoutError"):
            await client.send_template(TO, "document_ready", "en", ["Ana"], ready=slow)

    with_client(sandbox, use)
    assert texts(sandbox) == [] and sandbox.inbox(TO) == []
