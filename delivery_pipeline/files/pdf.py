"""A document drawn as a PDF: a title, the person's name and the date, then the body.

fpdf2 draws it (pure Python, nothing to install beyond the wheel) with the
DejaVu Sans subset shipped in ``fonts/`` (Latin with its accents, Greek,
Cyrillic, punctuation and common symbols; ``fonts/README.md``): a fresh
machine draws every character our locales use, and each file embeds only the
glyphs it uses. The same source always gives the same bytes: the file's date
is the document's, its identifier a hash of its content, and nothing else in
it varies (``RENDERER`` names the layout; changing it renders files again).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from fontTools.ttLib import TTFont
from fpdf import FPDF
from fpdf.enums import XPos, YPos

from delivery_pipeline.files import words
from delivery_pipeline.files.layout import Heading, ListItem, Paragraph, blocks, visible
from delivery_pipeline.model import Kind

FONTS = Path(__file__).parent / "fonts"
REGULAR = FONTS / "DejaVuSans.ttf"
BOLD = FONTS / "DejaVuSans-Bold.ttf"
FAMILY = "dejavu"
# The layout's name, part of every source hash: change it with the layout.
RENDERER = "pdf-1"
MIME_TYPE = "application/pdf"

# Millimetres and points.
MARGIN = 20.0
BODY_SIZE = 11.0
LINE = 5.6
PARAGRAPH_GAP = 2.6
HEADING_SIZE = 13.0
HEADING_GAP = 4.0
TITLE_SIZE = 18.0
LIST_INDENT = 4.0
GREY = (90, 90, 90)


@dataclass(frozen=True)
class FileSource:
    """Everything a document's file is drawn from."""

    kind: Kind
    locale: str
    name: str
    day: dt.date
    body: str

    def sha256(self) -> str:
        """A hash of everything the file is drawn from, its layout included: equal
        hashes, equal bytes."""
        fields = (RENDERER, self.kind, self.locale, self.name, self.day.isoformat(), self.body)
        return hashlib.sha256("\x1f".join(fields).encode()).hexdigest()

    @property
    def filename(self) -> str:
        return words.file_name(self.kind, self.locale, self.name, self.day)


@cache
def _characters() -> frozenset[int]:
    """The code points both shipped fonts draw."""
    regular = set(TTFont(REGULAR, lazy=True).getBestCmap())
    return frozenset(regular & set(TTFont(BOLD, lazy=True).getBestCmap()))


def drawable(character: str) -> bool:
    """Can the shipped fonts draw ``character``?"""
    return ord(character) in _characters()


class _Sheet(FPDF):
    """A4 pages numbered ``n / N`` at the foot."""

    def footer(self) -> None:
        # A list item's text may be what broke the page, its margin still indented.
        self.set_left_margin(MARGIN)
        self.set_y(-12)
        self.set_font(FAMILY, size=8)
        self.set_text_color(*GREY)
        self.cell(0, 5, f"{self.page_no()} / {{nb}}", align="C")


def render_pdf(source: FileSource) -> bytes:
    """The document as a PDF file's bytes."""
    pdf = _Sheet(format="A4")
    pdf.set_margins(MARGIN, MARGIN, MARGIN)
    pdf.set_auto_page_break(True, margin=MARGIN)
    pdf.add_font(FAMILY, "", str(REGULAR))
    pdf.add_font(FAMILY, "B", str(BOLD))
    title = visible(words.title(source.kind, source.locale), drawable)
    name = visible(" ".join(source.name.split()), drawable)
    pdf.set_title(f"{title} - {name}" if name else title)
    pdf.set_lang(words.locale_of(source.locale).value)
    pdf.set_creation_date(dt.datetime.combine(source.day, dt.time(), dt.UTC))
    pdf.add_page()
    _head(pdf, title, name, words.long_date(source.day, source.locale))
    listing = False
    for block in blocks(source.body, drawable):
        if listing and not isinstance(block, ListItem):
            pdf.ln(PARAGRAPH_GAP)
        listing = isinstance(block, ListItem)
        if isinstance(block, Heading):
            _heading(pdf, block.text)
        elif isinstance(block, ListItem):
            _list_item(pdf, block.marker, block.text)
        else:
            _paragraph(pdf, block)
    return bytes(pdf.output())


def _head(pdf: FPDF, title: str, name: str, date: str) -> None:
    pdf.set_font(FAMILY, "B", TITLE_SIZE)
    _write(pdf, title, 8.5)
    pdf.set_font(FAMILY, size=BODY_SIZE)
    pdf.set_text_color(*GREY)
    _write(pdf, f"{name} · {date}" if name else date, LINE)
    pdf.set_text_color(0, 0, 0)
    pdf.ln(3)
    pdf.set_draw_color(*GREY)
    pdf.line(pdf.l_margin, pdf.get_y(), pdf.w - pdf.r_margin, pdf.get_y())
    pdf.ln(5)


def _heading(pdf: FPDF, text: str) -> None:
    # Never alone at the foot of a page: with room for two lines after it, or on the next.
    if pdf.will_page_break(HEADING_GAP + 7 + 2 * LINE):
        pdf.add_page()
    else:
        pdf.ln(HEADING_GAP)
    pdf.set_font(FAMILY, "B", HEADING_SIZE)
    _write(pdf, text, 7)
    pdf.ln(1)


def _paragraph(pdf: FPDF, paragraph: Paragraph) -> None:
    pdf.set_font(FAMILY, size=BODY_SIZE)
    for line in paragraph.lines:
        _write(pdf, line, LINE)
    pdf.ln(PARAGRAPH_GAP)


def _list_item(pdf: FPDF, marker: str, text: str) -> None:
    pdf.set_font(FAMILY, size=BODY_SIZE)
    left = pdf.l_margin
    room = max(pdf.get_string_width(marker) + 2.5, 5.0)
    pdf.set_x(left + LIST_INDENT)
    pdf.cell(room, LINE, marker)
    pdf.set_left_margin(left + LIST_INDENT + room)
    _write(pdf, text, LINE)
    pdf.set_left_margin(left)
    pdf.set_x(left)
    pdf.ln(1)


def _write(pdf: FPDF, text: str, height: float) -> None:
    """``text`` from the left margin, wrapped at spaces to the right one, a line a cell."""
    for line in _wrapped(pdf, text, pdf.w - pdf.r_margin - pdf.l_margin):
        pdf.cell(0, height, line, new_x=XPos.LMARGIN, new_y=YPos.NEXT)


def _wrapped(pdf: FPDF, text: str, width: float) -> list[str]:
    """``text`` cut into lines no wider than ``width`` at its spaces, a word wider than
    a line at the character where it overflows. (fpdf2's ``multi_cell`` measures a line
    again at every character it adds: it drew a nine-part plan in twice the time.)"""
    lines: list[str] = []
    current, used = "", 0.0
    space = pdf.get_string_width(" ")
    for word in text.split(" "):
        size = pdf.get_string_width(word)
        if current and used + space + size <= width:
            current, used = f"{current} {word}", used + space + size
            continue
        if current:
            lines.append(current)
        while size > width and len(word) > 1:
            cut = _fitting(pdf, word, width)
            lines.append(word[:cut])
            word = word[cut:]
            size = pdf.get_string_width(word)
        current, used = word, size
    lines.append(current)
    return lines


def _fitting(pdf: FPDF, word: str, width: float) -> int:
    """How many of ``word``'s first characters fit in ``width`` (at least one)."""
    fits = 1
    while fits < len(word) and pdf.get_string_width(word[: fits + 1]) <= width:
        fits += 1
    return fits
