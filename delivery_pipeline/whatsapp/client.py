"""Cloud API client: text and template sends over aiohttp, typed errors.

A success means *accepted* (a wamid came back), not delivered. Errors come back
as the classes in ``errors``; a timeout after the request left is
``SendOutcomeUnknown``, distinct from a refusal and from a request that never
left (``SendNotAttempted``).

aiohttp rather than httpx: a send is the engine's most frequent operation, and
on this project's machine aiohttp (C parser, no anyio layer) costs an order of
magnitude less CPU per request (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from delivery_pipeline.settings import Settings
from delivery_pipeline.whatsapp.errors import (
    ApiUnreachable,
    CloudApiError,
    SendNotAttempted,
    SendOutcomeUnknown,
    TransientError,
    from_error_object,
)

# A cap on one process's connections to the API (aiohttp's cost per request
# does not grow with its pool, unlike httpcore's did: docs/benchmarks.md).
MAX_CONNECTIONS = 128
# Idle connections are dropped well before a server's keep-alive timeout
# (uvicorn's is 5 s): reusing one the server is closing turns a send into an
# "outcome unknown" for no reason.
KEEPALIVE_SECONDS = 2.0
# A connect takes at most this long (or the send timeout, if shorter).
CONNECT_TIMEOUT_MAX = 5.0
# A send's ``ready`` may wait this long, holding its connection: far below a
# server's keep-alive, so that the connection it holds is not closed under it.
READY_SECONDS = 1.0

# Awaited right before a send's bytes are written; raising there sends nothing.
Ready = Callable[[], Awaitable[None]]


class NotWritten(Exception):
    """``ready`` raised: the request was never written."""


class _WrittenWhenReady(aiohttp.BytesPayload):
    """A request body written only once ``ready`` has returned. The request's
    headers wait in aiohttp's buffer for the body, so headers and body leave
    together, in the same step of the event loop as ``ready`` returned: nothing
    of ours runs in between."""

    def __init__(self, body: bytes, ready: Ready) -> None:
        super().__init__(body, content_type="application/json")
        self._ready = ready

    async def write_with_length(
        self, writer: aiohttp.abc.AbstractStreamWriter, content_length: int | None
    ) -> None:
        try:
            async with asyncio.timeout(READY_SECONDS):
                await self._ready()
        except Exception as exc:
            # Not an OSError (as a timeout is): aiohttp hands this one back to
            # the request as a connection error caused by it, which _post knows.
            raise NotWritten(
                f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            ) from exc
        await super().write_with_length(writer, content_length)


def addressed(to: str) -> dict[str, str]:
    """Who a message is for: ``to`` with an E.164 number, ``recipient`` with a
    business-scoped user id (a person who uses a username and shared no number)."""
    return {"to": to} if to.startswith("+") else {"recipient": to}


class CloudApiClient:
    """The messages endpoint of the business phone numbers one token may use: the
    configured number's, or any other's a send names (``number``)."""

    def __init__(
        self,
        base_url: str,
        phone_number_id: str,
        access_token: str,
        *,
        api_version: str = "v25.0",
        timeout: float = 10.0,
        max_connections: int = 100,
    ) -> None:
        self._base = f"{base_url.rstrip('/')}/{api_version}"
        self._number_url = f"{self._base}/{phone_number_id}"
        self._url = f"{self._number_url}/messages"
        self._headers = {
            "Authorization": f"Bearer {access_token}",
            "Content-Type": "application/json",
        }
        # Per operation, a connect and each read of the answer: a connect that times
        # out never sent anything (not attempted), a silent answer is an unknown
        # outcome. And in total, connect plus answer: an answer that keeps trickling
        # in (every read gets a byte) must not hold a send, its slot and its claim
        # forever. The connect's own limit is always first, so the two stay told apart.
        connect = min(timeout, CONNECT_TIMEOUT_MAX)
        self._timeout = aiohttp.ClientTimeout(
            total=connect + timeout, connect=None, sock_connect=connect, sock_read=timeout
        )
        self._max_connections = max_connections
        # Requests beyond the pool wait here, never inside the connector.
        self._slots = asyncio.Semaphore(max_connections)
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_settings(
        cls, settings: Settings, *, max_connections: int | None = None
    ) -> CloudApiClient:
        whatsapp = settings.whatsapp
        return cls(
            whatsapp.api_base_url,
            whatsapp.phone_number_id,
            whatsapp.access_token.get_secret_value(),
            api_version=whatsapp.api_version,
            timeout=whatsapp.send_timeout,
            max_connections=min(
                max_connections or max(settings.delivery.concurrency, 10), MAX_CONNECTIONS
            ),
        )

    async def __aenter__(self) -> CloudApiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def _http(self) -> aiohttp.ClientSession:
        # Made on first use, inside the event loop that will use it.
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                timeout=self._timeout,
                connector=aiohttp.TCPConnector(
                    limit=self._max_connections, keepalive_timeout=KEEPALIVE_SECONDS
                ),
            )
        return self._session

    async def send_text(
        self,
        to: str,
        body: str,
        *,
        callback_data: str | None = None,
        number: str | None = None,
        ready: Ready | None = None,
    ) -> str:
        """Send a free-form text to a number or a BSUID (``addressed``) from business
        number ``number`` (None: the configured one); returns the wamid. ``ready``
        is awaited right before the request's bytes are written (at most
        ``READY_SECONDS``); if it raises, nothing is sent (``SendNotAttempted``)."""
        payload: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            **addressed(to),
            "type": "text",
            "text": {"preview_url": False, "body": body},
        }
        if callback_data:
            payload["biz_opaque_callback_data"] = callback_data
        return await self._post(payload, number, ready)

    async def send_template(
        self,
        to: str,
        name: str,
        language: str,
        parameters: list[str],
        *,
        callback_data: str | None = None,
        button_payloads: tuple[str, ...] = (),
        number: str | None = None,
        ready: Ready | None = None,
    ) -> str:
        """Send an approved template with positional body parameters and, for a
        template with quick-reply buttons, each button's payload (in button order:
        the press comes back with it), from business number ``number`` (None: the
        configured one); returns the wamid. ``ready`` as for ``send_text``."""
        template: dict[str, Any] = {"name": name, "language": {"code": language}}
        components: list[dict[str, Any]] = []
        if parameters:
            components.append(
                {"type": "body", "parameters": [{"type": "text", "text": p} for p in parameters]}
            )
        for index, button in enumerate(button_payloads):
            components.append(
                {
                    "type": "button",
                    "sub_type": "quick_reply",
                    "index": str(index),
                    "parameters": [{"type": "payload", "payload": button}],
                }
            )
        if components:
            template["components"] = components
        payload: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            **addressed(to),
            "type": "template",
            "template": template,
        }
        if callback_data:
            payload["biz_opaque_callback_data"] = callback_data
        return await self._post(payload, number, ready)

    async def phone_number(self, number: str | None = None) -> dict[str, Any]:
        """``GET /{version}/{phone_number_id}``: the record of ``number`` (None: the
        default number). An answer at all proves the token may use this number;
        sends nothing to anyone.

        Raises the classified ``CloudApiError`` (190: the token, 100: the
        number id), or ``ApiUnreachable``."""
        params = {"fields": "id,display_phone_number,verified_name"}
        try:
            url = self._number_url if number is None else f"{self._base}/{number}"
            async with self._http().get(url, params=params) as response:
                status, raw = response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ApiUnreachable(
                f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            ) from exc
        body = _json_or_none(raw)
        if status == 200 and isinstance(body, dict):
            return body
        raise _error_of(status, raw, body)

    async def _post(
        self, payload: dict[str, Any], number: str | None = None, ready: Ready | None = None
    ) -> str:
        body = json.dumps(payload).encode()
        data = body if ready is None else _WrittenWhenReady(body, ready)
        url = self._url if number is None else f"{self._base}/{number}/messages"
        try:
            async with self._slots, self._http().post(url, data=data) as response:
                return _parse_response(response.status, await response.read())
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            raise SendNotAttempted(f"{type(exc).__name__}: {exc}") from exc
        except (
            aiohttp.ServerTimeoutError,
            aiohttp.ServerDisconnectedError,
            aiohttp.ClientPayloadError,
            aiohttp.ClientOSError,
            TimeoutError,
        ) as exc:
            raise SendOutcomeUnknown(f"{type(exc).__name__}: {exc}") from exc
        except aiohttp.ClientConnectionError as exc:
            # aiohttp's word for "the body could not be written": by ``ready``,
            # before a byte left, or by the connection, after some may have.
            if isinstance(exc.__cause__, NotWritten):
                raise SendNotAttempted(f"not ready to send: {exc.__cause__}") from exc
            raise SendOutcomeUnknown(f"{type(exc).__name__}: {exc}") from exc


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _parse_response(status: int, raw: bytes) -> str:
    body = _json_or_none(raw)
    if status == 200 and isinstance(body, dict):
        messages = body.get("messages")
        if isinstance(messages, list) and messages and isinstance(messages[0], dict):
            wamid = messages[0].get("id")
            if isinstance(wamid, str) and wamid:
                return wamid
        # 200 without a message id: the platform said yes but we cannot tie
        # it to anything; treat it as an ambiguous outcome.
        raise SendOutcomeUnknown(f"HTTP 200 without a message id: {str(body)[:200]}")
    raise _error_of(status, raw, body)


def _error_of(status: int, raw: bytes, body: Any) -> CloudApiError:
    """The classified error of an answer that is not a success."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return from_error_object(body["error"], status)
    if status >= 500:
        return TransientError(code=None, message=f"HTTP {status}", http_status=status)
    return CloudApiError(
        code=None,
        message=f"HTTP {status}: {raw[:200].decode(errors='replace')}",
        http_status=status,
    )
