"""Reviewer sessions and sign-in limits, kept in Postgres so every replica agrees.

The cookie is ``<key>.<signature>``: a random key and an HMAC-SHA256 of it
under a key derived from ``REVIEW_TOKEN``, so a forged or garbled cookie is
refused before any query, and changing the token signs every reviewer out.
The session itself is a row (sql/015) found by the key's SHA-256: who signed
in, their CSRF token, until when. Signing out deletes the row: a copied
cookie stops working at once, on every replica. The CSRF token is random per
session and must come back in every form (``csrf_matches``), compared in
constant time; the cookie is ``HttpOnly`` and ``SameSite=Strict`` (set by the
page) and ``Secure`` over HTTPS or with ``REVIEW_COOKIE_SECURE=always``.

Wrong tokens are limited (``store.review.SignInLimits``, from the
``REVIEW_SIGN_IN_*`` settings): a client that sent
``REVIEW_SIGN_IN_CLIENT_FAILURES`` (10) wrong tokens within
``REVIEW_SIGN_IN_WINDOW_SECONDS`` (15 min) waits until the oldest of them
leaves the window; once ``REVIEW_SIGN_IN_FAILURES`` (100) arrived from all
clients together, every client that has not signed in within 30 days waits
too, while known ones keep their own allowance. Held means the token is not
even checked: 429, ``Retry-After``, and the page says when. The client is
the peer's address, or the forwarded one when the peer is a trusted proxy
(``DELIVERY_TRUSTED_PROXIES``: uvicorn rewrites it); an IPv6 client is its
/64, which one machine easily has whole.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field

import psycopg
from psycopg.rows import DictRow

from delivery_pipeline.settings import ReviewSettings
from delivery_pipeline.store.review import (
    Held,
    SignInLimits,
    WrongToken,
    attempt_sign_in,
    end_session,
    live_session,
)
from delivery_pipeline.store.rows import StoredSession
from delivery_pipeline.whatsapp.signature import tokens_match

COOKIE_NAME = "dp_review_session"
SESSION_SECONDS = 12 * 3600
# Separates this key from any other use of the token.
_KEY_PURPOSE = b"delivery_pipeline review session v2"


@dataclass(frozen=True)
class Session:
    name: str
    expires: dt.datetime
    csrf: str


@dataclass(frozen=True)
class SignedIn:
    session: Session
    cookie: str


def client_key(host: str | None) -> str:
    """The client a sign-in limit counts: its address, an IPv6 one as its /64."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:100]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def _hash(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def _session(stored: StoredSession) -> Session:
    return Session(stored.reviewer, stored.expires_at, stored.csrf)


@dataclass(frozen=True)
class Sessions:
    """Signs in (under the limits), reads and ends reviewer sessions."""

    token: str = field(repr=False)
    lifetime_seconds: int = SESSION_SECONDS
    limits: SignInLimits = SignInLimits()
    # Attempts wait for the fleet's lock (store.review.attempt_sign_in) on a connection:
    # one at a time per process, so a burst holds one of the pool's, never all of them.
    one_at_a_time: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False, compare=False)

    @classmethod
    def from_settings(cls, review: ReviewSettings) -> Sessions | None:
        """None when ``REVIEW_TOKEN`` is unset: the page is off."""
        if review.token is None:
            return None
        limits = SignInLimits(
            client_failures=review.sign_in_client_failures,
            failures=review.sign_in_failures,
            window_seconds=review.sign_in_window_seconds,
        )
        return cls(review.token.get_secret_value(), limits=limits)

    @property
    def _key(self) -> bytes:
        return hmac.new(self.token.encode(), _KEY_PURPOSE, hashlib.sha256).digest()

    def _sign(self, key: str) -> str:
        return hmac.new(self._key, key.encode(), hashlib.sha256).hexdigest()

    def token_valid(self, given: str) -> bool:
        """The sign-in check: ``given`` is the review token (constant time)."""
        return tokens_match(given, self.token)

    def key_hash(self, cookie: str | None) -> bytes | None:
        """The stored hash of the session ``cookie`` names, if we signed it."""
        if not cookie or cookie.count(".") != 1:
            return None
        key, signature = cookie.split(".")
        if not key or not tokens_match(signature, self._sign(key)):
            return None
        return _hash(key)

    async def sign_in(
        self, conn: psycopg.AsyncConnection[DictRow], client: str, name: str, given: str
    ) -> SignedIn | Held | WrongToken:
        """``name`` signs in from ``client`` with the token ``given``, if not held."""
        key = secrets.token_urlsafe(32)
        outcome = await attempt_sign_in(
            conn,
            client,
            self.limits,
            lambda: self.token_valid(given),
            {
                "key_hash": _hash(key),
                "reviewer": name,
                "csrf": secrets.token_urlsafe(24),
                "lifetime": dt.timedelta(seconds=self.lifetime_seconds),
            },
        )
        if isinstance(outcome, StoredSession):
            return SignedIn(_session(outcome), f"{key}.{self._sign(key)}")
        return outcome

    async def read(
        self, conn: psycopg.AsyncConnection[DictRow], cookie: str | None
    ) -> Session | None:
        """The live session ``cookie`` names: signed by us, not expired, not signed out."""
        key_hash = self.key_hash(cookie)
        if key_hash is None:
            return None
        stored = await live_session(conn, key_hash)
        return _session(stored) if stored else None

    async def end(self, conn: psycopg.AsyncConnection[DictRow], cookie: str | None) -> None:
        """Sign out: the session ``cookie`` names ends for every replica."""
        key_hash = self.key_hash(cookie)
        if key_hash is not None:
            await end_session(conn, key_hash)

    @staticmethod
    def csrf_matches(session: Session, given: str | None) -> bool:
        return bool(given) and tokens_match(given or "", session.csrf)
