"""The one completer of a failed send: its consequence carried out, whoever heard of it.

A send fails on the send call (the engine, holding the document's claim) or
later, in a ``failed`` status (the webhook service's transaction), and what
failed is a chunk or a knock. ``complete`` takes the ``Failure``, asks
``outcomes.consequence_of`` what it means and writes all of it over one
connection, in the caller's transaction: the alert, the template avoided, the
person opted out or their window closed, the pause; then the documents,
abandoned or given back, and ``DELIVERY_MAX_ATTEMPTS`` applied to the attempts
the giving back counted (``outcomes.at_limit``).

How the documents are held is the one thing that differs, and a ``Held`` says
it: ``statements.ClaimedDocument`` (the sender's claim), ``chunk_status.FailedChunk``
and ``knock_status.FailedKnock`` (a status webhook's), and
``acknowledgement.OwedAnswer`` (the answer to a press, which holds no document:
what it gives back or gives up is the answer itself). A new kind of message
is a ``MessageKind``; it needs a ``Held`` of its own only if what it sends is
held in a new way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from psycopg import AsyncConnection

from delivery_pipeline.delivery.outcomes import (
    Consequence,
    Failure,
    Step,
    at_limit,
    consequence_of,
)
from delivery_pipeline.delivery.pause import DEFAULT_REMINDER_SECONDS, pause_sender
from delivery_pipeline.model import AbandonReason
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.text import stored_error
from delivery_pipeline.watch.alerts import record_alert
from delivery_pipeline.whatsapp.errors import Scope

# The document goes on at once under the sender's claim (the knock path, the
# next template, waiting for the person); a status webhook's gives it back due now.
GOES_ON = frozenset({Step.KNOCK, Step.NEXT_TEMPLATE, Step.WAIT_FOR_PERSON, Step.WITHOUT_FILE})


class Counted(NamedTuple):
    """What was given back (a document; an answer to a press: its reply), and its
    failed attempts so far."""

    id: int
    attempts: int


class Held(Protocol):
    """The documents a failed send was for, as whoever heard of the failure holds them
    (a holder subclasses it for ``last_error``)."""

    @property
    def number(self) -> str | None:
        """The business number it was sent from (a pause may be that number's)."""
        ...

    @property
    def probe_document(self) -> int | None:
        """The document whose send it was, if one (a refused probe grows its interval)."""
        ...

    def last_error(self, reason: str) -> str:
        """What the documents' last error says of ``reason``: the reason, unless the
        holder has more to say."""
        return reason

    async def give_back(
        self, conn: AsyncConnection[Any], consequence: Consequence, error: str
    ) -> list[Counted]:
        """The documents due again after ``consequence.retry_after``, its attempt
        counted or not; the steps in ``GOES_ON`` and the pause as this holder can."""
        ...

    async def abandon(
        self, conn: AsyncConnection[Any], reason: AbandonReason, error: str
    ) -> list[int]:
        """Never sent again; the documents this abandoned."""
        ...

    async def give_up(
        self, conn: AsyncConnection[Any], counted: Counted, reason: AbandonReason, error: str
    ) -> bool:
        """Never send ``counted`` again, at its attempt limit, in the transaction that
        gave it back (so nobody claimed it since); whether it was given up. A
        document, unless the holder holds something else."""
        return bool(await abandon_documents(conn, [counted.id], reason, error))


@dataclass(frozen=True)
class Completed:
    """What carrying out a failure did."""

    consequence: Consequence
    # By the consequence, or at the attempt limit (an answer to a press: its reply).
    abandoned: tuple[int, ...] = ()
    due_now: tuple[int, ...] = ()  # documents given back due at once: whoever can, sweeps them

    @property
    def abandon_reason(self) -> AbandonReason:
        return self.consequence.abandon_reason or AbandonReason.MAX_ATTEMPTS


async def complete(
    conn: AsyncConnection[Any],
    failure: Failure,
    held: Held,
    settings: DeliverySettings,
    *,
    reminder_seconds: float = DEFAULT_REMINDER_SECONDS,
) -> Completed:
    """Carry out what ``failure`` means, within the caller's transaction on ``conn``."""
    consequence = consequence_of(failure, settings)
    error = held.last_error(failure.reason)
    # The pause first: a document given back while paused is due at the next
    # probe (its ready notification says so), and no listener sweeps it at once.
    await _beyond_the_documents(conn, failure, consequence, held, settings, reminder_seconds)
    if consequence.step is Step.ABANDON:
        assert consequence.abandon_reason is not None  # an abandonment always has its reason
        abandoned = await held.abandon(conn, consequence.abandon_reason, error)
        return Completed(consequence, abandoned=tuple(abandoned))
    abandoned, due = [], []
    for counted in await held.give_back(conn, consequence, error):
        exhausted = at_limit(
            consequence,
            kind=failure.kind,
            document_id=counted.id,
            attempts=counted.attempts,
            last_error=error,
            code=failure.error.code if failure.error is not None else None,
            settings=settings,
        )
        if exhausted.step is Step.ABANDON:
            assert exhausted.abandon_reason is not None
            last = f"{counted.attempts} attempts, last: {error}"
            if await held.give_up(conn, counted, exhausted.abandon_reason, last):
                if exhausted.alert is not None:
                    await record_alert(conn, exhausted.alert)
                abandoned.append(counted.id)
        elif consequence.retry_after == 0:
            due.append(counted.id)
    return Completed(consequence, tuple(abandoned), tuple(due))


async def _beyond_the_documents(
    conn: AsyncConnection[Any],
    failure: Failure,
    consequence: Consequence,
    held: Held,
    settings: DeliverySettings,
    reminder_seconds: float,
) -> None:
    """What the failure changes besides its documents: ops told, the template
    avoided, the person (opted out, window closed), the sender (paused)."""
    error = failure.error
    code = error.code if error is not None else None
    if consequence.alert is not None:
        await record_alert(conn, consequence.alert)
    if consequence.scope is Scope.TEMPLATE and failure.template is not None and code is not None:
        name, language = failure.template
        await QUERIES.note_template_refused.run(
            conn,
            {
                "name": name,
                "language": language,
                "code": code,
                "recheck_seconds": settings.template_recheck_seconds,
            },
        )
    if consequence.opts_out:
        await QUERIES.person_opted_out.run(conn, {"person_id": failure.person_id})
    if consequence.step is Step.WITHOUT_FILE and failure.document_id is not None:
        # The document's way from now on, whoever goes on with it: text.
        await QUERIES.document_without_file.one(conn, {"document_id": failure.document_id})
    if consequence.step is Step.KNOCK:
        # The platform's word is the person's new state: the window closed.
        await QUERIES.refuse_window.run(conn, {"person_id": failure.person_id, "at": failure.at})
    if consequence.step is Step.PAUSE:
        await pause_sender(
            conn,
            error,
            failure.reason,
            document_id=held.probe_document,
            settings=settings,
            number=held.number,
            reminder_seconds=reminder_seconds,
        )


async def abandon_documents(
    conn: AsyncConnection[Any], documents: list[int], reason: AbandonReason, error: str
) -> list[int]:
    """Never sent again, whoever holds them: the documents this abandoned."""
    abandoned = []
    for document_id in documents:
        row = await QUERIES.abandon_document_async.one(
            conn, {"document_id": document_id, "reason": reason, "error": stored_error(error)}
        )
        if row is not None:
            abandoned.append(document_id)
    return abandoned
