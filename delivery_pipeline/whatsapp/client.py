"""Cloud API client: text, template and document sends over aiohttp, media uploads,
read marks with a typing indicator, typed errors.

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
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

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
T = TypeVar("T")


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


# A document message's caption: the platform's limit.
CAPTION_MAX = 1024


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
        self._media_url = f"{self._number_url}/media"
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
        payload = _message(to, "text", {"preview_url": False, "body": body}, callback_data)
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
        return await self._post(_message(to, "template", template, callback_data), number, ready)

    async def send_document_template(
        self,
        to: str,
        name: str,
        language: str,
        parameters: Mapping[str, str],
        *,
        media_id: str,
        filename: str,
        callback_data: str | None = None,
        number: str | None = None,
        ready: Ready | None = None,
    ) -> str:
        """Send an approved template with a DOCUMENT header: the file ``media_id``
        (uploaded from ``number``: ``upload_media``) shown as ``filename``, and the
        body's named parameters (``{"name": "Ana", …}`` for ``{{name}}``); returns the
        wamid. ``ready`` as for ``send_text``. Outside the window this is how a
        document reaches a person who never writes: one billed message."""
        template = {
            "name": name,
            "language": {"code": language},
            "components": [
                {
                    "type": "header",
                    "parameters": [
                        {"type": "document", "document": {"id": media_id, "filename": filename}}
                    ],
                },
                {
                    "type": "body",
                    "parameters": [
                        {"type": "text", "parameter_name": key, "text": value}
                        for key, value in parameters.items()
                    ],
                },
            ],
        }
        return await self._post(_message(to, "template", template, callback_data), number, ready)

    async def send_document(
        self,
        to: str,
        media_id: str,
        filename: str,
        *,
        caption: str | None = None,
        callback_data: str | None = None,
        number: str | None = None,
        ready: Ready | None = None,
    ) -> str:
        """Send the file ``media_id`` (uploaded from ``number``) as a ``document``
        message, free-form: inside the window only. ``caption`` at most ``CAPTION_MAX``
        characters (ValueError beyond: nothing is sent). Returns the wamid."""
        if caption is not None and len(caption) > CAPTION_MAX:
            raise ValueError(f"a caption holds at most {CAPTION_MAX} characters")
        document: dict[str, Any] = {"id": media_id, "filename": filename}
        if caption:
            document["caption"] = caption
        return await self._post(_message(to, "document", document, callback_data), number, ready)

    async def mark_read(
        self, message_id: str, *, typing: bool = True, number: str | None = None
    ) -> None:
        """Mark the person's message ``message_id`` (and those before it) read on
        ``number``, with a typing indicator (``typing``) shown until our next message or
        25 s: send it only when a message follows within seconds."""
        payload: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": message_id,
        }
        if typing:
            payload["typing_indicator"] = {"type": "text"}
        body = json.dumps(payload).encode()
        await self._request(self._messages(number), body, None, _parse_success)

    async def upload_media(
        self, content: bytes, mime_type: str, filename: str, *, number: str | None = None
    ) -> str:
        """``POST /{number}/media``: upload a file to business number ``number`` (None:
        the configured one); returns its media id, which only that number may send,
        for 30 days. A refusal of the file is ``MediaRefused`` (its type, its size,
        bytes that do not match ``mime_type``: ``errors.MEDIA_UPLOAD_RULES``); other
        errors as for a send."""
        form = aiohttp.FormData()
        form.add_field("messaging_product", "whatsapp")
        form.add_field("type", mime_type)
        form.add_field("file", content, filename=filename, content_type=mime_type)
        body = form()
        url = self._media_url if number is None else f"{self._base}/{number}/media"
        return await self._request(url, body, {"Content-Type": body.content_type}, _parse_media_id)

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
        return await self._request(self._messages(number), data, None, _parse_response)

    def _messages(self, number: str | None) -> str:
        return self._url if number is None else f"{self._base}/{number}/messages"

    async def _request(
        self,
        url: str,
        data: Any,
        headers: dict[str, str] | None,
        parse: Callable[[int, bytes], T],
    ) -> T:
        try:
            async with (
                self._slots,
                self._http().post(url, data=data, headers=headers) as response,
            ):
                return parse(response.status, await response.read())
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


def _parse_success(status: int, raw: bytes) -> None:
    """A read mark's answer: ``{"success": true}``."""
    body = _json_or_none(raw)
    if status == 200 and isinstance(body, dict) and body.get("success") is True:
        return
    if status == 200:
        raise SendOutcomeUnknown(f"HTTP 200 without success: {str(body)[:200]}")
    raise _error_of(status, raw, body)


def _parse_media_id(status: int, raw: bytes) -> str:
    """An upload's answer: ``{"id": "<media id>"}``; its errors read as the media
    endpoint's (``errors.MEDIA_UPLOAD_RULES``)."""
    body = _json_or_none(raw)
    if status == 200 and isinstance(body, dict):
        media_id = body.get("id")
        if isinstance(media_id, str) and media_id:
            return media_id
        raise SendOutcomeUnknown(f"HTTP 200 without a media id: {str(body)[:200]}")
    raise _error_of(status, raw, body, upload=True)


def _message(
    to: str, kind: str, content: dict[str, Any], callback_data: str | None
) -> dict[str, Any]:
    """A message's payload: to whom, its type and that type's object, its callback data."""
    payload: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        **addressed(to),
        "type": kind,
        kind: content,
    }
    if callback_data:
        payload["biz_opaque_callback_data"] = callback_data
    return payload


def _error_of(status: int, raw: bytes, body: Any, *, upload: bool = False) -> CloudApiError:
    """The classified error of an answer that is not a success (``upload``: the media
    endpoint's)."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return from_error_object(body["error"], status, upload=upload)
    if status >= 500:
        return TransientError(code=None, message=f"HTTP {status}", http_status=status)
    return CloudApiError(
        code=None,
        message=f"HTTP {status}: {raw[:200].decode(errors='replace')}",
        http_status=status,
    )
