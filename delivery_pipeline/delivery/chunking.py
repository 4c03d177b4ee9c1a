"""Cut a document into messages of at most ``limit`` UTF-16 code units.

The limit is counted in UTF-16 code units, the strictest reading of the
platform's "4096 characters" (docs/design/chunking.md, "The 4096 limit"): a chunk within
it is within 4096 code points and 4096 grapheme clusters as well.

Cuts fall on paragraph boundaries when they can, then on sentence (``.``,
``!``, ``?``, ``…`` before whitespace; ``。``, ``！``, ``？`` anywhere), then on
word boundaries, and only as a last resort inside a word, and every cut falls
between two grapheme clusters (UAX #29: a ZWJ emoji, a flag, a letter with its
combining marks, a Thai syllable stay whole); only a single cluster longer
than a whole message is cut inside. Every chunk is a verbatim slice of the
text, none is empty or blank, and between two consecutive chunks there is
only the whitespace at the cut. The same body and limit always give the same
chunks.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator

import regex

# Paragraphs end where a blank line (only spaces or tabs on it) begins.
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")
# A sentence ends at . ! ? … (and the Devanagari danda, the Arabic question
# mark) before whitespace, or at an ideographic full stop, exclamation or
# question mark (with the closing quotes or brackets after it), which CJK text
# follows with the next sentence directly.
_SENTENCES = re.compile(r"\S.*?(?:[.!?…।؟](?=\s)|[。！？｡][」』）〕】〉》”’\"')\]]*|\Z)", re.DOTALL)
_WORDS = re.compile(r"\S+")
# Code points outside the Basic Multilingual Plane: two UTF-16 code units each.
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_GRAPHEME = regex.compile(r"\X", regex.DOTALL)
# What UAX #29 joins across the cuts chunking makes (each is next to whitespace
# or a sentence's last mark): a mark that extends the cluster before it, a
# prepended mark that joins the one after it; never across a control or newline.
_EXTENDS_BACK = regex.compile(
    r"[\p{Grapheme_Cluster_Break=Extend}\p{Grapheme_Cluster_Break=ZWJ}"
    r"\p{Grapheme_Cluster_Break=SpacingMark}]"
)
_PREPEND = regex.compile(r"\p{Grapheme_Cluster_Break=Prepend}")
_CONTROL = regex.compile(
    r"[\p{Grapheme_Cluster_Break=Control}\p{Grapheme_Cluster_Break=CR}"
    r"\p{Grapheme_Cluster_Break=LF}]"
)

# The longest character in UTF-16 code units: a limit must hold any one.
MIN_LIMIT = 2


def utf16_units(text: str) -> int:
    """The length of ``text`` in UTF-16 code units: the unit the limit is counted in."""
    return len(text) + sum(1 for _ in _ASTRAL.finditer(text))


def chunk_text(text: str, limit: int = 4096) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` UTF-16 code units."""
    if limit < MIN_LIMIT:
        raise ValueError(f"limit must be at least {MIN_LIMIT} (one character of any plane)")
    body = _Body(text)
    chunks: list[str] = []
    start = end = -1
    for piece_start, piece_end in _pieces(body, limit):
        if start < 0:
            start, end = piece_start, piece_end
        elif body.width(start, piece_end) <= limit:
            end = piece_end
        else:
            chunks.append(text[start:end])
            start, end = piece_start, piece_end
    if start >= 0:
        chunks.append(text[start:end])
    return chunks


def position_marker(index: int, count: int) -> str:
    """What heads part ``index`` (from 1) of a document of ``count`` messages."""
    return f"({index}/{count}) "


def delivery_messages(text: str, limit: int = 4096) -> list[str]:
    """The messages a document goes out as: its chunks, each part of a multi-part
    document headed by its position, ``(2/3) ``, within ``limit`` with it.

    The platform does not keep messages in order, and a part resent after a
    later one was accepted (a failure after acceptance) arrives after it: the
    marker lets the person read the parts in order whatever order they came in
    (docs/design/chunking.md, "Parts that say where they belong"). A one-message document
    carries none.
    """
    chunks = chunk_text(text, limit)
    count = len(chunks)
    while count > 1:
        room = utf16_units(position_marker(count, count))
        if limit - room < MIN_LIMIT:
            return chunk_text(text, limit)  # no room for a marker in so small a message
        chunks = chunk_text(text, limit - room)
        if utf16_units(position_marker(len(chunks), len(chunks))) <= room:
            break
        count = len(chunks)  # more parts than before: the widest marker grew
    if len(chunks) == 1:
        return chunks
    return [position_marker(i, len(chunks)) + c for i, c in enumerate(chunks, start=1)]


