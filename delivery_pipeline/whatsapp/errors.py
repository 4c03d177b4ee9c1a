"""Errors as values with meaning: what the platform said, classified once.

Every code the platform answers is classified here, by what it concerns
(``Scope``: the person, the template, the sender, this message) and what it
says is wrong (``Trouble``). ``RULES`` is that classification as a table, and
``docs/reference/errors.md`` is generated from it. What the engine does about
it is decided once, from the class and the kind of message
(``delivery.outcomes.consequence_of``); code branches on the class (or its
``scope``/``trouble``), never on message text or HTTP status. The same
classification serves synchronous errors (the send call) and asynchronous
ones (``failed`` status webhooks).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, ClassVar

from delivery_pipeline.model import AbandonReason


class Scope(enum.StrEnum):
    """What an error concerns, and so whose sends it stops."""

    PERSON = "person"  # this recipient: their documents, nobody else's
    TEMPLATE = "template"  # this template (name, language): knocks that use it
    SENDER = "sender"  # every send of our app, token and account: every number pauses
    NUMBER = "number"  # one business number: its sends pause, the other numbers go on
    MESSAGE = "message"  # this request only: this document, bounded retries


class Trouble(enum.StrEnum):
    """What the error says is wrong (``Scope``: whose trouble it is). What is done
    about it is decided in the core (``delivery.outcomes.Step``), by the kind of
    message too: these are the platform's words, not our steps."""

    WINDOW_CLOSED = "window_closed"  # 131047: outside the person's 24 h window
    UNREACHABLE = "unreachable"  # for good: the person cannot receive (opted out, …)
    PLATFORM_HOLD = "platform_hold"  # the platform asks us to wait a fixed time
    THROUGHPUT = "throughput"  # the number's rate was exceeded
    SENDER_REFUSED = "sender_refused"  # our sending itself: token, app, account, number
    TEMPLATE_REFUSED = "template_refused"  # the template (paused, disabled, its parameters)
    FILE_REFUSED = "file_refused"  # the document's file (type, size, bytes, fetch)
    THIS_SEND = "this_send"  # this request alone: passing platform trouble, or malformed


@dataclass
class CloudApiError(Exception):
    """An error object from the Cloud API (sync body or async status)."""

    code: int | None
    message: str = ""
    details: str = ""
    http_status: int | None = None
    subcode: int | None = None

    scope: ClassVar[Scope] = Scope.MESSAGE
    trouble: ClassVar[Trouble] = Trouble.THIS_SEND

    def __str__(self) -> str:
        text = f"({self.code}) {self.message}".strip()
        if self.details:
            text += f": {self.details}"
        return text


class ReEngagementRequired(CloudApiError):
    """131047: outside the 24-hour window; only a template may be sent."""

    scope = Scope.PERSON
    trouble = Trouble.WINDOW_CLOSED


class Throttled(CloudApiError):
    """Throughput or pair-rate limit: retry later, don't count an attempt."""

    scope = Scope.SENDER
    trouble = Trouble.THROUGHPUT


class PairRateLimited(Throttled):
    """131056: too many messages to this person lately; others are unaffected."""

    scope = Scope.PERSON
    trouble = Trouble.PLATFORM_HOLD


class TransientError(CloudApiError):
    """Temporary platform trouble (or a 5xx / network error before sending): retry, bounded."""


class MalformedRequest(TransientError):
    """The platform refused this one request as malformed: this document alone,
    retried a bounded number of times, then abandoned with the platform's words."""


class MediaRefused(CloudApiError):
    """The platform refused a document's file: its type, its size, bytes that do not
    match the declared type, or a file it could not fetch. The same bytes are never
    uploaded to that number again; the document goes the way it would without a file
    (text parts in the window, the knock outside it), and ops hear of it (the renderer
    made a file the platform will not take). A send that carried no file has none to
    go without: its refusal is that message's own trouble, retried as ``RETRY``."""

    trouble = Trouble.FILE_REFUSED


class EcosystemHold(CloudApiError):
    """131049: withheld for ecosystem health; the platform asks for a day before trying again."""

    scope = Scope.PERSON
    trouble = Trouble.PLATFORM_HOLD


class RecipientUnreachable(CloudApiError):
    """Permanent for this recipient: abandon the document with a reason."""

    scope = Scope.PERSON
    trouble = Trouble.UNREACHABLE
    abandon_reason: ClassVar[AbandonReason] = AbandonReason.UNDELIVERABLE


class RecipientOptedOut(RecipientUnreachable):
    """131050: the person stopped these messages; never retry."""

    abandon_reason: ClassVar[AbandonReason] = AbandonReason.OPTED_OUT


class TemplateRefused(CloudApiError):
    """The template (paused, disabled, missing, its parameters): only sends that use
    it wait; in-window deliveries, which need no template, go on."""

    scope = Scope.TEMPLATE
    trouble = Trouble.TEMPLATE_REFUSED


class GlobalSendError(CloudApiError):
    """Nobody can be sent to (token, phone number id, account, limits): every sender
    of the fleet pauses until a probe succeeds."""

    scope = Scope.SENDER
    trouble = Trouble.SENDER_REFUSED


