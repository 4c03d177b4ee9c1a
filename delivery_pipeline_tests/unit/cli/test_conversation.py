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
