"""Read marks and the typing indicator, as the messages endpoint takes them.

``POST /{version}/{phone_number_id}/messages`` with ``{"messaging_product":
"whatsapp", "status": "read", "message_id": "<their wamid>", "typing_indicator":
{"type": "text"}}`` marks the person's message (and theirs before it) read and
shows "typing…" until our next message or 25 s; the answer is ``{"success":
true}``. The message must be one the person wrote to that number (else 100).
Each mark is kept on the person (``read_marks``, with the ``seq`` every inbox
record has too), so a test sees it and whether it came before a message.
"""

from __future__ import annotations

from typing import Any

from delivery_pipeline.sandbox.memory import SandboxState, iso
from delivery_pipeline.sandbox.refusals import Refusal


def is_read_mark(payload: Any) -> bool:
    return isinstance(payload, dict) and payload.get("status") == "read"


def mark_read(state: SandboxState, payload: dict[str, Any], number: str, now: float) -> None:
    """Record the mark (and the typing indicator) on the person who wrote the message."""
    if payload.get("messaging_product") != "whatsapp":
        raise Refusal(100, "messaging_product is required and must be 'whatsapp'.")
    message_id = payload.get("message_id")
    typing = payload.get("typing_indicator")
    if typing is not None and typing != {"type": "text"}:
        raise Refusal(100, "typing_indicator must be {'type': 'text'}.")
    for person in state.people.values():
        written = [m for m in person.written if m["id"] == message_id]
        if written and written[0].get("to") == number:
            break
    else:
        raise Refusal(100, f"message_id {message_id!r} is not a message this number received.")
    for message in person.written[: person.written.index(written[0]) + 1]:
        message.setdefault("read_at", iso(now))
    person.marks.append(
        {
            "message_id": message_id,
            "typing": typing is not None,
            "phone_number_id": number,
            "time": iso(now),
            "seq": state.next_seq(),
        }
    )
