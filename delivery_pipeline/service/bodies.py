"""Request bodies, read with a limit and a deadline before anything parses them."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs

from starlette.requests import Request

# The whole body's deadline unless the caller gives one (DELIVERY_SERVICE_BODY_TIMEOUT_SECONDS).
BODY_TIMEOUT_SECONDS = 30.0


class TooLarge(Exception):
    """The body is over the limit (declared or streamed)."""


class TooSlow(Exception):
    """The body did not arrive whole within its deadline."""


async def read_limited(request: Request, limit: int) -> bytes:
    """The raw body; ``TooLarge`` as soon as it passes ``limit`` bytes, ``TooSlow`` when it
    is not whole within the app's deadline (``app.state.body_timeout``, else
    ``BODY_TIMEOUT_SECONDS``). A client that leaves mid-body raises
    Starlette's ``ClientDisconnect`` (the app answers it, once, in one counted line)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise TooLarge
    deadline = getattr(request.app.state, "body_timeout", BODY_TIMEOUT_SECONDS)
    body = bytearray()
    try:
        async with asyncio.timeout(deadline):
            async for part in request.stream():
                body.extend(part)
                if len(body) > limit:
                    raise TooLarge
    except TimeoutError:
        raise TooSlow from None
    return bytes(body)


async def read_form(request: Request, limit: int) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (what a plain HTML form posts); the
    first value of each field. Undecodable bytes become U+FFFD rather than an error."""
    body = await read_limited(request, limit)
    fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items()}
