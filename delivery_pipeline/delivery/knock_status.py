"""A knock's statuses: delivered and read times, and what a later failure means.

A knock is watched like a chunk. The platform may accept it and fail it
later; that failure has the consequences the same error has on a chunk:
unreachable → its documents abandoned and ops told; the template's trouble →
the template avoided and the documents knocking again at once on the next
template of their locale; 131049 → parked a day, counted; a sender-wide
error → the pause; anything else → retried after a minute, counted, up to
``DELIVERY_MAX_ATTEMPTS``. A failed knock gives the person's 24 h knock
reservation back unless the platform's answer was about the person.

Runs inside the webhook service's statuses transaction (``service.ingest``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from psycopg import AsyncConnection

from delivery_pipeline.delivery.knock import template_scoped
from delivery_pipeline.delivery.outcomes import (
    ASYNC_RETRY_SECONDS,
    ECOSYSTEM_RETRY_SECONDS,
    Step,
    consequence_of,
)
from delivery_pipeline.delivery.pause import pause_sender
from delivery_pipeline.model import AbandonReason
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows import KnockRow, KnockUnwaited
from delivery_pipeline.watch.alerts import Alert, AlertSeverity, record_alert
from delivery_pipeline.whatsapp.errors import CloudApiError, EcosystemHold, from_error_object


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
    reason = str(error) if error else "failed status without an error"
    failed = await QUERIES.knock_failed.one(
        conn,
        {
            "knock_id": knock.id,
            "wa_message_id": wamid,
            "at": at,
            "error_code": error.code if error else None,
            "error": reason[:1000],
        },
    )
    if failed is None:
        return []
    return await _carry_out(conn, knock, error, settings)


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
    return await _carry_out(conn, knock, error, settings)


async def _carry_out(
    conn: AsyncConnection[Any],
    knock: KnockRow,
    error: CloudApiError | None,
    settings: DeliverySettings,
) -> list[int]:
    waiting = await QUERIES.knock_waiting_documents.one(conn, {"knock_id": knock.id})
    if waiting is None or not waiting.document_ids:
        return []
    documents = waiting.document_ids
    reason = str(error) if error else "failed status without an error"
    code = error.code if error else None
    error_text = f"knock {knock.id} ({knock.template}:{knock.language}) failed: {reason}"
    if template_scoped(error) and code is not None:
        await QUERIES.note_template_refused.run(
            conn,
            {
                "name": knock.template,
                "language": knock.language,
                "code": code,
                "recheck_seconds": settings.template_recheck_seconds,
            },
        )
        await record_alert(
            conn,
            Alert(
                f"knock_template:{knock.template}:{knock.language}:{code}",
                AlertSeverity.ERROR,
                f"WhatsApp failed a knock on template {knock.template} ({knock.language}) "
                f"after accepting it: {reason}. Knocks fail over to the next template of "
                "the locale; in-window deliveries go on.",
                {"template": knock.template, "language": knock.language, "code": code},
            ),
        )
        await QUERIES.give_back_knock.run(conn, {"knock_id": knock.id})
        await _unwait(conn, documents, 0.0, counted=False, error=error_text)
        return documents
    if isinstance(error, EcosystemHold):
        # 131049: not before a day has passed; the person's knock stays spent.
        await _unwait(conn, documents, ECOSYSTEM_RETRY_SECONDS, counted=True, error=error_text)
        return []
    consequence = consequence_of(
        error,
        document_id=documents[0],
        person_id=knock.person_id,
        attempts=0,
        settings=settings,
        synchronous=False,
        knock=True,
    )
    if consequence.alert is not None:
        await record_alert(conn, consequence.alert)
    if consequence.step == Step.ABANDON:
        assert consequence.abandon_reason is not None
        if consequence.opts_out:
            await QUERIES.person_opted_out.run(conn, {"person_id": knock.person_id})
        for document_id in documents:
            await QUERIES.abandon_document_async.one(
                conn,
                {
                    "document_id": document_id,
                    "reason": consequence.abandon_reason,
                    "error": error_text,
                },
            )
        return []
    await QUERIES.give_back_knock.run(conn, {"knock_id": knock.id})
    if consequence.step == Step.PAUSE:
        await pause_sender(
            conn, error, reason, document_id=None, settings=settings, number=knock.phone_number_id
        )
        await _unwait(conn, documents, ASYNC_RETRY_SECONDS, counted=False, error=error_text)
        return []
    # A passing failure after acceptance: the knock never arrived. It counts,
    # as a chunk's does; exhausted → abandoned, ops told.
    unwaited = await _unwait(conn, documents, ASYNC_RETRY_SECONDS, counted=True, error=error_text)
    for row in unwaited:
        if row.delivery_attempts >= settings.max_attempts:
            abandoned = await QUERIES.abandon_document_async.one(
                conn,
                {
                    "document_id": row.id,
                    "reason": AbandonReason.MAX_ATTEMPTS,
                    "error": f"{row.delivery_attempts} attempts, last: {error_text}",
                },
            )
            if abandoned is not None:
                await record_alert(
                    conn,
                    Alert(
                        f"max_attempts:{row.id}",
                        AlertSeverity.WARNING,
                        f"Document {row.id} abandoned after {row.delivery_attempts} "
                        f"attempts: {error_text}",
                        {"document_id": row.id, "code": code},
                    ),
                )
    return []


async def _unwait(
    conn: AsyncConnection[Any], documents: list[int], delay: float, *, counted: bool, error: str
) -> list[KnockUnwaited]:
    return await QUERIES.knock_unwait.all(
        conn,
        {
            "document_ids": documents,
            "delay_seconds": delay,
            "attempt": 1 if counted else 0,
            "error": error[:1000],
        },
    )
