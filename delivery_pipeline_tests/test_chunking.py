import re

import pytest
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


@given(text=text_strategy, limit=st.integers(min_value=1, max_value=400))
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
