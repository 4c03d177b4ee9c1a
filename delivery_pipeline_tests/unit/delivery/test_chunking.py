import re

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from delivery_pipeline.delivery.chunking import chunk_text

pytestmark = pytest.mark.engine

text_strategy = st.text(
    alphabet=st.sampled_from(list("abcdé .!?\n\n\t  …xyzXYZ0123")), max_size=3000
)


def _assert_faithful(text: str, chunks: list[str]) -> None:
    """Chunks are verbatim slices, in order, with only whitespace between them."""
    position = 0
    for chunk in chunks:
        found = text.find(chunk, position)
        assert found >= 0, f"chunk not found in order: {chunk[:40]!r}"
        assert text[position:found].strip() == "", "non-whitespace dropped between chunks"
        position = found + len(chunk)
    assert text[position:].strip() == ""


@given(text=text_strategy, limit=st.integers(min_value=2, max_value=400))
@settings(max_examples=400, deadline=None)
def test_chunks_respect_limit_and_give_back_the_text(text: str, limit: int) -> None:
    chunks = chunk_text(text, limit)
    assert all(0 < len(c) <= limit for c in chunks)
    assert all(c.strip() for c in chunks), "no empty or blank chunk"
    assert all(c == c.strip() for c in chunks), "chunks are cut at whitespace, not padded"
    _assert_faithful(text, chunks)
    assert chunk_text(text, limit) == chunks, "deterministic"
    if text.strip():
        assert chunks


@given(
    paragraphs=st.lists(
        st.text(alphabet="abc d.", min_size=1, max_size=50).filter(str.strip),
        min_size=1,
        max_size=20,
    ),
    limit=st.integers(min_value=60, max_value=500),
)
@settings(max_examples=200, deadline=None)
def test_paragraphs_that_fit_are_never_split(paragraphs: list[str], limit: int) -> None:
    text = "\n\n".join(p.strip() for p in paragraphs)
    chunks = chunk_text(text, limit)
    for paragraph in paragraphs:
        assert any(paragraph.strip() in c for c in chunks)


def test_cut_prefers_paragraph_then_sentence_then_word() -> None:
    text = "First paragraph.\n\nSecond one. It has two sentences."
    assert chunk_text(text, 40) == ["First paragraph.", "Second one. It has two sentences."]
    assert chunk_text("One sentence here. Another sentence there.", 25) == [
        "One sentence here.",
        "Another sentence there.",
    ]
    assert chunk_text("alpha beta gamma delta", 11) == ["alpha beta", "gamma delta"]
    assert chunk_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


def test_default_limit_is_whatsapp_text_limit() -> None:
    body = "\n\n".join("p" * 3000 for _ in range(3))
    chunks = chunk_text(body)
    assert len(chunks) == 3 and all(len(c) == 3000 for c in chunks)


# The paragraph pattern chunk_text used before it scanned for blank lines: a resumed
# document must be cut at exactly the same places, so the two must agree.
_OLD_PARAGRAPHS = re.compile(r"\S(?:.*?\S)?(?=\s*\n[ \t\r\f\v]*\n|\s*\Z)", re.DOTALL)


@given(
    text=st.text(
        alphabet=st.sampled_from(list("ab .\n\n\n\t \r\x0b\x0c\x85\u2028\xa0")), max_size=400
    )
)
@settings(max_examples=1000, deadline=None)
def test_paragraphs_are_found_where_they_always_were(text: str) -> None:
    from delivery_pipeline.delivery.chunking import _paragraphs

    assert list(_paragraphs(text)) == [m.span() for m in _OLD_PARAGRAPHS.finditer(text)]


# ── the 4096 limit in UTF-16 code units, never a cluster split ──────────────

# Clusters of several code points or several UTF-16 code units each, and the
# separators chunking cuts at.
CLUSTERS = [
    "👨\u200d👩\u200d👧\u200d👦",  # a ZWJ family: 7 code points, 11 UTF-16 code units
    "🇧🇷",  # a flag: two regional indicators
    "🇯🇵",
    "👍🏽",  # an emoji with a skin-tone modifier
    "😀",  # one code point, two code units
    "e\u0301",  # a combining acute
    "a\u0308\u0323",  # two combining marks
    "ก้ำ",  # Thai: a consonant with a tone mark and a vowel
    "ที่",
    "\u1100\u1161\u11a8",  # Hangul jamo: L V T
    "क्षि",  # Devanagari: a conjunct through the virama
    "漢",
    "字",
    "。",
    "！",
    "？",
    "a",
    "b",
    ".",
    "!",
    " ",
    " ",
    "\n",
    "\n\n",
]
WIDEST_CLUSTER = 11


