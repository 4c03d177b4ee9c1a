"""Reading a sandbox inbox: the texts a person got, and the knocks."""

from __future__ import annotations

from typing import Any


def texts(inbox: list[dict[str, Any]]) -> list[str]:
    """Free-form text bodies, in the order the phone received them."""
    return [m["text"] for m in inbox if m["type"] == "text"]


def knocks(inbox: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Template messages: name, language, parameters."""
    return [m["template"] for m in inbox if m["type"] == "template"]
