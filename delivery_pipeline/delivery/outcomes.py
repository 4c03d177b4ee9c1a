"""What a failed send means for its documents: the one decision.

The engine meets an error on the send call (synchronous); the webhook
service meets the same error objects in a ``failed`` status (asynchronous,
after the platform accepted the message). Either reports a ``Failure``;
``consequence_of`` says what it means, ``at_limit`` applies
``DELIVERY_MAX_ATTEMPTS`` once the attempt is counted, and
``completer.complete`` carries both out, whichever path reported it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import random
from dataclasses import dataclass

from delivery_pipeline.backoff import backoff_seconds
from delivery_pipeline.delivery.addressing import bsuid_alert, refused_for_bsuid
from delivery_pipeline.model import AbandonReason
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.watch.alerts import Alert, AlertSeverity
from delivery_pipeline.whatsapp.errors import (
    PAIR_RATE_RETRY_SECONDS,
    CloudApiError,
    EcosystemHold,
    PairRateLimited,
    RecipientOptedOut,
    RecipientUnreachable,
    Scope,
    Trouble,
)

# A 130429 means the last second was one too many. The pause moves the whole
# fleet's timeline, so it is short: enough slots skipped for a burst of a few
# messages to pass out of the platform's window; longer pauses cost the
# whole fleet a visible share of its rate (the fleet benchmark).
THROUGHPUT_PAUSE_SECONDS = 0.1
# A message failed after acceptance for a passing reason: look again later.
ASYNC_RETRY_SECONDS = 60.0
# 131049 (withheld for ecosystem health): the platform asks for a day.
ECOSYSTEM_RETRY_SECONDS = 24 * 3600.0
# The answer to a press is worth little a few minutes late: a few tries, close
# together, instead of the documents' backoff and limit.
ACKNOWLEDGEMENT_ATTEMPTS = 3
ACKNOWLEDGEMENT_RETRY_SECONDS = 2.0


class MessageKind(enum.StrEnum):
    """What the failed send was. The rules that differ by kind ask this value; a new
    kind (a document sent as a file through a template) is one more member, which
    says whether it is ``templated``; the knock's own rules do not concern it."""

    CHUNK = "chunk"  # a part of a document, as text: only inside the person's window
    KNOCK = "knock"  # the template asking the person to write
    # The document as one PDF: on a document template (outside the window), or as
    # a ``document`` message (inside it). Its ledger is a part's (one row).
    DOCUMENT_TEMPLATE = "document_template"
    DOCUMENT = "document"
    # The answer to a press of Later or Stop, as text in the window the press opened;
    # about no one document (``delivery.acknowledgement``).
    ACKNOWLEDGEMENT = "acknowledgement"

    @property
    def templated(self) -> bool:
        """Sent on an approved template: it needs no window, and the template itself
        can be refused (the refusal holds the template, ``template_recheck_seconds``)."""
        return self in (MessageKind.KNOCK, MessageKind.DOCUMENT_TEMPLATE)

    @property
    def carries_file(self) -> bool:
        """It carries the document's file: a refusal of the file (``MediaRefused``)
        sends the document without it."""
        return self in (MessageKind.DOCUMENT_TEMPLATE, MessageKind.DOCUMENT)

    def attempt_limit(self, settings: DeliverySettings) -> int:
        """The counted attempts after which it is given up: ``DELIVERY_MAX_ATTEMPTS``
        for a document's sends, a few for an answer."""
        if self is MessageKind.ACKNOWLEDGEMENT:
            return ACKNOWLEDGEMENT_ATTEMPTS
        return settings.max_attempts


class Step(enum.StrEnum):
    """What is done about a failed send (``whatsapp.errors.Trouble`` says what went wrong)."""

    KNOCK = "knock"  # outside the window: the template, then wait for the person
    ABANDON = "abandon"  # never sent again
    PAUSE = "pause"  # nobody can be sent to: sending stops for everyone
    HOLD_TEMPLATE = "hold_template"  # the send's template is refused: it waits for it
    NEXT_TEMPLATE = "next_template"  # the knock's template is refused: the next one, now
    # The file cannot go (refused, or its template cannot reach a BSUID): the
    # document goes as text, parts in the window or the knock outside it, now.
    WITHOUT_FILE = "without_file"
    WAIT_FOR_PERSON = "wait_for_person"  # no knock reaches them: their next message will
    RETRY = "retry"  # try again after ``retry_after``


@dataclass(frozen=True)
class Failure:
    """A send the platform refused (the send call) or failed later (a status), as
    whoever heard of it reports it."""

    error: CloudApiError | None  # None: a failed status without an error object
    kind: MessageKind
    # The document it was for (a knock's: the first it asked about); None: an
    # acknowledgement, which is about the person's press.
    document_id: int | None
    person_id: int
    # The document's failed attempts with this one, as far as the reporter knows
    # (the backoff grows with it; 0: not known, a knock's documents each have theirs).
    attempts: int
    synchronous: bool  # the send call refused it: the sender holds the claim
    template: tuple[str, str] | None = None  # the template (name, language) it named
    at: dt.datetime | None = None  # when the platform said so (None: now)

    @property
    def reason(self) -> str:
        return reason_of(self.error)


