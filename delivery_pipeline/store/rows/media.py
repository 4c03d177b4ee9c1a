"""Parameters and rows of ``sql/queries/media.sql``: a file's media id on a number (037)."""

import datetime as dt
import uuid
from typing import NamedTuple, TypedDict


class MediaKey(TypedDict):
    document_id: int
    phone_number_id: str
    sha256: str


class MediaLookup(MediaKey):
    margin: dt.timedelta
    lease: dt.timedelta


class MediaLease(MediaLookup):
    token: uuid.UUID


class MediaToken(MediaKey):
    token: uuid.UUID


class MediaRecord(MediaToken):
    media_id: str
    lifetime: dt.timedelta


class MediaRefusal(MediaToken):
    code: int | None
    refusal: str


class MediaDrop(TypedDict):
    document_id: int
    phone_number_id: str
    media_id: str
    reason: str


class MediaState(NamedTuple):
    """A file's media id on a number, and whether it may be used now."""

    media_id: str | None
    usable: bool
    uploading: bool
    upload_refusal_code: int | None
    upload_refusal: str | None
    uploads: int
