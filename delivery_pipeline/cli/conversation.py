"""A person's conversation in the sandbox as text a person reads (``sandbox inbox``).

What their phone received (a knock with its buttons, the parts of a document, a
file and the address that opens it, an acknowledgement) and what they wrote or
pressed, in the order it happened, each in its own language and script: the
sandbox's JSON is for programs.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

RECEIVED = "←"
WRITTEN = "→"
_TIME = "%H:%M:%S"
_INDENT = " " * (len("00:00:00") + 3)


def _moment(message: dict[str, Any]) -> dt.datetime:
    """When the phone got it (or the person wrote it); the sandbox writes ISO 8601 in UTC."""
    stamp = message.get("arrived") or message.get("time")
    try:
        return dt.datetime.fromisoformat(str(stamp)).astimezone(dt.UTC)
    except ValueError:
        return dt.datetime.min.replace(tzinfo=dt.UTC)


def _received(message: dict[str, Any], sandbox_url: str | None) -> list[str]:
    text = str(message.get("text") or "")
    template = message.get("template")
    if isinstance(template, dict):
        head = [f"[template {template.get('name')} ({template.get('language')})]"]
    elif message.get("type") == "text":
        head = []
    else:
        head = [f"[{message.get('type')}]"]
    buttons = message.get("buttons") or []
    pressable = [" ".join(f"[{b.get('text')}]" for b in buttons)] if buttons else []
    return head + _file(message, sandbox_url) + text.splitlines() + pressable or [""]


def _file(message: dict[str, Any], sandbox_url: str | None) -> list[str]:
    """The file a message carries: its name, type and size, and where to open it."""
    document = message.get("document")
    if not isinstance(document, dict):
        return []
    size = document.get("size")
    facts = ", ".join(
        filter(None, [document.get("mime_type"), f"{size / 1024:.0f} KB" if size else None])
    )
    name = document.get("filename") or "file"
    line = f"[file {name}" + (f" ({facts})" if facts else "") + "]"
    if document.get("id") and sandbox_url:
        return [line, f"{sandbox_url.rstrip('/')}/_sandbox/media/{document['id']}"]
    return [line, str(document.get("link") or "")] if document.get("link") else [line]


def _written(message: dict[str, Any]) -> list[str]:
    if message.get("button") is not None:
        return [f"pressed [{message['button']}]"]
    return str(message.get("text") or "").splitlines() or [""]


def conversation(
    number: str,
    received: list[dict[str, Any]],
    written: list[dict[str, Any]],
    sandbox_url: str | None = None,
) -> str:
    """The conversation with ``number``, oldest first: ``←`` what the phone received
    (a file with the address that opens it on ``sandbox_url``), ``→`` what the
    person wrote or pressed."""
    entries = [(_moment(m), RECEIVED, _received(m, sandbox_url)) for m in received]
    entries += [(_moment(m), WRITTEN, _written(m)) for m in written]
    entries.sort(key=lambda entry: entry[0])
    lines = [
        f"{number}: {len(received)} received ({RECEIVED}), {len(written)} written or "
        f"pressed ({WRITTEN}), times in UTC"
    ]
    for moment, arrow, body in entries:
        first, *rest = body
        lines.append(f"{moment:{_TIME}} {arrow} {first}")
        lines += [f"{_INDENT}{line}" if line else "" for line in rest]
    if not entries:
        lines.append("nothing yet")
    return "\n".join(lines)
