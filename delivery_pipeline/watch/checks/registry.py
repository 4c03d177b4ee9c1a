"""The ops checks as data: each check's name, owner, the asset it judges, and its runbook.

Every reader takes a check from here: the evaluators (``evaluators.py``,
``templates.py``, ``probe.py``) stamp their results with it, the Dagster asset
checks (``dagster_defs/asset_checks.py``) are built from it, and the alert
sensor (``dagster_defs/alert_sensors.py``) finds the owner, runbook and
channel of a failing check here by its name instead of reading them back
out of Dagster's metadata. A check's name is a Dagster key users rely on
(alerts, the UI, dedup keys in ``ops_alerts``): it is written once, here.

A family (``knock_template_<name>_<language>``, one per configured knock
template) is one entry with a name rule: ``template_check`` makes a member,
``lookup`` recognises one by its prefix.

Severity is ``model.Severity``, shared with the alerts: a check is WARNING or
ERROR when it fails, without severity when it passes.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass
from typing import Any

from delivery_pipeline.model import EXPECTED_ABANDON_REASONS, AbandonReason, Severity
from delivery_pipeline.watch.alert import AlertChannel
from delivery_pipeline.watch.episodes import Said, check_episode

RUNBOOK = "its runbook: How-to → Alerts in the documentation (watch/runbooks.py)"


class Owner(enum.StrEnum):
    """Who acts when a check fails (shown in every alert and on the check in Dagster)."""

    GENERATOR = "generator"
    REVIEWERS = "reviewers"
    DELIVERY = "delivery"
    PERSON = "the person"
    OPS = "ops"
    TEMPLATE = "the template"


class Judged(enum.StrEnum):
    """The Dagster asset a check hangs on (``dagster_defs/assets.py``), by its key."""

    GENERATED = "generated_documents"
    DELIVERED = "delivered_documents"
    BACKLOG = "delivery_backlog"


@dataclass(frozen=True)
class Check:
    name: str
    owner: Owner
    judges: Judged
    description: str
    runbook: str

    @property
    def channel(self) -> AlertChannel:
        """Whose channel hears of it: a check the reviewers own goes to theirs (and to
        ops as well at ERROR, ``dagster_defs/alert_sensors.py``)."""
        return AlertChannel.REVIEWERS if self.owner is Owner.REVIEWERS else AlertChannel.OPS


@dataclass(frozen=True)
class CheckResult:
    """A check's evaluation: passed or not, its severity, one line, its metadata, and
    what it says about each episode it sees (``watch/episodes.py``): by default the
    check's own, ``check:<name>``."""

    name: str
    owner: Owner
    passed: bool
    severity: Severity | None
    summary: str
    metadata: dict[str, Any]
    said: tuple[Said, ...]

    @property
    def count(self) -> int:
        return int(self.metadata.get("count", 0))


def result(
    check: Check,
    severity: Severity | None,
    summary: str,
    metadata: dict[str, Any],
    said: tuple[Said, ...] | None = None,
) -> CheckResult:
    """A check's result; its owner and runbook go into the metadata shown in Dagster.
    Without ``said`` it speaks of its own episode."""
    if said is None:
        said = (Said(check_episode(check.name), severity is not None, severity),)
    return CheckResult(
        name=check.name,
        owner=check.owner,
        passed=severity is None,
        severity=severity,
        summary=summary,
        metadata={"owner": check.owner.value, **metadata, "runbook": check.runbook},
        said=said,
    )


def could_not_evaluate(check: Check, error: BaseException) -> CheckResult:
    """The result of a check that raised: an ERROR of its own episode, naming the check,
    so a watcher that went blind is told like any failing check (never only as a
    failed run)."""
    cause = " ".join(f"{type(error).__name__}: {error}".split())[:300]
    return result(
        check,
        Severity.ERROR,
        f"Check {check.name} could not evaluate ({cause}): what it watches is unknown "
        "until it does. The traceback is in the delivery_checks run's log.",
        {"count": 1, "error": cause},
    )


# ── one per waiting state, and the outbox (evaluators.py) ───────────────

