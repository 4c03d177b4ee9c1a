"""Cut a document into messages of at most ``limit`` characters.

Cuts fall on paragraph boundaries when they can, then on sentence, then on
word boundaries, and only as a last resort inside a word. Every chunk is a
verbatim slice of the text, none is empty or blank, and between two
consecutive chunks there is only the whitespace at the cut. The same body and
limit always give the same chunks: a resumed delivery relies on that.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# Paragraphs end where a blank line (only spaces or tabs on it) begins.
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")
_SENTENCES = re.compile(r"\S.*?(?:[.!?…](?=\s)|\Z)", re.DOTALL)
_WORDS = re.compile(r"\S+")


def chunk_text(text: str, limit: int = 4096) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` characters."""
    if limit < 1:
        raise ValueError("limit must be positive")
    chunks: list[str] = []
    start = end = -1
    for piece_start, piece_end in _pieces(text, limit):
        if start < 0:
            start, end = piece_start, piece_end
        elif piece_end - start <= limit:
            end = piece_end
        else:
            chunks.append(text[start:end])
            start, end = piece_start, piece_end
    if start >= 0:
        chunks.append(text[start:end])
    return chunks


def _paragraphs(text: str) -> Iterator[tuple[int, int]]:
    """Spans of the paragraphs: the text between blank lines, trimmed, never blank.

    Exactly where the pattern this replaced put them (a lazy match up to a
    look-ahead, which cost a tenth of a sweep's CPU), quirk included: a
    one-character paragraph runs on into the next one. Chunks already sent
    were cut this way, and a resumed document must be cut the same.
    """
    spans = []
    start = 0
    for blank in _BLANK_LINE.finditer(text):
        spans.append(_strip(text, start, blank.start()))
        start = blank.end()
    spans.append(_strip(text, start, len(text)))
    spans = [(s, e) for s, e in spans if s < e]
    i = 0
    while i < len(spans):
        s, e = spans[i]
        if e - s == 1 and i + 1 < len(spans):
            e = spans[i + 1][1]
            i += 1
        yield s, e
        i += 1


def _pieces(text: str, limit: int) -> Iterator[tuple[int, int]]:
    """Spans of paragraphs; an oversized one as sentences, words, hard cuts."""
    for paragraph_start, paragraph_end in _paragraphs(text):
        if paragraph_end - paragraph_start <= limit:
            yield paragraph_start, paragraph_end
            continue
        for sentence in _SENTENCES.finditer(text, paragraph_start, paragraph_end):
            s, e = _strip(text, *sentence.span())
            if s == e:
                continue
            if e - s <= limit:
                yield s, e
                continue
            for word in _WORDS.finditer(text, s, e):
                ws, we = word.span()
                while we - ws > limit:
                    yield ws, ws + limit
                    ws += limit
                yield ws, we


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
