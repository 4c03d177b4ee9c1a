"""Signed webhook bodies as an attacker (or a bad day) makes them, from real ones.

``mutate(rng)`` takes a real-shape body (the Meta corpus in
``fixtures/meta-webhooks/`` and the builders in ``payloads``), changes it a few
times at random (keys dropped, values of other types, odd strings, numbers
beyond 64 bits or a double, deep nesting, repeated entries, broken bytes) and
says what it did. One ``random.Random`` drives it, so the property test
(hypothesis supplies the Random) and the fuzz run (a seeded one) share every
mutation.
"""

from __future__ import annotations

import copy
import json
import random
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from delivery_pipeline.testing import payloads

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "meta-webhooks"


def _builders() -> list[Any]:
    wamid = "wamid.MUTANT"
    return [
        json.loads(payloads.inbound("+15550000001", wamid, "hello")),
        json.loads(payloads.status(wamid, "delivered", callback="dp:1:0:1")),
        json.loads(payloads.status(wamid, "failed", errors=[payloads.REENGAGEMENT_ERROR])),
        json.loads(
            payloads.status(wamid, "failed", errors=[{"code": 190, "title": "token expired"}])
        ),
    ]


CORPUS: list[Any] = [json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))] + (
    _builders()
)

# Strings Postgres text cannot hold, or that stress whoever reads them.
ODD_STRINGS = [
    "\x00",
    "a\x00b",
    "wamid.\x00",
    "\ud800",
    "x\udfffy",
    "\ud83d",  # half an emoji
    "x" * 70_000,
    "9" * 70_000,
    "",
    " ",
    "\n\r\t\x1b[31mred",
    "%s%s%n%x",
    "'; DROP TABLE people; --",
    "\u202egnp.exe",
    "😀" * 100,
    "null",
    "1e400",
    "-0",
]
# Raw JSON numbers: beyond 64 bits, beyond a double, negative zero, tiny.
ODD_NUMBERS = [
    str(2**64),
    str(-(2**70)),
    "1" + "0" * 400,
    "1e400",
    "-1e400",
    "1e-400",
    "-0",
    "0.1e1",
    "9007199254740993",
]
TYPES: list[Any] = [None, True, False, 0, -1, 1.5, "", "text", [], {}, [None], {"": None}]
_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


_POOLS = {
    "nul": [s for s in ODD_STRINGS if "\x00" in s],
    "surrogate": [s for s in ODD_STRINGS if _has_surrogate(s)],
    "odd-string": ODD_STRINGS,
}
_SENTINEL = "\u2063SPLICE{}\u2063"


@dataclass
class Mutant:
    """A body to sign and post, and what was done to it."""

    body: bytes
    done: list[str] = field(default_factory=list)
    carries_extra: bool = False

    @property
    def unstorable(self) -> bool:
        """Holds something Postgres cannot store as parsed (so it must be kept raw)."""
        return any(d in UNSTORABLE for d in self.done)


UNSTORABLE = {"nul", "surrogate", "number-overflow", "deep", "broken-bytes", "truncated"}


class _Splices:
    """Raw JSON text that json.dumps cannot produce (1e400, 5,000-deep nesting)."""

    def __init__(self) -> None:
        self.parts: dict[str, tuple[str, str]] = {}

    def add(self, raw: str, tag: str) -> str:
        key = _SENTINEL.format(len(self.parts))
        self.parts[key] = (raw, tag)
        return key

    def apply(self, text: str, ensure_ascii: bool) -> tuple[str, set[str]]:
        """``text`` with every splice still in it put in place, and their tags."""
        tags = set()
        for key, (raw, tag) in self.parts.items():
            quoted = json.dumps(key, ensure_ascii=ensure_ascii)
            if quoted in text:
                text = text.replace(quoted, raw)
                tags.add(tag)
        return text, tags


