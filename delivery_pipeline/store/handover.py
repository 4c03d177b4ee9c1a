"""An application hands a document over (``POST /v1/documents``), once, whatever it retries.

One transaction does all of it: under an ``Idempotency-Key`` it first takes a
lock on (application, key), so a retry racing the first request waits for it;
then it finds the first request's document (same request: its first answer,
replayed; another request: ``IdempotencyConflict``, nothing written), or finds
or adds the person (``application_people.resolve``), adds the document through
intake's checks, records who handed it over with what (``api_documents``) and
keeps the answer. A failure anywhere rolls all of it back: nothing is ever
half written, and a retry after a refusal starts afresh.

A document replaces another only when the application says so: under the same
``replace_key`` for the same person (``superseded``, sql/migrations/036). Handed over
without one, it is never superseded and supersedes nothing, as a retry-safe
hand-over should: two plans handed over minutes apart are both delivered, in
the person's turn.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from delivery_pipeline.model import Kind, Priority
from delivery_pipeline.settings import WhatsAppSettings
from delivery_pipeline.store.application_people import PersonRef, resolve
from delivery_pipeline.store.intake import add_document_async
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.api import IdempotencyKey

AsyncConn = psycopg.AsyncConnection[Any]
# The answer to a hand-over, made inside its transaction (the document as it reads now).
Render = Callable[[AsyncConn, int], Awaitable[dict[str, Any]]]


class IdempotencyConflict(Exception):
    """The idempotency key was used for another request; nothing was written."""

    def __init__(self, document_id: int) -> None:
        super().__init__(f"the key was used for another request (document {document_id})")
        self.document_id = document_id


@dataclass(frozen=True)
class HandOver:
    """A document an application hands over: ready (``body``) or to be generated (None)."""

    application: str
    person: PersonRef
    kind: Kind
    body: str | None
    day: dt.date | None = None
    priority: Priority = Priority.NORMAL
    replace_key: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None
    request_hash: bytes | None = None


@dataclass(frozen=True)
class Accepted:
    document_id: int
    answer: dict[str, Any]
    replayed: bool  # the answer of an earlier request under the same key


async def hand_over(
    conn: AsyncConn,
    request: HandOver,
    *,
    render: Render,
    whatsapp: WhatsAppSettings,
    review_kinds: Collection[str] = frozenset(),
) -> Accepted:
    """Accept ``request`` once; ``IdempotencyConflict`` or ``InputError`` write nothing."""
    async with conn.transaction():
        if request.idempotency_key is not None:
            keyed: IdempotencyKey = {
                "application": request.application,
                "idempotency_key": request.idempotency_key,
            }
            await QUERIES.api_idempotency_lock.run(conn, keyed)
            earlier = await QUERIES.api_handed_over.one(conn, keyed)
            if earlier is not None:
                if earlier.request_hash != request.request_hash or earlier.answer is None:
                    raise IdempotencyConflict(earlier.document_id)
                return Accepted(earlier.document_id, earlier.answer, replayed=True)
        known = await resolve(conn, request.application, request.person, whatsapp)
        doc = await add_document_async(
            conn, known.person, request.kind, request.body, request.day, review_kinds
        )
        await QUERIES.api_insert_document.run(
            conn,
            {
                "document_id": doc.id,
                "application": request.application,
                "idempotency_key": request.idempotency_key,
                "request_hash": request.request_hash,
                "replace_key": request.replace_key,
                "priority": request.priority,
                "metadata": Jsonb(request.metadata),
            },
        )
        answer = await render(conn, doc.id)
        await QUERIES.api_keep_answer.run(conn, {"document_id": doc.id, "answer": Jsonb(answer)})
    return Accepted(doc.id, answer, replayed=False)
