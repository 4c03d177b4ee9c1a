"""Meta-shaped webhook bodies for tests."""

from __future__ import annotations

import json
import time
from typing import Any, TypedDict, Unpack

REENGAGEMENT_ERROR = {
    "code": 131047,
    "title": "Re-engagement message",
    "message": "Re-engagement message",
    "error_data": {
        "details": "Message failed to send because more than 24 hours have passed "
        "since the customer last replied to this number."
    },
}


def envelope(value: dict[str, Any]) -> dict[str, Any]:
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "102290129340398",
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": "15550000000",
                                "phone_number_id": "100000000000001",
                            },
                            **value,
                        },
                    }
                ],
            }
        ],
    }


def inbound(phone: str, wamid: str, text: str = "hi", timestamp: float | None = None) -> bytes:
    digits = phone.lstrip("+")
    return json.dumps(
        envelope(
            {
                "contacts": [{"profile": {"name": "Test"}, "wa_id": digits}],
                "messages": [
                    {
                        "from": digits,
                        "id": wamid,
                        "timestamp": str(int(timestamp or time.time())),
                        "type": "text",
                        "text": {"body": text},
                    }
                ],
            }
        )
    ).encode()


class StatusOptions(TypedDict, total=False):
    """What a status may carry besides its message and state; left out: now, no tag, no
    errors, the test recipient."""

    timestamp: float | None
    callback: str | None
    errors: list[dict[str, Any]] | None
    recipient: str


def status(wamid: str, state: str, **options: Unpack[StatusOptions]) -> bytes:
    """A webhook body holding one status."""
    return json.dumps(envelope({"statuses": [status_item(wamid, state, **options)]})).encode()


def status_item(wamid: str, state: str, **options: Unpack[StatusOptions]) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": wamid,
        "status": state,
        "timestamp": str(int(options.get("timestamp") or time.time())),
        "recipient_id": options.get("recipient", "15550001"),
    }
    if callback := options.get("callback"):
        item["biz_opaque_callback_data"] = callback
    if errors := options.get("errors"):
        item["errors"] = errors
    return item