PENDING = Check(
    "pending_too_long",
    Owner.GENERATOR,
    Judged.GENERATED,
    "Documents waiting for generation longer than the threshold.",
    "Is the pending_generation sensor running, and the generator reachable? "
    "See the generate_documents runs; " + RUNBOOK,
)
GENERATING = Check(
    "generating_too_long",
    Owner.GENERATOR,
    Judged.GENERATED,
    "Documents whose generation claim is older than the threshold: a dead or "
    "stuck worker (the rows are listed).",
    "A generator died or hangs: its claim expires after GENERATION_LEASE_SECONDS "
    "and another takes over; if not, check generate_documents runs; " + RUNBOOK,
)
AWAITING_REVIEW = Check(
    "awaiting_review_too_long",
    Owner.REVIEWERS,
    Judged.GENERATED,
    "Documents of a reviewed kind (DELIVERY_REVIEW_KINDS) waiting for a reviewer's "
    "decision longer than REVIEW_WARN_SECONDS / REVIEW_ERROR_SECONDS; the reviewers' "
    "channel is told, and ops at ERROR.",
    "Reviewers: approve or reject them on the review page (linked), or "
    "`delivery-pipeline documents approve|reject ID`; " + RUNBOOK,
)
UNDELIVERED = Check(
    "undelivered_stranded",
    Owner.DELIVERY,
    Judged.DELIVERED,
    "Generated documents a sweep would deliver now (eligible_documents) that "
    "nothing has taken for longer than the threshold; also WARNs on documents "
    "undelivered for hours while retrying.",
    "Is the delivery_heartbeat sensor running and deliver_documents succeeding? "
    "`delivery-pipeline sweep` delivers by hand; " + RUNBOOK,
)
AWAITING_REPLY = Check(
    "awaiting_reply",
    Owner.PERSON,
    Judged.DELIVERED,
    "Documents knocked for and waiting on the person's reply: counted, and knocks "
    "dropped at their time to live; alerts when most knocks go undelivered (template "
    "broken) or unanswered, or knocks past their time to live are not ended.",
    "Check the knock template's status in WhatsApp Manager and the knocks' "
    "status events; knocks past their time to live are ended by the "
    "delivery_heartbeat sensor and every sweep; " + RUNBOOK,
)
# Named in the order of AbandonReason, from the one set the evaluator counts by.
EXPECTED_REASONS_TEXT = ", ".join(r for r in AbandonReason if r in EXPECTED_ABANDON_REASONS)
ABANDONED = Check(
    "abandoned_or_failed",
    Owner.OPS,
    Judged.BACKLOG,
    "Documents abandoned (by reason) or whose generation failed in the last day; "
    f"{EXPECTED_REASONS_TEXT} are expected and only counted.",
    "`delivery-pipeline documents show ID` for the reason and the last error; " + RUNBOOK,
)
TIER = Check(
    "messaging_tier_headroom",
    Owner.OPS,
    Judged.DELIVERED,
    "Unique people reached outside the window (knocked) in the rolling 24 h "
    "versus the messaging tier limit (WHATSAPP_MESSAGING_TIER).",
    "Near the limit further knocks are refused: raise the tier in WhatsApp "
    "Manager or set WHATSAPP_MESSAGING_TIER; " + RUNBOOK,
)
SENDER_PAUSED = Check(
    "sender_paused",
    Owner.OPS,
    Judged.DELIVERED,
    "Sending is paused by a global error (expired token, unknown phone number "
    "id, missing template, restricted account): ERROR at once.",
    "Fix the credential/template/account named in the reason; the next "
    "successful send resumes by itself; " + RUNBOOK,
)
DELIVERY_EVENTS = Check(
    "delivery_events_unrecorded",
    Owner.OPS,
    Judged.DELIVERED,
    "Deliveries, knocks and abandonments not yet on Dagster's delivered_documents "
    "timeline (the delivery_events outbox): recording is late, not delivery.",
    "Is the record_delivery_events sensor running, and can the webhook service reach "
    "DAGSTER_WEBSERVER_URL? The rows wait in delivery_events and are recorded once "
    "either works again; " + RUNBOOK,
)

STATE_CHECKS: tuple[Check, ...] = (
    PENDING,
    GENERATING,
    AWAITING_REVIEW,
    UNDELIVERED,
    AWAITING_REPLY,
    ABANDONED,
    TIER,
    SENDER_PAUSED,
    DELIVERY_EVENTS,
)

# ── the reverse watch (probe.py) ────────────────────────────────────────

SERVICE = Check(
    "webhook_service_reachable",
    Owner.OPS,
    Judged.DELIVERED,
    "The webhook service answers GET /healthz and reaches its database: without it, "
    "replies and generation pokes deliver nothing.",
    "Is the webhook service running (`delivery-pipeline service`, its log)? `curl "
    "DELIVERY_SERVICE_URL/healthz` says whether it answers and reaches the database. Meanwhile "
    "Meta retries webhooks for days and the heartbeat still delivers; replies wake nothing "
    "until it is back; " + RUNBOOK,
)

