"""The applications' API as the tests use it: tokens, signing secrets, a service with both."""

from __future__ import annotations

import base64
from typing import Any

from delivery_pipeline.testing.service import ServiceProcess, start_service

TOKEN = "acme-token-0123456789abcdef"
ROTATED_TOKEN = "acme-token-next-9876543210"
OTHER_TOKEN = "beta-token-0123456789abcdef"
SECRET = "whsec_" + base64.b64encode(b"a signing key of 32 bytes here!!").decode()
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def api_env(**extra: Any) -> dict[str, Any]:
    """The API's settings for a test service: two applications, a generous rate."""
    return {
        "DELIVERY_API_TOKENS": f"acme={TOKEN},acme={ROTATED_TOKEN},beta={OTHER_TOKEN}",
        "DELIVERY_API_RATE_PER_SECOND": "1000",
        "DELIVERY_API_RATE_BURST": "1000",
        **extra,
    }


def start_api_service(database_url: str, sandbox_url: str, **extra: Any) -> ServiceProcess:
    return start_service(database_url, sandbox_url, **api_env(**extra))


def plan(phone: str, body: str = "Your plan.\n\nStep one.", **more: Any) -> dict[str, Any]:
    """The smallest hand-over, and more."""
    return {"person": {"phone": phone}, "kind": "plan", "body": body, **more}
