"""The tag on every send (``biz_opaque_callback_data``), echoed back in status webhooks.

It ties a status to a chunk even when the send's own answer was lost:
``dp:<document>:<chunk>:<attempt>`` for a chunk, ``dp:knock:<knock>`` for a
knock (a row of ``knocks``, which may cover several documents). Knocks sent
before the knocks table were tagged ``dp:<document>:knock``; their statuses
may still arrive, so that tag is still read. The answer to a press of Later or
Stop is ``dp:answer:<reply>`` (a row of ``knock_replies``): its statuses are
stored and priced like any other, and change no document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CHUNK = re.compile(r"^dp:(\d+):(\d+):(\d+)$")
_KNOCK = re.compile(r"^dp:(\d+):knock$")
_KNOCK_ROW = re.compile(r"^dp:knock:(\d+)$")


def chunk_callback(document_id: int, chunk_index: int, attempt: int) -> str:
    return f"dp:{document_id}:{chunk_index}:{attempt}"


def knock_callback(knock_id: int) -> str:
    return f"dp:knock:{knock_id}"


def acknowledgement_callback(reply_id: int) -> str:
    return f"dp:answer:{reply_id}"


@dataclass(frozen=True)
class ChunkTag:
    document_id: int
    chunk_index: int
    attempt: int


def parse_chunk(callback: str | None) -> ChunkTag | None:
    match = _CHUNK.match(callback or "")
    return ChunkTag(*map(int, match.groups())) if match else None


def parse_knock(callback: str | None) -> int | None:
    """The document a knock's tag names, or None."""
    match = _KNOCK.match(callback or "")
    return int(match.group(1)) if match else None


def parse_knock_id(callback: str | None) -> int | None:
    """The knock (row of ``knocks``) a knock's tag names, or None."""
    match = _KNOCK_ROW.match(callback or "")
    return int(match.group(1)) if match else None