class NumberSendError(GlobalSendError):
    """Nobody can be sent to from this business number (not registered, not one the
    token may use, its display name): its sends pause, every other number goes on."""

    scope = Scope.NUMBER


class AppRateLimited(GlobalSendError):
    """4, 80007: the app or the account made too many API calls; every call counts,
    so the whole fleet stops and one sender probes."""


class SendOutcomeUnknown(Exception):
    """The request left and no answer came: it may or may not have been accepted."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SendNotAttempted(Exception):
    """The request never left (connection refused, pool timeout): safe to retry."""


class ApiUnreachable(Exception):
    """The Cloud API (or the sandbox) gave no answer at all: refused, timed out."""


class Arrives(enum.StrEnum):
    """How a code shows: on the send call, in a ``failed`` status later, or either."""

    SYNC = "sync"
    ASYNC = "async"
    BOTH = "sync, async"


@dataclass(frozen=True)
class Rule:
    """One row of the classification."""

    meaning: str
    error: type[CloudApiError]
    arrives: Arrives

    @property
    def scope(self) -> Scope:
        return self.error.scope

    @property
    def trouble(self) -> Trouble:
        return self.error.trouble


S, A, B = Arrives.SYNC, Arrives.ASYNC, Arrives.BOTH

# The classification. (100 has two rows: see PHONE_NUMBER_ID_SUBCODE.)
RULES: dict[int, Rule] = {
    # the person
    131047: Rule("more than 24 h since the person last wrote", ReEngagementRequired, B),
    131056: Rule("pair rate: too many messages to this person lately", PairRateLimited, S),
    131049: Rule("withheld for ecosystem health (per-user marketing cap)", EcosystemHold, A),
    131026: Rule(
        "receiver cannot get the message (no WhatsApp, old app, terms)", RecipientUnreachable, B
    ),
    131050: Rule("the person stopped these messages", RecipientOptedOut, B),
    131021: Rule("recipient cannot be the sender", RecipientUnreachable, S),
    130497: Rule("the business may not message this person's country", RecipientUnreachable, B),
    131062: Rule(
        "this message type cannot go to a business-scoped user id", RecipientUnreachable, B
    ),
    139200: Rule("direct sends to this person are blocked", RecipientUnreachable, B),
    470: Rule(
        "re-engagement (legacy code of 131047's era): the person cannot be reached",
        RecipientUnreachable,
        B,
    ),
    # the template
    132000: Rule("template parameter count does not match", TemplateRefused, S),
    132001: Rule("template does not exist in this language, or not approved", TemplateRefused, S),
    132005: Rule("template text too long once filled in", TemplateRefused, S),
    132007: Rule("template format character policy violated", TemplateRefused, S),
    132012: Rule("template parameter format does not match", TemplateRefused, S),
    132015: Rule("template paused (low quality)", TemplateRefused, B),
    132016: Rule("template disabled (low quality)", TemplateRefused, B),
    132018: Rule("template parameters invalid (new lines, tabs, spaces)", TemplateRefused, S),
    132068: Rule("the template's flow is blocked", TemplateRefused, S),
    132069: Rule("the template's flow is throttled", TemplateRefused, S),
    131063: Rule(
        "marketing messages unavailable on the Cloud API (the template is marketing)",
        TemplateRefused,
        B,
    ),
    # the sender
    190: Rule("access token expired, revoked or invalid", GlobalSendError, S),
    10: Rule("the token lacks the messaging permission", GlobalSendError, S),
    200: Rule("the token lacks the messaging permission", GlobalSendError, S),
    133010: Rule("phone number not registered on the Cloud API", NumberSendError, S),
    368: Rule("account restricted for policy violations", GlobalSendError, B),
    131031: Rule("business account locked", GlobalSendError, B),
    131005: Rule("access denied", GlobalSendError, S),
    131064: Rule("messaging limit cut for misclassified templates", GlobalSendError, B),
    131037: Rule("display name not approved", NumberSendError, B),
    4: Rule("app-level API rate limit", AppRateLimited, S),
    80007: Rule("account (WABA) API rate limit", AppRateLimited, S),
    130429: Rule("throughput limit of the number (messages per second)", Throttled, S),
    # the message
    100: Rule("invalid parameter: this one request is malformed", MalformedRequest, S),
    131009: Rule("a parameter value is not valid", MalformedRequest, S),
    131008: Rule("a required parameter is missing", MalformedRequest, S),
    131051: Rule("unsupported message type", MalformedRequest, B),
    131052: Rule("media could not be downloaded", MalformedRequest, A),
    131053: Rule(
        "media could not be used: its type does not match its bytes, or it could not be fetched",
        MediaRefused,
        A,
    ),
    137000: Rule("identity key mismatch (resend without the hash)", MalformedRequest, B),
    131000: Rule("something went wrong (temporary)", TransientError, B),
    1: Rule("API unknown error (temporary)", TransientError, S),
    2: Rule("API service temporarily unavailable", TransientError, S),
    131016: Rule("service overloaded", TransientError, S),
    131057: Rule("account in maintenance mode", TransientError, S),
    133004: Rule("server temporarily unavailable", TransientError, S),
}

# 100 with this subcode is the Graph API's "object with ID … does not exist,
# cannot be loaded due to missing permissions": our WHATSAPP_PHONE_NUMBER_ID,
# wrong for every send from that number. Any other 100 is one malformed request.
PHONE_NUMBER_ID_SUBCODE = 33
PHONE_NUMBER_ID_RULE = Rule(
    "phone number id unknown, or not one this token may use (100, subcode 33)",
    NumberSendError,
    S,
)

# The media endpoint (POST /{phone_number_id}/media) answers a file it will not take
# with these codes, synchronously; there they concern the file, not one request to
# retry (a 100 anywhere else is one malformed request). Every other code it answers
# means what RULES says (190: the token, 100 subcode 33: the number, 4: the app's rate).
MEDIA_UPLOAD_RULES: dict[int, Rule] = {
    100: Rule(
        "the upload was refused: a type the platform does not take, or no file",
        MediaRefused,
        S,
    ),
    131053: Rule(
        "the upload was refused: too large, or its bytes do not match its declared type",
        MediaRefused,
        S,
    ),
}

PAIR_RATE_LIMIT = 131056
# About one message per 6 s to the same person refills the pair-rate budget.
PAIR_RATE_RETRY_SECONDS = 6.0
REENGAGEMENT = 131047
ECOSYSTEM = 131049


def rule_for(code: int | None, subcode: int | None = None) -> Rule | None:
    """The classification's row for ``code`` (and ``subcode``), None when unmapped."""
    if code == 100 and subcode == PHONE_NUMBER_ID_SUBCODE:
        return PHONE_NUMBER_ID_RULE
    return RULES.get(code) if code is not None else None


