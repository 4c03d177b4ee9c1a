"""Pure rules of a reply to a knock: the keywords in three languages, each shape
Meta sends a press in, and what the knock says about how many documents wait."""

from __future__ import annotations

from delivery_pipeline.delivery.knock import knock_with, waiting_phrase
from delivery_pipeline.delivery.reply import BUTTON_PAYLOADS, Ask, keyword, read_reply


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
    assert read_reply(button).ask == Ask.LATER and read_reply(button).context_id == "wamid.K"
    # A template approved without our payloads: the button's text comes back.
    own = {"type": "button", "button": {"payload": "Parar", "text": "Parar"}}
    assert read_reply(own).ask == Ask.STOP
    interactive = {
        "type": "interactive",
        "interactive": {"type": "button_reply", "button_reply": {"id": "knock:stop", "title": "x"}},
    }
    assert read_reply(interactive).ask == Ask.STOP
    assert read_reply(interactive).via == "button"
    assert read_reply({"type": "text", "text": {"body": "hi"}}).ask is None
    assert read_reply({"type": "image"}).ask is None


def test_a_knock_with_buttons_says_how_many_wait_and_carries_the_payloads():
    one = knock_with("documents_ready", "es", "es", "Ana", with_buttons=True, waiting=1)
    assert one.parameters == ["Ana", "tu documento está listo"]
    assert one.buttons == BUTTON_PAYLOADS
    many = knock_with("documents_ready", "pt_BR", "pt", "Bia", with_buttons=True, waiting=3)
    assert many.parameters == ["Bia", "você tem 3 documentos prontos"]
    assert waiting_phrase("fr", 2) == "you have 2 documents ready", "English when no words"
    plain = knock_with("document_ready", "en", "en", "Ana")
    assert plain.parameters == ["Ana"] and plain.buttons == ()
