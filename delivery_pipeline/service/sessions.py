"""Reviewer sessions and sign-in limits, kept in Postgres so every replica agrees.

Who signs in, with which right, comes from the token given:

* ``REVIEW_TOKEN``: the shared reviewer token. Whoever holds it reviews under
  the name they type: a name that says who they claim to be, nothing more.
* ``REVIEW_TOKENS`` (``name=token,…``): a reviewer's own token; the name their
  decisions are kept under comes from the token, whatever the form says.
* ``OPERATOR_TOKENS`` (``name=token,…``): an operator's own token; they review
  and may also cancel and resend any document (``Session.operator``), which a
  reviewer may not.

The cookie is ``<key>.<signature>``: a random key and an HMAC-SHA256 of it
under a key derived from every token (and each person's name and right), so a
forged or garbled cookie is refused before any query, and changing any token,
name or right signs everyone out. The session itself is a row (sql/migrations/015, 042)
found by the key's SHA-256: who signed in, whether an operator, their CSRF
token, until when. The sign-in form has a CSRF token too, before any session: an
HMAC of a random nonce the browser holds in a cookie of its own. Signing out deletes
the row: a copied cookie stops working at once, on every replica. The CSRF token is random per
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
from collections.abc import Mapping
from dataclasses import dataclass, field

import psycopg
from psycopg.rows import DictRow

from delivery_pipeline.settings import ReviewSettings
from delivery_pipeline.store.review import (
    Held,
    NameRequired,
    SignInLimits,
    WrongToken,
    attempt_sign_in,
    end_session,
    live_session,
)
from delivery_pipeline.store.rows.review import NewSession, StoredSession
from delivery_pipeline.whatsapp.signature import tokens_match

COOKIE_NAME = "dp_review_session"
# Before a session: the sign-in form's own CSRF nonce (sign_in_csrf), for this browser.
SIGN_IN_COOKIE = "dp_review_sign_in"
_SIGN_IN_PURPOSE = b"sign-in form\0"
SESSION_SECONDS = 12 * 3600
# Separates this key from any other use of the token.
_KEY_PURPOSE = b"delivery_pipeline review session v2"


@dataclass(frozen=True)
class Person:
    """Whom a token signs in: a name (None: the shared token's, the form gives it) and
    whether they are an operator."""

    name: str | None
    operator: bool = False


@dataclass(frozen=True)
class Session:
    name: str
    expires: dt.datetime
    csrf: str
    operator: bool = False


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
    return Session(stored.reviewer, stored.expires_at, stored.csrf, stored.operator)


@dataclass(frozen=True)
class Sessions:
    """Signs in (under the limits), reads and ends reviewer and operator sessions."""

    token: str | None = field(default=None, repr=False)  # REVIEW_TOKEN, shared
    people: Mapping[str, Person] = field(default_factory=dict, repr=False)  # token → person
    lifetime_seconds: int = SESSION_SECONDS
    limits: SignInLimits = SignInLimits()
    # Attempts wait for the fleet's lock (store.review.attempt_sign_in) on a connection:
    # one at a time per process, so a burst holds one of the pool's, never all of them.
    one_at_a_time: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False, compare=False)

    @classmethod
    def from_settings(cls, review: ReviewSettings) -> Sessions | None:
        """None when no token is set (``REVIEW_TOKEN``, ``REVIEW_TOKENS``,
        ``OPERATOR_TOKENS``): the page is off."""
        if not review.page_on:
            return None
        limits = SignInLimits(
            client_failures=review.sign_in_client_failures,
            failures=review.sign_in_failures,
            window_seconds=review.sign_in_window_seconds,
        )
        people = {
            token: Person(name, operator)
            for operator in (False, True)
            for token, name in review.people_by_token(operators=operator).items()
        }
        shared = review.token.get_secret_value() if review.token is not None else None
        return cls(shared, people, limits=limits)

    @property
    def _key(self) -> bytes:
        # The shared token alone keeps the key (and every cookie) it had before people
        # had tokens of their own.
        material = "\0".join(
            [
                self.token or "",
                *sorted(f"{t}\0{p.name}\0{p.operator}" for t, p in self.people.items()),
            ]
        )
        return hmac.new(material.encode(), _KEY_PURPOSE, hashlib.sha256).digest()

    def _sign(self, key: str) -> str:
        return hmac.new(self._key, key.encode(), hashlib.sha256).hexdigest()

    def identify(self, given: str) -> Person | None:
        """Whom the token ``given`` signs in, or None. Compared with every token, each in
        constant time, so the answer's timing says nothing about which one matched."""
        found = None
        for token, person in self.people.items():
            if tokens_match(given, token):
                found = person
        if self.token is not None and tokens_match(given, self.token):
            found = Person(None)
        return found

    def token_valid(self, given: str) -> bool:
        """The sign-in check: ``given`` is one of the tokens (constant time)."""
        return self.identify(given) is not None

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
    ) -> SignedIn | Held | WrongToken | NameRequired:
        """Someone signs in from ``client`` with the token ``given``, if not held: as the
        token's person, or (the shared token) as ``name``."""
        key = secrets.token_urlsafe(32)

        def check() -> NewSession | WrongToken | NameRequired:
            person = self.identify(given)
            if person is None:
                return WrongToken()
            who = person.name or name
            if not who:
                return NameRequired()
            return {
                "key_hash": _hash(key),
                "reviewer": who,
                "operator": person.operator,
                "csrf": secrets.token_urlsafe(24),
                "lifetime": dt.timedelta(seconds=self.lifetime_seconds),
            }

        outcome = await attempt_sign_in(conn, client, self.limits, check)
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

    def sign_in_csrf(self, nonce: str) -> str:
        """The sign-in form's CSRF token for the browser holding the ``nonce`` cookie
        (``SIGN_IN_COOKIE``): only a page we served can hold both, and a cookie set from
        elsewhere (a neighbouring subdomain's) has no token that matches it."""
        return hmac.new(self._key, _SIGN_IN_PURPOSE + nonce.encode(), hashlib.sha256).hexdigest()

    def sign_in_csrf_matches(self, nonce: str | None, given: str | None) -> bool:
        if not nonce or not given:
            return False
        return tokens_match(given, self.sign_in_csrf(nonce))
