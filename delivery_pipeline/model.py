"""The project's vocabulary: the values a document, a person and a sweep use.

Each enum here is the Python side of a CHECK constraint or a ``CASE`` in
``sql/``; ``delivery_pipeline_tests/test_model.py`` reads the SQL and fails
when the two lists differ.
"""

from __future__ import annotations

import enum
import re


class Kind(enum.StrEnum):
    """What a document is (``documents.kind``)."""

    PLAN = "plan"
    DAILY_BRIEF = "daily_brief"


class Locale(enum.StrEnum):
    """The languages people read (``people.locale``)."""

    EN = "en"
    ES = "es"
    PT = "pt"


class Action(enum.StrEnum):
    """What a sweep does with a claimed document (``eligible_documents().action``)."""

    DELIVER = "deliver"
    KNOCK = "knock"
    HOLD_QUIET = "hold_quiet"
    ABANDON_UNREACHABLE = "abandon_unreachable"
    ABANDON_STALE = "abandon_stale"
    ABANDON_SUPERSEDED = "abandon_superseded"  # a newer one of the same kind is ready (025)


class AbandonReason(enum.StrEnum):
    """Why a document will never be sent (``documents.abandon_reason``)."""

    STALE = "stale"
    UNDELIVERABLE = "undeliverable"
    OPTED_OUT = "opted_out"
    MAX_ATTEMPTS = "max_attempts"
    UNKNOWN_OUTCOME = "unknown_outcome"
    UNREACHABLE = "unreachable"
    OPERATOR = "operator"
    REJECTED = "rejected"  # a reviewer said no, with a reason
    SUPERSEDED = "superseded"  # a newer document of the same kind and day, before a part left
    CANCELLED = "cancelled"  # an operator's `documents cancel`
    NO_REPLY = "no_reply"  # knocked, reminded once, and never answered (026)
    EXPIRED = "expired"  # a brief whose template message the platform dropped at its TTL (040)


# Reasons that are the system working as intended, not a failure to look at.
EXPECTED_ABANDON_REASONS = frozenset(
    {
        AbandonReason.STALE,
        AbandonReason.OPTED_OUT,
        AbandonReason.OPERATOR,
        AbandonReason.REJECTED,
        AbandonReason.SUPERSEDED,
        AbandonReason.CANCELLED,
        # Asked twice, no answer: the person's choice, counted by the report (not seen
        # vs not wanted), not a fault for ops.
        AbandonReason.NO_REPLY,
        # The person's phone was off past the template's time to live: their state,
        # counted by the report; many at once show in the knocks' delivery check.
        AbandonReason.EXPIRED,
    }
)


class Severity(enum.StrEnum):
    """How bad: a check's result and an ops alert (``ops_alerts.severity``) alike.

    One vocabulary for both, so a check's result becomes an alert without a
    mapping; only Dagster's own ``AssetCheckSeverity`` is translated, at the
    Dagster boundary (``dagster_defs/asset_checks.py``). A passing check has
    no severity; ``INFO`` is the "resolved" message's.
    """

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class ReviewDecision(enum.StrEnum):
    """What a reviewer decided about a document (``documents.review_decision``)."""

    APPROVED = "approved"
    REJECTED = "rejected"


class DocumentState(enum.StrEnum):
    """Where a document is (the ``document_states`` view), each with the part that owns it."""

    PENDING = "pending"
    GENERATING = "generating"
    AWAITING_REVIEW = "awaiting_review"
    UNDELIVERED = "undelivered"
    AWAITING_REPLY = "awaiting_reply"
    KNOCK_HELD = "knock_held"
    QUIET_HOURS = "quiet_hours"
    DELIVERED = "delivered"
    ABANDONED = "abandoned"
    GENERATION_FAILED = "generation_failed"


# The states a document waits in, and who must act for it to leave.
WAITING_STATE_OWNERS: dict[DocumentState, str] = {
    DocumentState.PENDING: "generator",
    DocumentState.GENERATING: "generator",
    DocumentState.AWAITING_REVIEW: "reviewers",
    DocumentState.UNDELIVERED: "delivery",
    DocumentState.AWAITING_REPLY: "the person",
    DocumentState.KNOCK_HELD: "the template",
    DocumentState.QUIET_HOURS: "the clock",
    DocumentState.GENERATION_FAILED: "ops",
}


class OperatorAction(enum.StrEnum):
    """What an operator did to a document (``document_actions.action``, sql/migrations/025)."""

    CANCEL = "cancel"
    RESEND = "resend"


class ChunkState(enum.StrEnum):
    """One message of a document in the ledger (``delivery_chunks.state``)."""

    PENDING = "pending"  # cut and stored at the first claim, never fenced
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"
    UNKNOWN = "unknown"


