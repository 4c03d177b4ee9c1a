"""``X-Hub-Signature-256``: HMAC-SHA256 of the raw body, keyed with the app secret.

Meta signs the exact bytes it sends (an escaped-unicode JSON form), so the
signature is computed over the raw request body, never over re-serialised
JSON, and compared in constant time. The webhook service verifies with it;
the sandbox and the tests sign with it.
"""

from __future__ import annotations

import hashlib
import hmac
import re

# What ``sign`` writes: anything else cannot match, whatever the body.
_SHAPE = re.compile(r"sha256=[0-9a-f]{64}")


def sign(secret: str, body: bytes) -> str:
    """The header value Meta sends for ``body``: ``sha256=<hex>``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signature_shaped(header: str) -> bool:
    """Whether ``header`` could be a signature at all (checked before the body is read)."""
    return _SHAPE.fullmatch(header.strip()) is not None


def signature_valid(secret: str, body: bytes, header: str) -> bool:
    """Whether ``header`` is ``body``'s signature under ``secret``."""
    return hmac.compare_digest(sign(secret, body).encode(), header.strip().encode())


def tokens_match(given: str, expected: str) -> bool:
    """A constant-time comparison for bearer and verify tokens."""
    return hmac.compare_digest(given.encode(), expected.encode())
