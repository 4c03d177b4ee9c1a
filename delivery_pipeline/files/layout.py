"""A body's shape as a file shows it, and only what its font can draw.

The generators write plain text (``generation/``): paragraphs between blank
lines, a list item on a line of its own after a marker (``• ``, ``- ``,
``* ``, ``1. ``), and a heading as a paragraph of one short line that does not
end as a sentence does (``Week 2 of 6, …: Move your body``) or that starts
with ``#`` marks (dropped). Every other line break is kept as it is.

What the font cannot draw (most emoji) is left out whole, with one of the
spaces around it, never drawn as an empty box: a grapheme cluster (UAX #29: a
flag, a family, a hand with its skin tone) goes or stays as one, and the
invisible joiners and variation selectors of a symbol that stays go (``☀️`` is
drawn ``☀``). Text is composed first (NFC), so an accent typed as a combining
mark is drawn as the letter with its accent.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

import regex

# A paragraph ends where a blank line (only spaces or tabs on it) begins, as in
# the chunker (delivery/chunking.py): a file and its text parts agree on them.
_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n")
_LIST_MARKER = re.compile(r"(?:[•◦▪‣\-*]|\d{1,3}[.)])(?= +\S)")
_HEADING_MARKS = re.compile(r"#{1,3} +(?=\S)")
# A heading is short and does not end as a sentence or a clause does.
HEADING_MAX = 100
_SENTENCE_END = re.compile(r"[.!?…;,。！？][\"'”’»)\]]*$")
_GRAPHEME = regex.compile(r"\X")
# Invisible in text, and so never worth a glyph: joiners, variation selectors,
# the keycap's enclosing mark, tag characters (subdivision flags).
_IGNORABLE = frozenset(
    "\u200d\ufe0e\ufe0f\u20e3" + "".join(chr(c) for c in range(0xE0020, 0xE0080))
)
# Where a left-out cluster was, before the spaces around it are tidied.
_GONE = "\x00"
_GONE_WITH_SPACE = re.compile(r" ?\x00+(?= |$|[,.;:!?…)\]»”’])")
_GONE_AT_START = re.compile(r"^\x00+ ?")

Drawable = Callable[[str], bool]


@dataclass(frozen=True)
class Heading:
    text: str


@dataclass(frozen=True)
class Paragraph:
    lines: tuple[str, ...]


@dataclass(frozen=True)
class ListItem:
    marker: str
    text: str


Block = Heading | Paragraph | ListItem


def visible(line: str, drawable: Drawable) -> str:
    """``line`` (one line, no line break) as the font draws it: each cluster whose
    first character it lacks left out with a space beside it, invisible marks gone."""
    line = unicodedata.normalize("NFC", line.replace("\t", " "))
    if line.isascii() and line.isprintable():
        return line.rstrip()
    kept: list[str] = []
    for cluster in _GRAPHEME.findall(line):
        if cluster[0] in _IGNORABLE or not drawable(cluster[0]):
            kept.append(_GONE)
            continue
        kept.append("".join(c for c in cluster if c not in _IGNORABLE and drawable(c)))
    text = "".join(kept)
    if _GONE in text:
        text = _GONE_WITH_SPACE.sub("", _GONE_AT_START.sub("", text)).replace(_GONE, "")
    return text.rstrip()


def blocks(body: str, drawable: Drawable) -> list[Block]:
    """The body's headings, paragraphs and list items, in order, as the font draws them."""
    shaped: list[Block] = []
    for paragraph in _PARAGRAPH_BREAK.split(body.replace("\r\n", "\n")):
        lines = [visible(line, drawable) for line in paragraph.split("\n")]
        lines = [line for line in lines if line.strip()]
        if not lines:
            continue
        if len(lines) == 1 and (heading := _heading(lines[0])) is not None:
            shaped.append(Heading(heading))
            continue
        plain: list[str] = []
        for line in lines:
            marker = _LIST_MARKER.match(line.lstrip())
            if marker is None:
                plain.append(line)
                continue
            if plain:
                shaped.append(Paragraph(tuple(plain)))
                plain = []
            item = line.lstrip()
            shaped.append(ListItem(marker.group(), item[marker.end() :].strip()))
        if plain:
            shaped.append(Paragraph(tuple(plain)))
    return shaped


def _heading(line: str) -> str | None:
    """The heading ``line`` is, if it is one (its ``#`` marks dropped)."""
    text = line.strip()
    if marks := _HEADING_MARKS.match(text):
        return text[marks.end() :]
    if (
        len(text) <= HEADING_MAX
        and not _SENTENCE_END.search(text)
        and not _LIST_MARKER.match(text)
        and any(c.isalpha() for c in text)
    ):
        return text
    return None