def reason_of(error: CloudApiError | None) -> str:
    """What a failure says, in a document's or a message's last error."""
    return str(error) if error is not None else "failed status without an error"


@dataclass(frozen=True)
class Consequence:
    step: Step
    scope: Scope = Scope.MESSAGE
    retry_after: float = 0.0
    counts_attempt: bool = False
    abandon_reason: AbandonReason | None = None
    opts_out: bool = False  # the person stopped our messages
    slows_sender: bool = False  # the number's throughput was exceeded
    # A knock that left stays spent: the person's 24 h knock is not given back.
    knock_spent: bool = False
    alert: Alert | None = None


def consequence_of(failure: Failure, settings: DeliverySettings) -> Consequence:
    """What to do with the documents of a send that failed.

    The error's ``scope`` says whose sends it stops, its ``trouble`` what is wrong;
    the kind of message and whether the send call itself refused it say what is
    done about it (the ``Step``).
    The attempt limit is not applied here: ``at_limit``, once the attempt counted.
    """
    error, kind = failure.error, failure.kind
    trouble = error.trouble if error is not None else Trouble.THIS_SEND
    scope = error.scope if error is not None else Scope.MESSAGE
    if error is not None and refused_for_bsuid(error):
        return _bsuid_refused(failure, error)
    if trouble == Trouble.FILE_REFUSED and kind.carries_file:
        assert error is not None
        return Consequence(Step.WITHOUT_FILE, scope, alert=_without_file_alert(failure, error))
    if trouble == Trouble.WINDOW_CLOSED:
        if kind.templated:
            # A template refused with 131047 is never a window question (a template
            # needs no window): retried after the backoff, and it counts.
            return Consequence(
                Step.RETRY, scope, counts_attempt=True, retry_after=_backoff(failure, settings)
            )
        return Consequence(Step.KNOCK, scope)
    if trouble == Trouble.SENDER_REFUSED:
        # The alert is the pause's own episode (delivery/pause.py), not one per refusal.
        return Consequence(
            Step.PAUSE, scope, retry_after=0.0 if failure.synchronous else ASYNC_RETRY_SECONDS
        )
    if trouble == Trouble.UNREACHABLE and isinstance(error, RecipientUnreachable):
        return Consequence(
            Step.ABANDON,
            scope,
            abandon_reason=error.abandon_reason,
            opts_out=isinstance(error, RecipientOptedOut),
            knock_spent=True,
            alert=_unreachable_alert(failure, error),
        )
    if trouble == Trouble.TEMPLATE_REFUSED:
        assert error is not None
        return _template_refused(failure, error, settings)
    if trouble == Trouble.PLATFORM_HOLD:
        if isinstance(error, EcosystemHold):
            # 131049: the platform asks for a day. A withheld knock or document
            # template counts (a knock's is spent); a withheld chunk does not.
            knock = kind is MessageKind.KNOCK
            return Consequence(
                Step.RETRY,
                scope,
                retry_after=ECOSYSTEM_RETRY_SECONDS,
                counts_attempt=kind.templated,
                knock_spent=knock,
            )
        if isinstance(error, PairRateLimited):
            return Consequence(Step.RETRY, scope, retry_after=_jitter(PAIR_RATE_RETRY_SECONDS))
    if trouble == Trouble.THROUGHPUT:
        if not failure.synchronous:
            return Consequence(Step.RETRY, scope, retry_after=ASYNC_RETRY_SECONDS)
        return Consequence(
            Step.RETRY, scope, retry_after=_jitter(THROUGHPUT_PAUSE_SECONDS), slows_sender=True
        )
    # This message's own trouble: the attempt counts, refused at once or failed
    # after acceptance, so a document that keeps failing ends abandoned (at_limit).
    return Consequence(
        Step.RETRY, scope, counts_attempt=True, retry_after=_backoff(failure, settings)
    )


def at_limit(
    consequence: Consequence,
    *,
    kind: MessageKind,
    document_id: int,
    attempts: int,
    last_error: str,
    code: int | None,
    settings: DeliverySettings,
) -> Consequence:
    """The attempt limit, applied here alone: a consequence that counted the
    ``attempts``-th attempt of a message of ``kind`` gives it up at the kind's limit
    (``MessageKind.attempt_limit``); a document is abandoned and ops is told, an
    answer to a press is not sent (``document_id`` is then its reply's). Below the
    limit, or not counted, the consequence stands."""
    if not consequence.counts_attempt or attempts < kind.attempt_limit(settings):
        return consequence
    if kind is MessageKind.ACKNOWLEDGEMENT:
        # Nothing waits on it: the press was applied, only its answer is lost.
        return dataclasses.replace(
            consequence, step=Step.ABANDON, abandon_reason=AbandonReason.MAX_ATTEMPTS
        )
    return dataclasses.replace(
        consequence,
        step=Step.ABANDON,
        abandon_reason=AbandonReason.MAX_ATTEMPTS,
        alert=Alert(
            f"max_attempts:{document_id}",
            AlertSeverity.WARNING,
            f"Document {document_id} abandoned after {attempts} attempts: {last_error}",
            {"document_id": document_id, "code": code},
        ),
    )


