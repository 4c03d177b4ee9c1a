"""Events, signed as the Standard Webhooks specification says: we sign, you verify.

Each event comes with three headers: ``webhook-id`` (the event's id: the same
on every retry of it, so deduplicate on it), ``webhook-timestamp`` (seconds
since the epoch, when this attempt was sent) and ``webhook-signature``
(``v1,<base64 of HMAC-SHA256(key, "<id>.<timestamp>.<body>")>``; several,
space-separated, while a secret is being replaced). The key is the base64
after ``whsec_`` in the secret. Any Standard Webhooks library verifies them;
``verify`` here does the same with the standard library alone.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

SECRET_PREFIX = "whsec_"
# An attempt older or newer than this is refused: a replayed capture is worthless.
TOLERANCE_SECONDS = 5 * 60


class InvalidSignature(Exception):
    """Not an event we signed (or too old to trust): drop it, answer 4xx."""


def secret_key(secret: str) -> bytes:
    """The signing key in a ``whsec_<base64>`` secret."""
    try:
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except ValueError:
        raise InvalidSignature("the secret is not whsec_<base64>") from None


def signature(key: bytes, event_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of an attempt."""
    signed = f"{event_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def signed_headers(
    keys: Iterable[bytes], event_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The three headers of an attempt, signed with each key."""
    return {
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signature(k, event_id, timestamp, body) for k in keys),
    }


def verify(
    secrets: str | Sequence[str],
    body: bytes,
    headers: Mapping[str, str],
    *,
    now: float | None = None,
    tolerance: float = TOLERANCE_SECONDS,
) -> dict[str, Any]:
    """The event, once its signature is one of ``secrets``' and its timestamp recent;
    ``InvalidSignature`` otherwise. ``headers`` as your framework gives them."""
    lower = {name.lower(): value for name, value in headers.items()}
    event_id = lower.get("webhook-id", "")
    stamp = lower.get("webhook-timestamp", "")
    given = lower.get("webhook-signature", "").split()
    if not event_id or not stamp.isdigit() or not given:
        raise InvalidSignature("missing webhook-id, webhook-timestamp or webhook-signature")
    if abs((time.time() if now is None else now) - int(stamp)) > tolerance:
        raise InvalidSignature("the timestamp is too old or too new")
    keys = [secret_key(s) for s in ([secrets] if isinstance(secrets, str) else secrets)]
    expected = [signature(key, event_id, int(stamp), body) for key in keys]
    if not any(hmac.compare_digest(g, e) for g in given for e in expected):
        raise InvalidSignature("no signature matches")
    event: dict[str, Any] = json.loads(body)
    return event
