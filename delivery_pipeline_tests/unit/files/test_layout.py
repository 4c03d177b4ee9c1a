"""A body's shape as a file shows it, and what the font cannot draw left out cleanly."""

from __future__ import annotations

import datetime as dt

import pytest

from delivery_pipeline.files.layout import Heading, ListItem, Paragraph, blocks, visible
from delivery_pipeline.files.pdf import drawable
from delivery_pipeline.generation.generator import DocumentSpec
from delivery_pipeline.generation.offline import OfflineGenerator


def test_paragraphs_headings_and_list_items():
    body = (
        "Ana, your plan\n\n"
        "This plan starts today. It lasts six weeks.\n\n"
        "Week 1 of 6, Monday 2 March to Sunday 8 March: Sleep and energy\n\n"
        "• Monday: set an alarm.\n• Tuesday: walk.\n\n"
        "Lead-in line\n1. first\n2) second\n- third\n* fourth\n\n"
        "## A marked heading\n\n"
        "Two lines\nof one paragraph.\n\n\n\n"
        "Small steps count."
    )
    assert blocks(body, drawable) == [
        Heading("Ana, your plan"),
        Paragraph(("This plan starts today. It lasts six weeks.",)),
        Heading("Week 1 of 6, Monday 2 March to Sunday 8 March: Sleep and energy"),
        ListItem("•", "Monday: set an alarm."),
        ListItem("•", "Tuesday: walk."),
        Paragraph(("Lead-in line",)),
        ListItem("1.", "first"),
        ListItem("2)", "second"),
        ListItem("-", "third"),
        ListItem("*", "fourth"),
        Heading("A marked heading"),
        Paragraph(("Two lines", "of one paragraph.")),
        Paragraph(("Small steps count.",)),
    ]


def test_a_sentence_or_a_long_line_alone_is_no_heading():
    long_line = "word " * 30
    assert blocks("¿Qué tal?\n\n¡Hola!\n\nOne thing, and then,\n\n" + long_line, drawable) == [
        Paragraph(("¿Qué tal?",)),
        Paragraph(("¡Hola!",)),
        Paragraph(("One thing, and then,",)),
        Paragraph((long_line.rstrip(),)),
    ]


@pytest.mark.parametrize("locale", ["en", "es", "pt"])
def test_the_offline_plan_has_a_title_six_week_headings_and_seven_actions_a_week(locale):
    spec = DocumentSpec(7, "plan", "Ana", locale, "UTC", dt.date(2026, 3, 2))
    shaped = blocks(OfflineGenerator().generate(spec), drawable)
    headings = [b for b in shaped if isinstance(b, Heading)]
    assert len(headings) == 1 + 6, "the plan's title and one heading a week"
    assert len([b for b in shaped if isinstance(b, ListItem)]) == 6 * 7


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("Good morning 🌞 Ana!", "Good morning Ana!"),
        ("Keep going 💪🏽", "Keep going"),
        ("🎉 Well done", "Well done"),
        ("Family 👨‍👩‍👧 and flag 🇧🇷 and Scotland 🏴󠁧󠁢󠁳󠁣󠁴󠁿 too", "Family and flag and Scotland too"),
        ("Sun ☀️ and heart ❤️ stay", "Sun ☀ and heart ❤ stay"),
        ("no space🙂here", "no spacehere"),
        ("a flag 🇧🇷, then", "a flag, then"),
        ("🙂🙂🙂", ""),
        ("cafe\u0301 and n\u0303", "café and ñ"),
        ("tab\there", "tab here"),
        ("¿Qué? ¡Sí! ação, coração, niño", "¿Qué? ¡Sí! ação, coração, niño"),
    ],
)
def test_what_the_font_cannot_draw_is_left_out_with_its_space(line, shown):
    assert visible(line, drawable) == shown


def test_a_paragraph_of_emoji_alone_leaves_nothing():
    assert blocks("Hi.\n\n🎉🎉\n\nBye.", drawable) == [
        Paragraph(("Hi.",)),
        Paragraph(("Bye.",)),
    ]