def retry_delay(attempts: int, settings: DeliverySettings) -> float:
    """The backoff before a document's next try, after ``attempts`` failed tries."""
    return backoff_seconds(attempts, settings.backoff_base_seconds, settings.backoff_max_seconds)


def _backoff(failure: Failure, settings: DeliverySettings) -> float:
    """How long a counted failure waits: the backoff; a knock that failed after it
    was accepted, a minute (its documents were waiting on the person meanwhile); an
    answer to a press, a moment."""
    if failure.kind is MessageKind.ACKNOWLEDGEMENT:
        return ACKNOWLEDGEMENT_RETRY_SECONDS
    if failure.kind is MessageKind.KNOCK and not failure.synchronous:
        return ASYNC_RETRY_SECONDS
    return retry_delay(failure.attempts, settings)


def _bsuid_refused(failure: Failure, error: CloudApiError) -> Consequence:
    """131062 (delivery/addressing.py): a knock waits for the person to write, no knock
    counted; a text that a BSUID cannot take means they cannot take our documents."""
    knock = failure.kind is MessageKind.KNOCK
    alert = bsuid_alert(failure.person_id, failure.document_id, error, knock=knock)
    if knock:
        return Consequence(Step.WAIT_FOR_PERSON, error.scope, alert=alert)
    if failure.kind is MessageKind.DOCUMENT_TEMPLATE:
        # Not a template for a BSUID: the document goes without its file, that is
        # the knock, whose own 131062 then waits for the person.
        return Consequence(Step.WITHOUT_FILE, error.scope, alert=alert)
    return Consequence(
        Step.ABANDON,
        error.scope,
        abandon_reason=AbandonReason.UNDELIVERABLE,
        knock_spent=True,
        alert=alert,
    )


def _unreachable_alert(failure: Failure, error: RecipientUnreachable) -> Alert:
    person_id, document_id = failure.person_id, failure.document_id
    what = (
        "the answer to their reply is not sent"
        if document_id is None
        else f"document {document_id} abandoned"
    )
    return Alert(
        f"recipient:{person_id}",
        AlertSeverity.WARNING,
        f"Person {person_id} cannot receive WhatsApp messages ({error}); {what}.",
        {"code": error.code, "document_id": document_id, "person_id": person_id},
    )


def _template_refused(
    failure: Failure, error: CloudApiError, settings: DeliverySettings
) -> Consequence:
    """The template itself was refused (paused, disabled, its parameters): it is
    avoided fleet-wide for ``template_recheck_seconds`` (``completer``). A knock
    fails over to the next template of its locale at once; any other send that
    named it waits that long; in-window deliveries, which need no template, go on."""
    hold = settings.template_recheck_seconds
    if failure.kind is MessageKind.DOCUMENT_TEMPLATE:
        assert failure.template is not None  # a document template's send names it
        name, language = failure.template
        return Consequence(
            Step.NEXT_TEMPLATE,
            error.scope,
            alert=Alert(
                f"document_template:{name}:{language}:{error.code}",
                AlertSeverity.ERROR,
                f"WhatsApp refused the document template {name} ({language}): {error}. "
                "Documents fall over to the next document template of the locale "
                "(DELIVERY_DOCUMENT_TEMPLATES), then to the knock.",
                {"template": name, "language": language, "code": error.code},
            ),
        )
    if failure.kind is MessageKind.KNOCK:
        assert failure.template is not None  # a knock names its template
        name, language = failure.template
        what = (
            f"refused the knock template {name} ({language}): {error}"
            if failure.synchronous
            else f"failed a knock on template {name} ({language}) after accepting it: {error}"
        )
        return Consequence(
            Step.NEXT_TEMPLATE,
            error.scope,
            alert=Alert(
                f"knock_template:{name}:{language}:{error.code}",
                AlertSeverity.ERROR,
                f"WhatsApp {what}. Knocks fail over to the next template of the locale "
                "(DELIVERY_KNOCK_TEMPLATES); in-window deliveries go on.",
                {"template": name, "language": language, "code": error.code},
            ),
        )
    return Consequence(
        Step.HOLD_TEMPLATE,
        error.scope,
        retry_after=hold,
        alert=Alert(
            f"template_refused:{error.code}",
            AlertSeverity.WARNING,
            f"A send's template was refused ({error}); sends on it wait and are tried "
            f"again every {hold / 60:.0f} min, in-window deliveries go on.",
            {"code": error.code, "document_id": failure.document_id},
        ),
    )


def _without_file_alert(failure: Failure, error: CloudApiError) -> Alert:
    return Alert(
        f"media_refused:{error.code}",
        AlertSeverity.WARNING,
        f"WhatsApp refused document {failure.document_id}'s file ({error}); it goes as "
        "text instead (the knock outside the window). Check the file's type and size.",
        {"code": error.code, "document_id": failure.document_id},
    )


def _jitter(seconds: float) -> float:
    """Spread retries that failed together over half their delay again."""
    return seconds * random.uniform(1.0, 1.5)