def units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def cluster_boundaries(text: str) -> set[int]:
    return {0} | {m.end() for m in regex.finditer(r"\X", text)}


def spans_of(text: str, chunks: list[str]) -> list[tuple[int, int]]:
    """Where each chunk sits in the text (verbatim, in order, only whitespace between)."""
    spans, position = [], 0
    for chunk in chunks:
        found = text.find(chunk, position)
        assert found >= 0 and not text[position:found].strip(), f"{chunk[:20]!r} not in order"
        spans.append((found, found + len(chunk)))
        position = found + len(chunk)
    assert not text[position:].strip(), "text left over after the last chunk"
    return spans


@given(
    clusters=st.lists(st.sampled_from(CLUSTERS), max_size=600),
    limit=st.integers(min_value=WIDEST_CLUSTER, max_value=120),
)
@settings(max_examples=500, deadline=None)
def test_chunks_fit_in_utf16_units_never_split_a_cluster_and_give_back_the_text(
    clusters: list[str], limit: int
) -> None:
    text = "".join(clusters)
    chunks = chunk_text(text, limit)
    assert all(0 < units(c) <= limit for c in chunks), [units(c) for c in chunks]
    boundaries = cluster_boundaries(text)
    spans = spans_of(text, chunks)
    for start, end in spans:
        assert start in boundaries and end in boundaries, (text[start - 2 : end + 2], limit)
    # the chunks and the whitespace at the cuts between them are the body, exactly
    edges = [0, *(i for span in spans for i in span), len(text)]
    gaps = [text[edges[i] : edges[i + 1]] for i in range(0, len(edges), 2)]
    assert all(not gap.strip() for gap in gaps)
    rebuilt = gaps[0] + "".join(c + gap for c, gap in zip(chunks, gaps[1:], strict=True))
    assert rebuilt == text
    assert chunk_text(text, limit) == chunks, "deterministic"


def test_the_limit_is_counted_in_utf16_code_units() -> None:
    body = "😀" * 3000  # 3000 code points, 6000 UTF-16 code units
    chunks = chunk_text(body, 4096)
    assert [len(c) for c in chunks] == [2048, 952]
    assert all(units(c) <= 4096 for c in chunks)


def test_a_hard_cut_falls_between_clusters() -> None:
    family = "👨\u200d👩\u200d👧\u200d👦"
    assert chunk_text(family * 3, 30) == [family * 2, family]
    assert chunk_text("🇧🇷" * 5, 10) == ["🇧🇷🇧🇷", "🇧🇷🇧🇷", "🇧🇷"]
    assert chunk_text("e\u0301" * 10, 5) == ["e\u0301e\u0301", "e\u0301e\u0301"] * 2 + [
        "e\u0301e\u0301"
    ]
    thai = "น้ำ" * 4  # each cluster three code points
    assert all(len(c) % 3 == 0 for c in chunk_text(thai, 7))


def test_only_a_cluster_longer_than_a_message_is_cut_inside() -> None:
    zalgo = "a" + "\u0301" * 40  # one cluster of 41 code points
    chunks = chunk_text("ok " + zalgo, 16)
    assert chunks[0] == "ok"
    assert "".join(chunks[1:]) == zalgo and all(units(c) <= 16 for c in chunks)


def test_ideographic_full_stop_exclamation_and_question_marks_end_sentences() -> None:
    text = "今日は晴れです。明日は雨！本当ですか？「はい。」そうです。"
    assert chunk_text(text, 9) == [
        "今日は晴れです。",
        "明日は雨！",
        "本当ですか？",
        "「はい。」",
        "そうです。",
    ]


def test_a_mark_carried_by_a_space_stays_with_it() -> None:
    # A combining mark right after a space extends the space (UAX #29): no cut between.
    text = "alpha \u0301beta gamma"
    chunks = chunk_text(text, 11)
    assert all(start in cluster_boundaries(text) for start, _ in spans_of(text, chunks))
    assert "".join(chunks).replace(" ", "") == text.replace(" ", "")
