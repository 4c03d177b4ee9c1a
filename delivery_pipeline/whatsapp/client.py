"""Cloud API client: text and template sends over httpx, typed errors.

A success means *accepted* (a wamid came back), not delivered. Errors come back
as the classes in ``errors``; a timeout after the request left is
``SendOutcomeUnknown``, distinct from a refusal and from a request that never
left (``SendNotAttempted``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from delivery_pipeline.settings import Settings
from delivery_pipeline.whatsapp.errors import (
    ApiUnreachable,
    CloudApiError,
    SendNotAttempted,
    SendOutcomeUnknown,
    TransientError,
    from_error_object,
)

MAX_CONNECTIONS = 32


class CloudApiClient:
    """One business phone number's messages endpoint."""

    def __init__(
        self,
        base_url: str,
        phone_number_id: str,
        access_token: str,
        *,
        api_version: str = "v25.0",
        timeout: float = 10.0,
        max_connections: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._number_url = f"{base_url.rstrip('/')}/{api_version}/{phone_number_id}"
        self._url = f"{self._number_url}/messages"
        # Requests beyond the pool wait here, not in httpcore, whose queue
        # costs O(waiting × connections) per request (profiled: most of the
        # CPU at concurrency 192).
        self._slots = asyncio.Semaphore(max_connections)
        self._http = httpx.AsyncClient(
            headers={"Authorization": f"Bearer {access_token}"},
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            # Idle connections are dropped well before a server's keep-alive
            # timeout (uvicorn's is 5 s): reusing one the server is closing
            # turns a send into an "outcome unknown" for no reason.
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
                keepalive_expiry=2.0,
            ),
            transport=transport,
        )

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
            # httpcore scans its whole pool on every request: more connections
            # than this made one process CPU-bound (docs/benchmarks.md); scale
            # out with processes instead.
            max_connections=min(
                max_connections or max(settings.delivery.concurrency, 10), MAX_CONNECTIONS
            ),
        )

    async def __aenter__(self) -> CloudApiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send_text(self, to: str, body: str, *, callback_data: str | None = None) -> str:
        """Send a free-form text; returns the wamid."""
        payload: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to,
            "type": "text",
            "text": {"preview_url": False, "body": body},
        }
        if callback_data:
            payload["biz_opaque_callback_data"] = callback_data
        return await self._post(payload)

    async def send_template(
        self,
        to: str,
        name: str,
        language: str,
        parameters: list[str],
        *,
        callback_data: str | None = None,
    ) -> str:
        """Send an approved template with positional body parameters; returns the wamid."""
        template: dict[str, Any] = {"name": name, "language": {"code": language}}
        if parameters:
            template["components"] = [
                {"type": "body", "parameters": [{"type": "text", "text": p} for p in parameters]}
            ]
        payload: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to,
            "type": "template",
            "template": template,
        }
        if callback_data:
            payload["biz_opaque_callback_data"] = callback_data
        return await self._post(payload)

    async def phone_number(self) -> dict[str, Any]:
        """``GET /{version}/{phone_number_id}``: the number's record. An answer at all
        proves the token may use this number; sends nothing to anyone.

        Raises the classified ``CloudApiError`` (190: the token, 100: the
        number id), or ``ApiUnreachable``."""
        try:
            response = await self._http.get(
                self._number_url, params={"fields": "id,display_phone_number,verified_name"}
            )
        except httpx.TransportError as exc:
            raise ApiUnreachable(
                f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            ) from exc
        body = _json_or_none(response)
        if response.status_code == 200 and isinstance(body, dict):
            return body
        raise _error_of(response, body)

    async def _post(self, payload: dict[str, Any]) -> str:
        try:
            async with self._slots:
                response = await self._http.post(self._url, json=payload)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise SendNotAttempted(f"{type(exc).__name__}: {exc}") from exc
        except (
            httpx.ReadTimeout,
            httpx.WriteTimeout,
            httpx.WriteError,
            httpx.ReadError,
            httpx.RemoteProtocolError,
        ) as exc:
            raise SendOutcomeUnknown(f"{type(exc).__name__}: {exc}") from exc
        return _parse_response(response)


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _parse_response(response: httpx.Response) -> str:
    body = _json_or_none(response)
    if response.status_code == 200 and isinstance(body, dict):
        messages = body.get("messages")
        if isinstance(messages, list) and messages and isinstance(messages[0], dict):
            wamid = messages[0].get("id")
            if isinstance(wamid, str) and wamid:
                return wamid
        # 200 without a message id: the platform said yes but we cannot tie
        # it to anything; treat it as an ambiguous outcome.
        raise SendOutcomeUnknown(f"HTTP 200 without a message id: {str(body)[:200]}")
    raise _error_of(response, body)


def _error_of(response: httpx.Response, body: Any) -> CloudApiError:
    """The classified error of a response that is not a success."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return from_error_object(body["error"], response.status_code)
    if response.status_code >= 500:
        return TransientError(
            code=None, message=f"HTTP {response.status_code}", http_status=response.status_code
        )
    return CloudApiError(
        code=None,
        message=f"HTTP {response.status_code}: {response.text[:200]}",
        http_status=response.status_code,
    )
