"""``sandbox inbox``: a conversation as text a person reads, whatever its language."""

from __future__ import annotations

import pytest

from delivery_pipeline.cli.conversation import conversation

pytestmark = pytest.mark.unit

KNOCK = {
    "id": "wamid.1",
    "type": "template",
    "template": {"name": "documents_ready", "language": "pt_BR", "parameters": ["Ana"]},
    "text": "Olá Ana, seu documento está pronto.",
    "buttons": [
        {"text": "Enviar", "payload": "knock:send"},
        {"text": "Mais tarde", "payload": "knock:later"},
        {"text": "Parar", "payload": "knock:stop"},
    ],
    "time": "2026-12-05T04:06:00+00:00",
    "arrived": "2026-12-05T04:06:00.120000+00:00",
}
PLAN = {
    "id": "wamid.3",
    "type": "text",
    "text": "(1/2) Este plano começa em sábado\n\n• Sábado: ação",
    "time": "2026-12-05T04:07:01+00:00",
    "arrived": "2026-12-05T04:07:01.050000+00:00",
}
PRESS = {"id": "wamid.2", "button": "Enviar", "time": "2026-12-05T04:07:00.500000+00:00"}


def test_the_conversation_reads_in_order_with_its_buttons_and_its_own_letters():
    text = conversation("+5511900000001", [PLAN, KNOCK], [PRESS])
    assert text.splitlines() == [
        "+5511900000001: 2 received (←), 1 written or pressed (→), times in UTC",
        "04:06:00 ← [template documents_ready (pt_BR)]",
        "           Olá Ana, seu documento está pronto.",
        "           [Enviar] [Mais tarde] [Parar]",
        "04:07:00 → pressed [Enviar]",
        "04:07:01 ← (1/2) Este plano começa em sábado",
        "",
        "           • Sábado: ação",
    ]
    assert "\\u" not in text


def test_an_empty_inbox_says_so_and_a_written_message_reads_as_written():
    assert conversation("+447700900003", [], []).splitlines()[-1] == "nothing yet"
    said = {"id": "wamid.9", "text": "oi", "time": "2026-12-05T04:06:00+00:00"}
    assert conversation("+5511900000001", [], [said]).splitlines()[-1] == "04:06:00 → oi"


def test_a_file_shows_its_name_type_size_and_the_address_that_opens_it():
    sent = {
        "id": "wamid.9",
        "type": "template",
        "template": {"name": "document_attached", "language": "en", "parameters": ["Noah"]},
        "text": "Hi Noah, the plan you asked for on 5 December 2026 is attached.",
        "document": {
            "id": "sbx-media-7",
            "filename": "Plan - Noah Brown - 2026-12-05.pdf",
            "mime_type": "application/pdf",
            "size": 48 * 1024,
        },
        "time": "2026-12-05T04:06:00+00:00",
    }

    lines = conversation("+447700900004", [sent], [], "http://127.0.0.1:8765/").splitlines()

    assert lines[1:4] == [
        "04:06:00 ← [template document_attached (en)]",
        "           [file Plan - Noah Brown - 2026-12-05.pdf (application/pdf, 48 KB)]",
        "           http://127.0.0.1:8765/_sandbox/media/sbx-media-7",
    ]
    assert lines[4].strip().startswith("Hi Noah, the plan you asked for")
