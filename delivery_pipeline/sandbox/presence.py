"""Phones that are off: messages held, delivered when the phone is back, dropped without
a word when their time to live passes first.

``POST /_sandbox/people/{number}/presence {"online": false}``: the phone is off
(switched off, no signal). A message accepted for it gets its ``sent`` status
and is held; ``{"online": true}`` delivers every held message whose time to live
has not passed, in the order they were sent (the inbox, then ``delivered``, and
``read`` as ``read_rate`` says). One whose time to live passed first is dropped:
no webhook at all, as on the platform, where "undelivered" ends so. The time to
live is the template's ``message_send_ttl_seconds`` (set at creation, or by the
template's control), else the platform's default, 30 days. What is held and
what was dropped shows in ``GET /_sandbox/people/{number}`` and in the stats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from delivery_pipeline.sandbox.memory import Person, iso
from delivery_pipeline.sandbox.validation import Outgoing

DEFAULT_TTL_SECONDS = 30 * 24 * 3600


@dataclass
class Held:
    """A message accepted for a phone that is off."""

    message: Outgoing
    wamid: str
    record: dict[str, Any]  # its inbox record, as it will arrive
    price: dict[str, Any]
    conversation: str
    expires_at: float

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.wamid,
            "type": self.message.type,
            "time": self.record["time"],
            "expires_at": iso(self.expires_at),
            "callback_data": self.message.callback_data,
        }


def settle(person: Person, now: float) -> int:
    """Drop the held messages of ``person`` whose time to live has passed (silently:
    they only move to ``person.dropped``); returns how many."""
    expired = [h for h in person.held if h.expires_at <= now]
    for held in expired:
        person.held.remove(held)
        person.dropped.append({**held.describe(), "dropped_at": iso(held.expires_at)})
    return len(expired)


def release(person: Person, now: float) -> list[Held]:
    """The phone is back: what it receives now, in order (the expired dropped first)."""
    settle(person, now)
    arriving, person.held = person.held, []
    return arriving
