"""Where each alert's runbook is: a page and an anchor of the documentation site.

An alert's key says what it is about (``check:pending_too_long``,
``recipient:41``, ``knock_held:es``); a check's runbook is found by the
check's name, any other alert's by the key's prefix. The ops channel links
the runbook under every alert it posts (``ops_channel.payload_for``), at
``DELIVERY_DOCS_URL``; the reference page of alerts is generated from here
(``docs_reference``), and a test checks that every anchor is in the built site
and that every alert the code can record has a runbook.
"""

from __future__ import annotations

from dataclasses import dataclass

from delivery_pipeline.watch.checks import registry

CHECK_PREFIX = "check:"
ESCALATED_SUFFIX = ":escalated"


@dataclass(frozen=True)
class Runbook:
    """A runbook's place: the page (its path under ``docs/``, without ``.md``) and the
    anchor of its section (a label of the page)."""

    page: str
    anchor: str

    def url(self, docs_url: str) -> str:
        return f"{docs_url.rstrip('/')}/{self.page}.html#{self.anchor}"


@dataclass(frozen=True)
class AlertKey:
    """An alert recorded outside the checks: its key (``<…>`` marks what varies),
    who records it, its runbook."""

    pattern: str
    raised_by: str
    runbook: Runbook

    @property
    def prefix(self) -> str:
        return self.pattern.split("<", 1)[0]


GENERATION = "how-to/alerts/generation"
REVIEW = "how-to/alerts/review"
DELIVERY = "how-to/alerts/delivery"
KNOCKS = "how-to/alerts/knocks"
SENDING = "how-to/alerts/sending"
WATCHERS = "how-to/alerts/watchers"
APPLICATIONS = "how-to/alerts/applications"

_CHECK_PAGES = {
    registry.PENDING: GENERATION,
    registry.GENERATING: GENERATION,
    registry.AWAITING_REVIEW: REVIEW,
    registry.UNDELIVERED: DELIVERY,
    registry.ABANDONED: DELIVERY,
    registry.AWAITING_REPLY: KNOCKS,
    registry.KNOCK_HELD: KNOCKS,
    registry.KNOCK_NOT_DELIVERED: KNOCKS,
    registry.TIER: SENDING,
    registry.SENDER_PAUSED: SENDING,
    registry.DELIVERY_EVENTS: WATCHERS,
    registry.SERVICE: WATCHERS,
    registry.BACKLOG_FRESHNESS: WATCHERS,
}
# A check's anchor is its name with hyphens; the template family's is its rule's.
CHECK_RUNBOOKS: dict[str, Runbook] = {
    check.name: Runbook(page, check.name.replace("_", "-")) for check, page in _CHECK_PAGES.items()
}
TEMPLATE_FAMILY = Runbook(KNOCKS, "knock-template")

KEYS: tuple[AlertKey, ...] = (
    AlertKey(
        "number_paused:<phone number id>",
        "the engine (one number's pause)",
        Runbook(SENDING, "number-paused"),
    ),
    AlertKey(
        "recipient:<person id>",
        "the engine and the webhook service (a person cannot receive)",
        Runbook(DELIVERY, "recipient-unreachable"),
    ),
    AlertKey(
        "bsuid_refused:<person id>",
        "the engine and the webhook service (131062)",
        Runbook(DELIVERY, "bsuid-refused"),
    ),
    AlertKey(
        "max_attempts:<document id>",
        "the engine and the webhook service",
        Runbook(DELIVERY, "max-attempts"),
    ),
    AlertKey(
        "migration:016:time_zones",
        "migration 016 (people's time zones repaired)",
        Runbook(DELIVERY, "time-zones-repaired"),
    ),
    AlertKey(
        "knock_held:<locale>",
        "the engine (no knock template of the locale can be used), when it cannot name "
        "the templates; else the first template's episode, template:<name>:<language>",
        Runbook(KNOCKS, "knock-held"),
    ),
    AlertKey(
        "knock_template:<name>:<language>:<code>",
        "the engine and the webhook service (a knock refused for its template), reported "
        "on the template's episode, template:<name>:<language>",
        Runbook(KNOCKS, "knock-template-refused"),
    ),
    AlertKey(
        "document_template:<name>:<language>:<code>",
        "the engine and the webhook service (a document's file refused for its document "
        "template), reported on the template's episode, template:<name>:<language>",
        Runbook(KNOCKS, "document-template-refused"),
    ),
    AlertKey(
        "media_refused:<code>",
        "the engine and the webhook service (a document's file refused: it goes as text)",
        Runbook(DELIVERY, "media-refused"),
    ),
    AlertKey(
        "template_refused:<code>",
        "the engine (a template-scoped refusal)",
        Runbook(KNOCKS, "knock-template-refused"),
    ),
    AlertKey(
        "template:<name>:<language>",
        "one episode per template (watch/episodes.py): its lifecycle webhooks (the webhook "
        "service), its refused knocks and held knocks (the engine), its check; resolved "
        "when the check passes",
        Runbook(KNOCKS, "template-lifecycle"),
    ),
    AlertKey(
        "watchdog:dagster_daemon",
        "the webhook service (Dagster's daemon silent)",
        Runbook(WATCHERS, "dagster-daemon"),
    ),
    AlertKey(
        "run_failure:<job>",
        "the ops_run_failures sensor: one episode per job, resolved by its next successful "
        "run (ops_run_successes); a checks run failed only by its checks is not one",
        Runbook(WATCHERS, "run-failure"),
    ),
    AlertKey(
        "application_endpoint:<application>",
        "the webhook service (an application's endpoint failing)",
        Runbook(APPLICATIONS, "application-endpoint"),
    ),
    AlertKey(
        "application_events_expired:<application>",
        "the webhook service (an application's events past the retry horizon)",
        Runbook(APPLICATIONS, "application-events-given-up"),
    ),
)


def runbook_for_check(name: str) -> Runbook | None:
    """The runbook of check ``name``, a template family member included."""
    if name in CHECK_RUNBOOKS:
        return CHECK_RUNBOOKS[name]
    if name.startswith((registry.TEMPLATE_PREFIX, registry.DOCUMENT_TEMPLATE_PREFIX)):
        return TEMPLATE_FAMILY
    return None


def runbook_for(key: str) -> Runbook | None:
    """The runbook of the alert recorded under ``key``; None when it has none."""
    if key.startswith(CHECK_PREFIX):
        return runbook_for_check(key.removeprefix(CHECK_PREFIX).removesuffix(ESCALATED_SUFFIX))
    return next((k.runbook for k in KEYS if key.startswith(k.prefix)), None)
