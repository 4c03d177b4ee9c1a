"""Who is calling, and whether their token may call again now.

A token per application, from ``DELIVERY_API_TOKENS`` (``name=token,…``); an
application may hold several at once, so a new token is handed out before the
old one is withdrawn. A token is compared with every configured one in constant
time (SHA-256 digests of equal length, each compared, none skipped), and is
never logged or stored: the rate's bucket names the application and the first
bytes of the token's digest.

Each token has a rate (``DELIVERY_API_RATE_PER_SECOND``, bursts of
``DELIVERY_API_RATE_BURST``) kept in Postgres (``api_rate_limits``: GCRA, one
row per token), so every replica counts against the same limit. Over it the
answer is 429 with ``Retry-After``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import math
from dataclasses import dataclass
from typing import Any

import psycopg

from delivery_pipeline.settings import ApiSettings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.api import RateTake


@dataclass(frozen=True)
class Caller:
    application: str
    bucket: str  # the token's rate: '<application>:<its digest's first bytes>'


class Tokens:
    """The configured tokens, as digests."""

    def __init__(self, by_token: dict[str, str]) -> None:
        self._digests = [(_digest(token), app) for token, app in by_token.items()]

    @classmethod
    def from_settings(cls, api: ApiSettings) -> Tokens:
        return cls(api.applications_by_token)

    @property
    def configured(self) -> bool:
        return bool(self._digests)

    def caller(self, authorization: str | None) -> Caller | None:
        """The application an ``Authorization: Bearer <token>`` header names, if any."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        given = _digest(token.strip())
        found: tuple[bytes, str] | None = None
        for digest, application in self._digests:
            if hmac.compare_digest(given, digest):
                found = (digest, application)
        if found is None:
            return None
        digest, application = found
        return Caller(application, f"{application}:{digest[:8].hex()}")


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


async def wait_seconds(
    conn: psycopg.AsyncConnection[Any], caller: Caller, api: ApiSettings
) -> float | None:
    """Take one request from the caller's rate: None when allowed, else how long to wait."""
    params: RateTake = {
        "bucket": caller.bucket,
        "interval": dt.timedelta(seconds=1 / api.rate_per_second),
        "burst": api.rate_burst,
    }
    if await QUERIES.api_rate_take.one(conn, params) is not None:
        return None
    wait = await QUERIES.api_rate_wait.one(conn, params)
    return wait if wait is not None else 1 / api.rate_per_second


def retry_after(seconds: float) -> str:
    """``Retry-After`` in whole seconds, at least one."""
    return str(max(1, math.ceil(seconds)))