def mutate(
    rng: random.Random,
    base: Any | None = None,
    *,
    max_mutations: int = 4,
    extra_entry: dict[str, Any] | None = None,
) -> Mutant:
    """A mutated body from ``base`` (else a random corpus body); 1..max_mutations
    changes. ``extra_entry`` is put intact among the entries, when there is an
    entry list left to put it in (``Mutant.carries_extra``)."""
    doc = copy.deepcopy(base if base is not None else rng.choice(CORPUS))
    splices = _Splices()
    kinds = [_mutate_once(rng, doc, splices) for _ in range(rng.randint(1, max_mutations))]
    carries_extra = False
    if extra_entry is not None and isinstance(doc, dict) and isinstance(doc.get("entry"), list):
        doc["entry"].insert(rng.randint(0, len(doc["entry"])), extra_entry)
        carries_extra = True
    ensure_ascii = rng.random() < 0.5
    text, spliced = splices.apply(json.dumps(doc, ensure_ascii=ensure_ascii), ensure_ascii)
    done = sorted(set(kinds) - {"nul", "surrogate", "deep", "number-overflow"} | spliced)
    done += sorted(_odd_text_in(doc))
    # Lone surrogates go out as raw bytes, not escapes, when ensure_ascii is off.
    body = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.05:
        done.append("broken-bytes")
        at = rng.randrange(len(body) + 1)
        body = body[:at] + rng.choice([b"\xff", b"\xc3", b"\x00", b"\xed\xa0\x80"]) + body[at:]
        carries_extra = False
    elif rng.random() < 0.03:
        done.append("truncated")
        body = body[: rng.randrange(len(body))]
        carries_extra = False
    return Mutant(body, done, carries_extra)


def _odd_text_in(doc: Any) -> set[str]:
    """Which unstorable characters the document's strings (and keys) hold."""
    found: set[str] = set()
    stack = [doc]
    while stack:
        node = stack.pop()
        texts: list[str] = []
        if isinstance(node, dict):
            texts.extend(k for k in node if isinstance(k, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str):
            texts.append(node)
        for text in texts:
            if "\x00" in text:
                found.add("nul")
            if _has_surrogate(text):
                found.add("surrogate")
    return found


def _mutate_once(rng: random.Random, doc: Any, splices: _Splices) -> str:
    containers = list(_containers(doc))
    parent, key = rng.choice(containers)
    kind = rng.choice(
        ["drop", "retype", "odd-string", "odd-number", "deep", "repeat", "nul", "surrogate"]
    )
    if kind == "drop" and isinstance(parent, dict) and key in parent:
        del parent[key]
        return "drop"
    if kind == "repeat":
        target = parent[key] if _has(parent, key) else None
        if isinstance(target, list) and target:
            target.extend(copy.deepcopy(rng.choice(target)) for _ in range(rng.randint(1, 20)))
            return "repeat"
    if kind == "odd-string" or kind in ("nul", "surrogate"):
        value = rng.choice(_POOLS[kind])
        _set(parent, key, value, rng)
        if "\x00" in value:
            return "nul"
        return "surrogate" if _has_surrogate(value) else "odd-string"
    if kind == "odd-number":
        raw = rng.choice(ODD_NUMBERS)
        tag = "number-overflow" if raw.lstrip("-") == "1e400" else "odd-number"
        _set(parent, key, splices.add(raw, tag), rng)
        return tag
    if kind == "deep":
        depth = rng.choice([60, 200, 900, 5_000])
        opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
        _set(parent, key, splices.add(opener * depth + "1" + closer * depth, "deep"), rng)
        return "deep"
    _set(parent, key, copy.deepcopy(rng.choice(TYPES)), rng)
    return "retype"


def _containers(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) in ``doc``, including a new key in each dict."""
    found: list[tuple[Any, Any]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            found.extend((node, k) for k in node)
            found.append((node, f"k{len(node)}"))
            stack.extend(node.values())
        elif isinstance(node, list):
            found.extend((node, i) for i in range(len(node)))
            stack.extend(node)
    return found or [({}, "k")]


def _has(parent: Any, key: Any) -> bool:
    return key in parent if isinstance(parent, dict) else 0 <= key < len(parent)


def _set(parent: Any, key: Any, value: Any, rng: random.Random) -> None:
    if isinstance(parent, dict) and rng.random() < 0.2:
        key = rng.choice(ODD_STRINGS[:6])  # the odd string as a key, too
    parent[key] = value


def good_entry(phone: str, text: str = "real message") -> tuple[dict[str, Any], str]:
    """A valid entry carrying one inbound message from ``phone``, and its id."""
    wamid = f"wamid.GOOD{uuid.uuid4().hex}"
    return json.loads(payloads.inbound(phone, wamid, text))["entry"][0], wamid
