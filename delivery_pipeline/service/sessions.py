"""Reviewer sessions: a signed cookie saying who signed in, until when, and their CSRF token.

The cookie is ``<payload>.<signature>``: the payload is URL-safe base64 JSON
(``name``, ``expires``, ``csrf``), the signature an HMAC-SHA256 of it under a
key derived from ``REVIEW_TOKEN``. No state on the server: every replica
that shares the token accepts the cookie, and changing the token signs every
reviewer out. The CSRF token is random per session and must come back in
every form (``csrf_matches``), compared in constant time; the cookie is also
``HttpOnly`` and ``SameSite=Strict`` (set by the page).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from delivery_pipeline.whatsapp.signature import tokens_match

COOKIE_NAME = "dp_review_session"
SESSION_SECONDS = 12 * 3600
# Separates this key from any other use of the token.
_KEY_PURPOSE = b"delivery_pipeline review session v1"


@dataclass(frozen=True)
class Session:
    name: str
    expires: int
    csrf: str


@dataclass(frozen=True)
class Sessions:
    """Issues and reads session cookies signed with a key derived from the review token."""

    token: str = field(repr=False)
    lifetime_seconds: int = SESSION_SECONDS
    clock: Callable[[], float] = time.time

    @property
    def _key(self) -> bytes:
        return hmac.new(self.token.encode(), _KEY_PURPOSE, hashlib.sha256).digest()

    def _sign(self, payload: bytes) -> str:
        return hmac.new(self._key, payload, hashlib.sha256).hexdigest()

    def token_valid(self, given: str) -> bool:
        """The sign-in check: ``given`` is the review token (constant time)."""
        return tokens_match(given, self.token)

    def issue(self, name: str) -> tuple[Session, str]:
        """A new session for ``name`` and its cookie value."""
        session = Session(
            name, int(self.clock()) + self.lifetime_seconds, secrets.token_urlsafe(24)
        )
        raw = json.dumps(
            {"name": session.name, "expires": session.expires, "csrf": session.csrf},
            separators=(",", ":"),
        ).encode()
        payload = base64.urlsafe_b64encode(raw)
        return session, f"{payload.decode()}.{self._sign(payload)}"

    def read(self, cookie: str | None) -> Session | None:
        """The session in ``cookie`` if its signature holds and it has not expired."""
        if not cookie or cookie.count(".") != 1:
            return None
        payload, signature = cookie.split(".")
        if not tokens_match(signature, self._sign(payload.encode())):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(payload.encode()))
            session = Session(str(data["name"]), int(data["expires"]), str(data["csrf"]))
        except (binascii.Error, ValueError, KeyError, TypeError):
            return None
        return session if session.expires > self.clock() else None

    @staticmethod
    def csrf_matches(session: Session, given: str | None) -> bool:
        return bool(given) and tokens_match(given or "", session.csrf)
