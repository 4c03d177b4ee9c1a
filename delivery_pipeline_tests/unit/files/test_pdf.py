"""A document as a PDF, opened and read back: its text is the body's, every character
of our locales is drawn, emoji are left out cleanly, the bytes are the body's alone,
and a nine-part plan stays small."""

from __future__ import annotations

import datetime as dt
import logging
import time

import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.files.pdf import FileSource, drawable, render_pdf
from delivery_pipeline.files.words import long_date, title
from delivery_pipeline.generation.generator import DocumentSpec
from delivery_pipeline.generation.offline import OfflineGenerator
from delivery_pipeline.model import Kind
from delivery_pipeline.testing.files import flat, pdf_pages, pdf_text

DAY = dt.date(2026, 3, 2)


def offline_body(kind: str, locale: str, name: str = "Ana", document_id: int = 7) -> str:
    spec = DocumentSpec(document_id, kind, name, locale, "UTC", DAY)
    return OfflineGenerator().generate(spec)


def shown(source: FileSource) -> str:
    """What the file should read: its title, the name and date, the body."""
    date = long_date(source.day, source.locale)
    return flat(f"{title(source.kind, source.locale)}\n{source.name} · {date}\n{source.body}")


@pytest.mark.parametrize("kind", [Kind.PLAN, Kind.DAILY_BRIEF])
@pytest.mark.parametrize("locale", ["en", "es", "pt"])
def test_the_text_read_back_is_the_title_the_name_the_date_and_the_body(kind, locale):
    source = FileSource(kind, locale, "Ana", DAY, offline_body(kind, locale))

    content = render_pdf(source)

    assert content.startswith(b"%PDF-")
    assert flat(pdf_text(content)) == shown(source)


def test_every_character_our_locales_use_is_drawn():
    letters = "áàâãäçéèêëíìîïñóòôõöúùûüýÿ"
    body = "\n\n".join(
        [
            letters + " " + letters.upper(),
            "¿Dónde está? ¡Olá! «Ação» “coração” ‘niño’ — 10 € … 2º 1ª • ½ · ° ±",
            "Ele não pôde; ela pôs. Pingüino, cigüeña, São João, Muñoz, Ibáñez, Conceição.",
        ]
    )
    source = FileSource(Kind.PLAN, "pt", "João Muñoz Conceição", DAY, body)

    assert flat(pdf_text(render_pdf(source))) == shown(source)


def test_emoji_are_left_out_cleanly_never_drawn_as_boxes(caplog):
    body = (
        "Good morning 🌞 Ana! 💪🏽 You did it 🎉\n\n"
        "Family 👨‍👩‍👧 time, flag 🇧🇷, sun ☀️ and a check ✓\n\n"
        "🙏"
    )
    source = FileSource(Kind.DAILY_BRIEF, "en", "Ana 🌸", DAY, body)

    with caplog.at_level(logging.WARNING, logger="fpdf"):
        text = pdf_text(render_pdf(source))

    assert flat(text) == flat(
        "Your daily brief\nAna · 2 March 2026\n"
        "Good morning Ana! You did it\nFamily time, flag, sun ☀ and a check ✓"
    )
    # fpdf2 warns of every character it had no glyph for (an empty box or a gap).
    assert not [r for r in caplog.records if "missing" in r.getMessage()]
    assert all(drawable(c) for c in text if not c.isspace())


def test_the_same_source_gives_the_same_bytes():
    body = offline_body("plan", "es")
    source = FileSource(Kind.PLAN, "es", "Ana", DAY, body)

    first = render_pdf(source)
    time.sleep(1.1)  # a timestamp in the file (to the second) would differ now
    second = render_pdf(source)

    assert first == second
    assert render_pdf(FileSource(Kind.PLAN, "es", "Ana", DAY, body + " Fin.")) != first
    assert source.sha256() == FileSource(Kind.PLAN, "es", "Ana", DAY, body).sha256()


def test_a_nine_part_plan_is_well_under_100_kb():
    # Real text, long enough to go as nine messages of 4096.
    parts = []
    while len(delivery_messages("\n\n".join(parts))) < 9:
        parts.append(offline_body("plan", "es", document_id=len(parts)))
    body = "\n\n".join(parts)
    while len(delivery_messages(body)) > 9:
        body = body.rsplit("\n\n", 1)[0]
    assert len(delivery_messages(body)) == 9
    source = FileSource(Kind.PLAN, "es", "Ana", DAY, body)

    content = render_pdf(source)

    assert len(content) < 70_000, f"{len(content)} bytes"
    assert pdf_pages(content) > 9
    assert flat(pdf_text(content)) == shown(source)


def test_a_word_longer_than_a_line_is_cut_and_nothing_is_lost():
    word = "x" * 300
    source = FileSource(Kind.PLAN, "en", "Ana", DAY, f"Before {word} after.")

    text = pdf_text(render_pdf(source))

    assert "".join(text.split()).endswith("Before" + word + "after.")