def upload_rule_for(code: int | None, subcode: int | None = None) -> Rule | None:
    """The classification's row for ``code`` answered by the media endpoint."""
    if code == 100 and subcode == PHONE_NUMBER_ID_SUBCODE:
        return PHONE_NUMBER_ID_RULE
    if code is not None and code in MEDIA_UPLOAD_RULES:
        return MEDIA_UPLOAD_RULES[code]
    return rule_for(code, subcode)


def classify(
    code: int | None,
    message: str = "",
    details: str = "",
    http_status: int | None = None,
    subcode: int | None = None,
    *,
    upload: bool = False,
) -> CloudApiError:
    """The typed error for an error object's ``code`` (``upload``: answered by the media
    endpoint, ``MEDIA_UPLOAD_RULES`` first)."""
    cls: type[CloudApiError]
    rule = upload_rule_for(code, subcode) if upload else rule_for(code, subcode)
    if rule is not None:
        cls = rule.error
    elif http_status is not None and http_status >= 500:
        cls = TransientError
    elif http_status == 401:
        cls = GlobalSendError
    else:
        # An unknown code: retry a bounded number of times rather than either
        # dropping the document or stopping everybody's delivery.
        cls = TransientError
    return cls(
        code=code, message=message, details=details, http_status=http_status, subcode=subcode
    )


def _int_or_none(raw: Any) -> int | None:
    try:
        value = int(raw) if raw is not None else None
    except (TypeError, ValueError, OverflowError):
        return None
    if value is not None and not -(2**31) <= value < 2**31:
        return None  # no platform code is that large; ours are stored as integer
    return value


def from_error_object(
    obj: dict[str, Any], http_status: int | None = None, *, upload: bool = False
) -> CloudApiError:
    """Classify an error object as found in a response body or a status webhook
    (``upload``: the media endpoint's answer)."""
    code = _int_or_none(obj.get("code"))
    subcode = _int_or_none(obj.get("error_subcode"))
    error_data = obj.get("error_data") or {}
    details = error_data.get("details", "") if isinstance(error_data, dict) else ""
    message = str(obj.get("message") or obj.get("title") or "")
    return classify(code, message, str(details or ""), http_status, subcode, upload=upload)


# What a sender-wide error asks of whoever configured the sender, naming the
# variable to look at. (Only the codes where one setting is the usual cause.)
_REMEDIES = {
    190: "check WHATSAPP_ACCESS_TOKEN (expired, revoked, or not this app's)",
    100: "check WHATSAPP_PHONE_NUMBER_ID or WHATSAPP_NUMBERS (unknown, or not a number "
    "this token may use)",
    10: "check that WHATSAPP_ACCESS_TOKEN has the whatsapp_business_messaging permission",
    200: "check that WHATSAPP_ACCESS_TOKEN has the whatsapp_business_messaging permission",
    132001: "check DELIVERY_KNOCK_TEMPLATES against the templates approved in WhatsApp Manager",
    131064: "the messaging limit was cut: review the templates' categories in WhatsApp Manager",
    131037: "the display name is not approved: see WhatsApp Manager → Phone numbers",
    4: "the app's API rate limit: sending resumes when a probe succeeds",
    80007: "the account's API rate limit: sending resumes when a probe succeeds",
}


def remedy(code: int | None) -> str | None:
    """The next step for an operator after error ``code``, if one setting is the
    usual cause."""
    return _REMEDIES.get(code) if code is not None else None
