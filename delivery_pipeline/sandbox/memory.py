"""The sandbox's memory: people (inbox and window), counters, failures and ops alerts.

Everything runs on one event loop and no method awaits, so each call is
atomic with respect to other requests: a send checks the limits and the
window and records the message without anything interleaving.
"""

from __future__ import annotations

import hashlib
import itertools
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from delivery_pipeline.model import country_of
from delivery_pipeline.sandbox.limits import PairRateLimiter, SlidingWindowCounter

# Unique across resets and restarts: the webhook service deduplicates by wamid,
# so a restarted sandbox must never reuse an id it handed out before.
_PROCESS_NONCE = secrets.token_hex(4)
_SEQUENCE = itertools.count(1)


def new_wamid() -> str:
    return f"wamid.SBX{_PROCESS_NONCE}{next(_SEQUENCE):010d}"


def iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat()


def user_id_for(number: str) -> str:
    """The business-scoped user id the platform gives the person at ``number``:
    stable for the number, a new one when the number changes (as on Meta)."""
    digits = int.from_bytes(hashlib.sha256(number.encode()).digest()[:8], "big")
    return f"{country_of(number, None) or 'US'}.{digits:020d}"


@dataclass
class Person:
    """One phone on the other side: what it received, what it wrote, when it last wrote.

    ``number`` is the person's address: an E.164 number, or for a username
    user (who shares no number) their business-scoped user id alone."""

    number: str
    inbox: list[dict[str, Any]] = field(default_factory=list)
    written: list[dict[str, Any]] = field(default_factory=list)
    wrote_to: dict[str, float] = field(default_factory=dict)
    """When they last wrote to each business number: the window is the pair's."""
    unreachable: str | None = None
    """None, or how sends to this phone fail with 131026: "sync" or "async"."""

    username: str | None = None
    online: bool = True
    """False: the phone is off; what is sent to it is held (sandbox/presence.py)."""
    held: list[Any] = field(default_factory=list)
    """presence.Held messages, in the order they were sent."""
    dropped: list[dict[str, Any]] = field(default_factory=list)
    """Held messages whose time to live passed: dropped without a webhook."""
    marks: list[dict[str, Any]] = field(default_factory=list)
    """Read marks (with or without a typing indicator) of their messages (sandbox/reads.py)."""

    @property
    def phone(self) -> str | None:
        return self.number if self.number.startswith("+") else None

    @property
    def user_id(self) -> str:
        return self.number if self.phone is None else user_id_for(self.number)

    def window_open(self, now: float, window_seconds: int, business_number: str) -> bool:
        """May ``business_number`` write to them freely (they wrote to it in the window)?"""
        last = self.wrote_to.get(business_number)
        return last is not None and now - last < window_seconds

    def describe(self, now: float, window_seconds: int, default_number: str) -> dict[str, Any]:
        last = self.wrote_to.get(default_number)
        return {
            "number": self.number,
            "phone": self.phone,
            "user_id": self.user_id,
            "username": self.username,
            # the default business number's window, as with one number; every number's below
            "window_open": self.window_open(now, window_seconds, default_number),
            "last_inbound_at": None if last is None else iso(last),
            "windows": {
                number: {"open": now - at < window_seconds, "last_inbound_at": iso(at)}
                for number, at in sorted(self.wrote_to.items())
            },
            "received": len(self.inbox),
            "unreachable": self.unreachable,
            "written": self.written,
            "online": self.online,
            "held": [held.describe() for held in self.held],
            "dropped": self.dropped,
            "read_marks": self.marks,
        }


@dataclass
class ForcedRefusal:
    """A code the sandbox answers on demand: on the send call (``sync``) or in a
    ``failed`` status after accepting (``async``), to one number or everybody,
    to one message type or all, from one business number or any, ``remaining``
    times or until cleared (None)."""

    code: int
    mode: str = "sync"
    to: str | None = None
    message_type: str | None = None
    remaining: int | None = None
    used: int = 0
    sender: str | None = None  # the business phone number id it refuses sends from

    def matches(self, to: str, message_type: str, sender: str = "") -> bool:
        return (
            (self.remaining is None or self.remaining > 0)
            and (self.to is None or self.to == to)
            and (self.message_type is None or self.message_type == message_type)
            and (self.sender is None or self.sender == sender)
        )

    def take(self) -> None:
        self.used += 1
        if self.remaining is not None:
            self.remaining -= 1

    def describe(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "mode": self.mode,
            "to": self.to,
            "type": self.message_type,
            "remaining": self.remaining,
            "phone_number_id": self.sender,
            "used": self.used,
        }


