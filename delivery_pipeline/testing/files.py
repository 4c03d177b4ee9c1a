"""Reading a rendered file back, as a person's PDF viewer would: its text."""

from __future__ import annotations

import io
import re

from pypdf import PdfReader

# The foot of every page (files/pdf.py): "2 / 5".
_PAGE_NUMBER = re.compile(r"\n?\d+ / \d+\s*$")


def pdf_text(content: bytes) -> str:
    """The text of every page of a PDF, in order, without the page numbers."""
    pages = PdfReader(io.BytesIO(content)).pages
    return "\n".join(_PAGE_NUMBER.sub("", page.extract_text()) for page in pages)


def pdf_pages(content: bytes) -> int:
    return len(PdfReader(io.BytesIO(content)).pages)


def flat(text: str) -> str:
    """``text`` with every run of whitespace one space: what a page's line breaks
    leave of a body's."""
    return " ".join(text.split())
