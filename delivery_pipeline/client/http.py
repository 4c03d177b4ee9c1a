"""The applications' API from Python: ``DeliveryClient`` (sync) and ``AsyncDeliveryClient``.

Both speak the same calls over httpx and answer plain dicts as the API's
JSON has them (the OpenAPI description says each field). A hand-over always
carries an ``Idempotency-Key`` (yours, or one made for the call), so the
client may retry it safely after a timeout or a dropped connection: a retry
gets the first answer and never a second document. Every call is retried on
429 and 503 after the ``Retry-After`` the service gives; a resend is never
retried blind (a lost answer may mean it went). Anything else the service
refuses is an ``ApiError`` naming the field.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

RETRIES = 3
RETRY_AFTER_MAX_SECONDS = 30.0


class ApiError(Exception):
    """The service refused the call: its problem details (``status``, ``field``, ``detail``)."""

    def __init__(self, status: int, problem: Mapping[str, Any]) -> None:
        self.status = status
        self.problem = dict(problem)
        self.field: str | None = problem.get("field")
        self.detail: str = str(problem.get("detail") or problem.get("title") or status)
        super().__init__(f"{status}: {self.detail}")


@dataclass(frozen=True)
class _Call:
    method: str
    path: str
    body: dict[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    blind_retry: bool = True  # may be sent again when its answer was lost


def _hand_over(
    person: Mapping[str, Any],
    kind: str,
    body: str | None,
    *,
    generate: bool,
    day: dt.date | str | None,
    priority: str | None,
    replace_key: str | None,
    metadata: Mapping[str, Any] | None,
    idempotency_key: str | None,
) -> _Call:
    payload: dict[str, Any] = {"person": dict(person), "kind": kind}
    if body is not None:
        payload["body"] = body
    if generate:
        payload["generate"] = True
    if day is not None:
        payload["day"] = day.isoformat() if isinstance(day, dt.date) else day
    if priority is not None:
        payload["priority"] = priority
    if replace_key is not None:
        payload["replace_key"] = replace_key
    if metadata:
        payload["metadata"] = dict(metadata)
    key = idempotency_key or str(uuid.uuid4())
    return _Call("POST", "/v1/documents", payload, {"Idempotency-Key": key})


def _action(document_id: int, action: str, reason: str | None) -> _Call:
    body = {"reason": reason} if reason else None
    return _Call("POST", f"/v1/documents/{document_id}/{action}", body, blind_retry=False)


def _person(key: str, values: Mapping[str, Any]) -> _Call:
    return _Call("PUT", f"/v1/people/{quote(key, safe='')}", dict(values))


def _answer(response: httpx.Response) -> dict[str, Any] | float:
    """The answer's JSON, or the seconds to wait before retrying; ``ApiError`` else."""
    if response.status_code in (429, 503):
        after = response.headers.get("retry-after", "1")
        return min(float(after) if after.isdigit() else 1.0, RETRY_AFTER_MAX_SECONDS)
    payload = _json(response)
    if response.is_success:
        return payload
    raise ApiError(response.status_code, payload)


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        payload = response.json()
    except ValueError:
        return {"detail": response.text[:200]}
    return payload if isinstance(payload, dict) else {"detail": str(payload)[:200]}


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "User-Agent": "delivery-pipeline-client"}


class DeliveryClient:
    """The API, synchronously: ``with DeliveryClient(url, token) as api: api.hand_over(…)``."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        retries: int = RETRIES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.retries = retries
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=_headers(token),
            timeout=timeout,
            transport=transport,
        )

    def hand_over(
        self,
        person: Mapping[str, Any],
        kind: str = "plan",
        body: str | None = None,
        *,
        generate: bool = False,
        day: dt.date | str | None = None,
        priority: str | None = None,
        replace_key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Hand a document over (or, ``generate=True``, ask for one); the document."""
        return self._send(
            _hand_over(
                person,
                kind,
                body,
                generate=generate,
                day=day,
                priority=priority,
                replace_key=replace_key,
                metadata=metadata,
                idempotency_key=idempotency_key,
            )
        )

    def document(self, document_id: int) -> dict[str, Any]:
        return self._send(_Call("GET", f"/v1/documents/{document_id}"))

    def document_by_key(self, idempotency_key: str) -> dict[str, Any]:
        path = f"/v1/documents/by-idempotency-key/{quote(idempotency_key, safe='')}"
        return self._send(_Call("GET", path))

    def cancel(self, document_id: int, reason: str | None = None) -> dict[str, Any]:
        return self._send(_action(document_id, "cancel", reason))

    def resend(self, document_id: int, reason: str | None = None) -> dict[str, Any]:
        return self._send(_action(document_id, "resend", reason))

    def put_person(self, key: str, **values: Any) -> dict[str, Any]:
        """Create or change the person ``key`` names (phone, locale, time_zone, brief, …)."""
        return self._send(_person(key, values))

    def person(self, key: str) -> dict[str, Any]:
        return self._send(_Call("GET", f"/v1/people/{quote(key, safe='')}"))

    def _send(self, call: _Call) -> dict[str, Any]:
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self._http.request(
                    call.method, call.path, json=call.body, headers=call.headers
                )
            except httpx.TransportError:
                if last or not call.blind_retry:
                    raise
                time.sleep(0.5 * 2**attempt)
                continue
            answer = _answer(response)
            if isinstance(answer, dict):
                return answer
            if last:
                raise ApiError(response.status_code, _json(response))
            time.sleep(answer)
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> DeliveryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncDeliveryClient:
    """The API from asyncio: the same calls as ``DeliveryClient``, awaited."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        retries: int = RETRIES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.retries = retries
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers=_headers(token),
            timeout=timeout,
            transport=transport,
        )

    async def hand_over(
        self,
        person: Mapping[str, Any],
        kind: str = "plan",
        body: str | None = None,
        *,
        generate: bool = False,
        day: dt.date | str | None = None,
        priority: str | None = None,
        replace_key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        return await self._send(
            _hand_over(
                person,
                kind,
                body,
                generate=generate,
                day=day,
                priority=priority,
                replace_key=replace_key,
                metadata=metadata,
                idempotency_key=idempotency_key,
            )
        )

    async def document(self, document_id: int) -> dict[str, Any]:
        return await self._send(_Call("GET", f"/v1/documents/{document_id}"))

    async def document_by_key(self, idempotency_key: str) -> dict[str, Any]:
        path = f"/v1/documents/by-idempotency-key/{quote(idempotency_key, safe='')}"
        return await self._send(_Call("GET", path))

    async def cancel(self, document_id: int, reason: str | None = None) -> dict[str, Any]:
        return await self._send(_action(document_id, "cancel", reason))

    async def resend(self, document_id: int, reason: str | None = None) -> dict[str, Any]:
        return await self._send(_action(document_id, "resend", reason))

    async def put_person(self, key: str, **values: Any) -> dict[str, Any]:
        return await self._send(_person(key, values))

    async def person(self, key: str) -> dict[str, Any]:
        return await self._send(_Call("GET", f"/v1/people/{quote(key, safe='')}"))

    async def _send(self, call: _Call) -> dict[str, Any]:
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = await self._http.request(
                    call.method, call.path, json=call.body, headers=call.headers
                )
            except httpx.TransportError:
                if last or not call.blind_retry:
                    raise
                await asyncio.sleep(0.5 * 2**attempt)
                continue
            answer = _answer(response)
            if isinstance(answer, dict):
                return answer
            if last:
                raise ApiError(response.status_code, _json(response))
            await asyncio.sleep(answer)
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncDeliveryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
