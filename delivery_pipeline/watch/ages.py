"""How ages read to an operator, in tables, alerts and the CLI.

Its own module so that the CLI and the service can format an age without
importing pandas (the backlog's frame), which costs a sweep process a quarter
of a second and tens of megabytes at start-up.
"""

from __future__ import annotations

import math


def format_age(seconds: float | None, *, precise: bool = False) -> str:
    """Ages as operators read them: 7300 → '2h' (a table cell) or, ``precise``,
    '2h 1m' (a sentence in an alert)."""
    if seconds is None or math.isnan(seconds):
        return "-"
    seconds = int(seconds)
    if precise:
        for unit, sub in ((86400, 3600), (3600, 60), (60, 1)):
            if seconds >= unit:
                big, small = divmod(seconds, unit)
                return f"{big}{_UNIT[unit]} {small // sub}{_UNIT[sub]}"
        return f"{seconds}s"
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


_UNIT = {86400: "d", 3600: "h", 60: "m", 1: "s"}
