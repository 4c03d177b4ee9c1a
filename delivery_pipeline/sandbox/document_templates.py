"""The templates that carry a document as a file, as submitted for approval
(docs/how-to/whatsapp.md, "Document templates": creating them on Meta).

Utility templates with a DOCUMENT header, whose file is chosen per send, and a
body of named parameters: ``{{name}}`` the person's name, ``{{kind}}`` what the
document is (``plan``, ``brief``) and ``{{date}}`` when it was asked for, or
(``brief_attached``) the day it is for. ``brief_attached`` is created with a
time to live (``message_send_ttl_seconds``, 12 h): a brief the platform could
not deliver by then is dropped, never delivered late. The sandbox knows them
as approved templates (``config.DEFAULT_TEMPLATES``).
"""

from __future__ import annotations

# A brief is for its day: undelivered after this long, the platform drops it.
BRIEF_TTL_SECONDS = 12 * 3600

# (name, language, body, named parameters, message_send_ttl_seconds)
DOCUMENT_TEMPLATE_SPECS: tuple[tuple[str, str, str, tuple[str, ...], int | None], ...] = (
    (
        "document_attached",
        "en",
        "Hi {{name}}, the {{kind}} you asked for on {{date}} is attached.",
        ("name", "kind", "date"),
        None,
    ),
    (
        "document_attached",
        "es",
        "Hola {{name}}, te enviamos adjunto el {{kind}} que pediste el {{date}}.",
        ("name", "kind", "date"),
        None,
    ),
    (
        "document_attached",
        "pt_BR",
        "Olá {{name}}, segue em anexo o {{kind}} que você pediu em {{date}}.",
        ("name", "kind", "date"),
        None,
    ),
    (
        "brief_attached",
        "en",
        "Good morning {{name}}, your brief for {{date}} is attached.",
        ("name", "date"),
        BRIEF_TTL_SECONDS,
    ),
    (
        "brief_attached",
        "es",
        "Buenos días {{name}}, te enviamos adjunto tu resumen del {{date}}.",
        ("name", "date"),
        BRIEF_TTL_SECONDS,
    ),
    (
        "brief_attached",
        "pt_BR",
        "Bom dia {{name}}, segue em anexo o seu resumo de {{date}}.",
        ("name", "date"),
        BRIEF_TTL_SECONDS,
    ),
)
