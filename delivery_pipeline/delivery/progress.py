"""What a sweep does, as it happens: the events an observer hears.

The engine reports everything it does as a ``SweepEvent``; ``SweepResult`` is the
sum of them (``SweepResult.add``), and a ``SweepObserver`` (any callable
taking an event) hears each one as it happens. No UI here: the command line
draws progress from these events, a Dagster run could log them, a test can
count them. An observer is called on the sweep's event loop, between
awaits, so it must be quick and must not block.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass


class Event(enum.StrEnum):
    CLAIMED = "claimed"  # count: documents claimed in one batch
    CHUNK_SENT = "chunk_sent"
    KNOCK_SENT = "knock_sent"
    FILE_SENT = "file_sent"  # a document as one file (detail: its way, file or file_in_window)
    SEND_FAILED = "send_failed"  # detail: the error's class (Throttled, TransientError, …)
    # A document's outcome in this sweep: exactly one of these per claim.
    DELIVERED = "delivered"
    AWAITING_REPLY = "awaiting_reply"
    DUE_AGAIN = "due_again"  # the person wrote meanwhile: it is due again now
    RETRY_SCHEDULED = "retry_scheduled"  # detail: why; after_seconds: when
    ABANDONED = "abandoned"  # detail: the abandon reason
    LOST_CLAIM = "lost_claim"  # another sender took it over
    RELEASED = "released"  # given back untouched (the sweep is stopping)
    HELD_QUIET = "held_quiet"  # the person's quiet hours: due when they end
    WAITED_TURN = "waited_turn"  # given back: another of the person's documents is being sent
    # Not about one document.
    ACKNOWLEDGED = "acknowledged"  # the answer to a press of Later or Stop went
    UNKNOWN_OUTCOME = "unknown_outcome"  # a send whose answer never came
    STOPPED = "stopped"  # detail: why the whole sweep stopped


# The events that end one claimed document's part in the sweep.
FINISHED = frozenset(
    {
        Event.DELIVERED,
        Event.AWAITING_REPLY,
        Event.DUE_AGAIN,
        Event.RETRY_SCHEDULED,
        Event.ABANDONED,
        Event.LOST_CLAIM,
        Event.RELEASED,
        Event.WAITED_TURN,
        Event.HELD_QUIET,
    }
)


@dataclass(frozen=True)
class SweepEvent:
    kind: Event
    document_id: int | None = None
    count: int = 1
    detail: str | None = None
    after_seconds: float | None = None


SweepObserver = Callable[[SweepEvent], None]
