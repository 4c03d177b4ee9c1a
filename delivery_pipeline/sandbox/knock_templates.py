"""The knock template with quick-reply buttons, as submitted for approval
(docs/how-to/whatsapp.md, "The knock template to submit").

One per language: ``{{1}}`` the person's name, ``{{2}}`` how many documents wait
(``delivery.knock.waiting_phrase``), and the buttons *Send it* / *Later* /
*Stop* in the person's language. The sandbox knows them as approved templates;
that page shows the same text to submit to Meta.
"""

from __future__ import annotations

# (name, language, body, body parameters, quick-reply buttons in order)
KNOCK_BUTTON_SPECS: tuple[tuple[str, str, str, int, tuple[str, ...]], ...] = (
    (
        "documents_ready",
        "en",
        "Hi {{1}}, {{2}}. Tap Send it to get it now, Later to get it tomorrow morning, "
        "or Stop to get no more of these messages.",
        2,
        ("Send it", "Later", "Stop"),
    ),
    (
        "documents_ready",
        "es",
        "Hola {{1}}, {{2}}. Toca Enviar para recibirlo ahora, Más tarde para recibirlo "
        "mañana por la mañana, o Parar para no recibir más estos mensajes.",
        2,
        ("Enviar", "Más tarde", "Parar"),
    ),
    (
        "documents_ready",
        "pt_BR",
        "Olá {{1}}, {{2}}. Toque em Enviar para receber agora, Mais tarde para receber "
        "amanhã de manhã, ou Parar para não receber mais estas mensagens.",
        2,
        ("Enviar", "Mais tarde", "Parar"),
    ),
)
