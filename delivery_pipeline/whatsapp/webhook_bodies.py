"""Reading Meta's webhook bodies: the parts we use, whatever shape the rest has.

Meta batches up to 1000 updates per body and the 2026 formats add fields
(business-scoped user ids, usernames without phone numbers); anything of an
unexpected type is skipped here, never raised on, so one odd update cannot
cost the others in the same body. Only a body with no ``entry`` list at all
is refused whole (``UnusableBody``).

JSON can say things Postgres cannot store: ``\\u0000`` inside a string (text
and jsonb cannot hold NUL), lone surrogates (not UTF-8), ``NaN`` and numbers
too large for a double, nesting thousands deep (too deep for Python's own
parser, too). ``read_body`` turns a body into one Postgres can hold and says
what it changed; the caller keeps the original bytes, so nothing is lost.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from delivery_pipeline import text as pg_text

# Meta's deepest real shapes are about ten levels; far past that is not a
# webhook, and walking or serialising it risks Python's recursion limit.
MAX_DEPTH = 48
# A body deeper than Python's own parser goes is cut at MAX_DEPTH in one pass
# over its bytes, a Python step per bracket or string. Only a body of at most
# CUT_MAX_BYTES with at most CUT_MAX_TOKENS of them is cut; a larger one is
# refused instead (kept raw, nothing applied), so one body costs the event loop
# tens of milliseconds at most, whatever its size or shape. Meta's bodies never
# get here: they parse.
CUT_MAX_BYTES = 1024 * 1024
CUT_MAX_TOKENS = 100_000
# The next bracket or quote; UTF-8 continuation bytes are never ASCII, so
# scanning bytes is safe.
_BRACKET_OR_QUOTE = re.compile(rb'[\[\]{}"]')
# The rest of a string after its opening quote, possessive: it matches once from
# where it starts, up to the closing quote or the end, and never backtracks.
_STRING_REST = re.compile(rb'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)
_TOO_DEEP = f"nesting deeper than {MAX_DEPTH}"


class UnusableBody(ValueError):
    """A signed body with nothing we could read as updates."""


class TooDeepToCut(ValueError):
    """Nested deeper than Python's parser goes, with too much of it to cut."""


def read_body(body: bytes) -> tuple[Any, list[str]]:
    """A webhook body parsed into what Postgres can store, and what had to change
    (see ``storable``). ValueError: it is not JSON (``TooDeepToCut``: nor cuttable)."""
    try:
        return storable(json.loads(body))
    except RecursionError:
        pass
    # Deeper than Python's parser goes: cut the deep parts off first, so the
    # rest of the batch can still be read.
    cut = cut_deeper_than(body, MAX_DEPTH)
    if cut.body is None:
        raise TooDeepToCut(
            f"nested deeper than Python's parser goes, and larger than {CUT_MAX_BYTES} bytes "
            f"or {CUT_MAX_TOKENS} brackets and strings: not cut"
        )
    payload, changes = storable(json.loads(cut.body))
    return payload, sorted({*changes, _TOO_DEEP})


@dataclass(frozen=True)
class Cut:
    """A body with its deep parts cut off (None: refused), and the work it took: the
    brackets and strings stepped over, the bytes examined (each at most once)."""

    body: bytes | None
    tokens: int
    scanned: int


def cut_deeper_than(
    body: bytes,
    max_depth: int,
    *,
    max_tokens: int = CUT_MAX_TOKENS,
    max_bytes: int = CUT_MAX_BYTES,
) -> Cut:
    """``body`` with every array or object nested deeper than ``max_depth`` as null.

    One forward pass: each search starts where the last one stopped, so no
    byte is examined twice (an unterminated string runs to the end instead of
    being retried at each of its quotes). A body over ``max_bytes`` is not
    scanned; after ``max_tokens`` brackets and strings the scan gives up.
    """
    size = len(body)
    if size > max_bytes:
        return Cut(None, 0, 0)
    out: list[bytes] = []
    depth = cut_at = kept_from = pos = tokens = 0
    while (match := _BRACKET_OR_QUOTE.search(body, pos)) is not None:
        tokens += 1
        if tokens > max_tokens:
            return Cut(None, tokens, match.end())
        at = match.start()
        byte = body[at]
        if byte == 0x22:  # a string, skipped whole (brackets in it are text)
            rest = _STRING_REST.match(body, at + 1)
            end = rest.end() if rest else at + 1
            pos = end + 1 if end < size and body[end] == 0x22 else size
            continue
        pos = at + 1
        if byte in b"[{":
            depth += 1
            if not cut_at and depth > max_depth:
                cut_at = depth
                out.append(body[kept_from:at] + b"null")
        else:
            if cut_at == depth:
                cut_at, kept_from = 0, pos
            depth -= 1
    if not cut_at:  # else unbalanced: what is left fails to parse, as it should
        out.append(body[kept_from:])
    return Cut(b"".join(out), tokens, size)


