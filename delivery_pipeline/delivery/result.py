"""What one sweep did, and the state it keeps while it runs."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from delivery_pipeline.delivery.progress import Event, SweepEvent, SweepObserver
from delivery_pipeline.model import AbandonReason

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Retry:
    """A document given back to the queue, when it is due again and why."""

    document_id: int
    after_seconds: float
    reason: str


@dataclass
class SweepResult:
    """What one sweep did (the sum of its events); printed by the CLI, shown as
    run metadata."""

    claimed: int = 0
    delivered: int = 0
    chunks_sent: int = 0
    knocks_sent: int = 0
    # Documents sent as one file: on a document template, or as a document message.
    files_sent: int = 0
    awaiting_reply: int = 0
    retry_scheduled: int = 0
    unknown_outcomes: int = 0
    lost_claims: int = 0
    released: int = 0
    # Claimed, then given back: another of the person's documents was being sent.
    waited_turn: int = 0
    # Held until the person's quiet hours end.
    held_quiet: int = 0
    due_again: int = 0
    # Answers to presses of Later and Stop sent (delivery/acknowledgement.py).
    acknowledged: int = 0
    abandoned: Counter[AbandonReason] = field(default_factory=Counter)
    send_errors: Counter[str] = field(default_factory=Counter)
    stopped_by: str | None = None
    retries: list[Retry] = field(default_factory=list)

    def add(self, event: SweepEvent) -> None:
        """Count one event."""
        match event.kind:
            case Event.CLAIMED:
                self.claimed += event.count
            case Event.CHUNK_SENT:
                self.chunks_sent += event.count
            case Event.KNOCK_SENT:
                self.knocks_sent += event.count
            case Event.FILE_SENT:
                self.files_sent += event.count
            case Event.SEND_FAILED:
                self.send_errors[event.detail or "?"] += event.count
            case Event.DELIVERED:
                self.delivered += event.count
            case Event.AWAITING_REPLY:
                self.awaiting_reply += event.count
            case Event.DUE_AGAIN:
                self.due_again += event.count
            case Event.RETRY_SCHEDULED:
                after = event.after_seconds or 0.0
                self.retry_scheduled += 1
                self.retries.append(
                    Retry(event.document_id or 0, round(after, 3), event.detail or "")
                )
                if after <= 0:
                    self.due_again += 1
            case Event.ABANDONED:
                self.abandoned[AbandonReason(str(event.detail))] += event.count
            case Event.LOST_CLAIM:
                self.lost_claims += event.count
            case Event.RELEASED:
                self.released += event.count
            case Event.WAITED_TURN:
                self.waited_turn += event.count
            case Event.HELD_QUIET:
                self.held_quiet += event.count
            case Event.UNKNOWN_OUTCOME:
                self.unknown_outcomes += event.count
            case Event.ACKNOWLEDGED:
                self.acknowledged += event.count
            case Event.STOPPED:
                self.stopped_by = self.stopped_by or event.detail

    def as_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["abandoned"] = {str(reason): n for reason, n in self.abandoned.items()}
        values["send_errors"] = dict(self.send_errors)
        return values

    @staticmethod
    def total(results: list[dict[str, Any]]) -> dict[str, Any]:
        """Several sweeps' ``as_dict()`` added up (parallel sweepers of one run)."""
        total = SweepResult().as_dict()
        stops = [r["stopped_by"] for r in results if r.get("stopped_by")]
        for result in results:
            for key, value in result.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    total[key] += value
                elif key in ("abandoned", "send_errors"):
                    for name, n in value.items():
                        total[key][name] = total[key].get(name, 0) + n
                elif key == "retries":
                    total["retries"].extend(value)
        total["stopped_by"] = "; ".join(stops) or None
        total["sweepers"] = len(results)
        return total


# Retries due within this many seconds are waited for by the sweep that
# scheduled them, rather than left to the next heartbeat.
SHORT_RETRY_SECONDS = 10.0


@dataclass
class SweepState:
    """One sweep's own state; never shared between sweeps, even in one process."""

    result: SweepResult = field(default_factory=SweepResult)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    # Whether sending may be paused (read at the sweep's start, set when it
    # pauses): only then does a success try to lift the pause.
    maybe_paused: bool = True
    short_retry_until: float = 0.0
    observer: SweepObserver | None = None

    def note(
        self,
        kind: Event,
        document_id: int | None = None,
        *,
        count: int = 1,
        detail: str | None = None,
        after_seconds: float | None = None,
    ) -> None:
        """Something happened: count it, and tell the observer."""
        event = SweepEvent(kind, document_id, count, detail, after_seconds)
        self.result.add(event)
        if kind == Event.RETRY_SCHEDULED and 0 < (after_seconds or 0) <= SHORT_RETRY_SECONDS:
            self.short_retry_until = max(
                self.short_retry_until, time.monotonic() + (after_seconds or 0)
            )
        if self.observer is not None:
            try:
                self.observer(event)
            except Exception:
                # Watching a sweep must never stop it.
                log.exception("the sweep's observer failed; the sweep goes on without it")
                self.observer = None
