"""What a person's reply to a knock asks for: pure rules, no database.

A knock with buttons offers *Send it* / *Later* / *Stop*; the press comes back
as a ``button`` message (a template's quick reply: ``button.payload``, and
``context.id`` = the knock's message id) or, for an interactive message, as
``interactive.button_reply.id``. The same words typed as the whole message, in
any of the three languages, ask the same, and START (VOLVER, VOLTAR) undoes a
Stop. Anything else is an ordinary reply: it opens the window and delivers.

A keyword must be the whole message (case, accents and punctuation aside): "stop"
stops, "please don't stop sending" is an ordinary reply.

Later and Stop are answered with one short message in the person's language
(``acknowledgement``): Later says when their documents will come and that
writing brings them sooner, Stop that no more of these messages will come and
the word that brings them back. Without it a press changes nothing the person
can see, and they cannot tell it worked. Send it needs no answer: what it asked
for is the answer.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
import unicodedata
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from delivery_pipeline.whatsapp.webhook_values import InboundMessage


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


def read_reply(message: InboundMessage) -> Reply:
    """What one inbound message asks: a button's payload (ours, or a keyword), else
    its text or the button's, as a whole-message keyword."""
    if message.button is not None:
        payload, text = message.button.payload, message.button.text
        ask = _BY_PAYLOAD.get(payload or "") or keyword(payload) or keyword(text)
        return Reply(ask, "button", message.context_id)
    return Reply(keyword(message.text), "keyword", message.context_id)


# ── the answer to Later and Stop ───────────────────────────────────────

# What gets an answer, and for how long after the reply it is still worth sending:
# later, it would answer a question nobody is asking any more.
ANSWERED = frozenset({Ask.LATER, Ask.STOP})
ANSWER_FRESH_SECONDS = 600.0

# Later, by how many documents it moved: one, or several.
_LATER = {
    "en": (
        "OK, later: you will get it {when}. Write to us any time to get it sooner.",
        "OK, later: you will get them {when}. Write to us any time to get them sooner.",
    ),
    "es": (
        "De acuerdo, más tarde: lo recibirás {when}. Escríbenos cuando quieras para "
        "recibirlo antes.",
        "De acuerdo, más tarde: los recibirás {when}. Escríbenos cuando quieras para "
        "recibirlos antes.",
    ),
    "pt": (
        "Combinado, mais tarde: você vai recebê-lo {when}. Escreva para nós a qualquer "
        "momento para recebê-lo antes.",
        "Combinado, mais tarde: você vai recebê-los {when}. Escreva para nós a qualquer "
        "momento para recebê-los antes.",
    ),
}
_NOTHING_WAITS = {
    "en": "OK. Nothing is waiting for you right now.",
    "es": "De acuerdo. Ahora no tienes nada pendiente.",
    "pt": "Combinado. Não há nada esperando por você agora.",
}
# Each names the word that undoes it (a START keyword of its language).
_STOPPED = {
    "en": "Done: you will get no more of these messages. Write START to get them again.",
    "es": "Listo: ya no recibirás estos mensajes. Escribe VOLVER para recibirlos de nuevo.",
    "pt": "Pronto: você não vai mais receber estas mensagens. Escreva VOLTAR para "
    "recebê-las de novo.",
}
# When, on the person's clock: today, tomorrow, or a date.
_WHEN = {
    "en": ("today at {time}", "tomorrow at {time}", "on {date:%Y-%m-%d} at {time}"),
    "es": ("hoy a las {time}", "mañana a las {time}", "el {date:%d/%m/%Y} a las {time}"),
    "pt": ("hoje às {time}", "amanhã às {time}", "em {date:%d/%m/%Y} às {time}"),
}


def _zone(name: str) -> dt.tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return dt.UTC


def when_phrase(locale: str, at: dt.datetime, now: dt.datetime, time_zone: str) -> str:
    """``at`` as the person says it in their zone: today/tomorrow at HH:MM, or a date."""
    zone = _zone(time_zone)
    local, today = at.astimezone(zone), now.astimezone(zone).date()
    today_at, tomorrow_at, on_date = _WHEN.get(locale, _WHEN["en"])
    days = (local.date() - today).days
    form = today_at if days <= 0 else tomorrow_at if days == 1 else on_date
    return form.format(time=f"{local:%H:%M}", date=local.date())


def acknowledgement(
    ask: Ask,
    locale: str,
    *,
    documents: int,
    snoozed_until: dt.datetime | None,
    time_zone: str,
    now: dt.datetime,
) -> str | None:
    """The answer to a reply that asked ``ask`` (None: it gets none), in ``locale``
    (English when it has no words): Later with how many ``documents`` it moved and
    until when, Stop."""
    if ask == Ask.STOP:
        return _STOPPED.get(locale, _STOPPED["en"])
    if ask != Ask.LATER:
        return None
    if documents <= 0 or snoozed_until is None:
        return _NOTHING_WAITS.get(locale, _NOTHING_WAITS["en"])
    one, several = _LATER.get(locale, _LATER["en"])
    text = one if documents == 1 else several
    return text.format(when=when_phrase(locale, snoozed_until, now, time_zone))
