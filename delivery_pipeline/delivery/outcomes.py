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
    PAIR_RATE_RETRY_SECONDS,
    CloudApiError,
    EcosystemHold,
    Effect,
    PairRateLimited,
    RecipientOptedOut,
    RecipientUnreachable,
    Scope,
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
# A knock whose template was refused (paused, disabled, its parameters): the
# document waits this long before its knock is tried again. A paused template
# stays paused 3 h at least; a quarter of an hour notices a fix soon enough
# without knocking on a closed door every few seconds.
TEMPLATE_HOLD_SECONDS = 15 * 60.0


class Step(enum.StrEnum):
    KNOCK = "knock"  # outside the window: the template, then wait for the person
    ABANDON = "abandon"  # never sent again
    PAUSE = "pause"  # nobody can be sent to: sending stops for everyone
    HOLD_TEMPLATE = "hold_template"  # the knock's template is refused: the knock waits
    RETRY = "retry"  # try again after ``retry_after``


@dataclass(frozen=True)
class Consequence:
    step: Step
    scope: Scope = Scope.MESSAGE
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
    knock: bool = False,
) -> Consequence:
    """What to do with a document whose send failed with ``error``.

    ``attempts``: the document's failed attempts including this one.
    ``synchronous``: the send call failed (the engine holds the claim), as
    opposed to a ``failed`` status arriving later (``error`` may then be None).
    ``knock``: the send that failed was the knock itself, not a chunk.
    The error's ``scope`` says whose sends it stops, its ``effect`` what happens.
    """
    effect = error.effect if error is not None else Effect.RETRY
    scope = error.scope if error is not None else Scope.MESSAGE
    if effect == Effect.KNOCK:
        if knock:
            # A knock refused with 131047 is never a window question (a template
            # needs no window): retried after the backoff, and it counts.
            return Consequence(
                Step.RETRY, scope, counts_attempt=True, retry_after=retry_delay(attempts, settings)
            )
        return Consequence(Step.KNOCK, scope)
    if effect == Effect.PAUSE:
        # The alert is the pause's own episode (delivery/pause.py), not one per refusal.
        return Consequence(
            Step.PAUSE, scope, retry_after=0.0 if synchronous else ASYNC_RETRY_SECONDS
        )
    if effect == Effect.ABANDON and isinstance(error, RecipientUnreachable):
        return Consequence(
            Step.ABANDON,
            scope,
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
    if effect == Effect.HOLD_TEMPLATE:
        assert error is not None
        # The hook for the template's own lifecycle: the scope says "template",
        # the engine records the hold on the document (last error, next attempt)
        # and only knocks wait; in-window deliveries need no template.
        return Consequence(
            Step.HOLD_TEMPLATE,
            scope,
            retry_after=TEMPLATE_HOLD_SECONDS,
            alert=Alert(
                f"template_refused:{error.code}",
                AlertSeverity.WARNING,
                f"A knock's template was refused ({error}); knocks wait and are tried "
                f"again every {TEMPLATE_HOLD_SECONDS / 60:.0f} min, in-window deliveries go on.",
                {"code": error.code, "document_id": document_id},
            ),
        )
    if effect == Effect.HOLD:
        if isinstance(error, EcosystemHold):
            # 131049: the platform asks for a day. A withheld knock counts (the
            # person's knock is spent); a withheld chunk does not.
            return Consequence(
                Step.RETRY, scope, retry_after=ECOSYSTEM_RETRY_SECONDS, counts_attempt=knock
            )
        if isinstance(error, PairRateLimited):
            return Consequence(Step.RETRY, scope, retry_after=_jitter(PAIR_RATE_RETRY_SECONDS))
    if effect == Effect.SLOW:
        if not synchronous:
            return Consequence(Step.RETRY, scope, retry_after=ASYNC_RETRY_SECONDS)
        return Consequence(
            Step.RETRY, scope, retry_after=_jitter(THROUGHPUT_PAUSE_SECONDS), slows_sender=True
        )
    # This message's own trouble: the attempt counts, refused at once or failed
    # after acceptance, so a document that keeps failing ends abandoned.
    if attempts >= settings.max_attempts:
        return Consequence(
            Step.ABANDON,
            scope,
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
        scope,
        counts_attempt=True,
        retry_after=retry_delay(attempts, settings),
    )


def retry_delay(attempts: int, settings: DeliverySettings) -> float:
    """The backoff before a document's next try, after ``attempts`` failed tries."""
    return backoff_seconds(attempts, settings.backoff_base_seconds, settings.backoff_max_seconds)


def _jitter(seconds: float) -> float:
    """Spread retries that failed together over half their delay again."""
    return seconds * random.uniform(1.0, 1.5)
