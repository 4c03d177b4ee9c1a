"""What one sweep did, and the state it keeps while it runs."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from delivery_pipeline.model import AbandonReason


@dataclass(frozen=True)
class Retry:
    """A document given back to the queue, when it is due again and why."""

    document_id: int
    after_seconds: float
    reason: str


@dataclass
class SweepResult:
    """What one sweep did; printed by the CLI, shown as run metadata."""

    claimed: int = 0
    delivered: int = 0
    chunks_sent: int = 0
    knocks_sent: int = 0
    awaiting_reply: int = 0
    retry_scheduled: int = 0
    unknown_outcomes: int = 0
    lost_claims: int = 0
    # Claimed, then given back: another of the person's documents was being sent.
    waited_turn: int = 0
    due_again: int = 0
    abandoned: Counter[AbandonReason] = field(default_factory=Counter)
    stopped_by: str | None = None
    retries: list[Retry] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["abandoned"] = {str(reason): n for reason, n in self.abandoned.items()}
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
                elif key == "abandoned":
                    for reason, n in value.items():
                        total["abandoned"][reason] = total["abandoned"].get(reason, 0) + n
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

    def scheduled_retry(self, document_id: int, delay: float, reason: str) -> None:
        self.result.retry_scheduled += 1
        self.result.retries.append(Retry(document_id, round(delay, 3), reason))
        if delay <= 0:
            self.result.due_again += 1
        elif delay <= SHORT_RETRY_SECONDS:
            self.short_retry_until = max(self.short_retry_until, time.monotonic() + delay)