@dataclass
class Stats:
    """Counters behind ``GET /_sandbox/stats``."""

    accepted: int = 0
    accepted_by_number: Counter[str] = field(default_factory=Counter)
    rejected: Counter[int] = field(default_factory=Counter)
    refused_async: int = 0
    sends_refused: int = 0  # message sends answered with an error (any code, 190 included)
    injected_5xx: int = 0
    dropped: int = 0
    stalled: int = 0
    throttled: int = 0
    paced: int = 0
    held: int = 0  # accepted for a phone that was off
    dropped_ttl: int = 0  # held past their time to live: dropped, no webhook
    inbound: int = 0
    webhooks_posted: int = 0
    webhooks_failed: int = 0
    webhooks_retried: int = 0
    webhook_attempt_errors: int = 0
    webhooks_posted_by_kind: Counter[str] = field(default_factory=Counter)
    # what the platform would bill: accepted messages that reached the person,
    # by pricing category, and the billable ones among them
    messages_by_category: Counter[str] = field(default_factory=Counter)
    billable_by_category: Counter[str] = field(default_factory=Counter)


class SandboxState:
    """All mutable state; ``reset`` forgets it all."""

    def __init__(self) -> None:
        self.people: dict[str, Person] = {}
        self.by_user_id: dict[str, str] = {}
        self.stats = Stats()
        self.failures: list[dict[str, Any]] = []
        self.ops_alerts: list[Any] = []
        self.refusals: list[ForcedRefusal] = []
        self.accepted_recently = SlidingWindowCounter(1.0)
        # Per business number: what its throughput limit counts.
        self.accepted_by_number: dict[str, SlidingWindowCounter] = {}
        self.pair_limiter = PairRateLimiter()
        self.started_at = time.monotonic()
        # Orders every inbox record and read mark of the run (``seq``).
        self._sequence = itertools.count(1)

    def next_seq(self) -> int:
        return next(self._sequence)

    def number_window(self, phone_number_id: str) -> SlidingWindowCounter:
        window = self.accepted_by_number.get(phone_number_id)
        if window is None:
            window = self.accepted_by_number[phone_number_id] = SlidingWindowCounter(1.0)
        return window

    def person(self, number: str) -> Person:
        """The person at an address: a number, a username user's BSUID, or the BSUID
        of a person known by number (a message may be addressed either way)."""
        person = self.people.get(number) or self.people.get(self.by_user_id.get(number, ""))
        if person is None:
            person = self.people[number] = Person(number)
            if person.phone is not None:
                self.by_user_id[person.user_id] = number
        return person

    def change_number(self, person: Person, new_number: str) -> Person:
        """The person now has ``new_number`` (and so a new BSUID); what they received
        and wrote moves with them."""
        self.people.pop(person.number, None)
        self.by_user_id.pop(person.user_id, None)
        person.number = new_number
        self.people[new_number] = person
        self.by_user_id[person.user_id] = new_number
        return person

    def forced_refusal(self, to: str, message_type: str, sender: str = "") -> ForcedRefusal | None:
        """The first forced refusal that applies to this send, taken (counted)."""
        for refusal in self.refusals:
            if refusal.matches(to, message_type, sender):
                refusal.take()
                return refusal
        return None

    def reset(self) -> None:
        self.people.clear()
        self.by_user_id.clear()
        self.stats = Stats()
        self.failures.clear()
        self.ops_alerts.clear()
        self.refusals.clear()
        self.accepted_recently.clear()
        self.accepted_by_number.clear()
        self.pair_limiter.clear()

    def stats_view(self, now: float, webhook_queue: int) -> dict[str, Any]:
        s = self.stats
        return {
            "accepted": s.accepted,
            "rejected": sum(s.rejected.values()),
            "rejected_by_code": {str(code): n for code, n in sorted(s.rejected.items())},
            "refused_async": s.refused_async,
            "sends_refused": s.sends_refused,
            "injected_5xx": s.injected_5xx,
            "dropped": s.dropped,
            "stalled": s.stalled,
            "throttled": s.throttled,
            "paced": s.paced,
            "held": s.held,
            "dropped_ttl": s.dropped_ttl,
            "inbound": s.inbound,
            "people": len(self.people),
            "messages_per_second": self.accepted_recently.count(now),
            "accepted_by_number": dict(s.accepted_by_number),
            "webhooks_posted": s.webhooks_posted,
            "webhooks_failed": s.webhooks_failed,
            "webhooks_retried": s.webhooks_retried,
            "webhook_attempt_errors": s.webhook_attempt_errors,
            "webhooks_posted_by_kind": dict(s.webhooks_posted_by_kind),
            "messages_by_category": dict(s.messages_by_category),
            "billable_by_category": dict(s.billable_by_category),
            "webhooks_pending": webhook_queue,
            "uptime_seconds": round(now - self.started_at, 3),
        }
