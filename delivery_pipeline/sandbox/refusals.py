"""The Meta-shaped error body every refusal of the sandbox answers with."""

from __future__ import annotations

import random
import secrets
from typing import Any

TITLES: dict[int, str] = {
    2: "Service temporarily unavailable",
    100: "Invalid parameter",
    190: "Invalid OAuth access token",
    130429: "Rate limit hit",
    131000: "Something went wrong",
    131009: "Parameter value is not valid",
    131026: "Receiver is incapable of receiving this message",
    131047: "Re-engagement message",
    131051: "Unsupported message type",
    131056: "(Business Account, Consumer Account) pair rate limit hit",
    132000: "Number of parameters does not match the expected number of params",
    132001: "Template name does not exist in the translation",
    132012: "Parameter format does not match format in the created template",
    131062: "Business-scoped user ID not supported for this message type",
    132018: "There was an issue with the parameters in your template.",
    131053: "Media upload error",
}


def title(code: int) -> str:
    """The error's title as the platform words it (a forced code without one: generic)."""
    return TITLES.get(code, f"Error {code} (forced by the sandbox)")


class Refusal(Exception):
    """A synchronous Cloud API error: HTTP status plus a Meta error object."""

    def __init__(
        self,
        code: int,
        details: str,
        *,
        http_status: int = 400,
        message: str | None = None,
        error_type: str = "OAuthException",
        subcode: int | None = None,
    ) -> None:
        super().__init__(f"({code}) {details}")
        self.code = code
        self.details = details
        self.http_status = http_status
        self.message = message or title(code)
        self.error_type = error_type
        self.subcode = subcode

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {
            "message": self.message,
            "type": self.error_type,
            "code": self.code,
            "error_data": {"messaging_product": "whatsapp", "details": self.details},
            "fbtrace_id": "A" + secrets.token_urlsafe(16),
        }
        if self.subcode is not None:
            error["error_subcode"] = self.subcode
        return {"error": error}


def http_status_of(code: int) -> int:
    """The HTTP status the Graph API answers a code with (auth errors 401, limits 429)."""
    if code == 190:
        return 401
    if code in (4, 80007, 130429, 131056):
        return 429
    return 400


def injected_5xx(rng: random.Random) -> Refusal:
    """A 5xx the sandbox injects (``error_5xx_rate``): half 500, half 503."""
    if rng.random() < 0.5:
        return Refusal(131000, "Something went wrong (injected by the sandbox).", http_status=500)
    return Refusal(2, "Service temporarily unavailable (injected by the sandbox).", http_status=503)
