"""A chunk's failed status: accepted by the platform, then failed; it never arrived.

A document sent as a file has a ledger of one row, so its failed status comes
here too, and fails as what it was (``kind_of``: a document template, whose
template the status does not name and the document row holds, or a
``document`` message).

The chunk is marked failed once (an old attempt's status, or one for a chunk
already delivered or read, changes nothing); its document is no longer
delivered, and the error means what it would have meant on the send call
(``completer``). Runs inside the webhook service's statuses transaction
(``service.ingest``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from delivery_pipeline.delivery.callback import parse_chunk
from delivery_pipeline.delivery.completer import Counted, Held, abandon_documents, complete
from delivery_pipeline.delivery.outcomes import Consequence, Failure, MessageKind
from delivery_pipeline.model import AbandonReason
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.webhooks import ChunkOwner
from delivery_pipeline.whatsapp.errors import CloudApiError


async def find_chunk(
    conn: AsyncConnection[Any], wamid: str, callback: str | None
) -> ChunkOwner | None:
    """The chunk a status is about: by its message id, else by the tag of its
    current send attempt (a send whose answer was lost)."""
    row = await QUERIES.chunk_by_wamid.one(conn, {"wa_message_id": wamid})
    tag = parse_chunk(callback)
    if row is not None or tag is None or callback is None:
        return row
    return await QUERIES.chunk_by_callback.one(
        conn,
        {"document_id": tag.document_id, "chunk_index": tag.chunk_index, "callback_data": callback},
    )


async def chunk_failed(
    conn: AsyncConnection[Any],
    chunk: ChunkOwner,
    at: dt.datetime,
    error: CloudApiError | None,
    settings: DeliverySettings,
) -> list[int] | None:
    """Carry out a chunk's failed status. Returns the documents due now (to sweep);
    None when the status changed nothing."""
    refused = await QUERIES.chunk_refused.one(
        conn,
        {
            "document_id": chunk.document_id,
            "chunk_index": chunk.chunk_index,
            "at": at,
            "callback_data": chunk.callback_data,
            "error_code": error.code if error else None,
        },
    )
    if refused is None:
        return None
    template = None
    if chunk.way == "file" and chunk.file_template and chunk.file_template_language:
        template = (chunk.file_template, chunk.file_template_language)
    failure = Failure(
        error,
        kind_of(chunk.way),
        chunk.document_id,
        chunk.person_id,
        attempts=chunk.delivery_attempts + 1,
        synchronous=False,
        template=template,
        at=at,
    )
    completed = await complete(conn, failure, FailedChunk(chunk), settings)
    return list(completed.due_now)


def kind_of(way: str | None) -> MessageKind:
    """What a ledger row of a document going ``way`` (sql/migrations/039) sends: its one file on a
    document template or as a ``document`` message, else a part of its text."""
    if way == "file":
        return MessageKind.DOCUMENT_TEMPLATE
    if way == "file_in_window":
        return MessageKind.DOCUMENT
    return MessageKind.CHUNK


@dataclass(frozen=True)
class FailedChunk(Held):
    """A failed chunk's document, as a status webhook holds it (``completer.Held``):
    whoever holds its claim, it is no longer delivered and is due as the
    consequence says; a sender finishing it meanwhile sees that (sql/migrations/028)."""

    chunk: ChunkOwner

    @property
    def number(self) -> str | None:
        return self.chunk.phone_number_id

    @property
    def probe_document(self) -> int | None:
        return self.chunk.document_id

    async def give_back(
        self, conn: AsyncConnection[Any], consequence: Consequence, error: str
    ) -> list[Counted]:
        attempts = await QUERIES.undeliver_document.one(
            conn,
            {
                "document_id": self.chunk.document_id,
                "error": error,
                "delay_seconds": consequence.retry_after,
                "attempt": int(consequence.counts_attempt),
                "chunk_index": self.chunk.chunk_index,
            },
        )
        return [] if attempts is None else [Counted(self.chunk.document_id, attempts)]

    async def abandon(
        self, conn: AsyncConnection[Any], reason: AbandonReason, error: str
    ) -> list[int]:
        return await abandon_documents(conn, [self.chunk.document_id], reason, error)
