"""A document as the application that handed it over reads it, cancels it and resends it.

An application sees only its own documents: another's, or one added any other
way, is unknown to it, exactly like an id nobody has. Cancel and resend are the
operator's (``store/operator.py``): one rule under the CLI, the Dagster job,
the review page and the API, recorded in ``document_actions`` under the name
``api:<application>``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import psycopg

from delivery_pipeline.model import OperatorAction
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.operator import ActionTaken, UnknownDocument, act_async
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.api import (
    ApiDocument,
    ApplicationDocument,
    DocumentKnock,
    MessagePrice,
)
from delivery_pipeline.store.rows.common import ByDocument
from delivery_pipeline.store.rows.core import Chunk
from delivery_pipeline.store.rows.operator import DocumentAction

AsyncConn = psycopg.AsyncConnection[Any]


def operator_name(application: str) -> str:
    """Who acted, in ``document_actions``, when an application did."""
    return f"api:{application}"


@dataclass(frozen=True)
class DocumentRecord:
    """Everything an application may read of one of its documents."""

    document: ApiDocument
    parts: list[Chunk]
    knocks: list[DocumentKnock]
    actions: list[DocumentAction]
    pricing: list[MessagePrice]


async def read(
    conn: AsyncConn,
    application: str,
    document_id: int,
    lease: dt.timedelta,
    *,
    just_handed_over: bool = False,
) -> DocumentRecord | None:
    """The document and how it went, if ``application`` handed it over (one handed over
    in this transaction has no parts, knocks, actions or prices yet: not asked)."""
    document = await QUERIES.api_document.one(
        conn, {"application": application, "document_id": document_id, "lease": lease}
    )
    if document is None:
        return None
    if just_handed_over:
        return DocumentRecord(document, [], [], [], [])
    by_document: ByDocument = {"document_id": document_id}
    return DocumentRecord(
        document,
        await QUERIES.document_chunks.all(conn, by_document),
        await QUERIES.api_document_knocks.all(conn, by_document),
        await QUERIES.document_actions.all(conn, by_document),
        await QUERIES.api_document_pricing.all(conn, by_document),
    )


async def handed_over_under(conn: AsyncConn, application: str, idempotency_key: str) -> int | None:
    """The document ``application`` handed over under ``idempotency_key``, if any."""
    row = await QUERIES.api_handed_over.one(
        conn, {"application": application, "idempotency_key": idempotency_key}
    )
    return row.document_id if row is not None else None


async def act(
    conn: AsyncConn,
    application: str,
    action: OperatorAction,
    document_id: int,
    reason: str | None,
    delivery: DeliverySettings,
) -> ActionTaken:
    """Cancel or resend one of ``application``'s documents, by the operator's rule (the
    daily cap on resends included): ``UnknownDocument`` for another's, ``NotApplicable``
    when the rule refuses."""
    known: ApplicationDocument = {
        "application": application,
        "document_id": document_id,
        "lease": delivery.lease,
    }
    if await QUERIES.api_document.one(conn, known) is None:
        raise UnknownDocument(f"no document {document_id}", "id")
    return await act_async(conn, action, document_id, operator_name(application), reason, delivery)
