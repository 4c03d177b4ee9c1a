"""Request bodies, read with a limit before anything parses them."""

from __future__ import annotations

from urllib.parse import parse_qs

from starlette.requests import Request


class TooLarge(Exception):
    """The body is over the limit (declared or streamed)."""


async def read_limited(request: Request, limit: int) -> bytes:
    """The raw body; ``TooLarge`` as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise TooLarge
    body = bytearray()
    async for part in request.stream():
        body.extend(part)
        if len(body) > limit:
            raise TooLarge
    return bytes(body)


async def read_form(request: Request, limit: int) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (what a plain HTML form posts); the
    first value of each field. Undecodable bytes become U+FFFD rather than an error."""
    body = await read_limited(request, limit)
    fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items()}
