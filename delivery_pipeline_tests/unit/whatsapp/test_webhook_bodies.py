"""Reading a webhook body deeper than Python's parser goes: bounded work, whatever
its size or shape (the scan is counted, not timed)."""

from __future__ import annotations

import json

import pytest

from delivery_pipeline.testing import payloads
from delivery_pipeline.whatsapp.webhook_bodies import (
    CUT_MAX_BYTES,
    CUT_MAX_TOKENS,
    MAX_DEPTH,
    TooDeepToCut,
    cut_deeper_than,
    read_body,
)

MAX_BODY = 4 * 1024 * 1024  # WEBHOOK_MAX_BODY_BYTES' default


def deep_arrays(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def deep_objects(levels: int) -> bytes:
    return b'{"entry":' + b'{"a":' * levels + b"1" + b"}" * levels + b"}"


def escaped_quotes(size: int) -> bytes:
    """Deep, then one unterminated string of escaped quotes: each quote looks like the
    start of a string to a scan that retries at every position (quadratic)."""
    return b"[" * 2000 + b'"' + b'\\"' * ((size - 2001) // 2)


def pairs(size: int) -> bytes:
    """Deep, then as many brackets as fit: a Python step per bracket."""
    return b"[" * 2000 + b"[]" * ((size - 4000) // 2) + b"]" * 2000


SHAPES = {
    "100k levels of arrays": deep_arrays(100_000),
    "100k levels of objects": deep_objects(100_000),
    "4 MiB of arrays": deep_arrays(MAX_BODY // 2),
    "4 MiB of escaped quotes": escaped_quotes(MAX_BODY),
    "4 MiB of bracket pairs": pairs(MAX_BODY),
    "escaped quotes under the byte cap": escaped_quotes(CUT_MAX_BYTES),
    "bracket pairs under the byte cap": pairs(CUT_MAX_BYTES),
}


@pytest.mark.parametrize("name", SHAPES)
def test_cutting_a_deep_body_is_bounded_work(name):
    body = SHAPES[name]
    cut = cut_deeper_than(body, MAX_DEPTH)
    assert cut.tokens <= CUT_MAX_TOKENS + 1, "a Python step per token, at most the cap"
    assert cut.scanned <= min(len(body), CUT_MAX_BYTES), "each byte examined at most once"
    if len(body) > CUT_MAX_BYTES or cut.tokens > CUT_MAX_TOKENS:
        assert cut.body is None
        with pytest.raises(TooDeepToCut):
            read_body(body)


def test_a_deep_part_is_cut_and_the_rest_of_the_batch_still_read():
    message = json.loads(payloads.inbound("+5511900000001", "wamid.KEPT"))
    message["entry"].append({"changes": [{"field": "junk", "value": {"a": None}}]})
    text = json.dumps(message).encode()
    body = text.replace(b'"a": null', b'"a": ' + deep_arrays(5000))

    parsed, changes = read_body(body)

    assert changes == [f"nesting deeper than {MAX_DEPTH}"]
    kept = parsed["entry"][0]["changes"][0]["value"]["messages"][0]
    assert kept["id"] == "wamid.KEPT"
