"""What Postgres text can hold: no NUL character, no lone surrogate (text is UTF-8).

Text from outside (a webhook body, a generator's answer, an error message
quoting either) may hold both; storing it as it is fails the statement.
"""

from __future__ import annotations

import re

LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"
NUL = "a NUL character"
SURROGATE = "a lone surrogate"
# An error a row keeps: enough to read what went wrong, never a whole answer's body.
ERROR_MAX_CHARACTERS = 1000


def unstorable(text: str) -> list[str]:
    """What ``text`` holds that Postgres text cannot (empty: it can be stored)."""
    problems = []
    if "\x00" in text:
        problems.append(NUL)
    if not text.isascii() and LONE_SURROGATE.search(text):
        problems.append(SURROGATE)
    return problems


def storable(text: str) -> str:
    """``text`` with every NUL and lone surrogate replaced by U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    if not text.isascii():
        text = LONE_SURROGATE.sub(REPLACEMENT, text)
    return text


def stored_error(text: str) -> str:
    """An error's text as a row keeps it: storable, and at most ``ERROR_MAX_CHARACTERS``."""
    return storable(text)[:ERROR_MAX_CHARACTERS]
