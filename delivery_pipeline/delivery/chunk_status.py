"""A chunk's failed status: accepted by the platform, then failed; it never arrived.

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
from delivery_pipeline.store.rows import ChunkOwner
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
    failure = Failure(
        error,
        MessageKind.CHUNK,
        chunk.document_id,
        chunk.person_id,
        attempts=chunk.delivery_attempts + 1,
        synchronous=False,
        at=at,
    )
    completed = await complete(conn, failure, FailedChunk(chunk), settings)
    return list(completed.due_now)


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
