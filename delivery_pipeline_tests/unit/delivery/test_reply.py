"""Pure rules of a reply to a knock: the keywords in three languages, each shape
Meta sends a press in, what the knock says about how many documents wait, and
the answer Later and Stop get."""

from __future__ import annotations

import datetime as dt
import re

from delivery_pipeline.delivery.knock import knock_with, waiting_phrase
from delivery_pipeline.delivery.reply import (
    ANSWERED,
    BUTTON_PAYLOADS,
    Ask,
    Reply,
    acknowledgement,
    keyword,
    read_reply,
    when_phrase,
)
from delivery_pipeline.whatsapp.webhook_values import InboundMessage


def read(message: dict) -> Reply:
    """A ``messages[]`` item as the edge reads it, then as the core does."""
    return read_reply(InboundMessage.of(message))


def test_keywords_are_whole_messages_in_three_languages():
    assert keyword("STOP") == keyword("Parar") == keyword("  baja! ") == Ask.STOP
    assert keyword("SAIR") == keyword("cancelar") == Ask.STOP
    assert keyword("Más tarde") == keyword("DEPOIS") == keyword("later") == Ask.LATER
    assert keyword("start") == keyword("Volver") == keyword("VOLTAR") == Ask.START
    assert keyword("Send it") == keyword("ENVIAR") == keyword("manda") == Ask.SEND
    assert keyword("please don't stop") is None
    assert keyword("") is None and keyword(None) is None


def test_a_reply_is_read_from_each_shape_meta_sends():
    button = {
        "type": "button",
        "button": {"payload": "knock:later", "text": "Later"},
        "context": {"id": "wamid.K"},
    }
    assert read(button).ask == Ask.LATER and read(button).context_id == "wamid.K"
    # A template approved without our payloads: the button's text comes back.
    own = {"type": "button", "button": {"payload": "Parar", "text": "Parar"}}
    assert read(own).ask == Ask.STOP
    interactive = {
        "type": "interactive",
        "interactive": {"type": "button_reply", "button_reply": {"id": "knock:stop", "title": "x"}},
    }
    assert read(interactive).ask == Ask.STOP
    assert read(interactive).via == "button"
    assert read({"type": "text", "text": {"body": "hi"}}).ask is None
    assert read({"type": "image"}).ask is None


def test_a_knock_with_buttons_says_how_many_wait_and_carries_the_payloads():
    one = knock_with("documents_ready", "es", "es", "Ana", with_buttons=True, waiting=1)
    assert one.parameters == ["Ana", "tu documento está listo"]
    assert one.buttons == BUTTON_PAYLOADS
    many = knock_with("documents_ready", "pt_BR", "pt", "Bia", with_buttons=True, waiting=3)
    assert many.parameters == ["Bia", "você tem 3 documentos prontos"]
    assert waiting_phrase("fr", 2) == "you have 2 documents ready", "English when no words"
    plain = knock_with("document_ready", "en", "en", "Ana")
    assert plain.parameters == ["Ana"] and plain.buttons == ()


# ── the answer to Later and Stop ─────────────────────────────────────────

NIGHT_IN_SAO_PAULO = dt.datetime(2026, 12, 5, 4, 6, tzinfo=dt.UTC)  # 01:06 there


def later(locale: str, documents: int, until: dt.datetime | None, zone: str) -> str | None:
    return acknowledgement(
        Ask.LATER,
        locale,
        documents=documents,
        snoozed_until=until,
        time_zone=zone,
        now=NIGHT_IN_SAO_PAULO,
    )


def test_later_says_when_on_the_persons_own_clock():
    eight_there = dt.datetime(2026, 12, 5, 11, 0, tzinfo=dt.UTC)  # 08:00 in São Paulo
    assert later("pt", 1, eight_there, "America/Sao_Paulo") == (
        "Combinado, mais tarde: você vai recebê-lo hoje às 08:00. Escreva para nós a "
        "qualquer momento para recebê-lo antes."
    )
    # The same instant is 11:00 in London.
    assert later("en", 3, eight_there, "Europe/London") == (
        "OK, later: you will get them today at 11:00. Write to us any time to get them sooner."
    )
    next_day = eight_there + dt.timedelta(days=1)
    assert later("es", 2, next_day, "America/Sao_Paulo") == (
        "De acuerdo, más tarde: los recibirás mañana a las 08:00. Escríbenos cuando quieras "
        "para recibirlos antes."
    )
    in_a_week = eight_there + dt.timedelta(days=7)
    assert "em 12/12/2026 às 08:00" in str(later("pt", 1, in_a_week, "America/Sao_Paulo"))
    assert "on 2026-12-12 at 08:00" in str(later("fr", 1, in_a_week, "America/Sao_Paulo"))


def test_later_with_nothing_waiting_says_so():
    assert later("es", 0, None, "UTC") == "De acuerdo. Ahora no tienes nada pendiente."
    assert later("en", 0, NIGHT_IN_SAO_PAULO, "UTC") == "OK. Nothing is waiting for you right now."


def test_stop_names_the_word_that_undoes_it_in_each_language():
    for locale in ("en", "es", "pt"):
        text = acknowledgement(
            Ask.STOP,
            locale,
            documents=1,
            snoozed_until=None,
            time_zone="UTC",
            now=NIGHT_IN_SAO_PAULO,
        )
        assert text is not None
        [word] = re.findall(r"\b[A-Z]{4,}\b", text)
        assert keyword(word) == Ask.START, (locale, word)


def test_send_it_and_start_get_no_answer():
    for ask in (Ask.SEND, Ask.START):
        assert (
            acknowledgement(
                ask, "en", documents=1, snoozed_until=None, time_zone="UTC", now=NIGHT_IN_SAO_PAULO
            )
            is None
        )
    assert ANSWERED == {Ask.LATER, Ask.STOP}


def test_the_time_is_the_persons_across_a_daylight_saving_change():
    # 2026-03-29 01:00 UTC: London moves to BST; 08:00 BST is 07:00 UTC.
    before = dt.datetime(2026, 3, 28, 23, 0, tzinfo=dt.UTC)
    until = dt.datetime(2026, 3, 29, 7, 0, tzinfo=dt.UTC)
    assert when_phrase("en", until, before, "Europe/London") == "tomorrow at 08:00"
