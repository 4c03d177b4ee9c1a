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
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
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


def _action(document_id: int, action: str, reason: str | None) -> _Call:
    body = {"reason": reason} if reason else None
    return _Call("POST", f"/v1/documents/{document_id}/{action}", body, blind_retry=False)


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


def _judged(
    call: _Call, attempt: int, retries: int, outcome: httpx.Response | httpx.TransportError
) -> dict[str, Any] | float:
    """What an attempt's outcome means: the answer, or the seconds to wait before the
    next attempt; raised, when the call is over (refused, or no attempt left)."""
    last = attempt == retries
    if isinstance(outcome, httpx.TransportError):
        if last or not call.blind_retry:
            raise outcome
        return 0.5 * 2.0**attempt
    answer = _answer(outcome)
    if last and not isinstance(answer, dict):
        raise ApiError(outcome.status_code, _json(outcome))
    return answer


def _options(base_url: str, token: str, timeout: float) -> dict[str, Any]:
    """The httpx client's options, the same for the sync and the async client."""
    return {
        "base_url": base_url.rstrip("/"),
        "headers": {"Authorization": f"Bearer {token}", "User-Agent": "delivery-pipeline-client"},
        "timeout": timeout,
    }


Answer = TypeVar("Answer")


class _Calls(Generic[Answer]):
    """Every call of the API, each one request, written once: ``_send`` carries it, and
    answers the document or person (``DeliveryClient``) or something to await for it
    (``AsyncDeliveryClient``)."""

    retries: int

    def _send(self, call: _Call) -> Answer:
        raise NotImplementedError

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
    ) -> Answer:
        """Hand a document over (or, ``generate=True``, ask for one); the document."""
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
        return self._send(_Call("POST", "/v1/documents", payload, {"Idempotency-Key": key}))

    def document(self, document_id: int) -> Answer:
        return self._send(_Call("GET", f"/v1/documents/{document_id}"))

    def document_by_key(self, idempotency_key: str) -> Answer:
        path = f"/v1/documents/by-idempotency-key/{quote(idempotency_key, safe='')}"
        return self._send(_Call("GET", path))

    def cancel(self, document_id: int, reason: str | None = None) -> Answer:
        return self._send(_action(document_id, "cancel", reason))

    def resend(self, document_id: int, reason: str | None = None) -> Answer:
        return self._send(_action(document_id, "resend", reason))

    def put_person(self, key: str, **values: Any) -> Answer:
        """Create or change the person ``key`` names (phone, locale, time_zone, brief, …)."""
        return self._send(_Call("PUT", f"/v1/people/{quote(key, safe='')}", dict(values)))

    def person(self, key: str) -> Answer:
        return self._send(_Call("GET", f"/v1/people/{quote(key, safe='')}"))


class DeliveryClient(_Calls[dict[str, Any]]):
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
        self._http = httpx.Client(**_options(base_url, token, timeout), transport=transport)

    def _send(self, call: _Call) -> dict[str, Any]:
        for attempt in range(self.retries + 1):
            outcome: httpx.Response | httpx.TransportError
            try:
                outcome = self._http.request(
                    call.method, call.path, json=call.body, headers=call.headers
                )
            except httpx.TransportError as error:
                outcome = error
            answer = _judged(call, attempt, self.retries, outcome)
            if isinstance(answer, dict):
                return answer
            time.sleep(answer)
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> DeliveryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncDeliveryClient(_Calls[Awaitable[dict[str, Any]]]):
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
        self._http = httpx.AsyncClient(**_options(base_url, token, timeout), transport=transport)

    async def _send(self, call: _Call) -> dict[str, Any]:
        for attempt in range(self.retries + 1):
            outcome: httpx.Response | httpx.TransportError
            try:
                outcome = await self._http.request(
                    call.method, call.path, json=call.body, headers=call.headers
                )
            except httpx.TransportError as error:
                outcome = error
            answer = _judged(call, attempt, self.retries, outcome)
            if isinstance(answer, dict):
                return answer
            await asyncio.sleep(answer)
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncDeliveryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
