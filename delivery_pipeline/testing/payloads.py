"""Meta-shaped webhook bodies for tests."""

from __future__ import annotations

import json
import time
from typing import Any

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


def status(
    wamid: str,
    state: str,
    *,
    timestamp: float | None = None,
    callback: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    recipient: str = "15550001",
) -> bytes:
    return json.dumps(
        envelope(
            {
                "statuses": [
                    status_item(
                        wamid,
                        state,
                        timestamp=timestamp,
                        callback=callback,
                        errors=errors,
                        recipient=recipient,
                    )
                ]
            }
        )
    ).encode()


def status_item(
    wamid: str,
    state: str,
    *,
    timestamp: float | None = None,
    callback: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    recipient: str = "15550001",
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": wamid,
        "status": state,
        "timestamp": str(int(timestamp or time.time())),
        "recipient_id": recipient,
    }
    if callback:
        item["biz_opaque_callback_data"] = callback
    if errors:
        item["errors"] = errors
    return item
