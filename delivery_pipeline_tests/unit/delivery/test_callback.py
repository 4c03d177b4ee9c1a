"""The tag on every send, read back from status webhooks."""

from __future__ import annotations

import pytest

from delivery_pipeline.delivery.callback import (
    ChunkTag,
    chunk_callback,
    knock_callback,
    parse_chunk,
    parse_knock,
    parse_knock_id,
)


def test_a_chunks_tag_reads_back_as_the_chunk() -> None:
    tag = chunk_callback(12, 3, 2)
    assert tag == "dp:12:3:2"
    assert parse_chunk(tag) == ChunkTag(document_id=12, chunk_index=3, attempt=2)
    assert parse_knock(tag) is None and parse_knock_id(tag) is None


def test_a_knocks_tag_names_the_knock_row() -> None:
    tag = knock_callback(41)
    assert parse_knock_id(tag) == 41
    assert parse_chunk(tag) is None and parse_knock(tag) is None


def test_a_knock_tagged_before_the_knocks_table_still_names_its_document() -> None:
    assert parse_knock("dp:9:knock") == 9
    assert parse_knock_id("dp:9:knock") is None


@pytest.mark.parametrize(
    "foreign", [None, "", "dp:1:2", "dp:1:2:3:4", "xx:1:2:3", "dp:a:2:3", "dp:knock:", " dp:1:2:3"]
)
def test_a_tag_not_ours_reads_as_nothing(foreign: str | None) -> None:
    assert parse_chunk(foreign) is None
    assert parse_knock(foreign) is None
    assert parse_knock_id(foreign) is None
