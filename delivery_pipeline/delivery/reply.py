"""What a person's reply to a knock asks for: pure rules, no database.

A knock with buttons offers *Send it* / *Later* / *Stop*; the press comes back
as a ``button`` message (a template's quick reply: ``button.payload``, and
``context.id`` = the knock's message id) or, for an interactive message, as
``interactive.button_reply.id``. The same words typed as the whole message, in
any of the three languages, ask the same, and START (VOLVER, VOLTAR) undoes a
Stop. Anything else is an ordinary reply: it opens the window and delivers.

A keyword must be the whole message (case, accents and punctuation aside): "stop"
stops, "please don't stop sending" is an ordinary reply.
"""

from __future__ import annotations

import enum
import re
import unicodedata
from dataclasses import dataclass
from typing import Any


class Ask(enum.StrEnum):
    SEND = "send"
    LATER = "later"
    STOP = "stop"
    START = "start"


# The payload each quick reply is sent with, in the template's button order.
BUTTON_PAYLOADS: tuple[str, ...] = ("knock:send", "knock:later", "knock:stop")
_BY_PAYLOAD = {payload: Ask(payload.split(":", 1)[1]) for payload in BUTTON_PAYLOADS}

# Whole-message keywords (normalised: lower case, no accents, single spaces),
# and the buttons' own texts (docs/design/conversation.md), so a template approved without our
# payloads still works: its press comes back with the button's text.
KEYWORDS: dict[str, Ask] = {
    **dict.fromkeys(["stop", "unsubscribe", "parar", "pare", "baja", "cancelar", "sair"], Ask.STOP),
    **dict.fromkeys(["start", "volver", "voltar", "alta"], Ask.START),
    **dict.fromkeys(["later", "mas tarde", "despues", "luego", "mais tarde", "depois"], Ask.LATER),
    **dict.fromkeys(["send it", "send", "enviar", "enviar ahora", "manda"], Ask.SEND),
}

_NOT_WORD = re.compile(r"[^\w]+")


def normalised(text: str) -> str:
    """Lower case, accents off, punctuation and runs of space to one space."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _NOT_WORD.sub(" ", plain).strip()


def keyword(text: str | None) -> Ask | None:
    if not text or len(text) > 40:
        return None
    return KEYWORDS.get(normalised(text))


@dataclass(frozen=True)
class Reply:
    """What a message asks (None: an ordinary reply), how, and which knock it answers."""

    ask: Ask | None
    via: str  # 'button' or 'keyword'
    context_id: str | None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def read_reply(message: dict[str, Any]) -> Reply:
    """Read one inbound message (the webhook's ``messages[]`` item)."""
    context = message.get("context")
    context_id = _text(context.get("id")) if isinstance(context, dict) else None
    kind = message.get("type")
    if kind == "button":
        button = message.get("button")
        if isinstance(button, dict):
            payload, text = _text(button.get("payload")), _text(button.get("text"))
            ask = _BY_PAYLOAD.get(payload or "") or keyword(payload) or keyword(text)
            return Reply(ask, "button", context_id)
    if kind == "interactive":
        interactive = message.get("interactive")
        reply = interactive.get("button_reply") if isinstance(interactive, dict) else None
        if isinstance(reply, dict):
            payload, text = _text(reply.get("id")), _text(reply.get("title"))
            ask = _BY_PAYLOAD.get(payload or "") or keyword(payload) or keyword(text)
            return Reply(ask, "button", context_id)
    if kind == "text":
        text_part = message.get("text")
        body = _text(text_part.get("body")) if isinstance(text_part, dict) else None
        return Reply(keyword(body), "keyword", context_id)
    return Reply(None, "keyword", context_id)
