"""A document's file in Postgres: drawn once per body, where it scales.

A file is drawn when its body is written (the generation worker, for the
kinds it is asked to draw: ``generate_pending(render_kinds=…)``), off every
send path and at the pace of generation. A sender that finds none for the
body it delivers (a body written by ``documents add``, approved with edits,
or a document older than its file) draws it with ``ensure_file_async``, once,
in a worker thread, before it takes a send slot. Either way the file is kept
in ``document_files`` (sql/migrations/037) with the hash of everything it was drawn
from; a body or a name that changed is drawn again, an equal one never.
Several processes drawing one file at once store it once (the same source
gives the same bytes).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import psycopg

from delivery_pipeline.files.pdf import MIME_TYPE, FileSource, render_pdf
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.files import FileSourceRow, NewFile, StoredFile


def ensure_file(conn: psycopg.Connection[Any], document_id: int) -> StoredFile | None:
    """Document ``document_id``'s file for the body it is delivered with, drawn now
    if it has none for it; None while it has no body."""
    source = _source(QUERIES.document_file_source.one(conn, {"document_id": document_id}))
    if source is None:
        return None
    stored = QUERIES.document_file.one(conn, {"document_id": document_id})
    if stored is not None and stored.source_sha256 == source.sha256():
        return stored
    new = _new_file(document_id, source, render_pdf(source))
    kept = QUERIES.store_document_file.one(conn, new)
    return kept or QUERIES.document_file.one(conn, {"document_id": document_id})


async def ensure_file_async(
    conn: psycopg.AsyncConnection[Any], document_id: int
) -> StoredFile | None:
    """``ensure_file`` on an async connection, drawing in a worker thread (the event
    loop's other sends go on meanwhile)."""
    row = await QUERIES.document_file_source.one(conn, {"document_id": document_id})
    source = _source(row)
    if source is None:
        return None
    stored = await QUERIES.document_file.one(conn, {"document_id": document_id})
    if stored is not None and stored.source_sha256 == source.sha256():
        return stored
    content = await asyncio.to_thread(render_pdf, source)
    kept = await QUERIES.store_document_file.one(conn, _new_file(document_id, source, content))
    return kept or await QUERIES.document_file.one(conn, {"document_id": document_id})


async def file_content(conn: psycopg.AsyncConnection[Any], stored: StoredFile) -> bytes | None:
    """The bytes of ``stored``; None when the document's file has changed since."""
    return await QUERIES.document_file_content.one(
        conn, {"document_id": stored.document_id, "sha256": stored.sha256}
    )


def _source(row: FileSourceRow | None) -> FileSource | None:
    if row is None:
        return None
    return FileSource(row.kind, row.locale, row.name, row.day, row.body)


def _new_file(document_id: int, source: FileSource, content: bytes) -> NewFile:
    return {
        "document_id": document_id,
        "source_sha256": source.sha256(),
        "sha256": hashlib.sha256(content).hexdigest(),
        "filename": source.filename,
        "mime_type": MIME_TYPE,
        "content": content,
    }
