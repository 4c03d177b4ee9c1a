"""Reading numbers from the environment, with a message that names the variable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

N = TypeVar("N", int, float)


def env_number(env: Mapping[str, str], name: str, default: N, kind: type[N] = float) -> N:
    """``env[name]`` as ``kind``; ``default`` when unset or empty."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return kind(raw)
    except ValueError as exc:
        noun = "an integer" if kind is int else "a number"
        raise ValueError(f"{name} must be {noun}, got {raw!r}") from exc
