"""What a platform error means for a document: the one mapping.

The engine meets an error on the send call (synchronous); the webhook
service meets the same error objects in a ``failed`` status (asynchronous,
after the platform accepted the message). Both ask ``consequence_of`` and
carry out what it says, each within its own transaction: the engine under
its claim, the service on whatever holds the document.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

from delivery_pipeline.backoff import backoff_seconds
from delivery_pipeline.model import AbandonReason
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.watch.alerts import Alert, AlertSeverity
from delivery_pipeline.whatsapp.errors import (
    PAIR_RATE_LIMIT,
    PAIR_RATE_RETRY_SECONDS,
    CloudApiError,
    EcosystemHold,
    GlobalSendError,
    RecipientOptedOut,
    RecipientUnreachable,
    ReEngagementRequired,
    Throttled,
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


class Step(enum.StrEnum):
    KNOCK = "knock"  # outside the window: the template, then wait for the person
    ABANDON = "abandon"  # never sent again
    PAUSE = "pause"  # nobody can be sent to: sending stops for everyone
    RETRY = "retry"  # try again after ``retry_after``


@dataclass(frozen=True)
class Consequence:
    step: Step
    retry_after: float = 0.0
    counts_attempt: bool = False
    abandon_reason: AbandonReason | None = None
    opts_out: bool = False  # the person stopped our messages
    slows_sender: bool = False  # the number's throughput was exceeded
    alert: Alert | None = None


def consequence_of(
    error: CloudApiError | None,
    *,
    document_id: int,
    person_id: int,
    attempts: int,
    settings: DeliverySettings,
    synchronous: bool,
) -> Consequence:
    """What to do with a document whose send failed with ``error``.

    ``attempts``: the document's failed attempts including this one.
    ``synchronous``: the send call failed (the engine holds the claim), as
    opposed to a ``failed`` status arriving later (``error`` may then be None).
    """
    if isinstance(error, ReEngagementRequired):
        return Consequence(Step.KNOCK)
    if isinstance(error, GlobalSendError):
        return Consequence(
            Step.PAUSE,
            retry_after=0.0 if synchronous else ASYNC_RETRY_SECONDS,
            alert=Alert(
                f"sender_paused:{error.code}",
                AlertSeverity.ERROR,
                f"Sending paused: WhatsApp refused a send with a global error ({error}). Fix "
                "what it names (credentials, phone number id, template or account); the next "
                "successful send resumes sending by itself.",
                {"code": error.code, "document_id": document_id},
            ),
        )
    if isinstance(error, RecipientUnreachable):
        return Consequence(
            Step.ABANDON,
            abandon_reason=error.abandon_reason,
            opts_out=isinstance(error, RecipientOptedOut),
            alert=Alert(
                f"recipient:{person_id}",
                AlertSeverity.WARNING,
                f"Person {person_id} cannot receive WhatsApp messages ({error}); "
                f"document {document_id} abandoned.",
                {"code": error.code, "document_id": document_id, "person_id": person_id},
            ),
        )
    if not synchronous:
        # Accepted, then failed for a passing reason: the message never
        # arrived, nothing is wrong with the document. Not an attempt.
        hold = ECOSYSTEM_RETRY_SECONDS if isinstance(error, EcosystemHold) else ASYNC_RETRY_SECONDS
        return Consequence(Step.RETRY, retry_after=hold)
    if isinstance(error, Throttled):
        if error.code == PAIR_RATE_LIMIT:
            return Consequence(Step.RETRY, retry_after=_jitter(PAIR_RATE_RETRY_SECONDS))
        return Consequence(
            Step.RETRY, retry_after=_jitter(THROUGHPUT_PAUSE_SECONDS), slows_sender=True
        )
    if attempts >= settings.max_attempts:
        return Consequence(
            Step.ABANDON,
            counts_attempt=True,
            abandon_reason=AbandonReason.MAX_ATTEMPTS,
            alert=Alert(
                f"max_attempts:{document_id}",
                AlertSeverity.WARNING,
                f"Document {document_id} abandoned after {attempts} attempts: {error}",
                {"document_id": document_id, "code": error.code if error else None},
            ),
        )
    return Consequence(
        Step.RETRY,
        counts_attempt=True,
        retry_after=backoff_seconds(
            attempts, settings.backoff_base_seconds, settings.backoff_max_seconds
        ),
    )


def _jitter(seconds: float) -> float:
    """Spread retries that failed together over half their delay again."""
    return seconds * random.uniform(1.0, 1.5)
