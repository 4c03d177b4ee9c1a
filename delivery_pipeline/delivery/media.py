"""The media id of a document's file on a business number: uploaded once, reused safely.

A file is uploaded on the number that will send it (a media id belongs to the
number that uploaded it) and its id kept in ``document_media`` (sql/migrations/037) with
its expiry. ``media_for`` hands out that id while it has more than
``REUSE_MARGIN`` left of its 30 days, to a retry, a resend or another sender
alike; after that, or once a send was refused with it (``drop_media``), the
file is uploaded again. The rule lives in Postgres, not in a process:

* at most one upload of a file to a number at a time: the upload is leased
  (``lease_media_upload``, ``UPLOAD_LEASE``); a sender that finds it leased
  waits for the id the holder records, and takes the lease over if the holder
  died (its lease lapsed);
* the id is recorded before anyone sends with it, so a crash after the upload
  loses nothing but that upload (an orphan the platform forgets in 30 days),
  and a crash after the record loses nothing at all: the next sender reuses it;
* a file the platform refused at upload (``MediaRefused``: its type, its size,
  bytes that do not match) is never uploaded to that number again: the refusal
  is recorded and raised at once to whoever asks next.

Uploads are not paced as messages are (the platform's throughput limit counts
messages), and take no send slot. No Dagster, no web framework.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from delivery_pipeline.files.stored import ensure_file_async, file_content
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.files import StoredFile
from delivery_pipeline.store.rows.media import MediaKey
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline.whatsapp.errors import MediaRefused

# How long the platform keeps an uploaded file.
MEDIA_LIFETIME = dt.timedelta(days=30)
# An id is handed out only while it has this long left: a message sent with it may
# wait days for the person's phone (a template's default time to live is 30 days).
REUSE_MARGIN = dt.timedelta(days=7)
# How long an upload holds other senders back: far longer than an upload takes (the
# client's timeouts end it sooner), short enough that a sender that died mid-upload
# delays the others by at most this.
UPLOAD_LEASE = dt.timedelta(seconds=60)
# A sender waiting on another's upload looks again after this, doubling, up to the cap.
FIRST_LOOK_SECONDS = 0.05
LOOK_CAP_SECONDS = 1.0


@dataclass(frozen=True)
class FileMedia:
    """A document's file as a send names it: its media id on the number, its name."""

    media_id: str
    filename: str
    sha256: str
    # uploaded by this call (False: an id recorded before, reused)
    uploaded: bool


Pool = AsyncConnectionPool[psycopg.AsyncConnection[Any]]


async def media_for(
    pool: Pool,
    client: CloudApiClient,
    document_id: int,
    number: str,
    *,
    margin: dt.timedelta = REUSE_MARGIN,
    lease: dt.timedelta = UPLOAD_LEASE,
) -> FileMedia | None:
    """The media id of document ``document_id``'s file on business number ``number``:
    the recorded one while valid, else uploaded now (the file drawn first if it has
    none for its body). None while the document has no body.

    Raises ``MediaRefused`` when the platform refused this file on this number (now
    or before), and whatever the upload raised otherwise (``CloudApiError``,
    ``SendOutcomeUnknown``, ``SendNotAttempted``, ``ApiUnreachable``): the lease is
    given back, and the next call uploads again."""
    look = FIRST_LOOK_SECONDS
    while True:
        token = uuid.uuid4()
        async with pool.connection() as conn:
            stored = await ensure_file_async(conn, document_id)
            if stored is None:
                return None
            key: MediaKey = {
                "document_id": document_id,
                "phone_number_id": number,
                "sha256": stored.sha256,
            }
            state = await QUERIES.document_media.one(
                conn, {**key, "margin": margin, "lease": lease}
            )
            if state is not None and state.usable and state.media_id is not None:
                return FileMedia(state.media_id, stored.filename, stored.sha256, uploaded=False)
            if state is not None and state.upload_refusal_code is not None:
                raise MediaRefused(
                    code=state.upload_refusal_code, message=state.upload_refusal or ""
                )
            leased = await QUERIES.lease_media_upload.one(
                conn, {**key, "margin": margin, "lease": lease, "token": token}
            )
            content = await file_content(conn, stored) if leased else None
        if leased is None or content is None:
            if leased is not None:  # the file was drawn again meanwhile: start over
                await _end_lease(pool, key, token)
            await asyncio.sleep(look)
            look = min(look * 2, LOOK_CAP_SECONDS)
            continue
        media_id = await _upload(pool, client, stored, content, key, token)
        if media_id is not None:
            return FileMedia(media_id, stored.filename, stored.sha256, uploaded=True)
        # Our lease lapsed during the upload and another sender's id is recorded: ours
        # is never used (the platform forgets it); take the recorded one.


async def drop_media(pool: Pool, document_id: int, number: str, media_id: str, reason: str) -> bool:
    """A send naming ``media_id`` was refused: never hand it out again, so the next
    ``media_for`` uploads the file anew. False when it was dropped already."""
    async with pool.connection() as conn:
        dropped = await QUERIES.drop_media.one(
            conn,
            {
                "document_id": document_id,
                "phone_number_id": number,
                "media_id": media_id,
                "reason": reason[:500],
            },
        )
    return dropped is not None


async def _upload(
    pool: Pool,
    client: CloudApiClient,
    stored: StoredFile,
    content: bytes,
    key: MediaKey,
    token: uuid.UUID,
) -> str | None:
    """Upload under our lease and record the id; None when the lease was lost."""
    try:
        media_id = await client.upload_media(
            content, stored.mime_type, stored.filename, number=key["phone_number_id"]
        )
    except MediaRefused as refused:
        async with pool.connection() as conn:
            await QUERIES.refuse_media_upload.one(
                conn,
                {**key, "token": token, "code": refused.code, "refusal": str(refused)[:500]},
            )
        raise
    except Exception:
        await _end_lease(pool, key, token)
        raise
    async with pool.connection() as conn:
        return await QUERIES.record_media_upload.one(
            conn, {**key, "token": token, "media_id": media_id, "lifetime": MEDIA_LIFETIME}
        )


async def _end_lease(pool: Pool, key: MediaKey, token: uuid.UUID) -> None:
    async with pool.connection() as conn:
        await QUERIES.release_media_upload.one(conn, {**key, "token": token})
