"""What a message carries beyond text: a DOCUMENT header, a ``document`` message, a
template's named parameters, and every template's components as the platform lists them.

* A template with a DOCUMENT header is sent with a ``header`` component of one
  parameter, ``{"type": "document", "document": {"id": "<media id>", "filename":
  "Plan - Ana.pdf"}}``. No header, a header of another type (an image), or a
  document with neither ``id`` nor ``link`` is refused with 132012 (``header:
  Format mismatch, expected DOCUMENT, received …``). A ``link`` is taken, and
  the message fails later with 131053: the sandbox fetches no URL (on the
  platform, whatever Meta cannot fetch).
* A ``document`` message: ``{"document": {"id" | "link", "filename"?,
  "caption"? (at most 1024 characters)}}``; free-form, so inside the window only.
* A template whose body names its parameters (``{{name}}``) is sent with each
  value's ``parameter_name``; names that are not the template's are refused
  with 132000.
* The media id a send names must be the sending number's and unexpired
  (``media.MediaStore.usable``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from delivery_pipeline.sandbox.config import Template
from delivery_pipeline.sandbox.refusals import Refusal
from delivery_pipeline.sandbox.template_lifecycle import TemplateBook

CAPTION_MAX = 1024
HEADER_PATH = "template['components'][0]['parameters'][0]['document']"
MESSAGE_PATH = "document"


@dataclass(frozen=True)
class Attachment:
    """The file a message carries: an uploaded media id, or a link."""

    media_id: str | None
    link: str | None
    filename: str | None
    caption: str | None
    # Where in the request it was: the platform's refusals name the parameter.
    where: str


def document_header(components: Any, template: Template) -> Attachment | None:
    """The file of a send of ``template`` (None: the template has no DOCUMENT header)."""
    if template.header != "DOCUMENT":
        return None
    headers = [c for c in components or [] if isinstance(c, dict) and c.get("type") == "header"]
    parameters = headers[0].get("parameters") if headers else None
    if not isinstance(parameters, list) or len(parameters) != 1:
        raise Refusal(132012, "header: Format mismatch, expected DOCUMENT, received UNKNOWN")
    parameter = parameters[0]
    kind = parameter.get("type") if isinstance(parameter, dict) else None
    if kind != "document":
        received = str(kind).upper() if isinstance(kind, str) else "UNKNOWN"
        raise Refusal(132012, f"header: Format mismatch, expected DOCUMENT, received {received}")
    document = parameter.get("document")
    attachment = _attachment(document, HEADER_PATH, caption=False)
    if attachment is None:
        raise Refusal(132012, "header: the document needs an 'id' or a 'link'")
    return attachment


def document_message(payload: dict[str, Any]) -> Attachment:
    """The file of a ``document`` message, or the platform's refusal."""
    attachment = _attachment(payload.get("document"), MESSAGE_PATH, caption=True)
    if attachment is None:
        raise Refusal(100, "document['id'] or document['link'] is required.")
    return attachment


def _attachment(document: Any, where: str, *, caption: bool) -> Attachment | None:
    if not isinstance(document, dict):
        return None
    media_id, link = document.get("id"), document.get("link")
    filename, text = document.get("filename"), document.get("caption")
    if (media_id is None) == (link is None):
        return None
    for name, value in (("id", media_id), ("link", link), ("filename", filename)):
        if value is not None and (not isinstance(value, str) or not value):
            raise Refusal(100, f"Param {where}['{name}'] must be a non-empty string.")
    if text is not None:
        if not caption:
            raise Refusal(132012, "header: a template's document takes no caption")
        if not isinstance(text, str) or len(text) > CAPTION_MAX:
            raise Refusal(
                100,
                f"Param {where}['caption'] must be a string of at most {CAPTION_MAX} characters.",
            )
    return Attachment(media_id, link, filename, text, f"{where}['id']")


def named_values(names: list[str | None], values: list[str], template: Template) -> list[str]:
    """The body's values in the order of the template's names, or 132000."""
    expected = template.parameter_names
    if sorted(n or "" for n in names) != sorted(expected):
        given = ", ".join(repr(n) for n in names)
        raise Refusal(
            132000,
            f"body: parameter names ({given}) do not match the template's ({', '.join(expected)})",
        )
    by_name = dict(zip(names, values, strict=True))
    return [by_name[name] for name in expected]


def components(template: Template) -> list[dict[str, Any]]:
    """The template's components as the platform lists them (``GET message_templates``)."""
    listed: list[dict[str, Any]] = []
    if template.header is not None:
        listed.append({"type": "HEADER", "format": template.header})
    listed.append({"type": "BODY", "text": template.text})
    if template.buttons:
        buttons = [{"type": "QUICK_REPLY", "text": text} for text in template.buttons]
        listed.append({"type": "BUTTONS", "buttons": buttons})
    return listed


def listing(templates: tuple[Template, ...], book: TemplateBook) -> list[dict[str, Any]]:
    """Every template the sandbox knows, touched or not: its life (status, quality,
    category…), its time to live, its parameters' format and its components; then any
    template only a control touched (which no send can use)."""
    known = {(t.name, t.language) for t in templates}
    listed = []
    for template in templates:
        life = book.life(template.name, template.language)
        listed.append(
            {
                **life.view(template.name, template.language),
                "parameter_format": "NAMED" if template.parameter_names else "POSITIONAL",
                "message_send_ttl_seconds": life.ttl_seconds or template.ttl_seconds,
                "components": components(template),
            }
        )
    others = [v for v in book.known() if (v["name"], v["language"]) not in known]
    return listed + [{**view, "components": []} for view in others]