# ── the knock templates (templates.py) ──────────────────────────────────

TEMPLATE_RUNBOOK = (
    "Open the template in WhatsApp Manager (status, quality, category). Knocks fail over "
    "to the next template of the locale in DELIVERY_KNOCK_TEMPLATES (name:lang|fallback:lang); "
    "a paused template comes back by itself after 3 h (6 h the second time). A template "
    "re-categorised MARKETING cannot knock reliably: submit a UTILITY one; " + RUNBOOK
)
KNOCK_HELD = Check(
    "knock_held",
    Owner.TEMPLATE,
    Judged.DELIVERED,
    "Documents whose knock waits because no template of their locale can be used: "
    "ERROR while any waits.",
    TEMPLATE_RUNBOOK,
)
KNOCK_NOT_DELIVERED = Check(
    "knock_not_delivered",
    Owner.TEMPLATE,
    Judged.DELIVERED,
    "Knocks the platform accepted and never reported delivered, read or failed after "
    "CHECK_KNOCK_UNDELIVERED_SECONDS (template pacing drops sends that way): WARN, "
    "listed apart from delivered knocks nobody answered.",
    TEMPLATE_RUNBOOK,
)
TEMPLATE_PREFIX = "knock_template_"
_TEMPLATE = Check(
    TEMPLATE_PREFIX,
    Owner.TEMPLATE,
    Judged.DELIVERED,
    "Knock template {name} ({language}): ERROR when paused, disabled, flagged, "
    "refused, RED or no longer UTILITY; WARN on YELLOW quality, an announced "
    "re-categorisation or knocks never delivered.",
    TEMPLATE_RUNBOOK,
)


def template_check_name(name: str, language: str) -> str:
    """A Dagster-safe check name for a template and language."""
    return TEMPLATE_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", f"{name}_{language}").lower()


def template_check(name: str, language: str) -> Check:
    """The family's member for one knock template of ``DELIVERY_KNOCK_TEMPLATES``."""
    return dataclasses.replace(
        _TEMPLATE,
        name=template_check_name(name, language),
        description=_TEMPLATE.description.format(name=name, language=language),
    )


DOCUMENT_TEMPLATE_PREFIX = "document_template_"
_DOCUMENT_TEMPLATE = Check(
    DOCUMENT_TEMPLATE_PREFIX,
    Owner.TEMPLATE,
    Judged.DELIVERED,
    "Document template {name} ({language}): ERROR when paused, disabled, flagged, "
    "refused, RED or no longer UTILITY (documents then fall over to the next "
    "document template, then to the knock); WARN on YELLOW quality or an announced "
    "re-categorisation.",
    TEMPLATE_RUNBOOK,
)


def document_template_check(name: str, language: str) -> Check:
    """The family's member for one document template of ``DELIVERY_DOCUMENT_TEMPLATES``."""
    safe = re.sub(r"[^A-Za-z0-9_]", "_", f"{name}_{language}").lower()
    return dataclasses.replace(
        _DOCUMENT_TEMPLATE,
        name=DOCUMENT_TEMPLATE_PREFIX + safe,
        description=_DOCUMENT_TEMPLATE.description.format(name=name, language=language),
    )


# ── built by Dagster itself (dagster_defs/asset_checks.py) ──────────────

BACKLOG_FRESHNESS = Check(
    "freshness_check",
    Owner.OPS,
    Judged.BACKLOG,
    "delivery_backlog materialized within CHECK_BACKLOG_STALE_SECONDS.",
    "Is the delivery_backlog schedule running and its runs succeeding? " + RUNBOOK,
)

_BY_NAME = {
    check.name: check
    for check in (*STATE_CHECKS, SERVICE, KNOCK_HELD, KNOCK_NOT_DELIVERED, BACKLOG_FRESHNESS)
}
CHECK_NAMES = tuple(check.name for check in STATE_CHECKS)
# Every check, the template family as its name rule (its name is the prefix).
CHECKS: tuple[Check, ...] = (*_BY_NAME.values(), _TEMPLATE, _DOCUMENT_TEMPLATE)


def lookup(name: str) -> Check | None:
    """The check of a name, a template family member included; None if not ours."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    if name.startswith(TEMPLATE_PREFIX):
        return dataclasses.replace(_TEMPLATE, name=name, description="A knock template.")
    if name.startswith(DOCUMENT_TEMPLATE_PREFIX):
        return dataclasses.replace(
            _DOCUMENT_TEMPLATE, name=name, description="A document template."
        )
    return None
