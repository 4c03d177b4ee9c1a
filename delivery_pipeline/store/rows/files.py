"""Parameters and rows of ``sql/queries/files.sql``: a document's file (037) and the way it
goes (039)."""

import datetime as dt
from typing import NamedTuple, TypedDict

from delivery_pipeline.model import Kind
from delivery_pipeline.store.rows.common import ClaimRef


class FileSourceRow(NamedTuple):
    """What a document's file is drawn from."""

    kind: Kind
    locale: str
    name: str
    day: dt.date
    body: str


class FileWords(NamedTuple):
    """What a document's file is called and dated in the messages that carry it."""

    kind: Kind
    locale: str
    name: str
    day: dt.date


class WayCount(NamedTuple):
    """Delivered documents that went one way (``way_summary``)."""

    way: str
    delivered: int
    recent: int  # within the period asked about


class Period(TypedDict):
    period: dt.timedelta


class OutsideWindow(TypedDict):
    person_id: int
    outside_window: str | None


class ChooseFileWay(ClaimRef):
    way: str  # 'file' or 'file_in_window'
    template: str | None
    language: str | None


class ForgetFileLedger(ClaimRef):
    way: str | None  # what it is again: None (decided afresh) or 'parts'


class StoredFile(NamedTuple):
    """A document's file, without its bytes."""

    document_id: int
    source_sha256: str
    sha256: str
    filename: str
    mime_type: str
    size_bytes: int
    rendered_at: dt.datetime


class NewFile(TypedDict):
    document_id: int
    source_sha256: str
    sha256: str
    filename: str
    mime_type: str
    content: bytes


class FileContent(TypedDict):
    document_id: int
    sha256: str