class _Body:
    """The text with what cutting it needs: widths in UTF-16 code units, and where a
    cut next to whitespace or a sentence end would join two halves of a cluster."""

    def __init__(self, text: str) -> None:
        self.text = text
        # ASCII (most bodies): one unit per character, no cluster crosses a cut.
        self.ascii = text.isascii()
        wide = not self.ascii and len(text.encode("utf-16-le")) > 2 * len(text)
        self._astral = [m.start() for m in _ASTRAL.finditer(text)] if wide else []

    def width(self, start: int, end: int) -> int:
        if not self._astral:
            return end - start
        return end - start + bisect_left(self._astral, end) - bisect_left(self._astral, start)

    def inside_cluster(self, at: int) -> bool:
        """Would a cut at ``at`` (beside whitespace or a sentence end) split a cluster?"""
        text = self.text
        if self.ascii or not 0 < at < len(text) or text[at - 1 : at + 1].isascii():
            return False
        if _CONTROL.match(text, at - 1) or _CONTROL.match(text, at):
            return False
        return bool(_EXTENDS_BACK.match(text, at) or _PREPEND.match(text, at - 1))

    def snapped(self, spans: Iterable[tuple[int, int]]) -> Iterator[tuple[int, int]]:
        """``spans`` widened to whole clusters; spans that then overlap become one."""
        current: tuple[int, int] | None = None
        for start, end in spans:
            while self.inside_cluster(start):
                start -= 1
            while self.inside_cluster(end):
                end += 1
            if current is not None and start < current[1]:
                current = (current[0], max(end, current[1]))
                continue
            if current is not None:
                yield current
            current = (start, end)
        if current is not None:
            yield current


def _paragraphs(text: str) -> Iterator[tuple[int, int]]:
    """Spans of the paragraphs: the text between blank lines, trimmed, never blank.

    Exactly where the pattern this replaced put them (a lazy match up to a
    look-ahead, which cost a tenth of a sweep's CPU), quirk included: a
    one-character paragraph runs on into the next one.
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


def _pieces(body: _Body, limit: int) -> Iterator[tuple[int, int]]:
    """Spans of paragraphs; an oversized one as sentences, words, hard cuts."""
    text = body.text
    for paragraph_start, paragraph_end in body.snapped(_paragraphs(text)):
        if body.width(paragraph_start, paragraph_end) <= limit:
            yield paragraph_start, paragraph_end
            continue
        sentences = (
            _strip(text, *sentence.span())
            for sentence in _SENTENCES.finditer(text, paragraph_start, paragraph_end)
        )
        for s, e in body.snapped((s, e) for s, e in sentences if s < e):
            if body.width(s, e) <= limit:
                yield s, e
                continue
            words = (word.span() for word in _WORDS.finditer(text, s, e))
            for ws, we in body.snapped(words):
                if body.width(ws, we) <= limit:
                    yield ws, we
                else:
                    yield from _hard_cuts(body, ws, we, limit)


def _hard_cuts(body: _Body, start: int, end: int, limit: int) -> Iterator[tuple[int, int]]:
    """A word longer than a message, cut between its grapheme clusters; a cluster
    longer than a message alone, between its code points."""
    cut = start
    for cluster in _GRAPHEME.finditer(body.text, start, end):
        cluster_start, cluster_end = cluster.span()
        if body.width(cut, cluster_end) <= limit:
            continue
        if cut < cluster_start:
            yield cut, cluster_start
            cut = cluster_start
        while body.width(cut, cluster_end) > limit:
            fits = cut + 1
            while body.width(cut, fits + 1) <= limit:
                fits += 1
            yield cut, fits
            cut = fits
    if cut < end:
        yield cut, end


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
