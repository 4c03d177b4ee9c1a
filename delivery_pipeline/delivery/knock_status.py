"""A knock's statuses: delivered and read times, and what a later failure means.

A knock is watched like a chunk. The platform may accept it and fail it
later; that failure means what the same error means on the send call
(``outcomes``), carried out by the one completer (``completer``) for every
document still waiting on the knock: unreachable → abandoned and ops told;
the template's trouble → the template avoided and the documents knocking
again at once on the next template of their locale; 131049 → parked a day,
counted; a sender-wide error → the pause; anything else → retried after a
minute, counted, up to ``DELIVERY_MAX_ATTEMPTS``. A failed knock gives the
person's 24 h knock reservation back unless it stays spent (the platform's
answer was about the person).

Runs inside the webhook service's statuses transaction (``service.ingest``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from delivery_pipeline.delivery.completer import Counted, Held, abandon_documents, complete
from delivery_pipeline.delivery.outcomes import Consequence, Failure, MessageKind, Step, reason_of
from delivery_pipeline.model import AbandonReason
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.templates import KnockRow
from delivery_pipeline.text import stored_error
from delivery_pipeline.whatsapp.errors import CloudApiError, from_error_object


async def find_knock(
    conn: AsyncConnection[Any], knock_id: int | None, wamid: str
) -> KnockRow | None:
    """The knock a status is about: by its tag's knock id, else by its message id."""
    return await QUERIES.knock_by_status.one(
        conn, {"knock_id": knock_id if knock_id is not None else -1, "wa_message_id": wamid}
    )


async def knock_status(
    conn: AsyncConnection[Any], knock: KnockRow, wamid: str, status: str, at: dt.datetime
) -> None:
    """sent / delivered / read: the knock's times (and its id, if the send's answer was lost)."""
    await QUERIES.knock_status.run(
        conn, {"knock_id": knock.id, "wa_message_id": wamid, "status": status, "at": at}
    )


async def knock_failed(
    conn: AsyncConnection[Any],
    knock: KnockRow,
    wamid: str,
    at: dt.datetime,
    error: CloudApiError | None,
    settings: DeliverySettings,
) -> list[int]:
    """A failed status of a knock: carry out what its error means for its documents.

    Returns the documents due now (to sweep); an empty list when the status
    was a duplicate or no document still waited on this knock. A document
    whose sender had not yet recorded the knock sent is not waiting yet: its
    sender sees the failure in ``await_reply`` and calls ``failed_before_waiting``.
    """
    failed = await QUERIES.knock_failed.one(
        conn,
        {
            "knock_id": knock.id,
            "wa_message_id": wamid,
            "at": at,
            "error_code": error.code if error else None,
            "error": stored_error(reason_of(error)),
        },
    )
    if failed is None:
        return []
    return await _complete_waiting(conn, knock, error, settings)


async def failed_before_waiting(
    conn: AsyncConnection[Any], knock_id: int, settings: DeliverySettings
) -> list[int]:
    """The knock's failed status was applied before its sender parked the
    documents to wait: carry the failure out now that they wait."""
    knock = await find_knock(conn, knock_id, "")
    if knock is None:
        return []
    found = await QUERIES.knock_failure_error.one(conn, {"knock_id": knock_id})
    error = from_error_object(found.error) if found and found.error else None
    return await _complete_waiting(conn, knock, error, settings)


async def _complete_waiting(
    conn: AsyncConnection[Any],
    knock: KnockRow,
    error: CloudApiError | None,
    settings: DeliverySettings,
) -> list[int]:
    waiting = await QUERIES.knock_waiting_documents.one(conn, {"knock_id": knock.id})
    if waiting is None or not waiting.document_ids:
        return []
    documents = waiting.document_ids
    failure = Failure(
        error,
        MessageKind.KNOCK,
        documents[0],
        knock.person_id,
        attempts=0,
        synchronous=False,
        template=(knock.template, knock.language),
    )
    completed = await complete(conn, failure, FailedKnock(knock, documents), settings)
    return list(completed.due_now)


@dataclass(frozen=True)
class FailedKnock(Held):
    """The documents still waiting on a knock that failed later, as a status webhook
    holds them (``completer.Held``): given back, they stop waiting on the person and
    knock again when due; the person's knock reservation is theirs again unless the
    knock stays spent."""

    knock: KnockRow
    documents: list[int]

    @property
    def number(self) -> str | None:
        return self.knock.phone_number_id

    @property
    def probe_document(self) -> int | None:
        return None

    def last_error(self, reason: str) -> str:
        knock = self.knock
        return f"knock {knock.id} ({knock.template}:{knock.language}) failed: {reason}"

    async def give_back(
        self, conn: AsyncConnection[Any], consequence: Consequence, error: str
    ) -> list[Counted]:
        if not consequence.knock_spent:
            await QUERIES.give_back_knock.run(conn, {"knock_id": self.knock.id})
        if consequence.step is Step.WAIT_FOR_PERSON:
            return []
        unwaited = await QUERIES.knock_unwait.all(
            conn,
            {
                "document_ids": self.documents,
                "delay_seconds": consequence.retry_after,
                "attempt": int(consequence.counts_attempt),
                "error": stored_error(error),
            },
        )
        return [Counted(row.id, row.delivery_attempts) for row in unwaited]

    async def abandon(
        self, conn: AsyncConnection[Any], reason: AbandonReason, error: str
    ) -> list[int]:
        return await abandon_documents(conn, self.documents, reason, error)
