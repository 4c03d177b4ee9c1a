"""Errors as values with meaning: what the platform said, classified once.

The class decides what the engine does; code branches on the class, never on
message text or HTTP status. The same classification serves synchronous
errors (the send call) and asynchronous ones (``failed`` status webhooks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from delivery_pipeline.model import AbandonReason


@dataclass
class CloudApiError(Exception):
    """An error object from the Cloud API (sync body or async status)."""

    code: int | None
    message: str = ""
    details: str = ""
    http_status: int | None = None

    def __str__(self) -> str:
        text = f"({self.code}) {self.message}".strip()
        if self.details:
            text += f": {self.details}"
        return text


class ReEngagementRequired(CloudApiError):
    """131047: outside the 24-hour window; only a template may be sent."""


class Throttled(CloudApiError):
    """Throughput, pair-rate or app rate limit: retry later, don't count an attempt."""


class TransientError(CloudApiError):
    """Temporary platform trouble (or a 5xx / network error before sending): retry, bounded."""


class EcosystemHold(TransientError):
    """131049: withheld for ecosystem health; the platform asks for a day before trying again."""


class RecipientUnreachable(CloudApiError):
    """Permanent for this recipient: abandon the document with a reason."""

    abandon_reason: ClassVar[AbandonReason] = AbandonReason.UNDELIVERABLE


class RecipientOptedOut(RecipientUnreachable):
    """131050: the person stopped these messages; never retry."""

    abandon_reason: ClassVar[AbandonReason] = AbandonReason.OPTED_OUT


class GlobalSendError(CloudApiError):
    """Nobody can be sent to (token, phone number id, template, account): stop and alert."""


class SendOutcomeUnknown(Exception):
    """The request left and no answer came: it may or may not have been accepted."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SendNotAttempted(Exception):
    """The request never left (connection refused, pool timeout): safe to retry."""


class ApiUnreachable(Exception):
    """The Cloud API (or the sandbox) gave no answer at all: refused, timed out."""


PAIR_RATE_LIMIT = 131056
# About one message per 6 s to the same person refills the pair-rate budget.
PAIR_RATE_RETRY_SECONDS = 6.0
REENGAGEMENT = 131047
ECOSYSTEM = 131049
THROTTLED = {130429, PAIR_RATE_LIMIT, 4, 80007}
TRANSIENT = {131000, 1, 2, 131016, 131057, 133004}
OPTED_OUT = {131050}
UNREACHABLE = {131026, 131051, 131021, 131052, 131053, 470}
GLOBAL = {
    190,
    100,
    133010,
    368,
    131031,
    131005,
    10,
    200,
    132000,
    132001,
    132005,
    132007,
    132012,
    132015,
    132016,
    132018,
    132068,
    132069,
}


def classify(
    code: int | None, message: str = "", details: str = "", http_status: int | None = None
) -> CloudApiError:
    """The typed error for an error object's ``code``."""
    cls: type[CloudApiError]
    if code == REENGAGEMENT:
        cls = ReEngagementRequired
    elif code in THROTTLED:
        cls = Throttled
    elif code == ECOSYSTEM:
        cls = EcosystemHold
    elif code in TRANSIENT:
        cls = TransientError
    elif code in OPTED_OUT:
        cls = RecipientOptedOut
    elif code in UNREACHABLE:
        cls = RecipientUnreachable
    elif code in GLOBAL:
        cls = GlobalSendError
    elif http_status is not None and http_status >= 500:
        cls = TransientError
    elif http_status == 401:
        cls = GlobalSendError
    else:
        # An unknown code: retry a bounded number of times rather than either
        # dropping the document or stopping everybody's delivery.
        cls = TransientError
    return cls(code=code, message=message, details=details, http_status=http_status)


def from_error_object(obj: dict[str, Any], http_status: int | None = None) -> CloudApiError:
    """Classify an error object as found in a response body or a status webhook."""
    raw_code = obj.get("code")
    try:
        code = int(raw_code) if raw_code is not None else None
    except (TypeError, ValueError, OverflowError):
        code = None
    if code is not None and not -(2**31) <= code < 2**31:
        code = None  # no platform code is that large; ours are stored as integer
    error_data = obj.get("error_data") or {}
    details = error_data.get("details", "") if isinstance(error_data, dict) else ""
    message = str(obj.get("message") or obj.get("title") or "")
    return classify(code, message, str(details or ""), http_status)


# What a global error asks of whoever configured the sender, naming the
# variable to look at. (Only the codes where one setting is the usual cause.)
_REMEDIES = {
    190: "check WHATSAPP_ACCESS_TOKEN (expired, revoked, or not this app's)",
    100: "check WHATSAPP_PHONE_NUMBER_ID (unknown, or not a number this token may use)",
    10: "check that WHATSAPP_ACCESS_TOKEN has the whatsapp_business_messaging permission",
    200: "check that WHATSAPP_ACCESS_TOKEN has the whatsapp_business_messaging permission",
    132001: "check DELIVERY_KNOCK_TEMPLATES against the templates approved in WhatsApp Manager",
}


def remedy(code: int | None) -> str | None:
    """The next step for an operator after global error ``code``, if one setting is
    the usual cause."""
    return _REMEDIES.get(code) if code is not None else None