class Way(enum.StrEnum):
    """How a document reached its person (``documents.way``, sql/migrations/039): the
    report, its costs, ``status`` and the API name ways by these values."""

    PARTS = "parts"  # its text in parts, inside the window
    FILE = "file"  # one file on a document template, outside the window
    FILE_IN_WINDOW = "file_in_window"  # one ``document`` message, inside the window
    KNOCK_THEN_PARTS = "knock_then_parts"  # the knock, then the parts once they answered
    KNOCK_THEN_FILE = "knock_then_file"  # the knock, then one ``document`` message

    @property
    def label(self) -> str:
        """As a person reads it in a report."""
        return _WAY_LABELS[self]


_WAY_LABELS = {
    Way.PARTS: "text parts",
    Way.FILE: "one file (template)",
    Way.FILE_IN_WINDOW: "one file (in the window)",
    Way.KNOCK_THEN_PARTS: "knock + parts",
    Way.KNOCK_THEN_FILE: "knock + one file",
}


class Priority(enum.StrEnum):
    """An application's say in its person's turn (``api_documents.priority``, sql/migrations/036):
    high goes with what the person asked for, normal keeps its kind's place, low goes
    after the briefs."""

    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


class EventType(enum.StrEnum):
    """What an application hears at its endpoint (``api_events.type``, sql/migrations/036)."""

    DOCUMENT_DELIVERED = "document.delivered"
    DOCUMENT_READ = "document.read"
    DOCUMENT_ABANDONED = "document.abandoned"
    DOCUMENT_AWAITING_REPLY = "document.awaiting_reply"
    PERSON_OPTED_OUT = "person.opted_out"


_E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")
_PUNCTUATION = re.compile(r"[\s\-().]")


def e164(value: str) -> str | None:
    """``value`` as an E.164 number (``+5511987654321``), or None if it is not one."""
    compact = _PUNCTUATION.sub("", value)
    return compact if _E164.match(compact) else None


# ── identity without a phone number ─────────────────────────────────────

# A business-scoped user id (BSUID): the person's ISO 3166 country code, a
# period, up to 128 letters and digits (``US.13491208655302741918``). Parent
# ids (``US.ENT.…``) span several portfolios and are never an address here.
_BSUID = re.compile(r"^[A-Z]{2}\.[A-Za-z0-9]{1,128}$")


def bsuid(value: str) -> str | None:
    """``value`` as a business-scoped user id, or None if it is not one."""
    compact = value.strip()
    return compact if _BSUID.match(compact) else None


# Calling code → ISO 3166 country, for the countries a rate card usually
# names; a number from elsewhere is priced at the rate table's ``*`` row.
# Longest prefix first when read (``country_of``).
CALLING_CODES: dict[str, str] = {
    "1": "US",
    "7": "RU",
    "20": "EG",
    "27": "ZA",
    "30": "GR",
    "31": "NL",
    "32": "BE",
    "33": "FR",
    "34": "ES",
    "39": "IT",
    "40": "RO",
    "41": "CH",
    "43": "AT",
    "44": "GB",
    "45": "DK",
    "46": "SE",
    "47": "NO",
    "48": "PL",
    "49": "DE",
    "51": "PE",
    "52": "MX",
    "53": "CU",
    "54": "AR",
    "55": "BR",
    "56": "CL",
    "57": "CO",
    "58": "VE",
    "60": "MY",
    "61": "AU",
    "62": "ID",
    "63": "PH",
    "64": "NZ",
    "65": "SG",
    "66": "TH",
    "81": "JP",
    "82": "KR",
    "84": "VN",
    "86": "CN",
    "90": "TR",
    "91": "IN",
    "92": "PK",
    "234": "NG",
    "254": "KE",
    "351": "PT",
    "353": "IE",
    "380": "UA",
    "502": "GT",
    "503": "SV",
    "504": "HN",
    "505": "NI",
    "506": "CR",
    "507": "PA",
    "591": "BO",
    "593": "EC",
    "595": "PY",
    "598": "UY",
    "966": "SA",
    "971": "AE",
    "972": "IL",
}


def country_of(phone: str | None, user_id: str | None) -> str | None:
    """The ISO country a person is priced in: a BSUID names it; a number's calling
    code (from ``CALLING_CODES``) else; None when neither tells."""
    if user_id and (known := bsuid(user_id)):
        return known[:2]
    if phone and phone.startswith("+"):
        digits = phone[1:]
        for length in (3, 2, 1):
            country = CALLING_CODES.get(digits[:length])
            if country is not None:
                return country
    return None