def storable(payload: Any) -> tuple[Any, list[str]]:
    """``payload`` as Postgres text and jsonb can hold it, and what had to change:
    NUL and lone surrogates become U+FFFD, non-finite numbers and anything nested
    deeper than ``MAX_DEPTH`` become null."""
    changes: set[str] = set()
    cleaned = _storable(payload, 0, changes)
    return cleaned, sorted(changes)


def _storable(value: Any, depth: int, changes: set[str]) -> Any:
    if isinstance(value, str):
        return _storable_text(value, changes)
    if isinstance(value, float) and not math.isfinite(value):
        changes.add("a number out of range")
        return None
    if isinstance(value, dict | list) and depth >= MAX_DEPTH:
        changes.add(_TOO_DEEP)
        return None
    if isinstance(value, dict):
        return {
            _storable_text(key, changes): _storable(item, depth + 1, changes)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_storable(item, depth + 1, changes) for item in value]
    return value


def _storable_text(text: str, changes: set[str]) -> str:
    problems = pg_text.unstorable(text)
    if not problems:
        return text
    changes.update(problems)
    return pg_text.storable(text)


# How far ahead of our clock a platform timestamp may be and still be believed
# (the two clocks disagree a little). One further ahead is taken as our now: a
# message from the future would hold the person's window open until then, a
# refusal from the future would keep it shut.
MAX_CLOCK_SKEW = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class Timestamp:
    """When the platform says something happened, as we take it."""

    at: dt.datetime
    # it said a time more than MAX_CLOCK_SKEW ahead of ours; ``at`` is our now
    from_the_future: bool = False


def parse_timestamp(raw: Any) -> Timestamp:
    """Unix seconds as a string (a few arrive in milliseconds); now() if unreadable,
    and now() too (``from_the_future``) if later than now + ``MAX_CLOCK_SKEW``."""
    now = dt.datetime.now(dt.UTC)
    try:
        value = float(raw)
    except (TypeError, ValueError, OverflowError):
        return Timestamp(now)
    if value > 1e11:
        value /= 1000.0
    try:
        at = dt.datetime.fromtimestamp(value, dt.UTC)
    except (OverflowError, OSError, ValueError):
        return Timestamp(now)
    if at > now + MAX_CLOCK_SKEW:
        return Timestamp(now, from_the_future=True)
    return Timestamp(at)


def iter_changes(payload: Any) -> list[tuple[str, dict[str, Any], Any]]:
    """Every ``entry[].changes[]`` as (field, value, the entry's ``time``); malformed
    parts are skipped. Template lifecycle changes carry no time of their own."""
    out: list[tuple[str, dict[str, Any], Any]] = []
    if not isinstance(payload, dict):
        raise UnusableBody("not a JSON object")
    entries = payload.get("entry")
    if not isinstance(entries, list):
        raise UnusableBody("no entry list")
    for entry in entries:
        changes = entry.get("changes") if isinstance(entry, dict) else None
        if not isinstance(changes, list):
            continue
        assert isinstance(entry, dict)
        for change in changes:
            if isinstance(change, dict) and isinstance(change.get("value"), dict):
                out.append((str(change.get("field", "")), change["value"], entry.get("time")))
    return out


def dicts(items: Any) -> list[dict[str, Any]]:
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def message_body(message: dict[str, Any]) -> str | None:
    kind = message.get("type")
    part = message.get(kind) if isinstance(kind, str) else None
    if not isinstance(part, dict):
        return None
    if kind == "text":
        return text_or_none(part.get("body"))
    if kind == "button":
        return text_or_none(part.get("text"))
    if kind == "interactive":
        for key in ("button_reply", "list_reply"):
            if isinstance(part.get(key), dict):
                return text_or_none(part[key].get("title"))
    if kind in ("image", "video", "document"):
        return text_or_none(part.get("caption"))
    if kind == "reaction":
        return text_or_none(part.get("emoji"))
    return None


def text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
