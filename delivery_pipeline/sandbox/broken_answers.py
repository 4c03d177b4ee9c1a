"""Answers the platform breaks on purpose after accepting a message: cut off
mid-body (``drop_after_accept_rate``) or trickled for ``stall_ms``
(``stall_after_accept_rate``)."""

from __future__ import annotations

import asyncio
import json
import logging
from contextvars import ContextVar
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

_dropping: ContextVar[bool] = ContextVar("sandbox_dropping", default=False)


class DropFilter(logging.Filter):
    """Keep uvicorn quiet about the responses we break on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_dropping.get() and "without completing response" in record.getMessage())


class BrokenResponse(Response):
    """Announces the whole body, sends half of it and stops: uvicorn closes the connection."""

    def __init__(self, content: dict[str, Any]) -> None:
        super().__init__(json.dumps(content).encode(), media_type="application/json")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        _dropping.set(True)
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await send(
            {
                "type": "http.response.body",
                "body": self.body[: len(self.body) // 2],
                "more_body": True,
            }
        )


# A stalled answer sends one byte this often: more often than any read timeout.
STALL_STEP_SECONDS = 0.2


class StalledResponse(Response):
    """The whole answer, slowly: the message body at once, then one byte of trailing
    whitespace every ``STALL_STEP_SECONDS`` for ``seconds``. A client that times out
    each read is never timed out; only a total timeout ends its wait."""

    def __init__(self, content: dict[str, Any], seconds: float) -> None:
        self.steps = max(1, round(seconds / STALL_STEP_SECONDS))
        body = json.dumps(content).encode() + b" " * self.steps
        super().__init__(body, media_type="application/json")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        trickle = asyncio.ensure_future(self._trickle(send))
        gone = asyncio.ensure_future(_disconnected(receive))
        # The client giving up ends it too (nothing is left running at shutdown).
        await asyncio.wait({trickle, gone}, return_when=asyncio.FIRST_COMPLETED)
        for task in (trickle, gone):
            task.cancel()
        await asyncio.gather(trickle, gone, return_exceptions=True)

    async def _trickle(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        head = self.body[: -self.steps]
        await send({"type": "http.response.body", "body": head, "more_body": True})
        for step in range(self.steps):
            await asyncio.sleep(STALL_STEP_SECONDS)
            more = step < self.steps - 1
            await send({"type": "http.response.body", "body": b" ", "more_body": more})


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
