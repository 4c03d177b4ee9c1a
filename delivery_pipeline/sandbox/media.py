"""Media on the sandbox: files uploaded per business number, their expiry, their bytes.

``POST /{version}/{phone_number_id}/media`` (multipart: ``messaging_product``
``whatsapp``, ``type``, ``file``) answers ``{"id": "<media id>"}``, or refuses
as the platform does:

* no file, or no ``messaging_product`` ``whatsapp`` → 100;
* a type the platform does not take (``application/octet-stream``, anything
  outside ``ACCEPTED``) → 100, naming the types it takes;
* more than ``media_max_bytes`` (documents: 100 MB) → 131053;
* bytes that do not match the declared type (a PDF declared ``image/png``, a
  PNG declared ``application/pdf``) → 131053.

A media id lasts ``media_ttl_seconds`` (30 days) and belongs to the number that
uploaded it: a send naming it from another number, or after it expired, is
refused with 100 (``… is not a valid whatsapp business account media
attachment ID``). ``GET /_sandbox/media`` lists every upload;
``GET /_sandbox/media/{media_id}`` returns a file's bytes.
"""

from __future__ import annotations

import hashlib
import itertools
import secrets
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from delivery_pipeline.sandbox.memory import iso
from delivery_pipeline.sandbox.refusals import Refusal

_DOCUMENT_TYPES = (
    "text/plain",
    "application/pdf",
    "application/vnd.ms-powerpoint",
    "application/msword",
    "application/vnd.ms-excel",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
)
ACCEPTED = (
    "audio/aac",
    "audio/mp4",
    "audio/mpeg",
    "audio/amr",
    "audio/ogg",
    *_DOCUMENT_TYPES,
    "image/jpeg",
    "image/png",
    "image/webp",
    "video/mp4",
    "video/3gpp",
)
DOCUMENT_TYPES = frozenset(_DOCUMENT_TYPES)
# How each type's bytes begin, where they have a signature to check.
_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ZIP = b"PK\x03\x04"
_SIGNATURES: dict[str, tuple[bytes, ...]] = {
    "application/pdf": (b"%PDF-",),
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "application/msword": (_OLE,),
    "application/vnd.ms-excel": (_OLE,),
    "application/vnd.ms-powerpoint": (_OLE,),
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": (_ZIP,),
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": (_ZIP,),
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": (_ZIP,),
}
UPLOAD_ERROR = "Media upload error"
NOT_A_MEDIA_ID = "is not a valid whatsapp business account media attachment ID"

# Media ids are digits, as the platform's; never one handed out before, across restarts.
_PREFIX = str(100 + secrets.randbelow(900))
_SEQUENCE = itertools.count(1)


@dataclass(frozen=True)
class Media:
    """One upload: whose it is, what it holds, until when."""

    id: str
    phone_number_id: str
    mime_type: str
    filename: str
    content: bytes
    uploaded_at: float
    expires_at: float

    def describe(self, now: float) -> dict[str, Any]:
        return {
            "id": self.id,
            "phone_number_id": self.phone_number_id,
            "mime_type": self.mime_type,
            "filename": self.filename,
            "size": len(self.content),
            "sha256": hashlib.sha256(self.content).hexdigest(),
            "uploaded_at": iso(self.uploaded_at),
            "expires_at": iso(self.expires_at),
            "expired": now >= self.expires_at,
        }


def _matches(mime_type: str, content: bytes) -> bool:
    """Do the bytes look like the declared type (where it has a signature to check)?"""
    if mime_type == "text/plain":
        try:
            return "\x00" not in content.decode("utf-8")
        except UnicodeDecodeError:
            return False
    if mime_type == "image/webp":
        return content[:4] == b"RIFF" and content[8:12] == b"WEBP"
    signatures = _SIGNATURES.get(mime_type)
    return signatures is None or content.startswith(signatures)


class MediaStore:
    """Every upload, by media id."""

    def __init__(self) -> None:
        self._media: dict[str, Media] = {}

    def upload(
        self,
        number: str,
        fields: dict[str, str],
        file: tuple[str, bytes] | None,
        *,
        ttl_seconds: float,
        max_bytes: int,
        now: float,
    ) -> Media:
        """Keep ``file`` (its name and bytes) for ``number``, or refuse it (``Refusal``)."""
        if fields.get("messaging_product") != "whatsapp":
            raise Refusal(100, "messaging_product is required and must be 'whatsapp'.")
        if file is None:
            raise Refusal(100, "The parameter file is required.")
        filename, content = file
        mime_type = fields.get("type", "")
        if mime_type not in ACCEPTED:
            raise Refusal(
                100,
                "Param file must be a file with one of the following types: "
                f"{', '.join(ACCEPTED)}. Received file of type '{mime_type or 'none'}'.",
            )
        if len(content) > max_bytes:
            raise Refusal(
                131053,
                f"The file is {len(content)} bytes; the limit for this type is {max_bytes}.",
                message=UPLOAD_ERROR,
            )
        if not _matches(mime_type, content):
            raise Refusal(
                131053,
                f"The file's content does not match its declared type {mime_type}.",
                message=UPLOAD_ERROR,
            )
        media_id = f"{_PREFIX}{next(_SEQUENCE):013d}"
        media = Media(media_id, number, mime_type, filename, content, now, now + ttl_seconds)
        self._media[media_id] = media
        return media

    def usable(self, media_id: str, number: str, where: str, now: float) -> Media:
        """The media a send from ``number`` names (``where``: the parameter's path), or
        the platform's refusal: unknown, expired, or another number's."""
        media = self._media.get(media_id)
        if media is None or media.phone_number_id != number or now >= media.expires_at:
            raise Refusal(100, f"Param {where} {NOT_A_MEDIA_ID}.", message="Invalid parameter")
        return media

    def get(self, media_id: str) -> Media | None:
        return self._media.get(media_id)

    def listing(self, now: float) -> list[dict[str, Any]]:
        return [media.describe(now) for media in self._media.values()]

    def reset(self) -> None:
        self._media.clear()


async def read_upload(request: Request) -> tuple[dict[str, str], tuple[str, bytes] | None]:
    """An upload's form fields and its file (name, bytes); a body that is no form: 100."""
    try:
        form = await request.form()
    except Exception as exc:  # Starlette's words for a malformed multipart body
        raise Refusal(100, f"The request must be multipart/form-data: {exc}") from None
    fields: dict[str, str] = {}
    file: tuple[str, bytes] | None = None
    try:
        for key, value in form.multi_items():
            if isinstance(value, str):
                fields[key] = value
            elif key == "file":
                file = (value.filename or "", await value.read())
    finally:
        await form.close()
    return fields, file
