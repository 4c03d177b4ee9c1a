"""The platform's two rate limits: business-number throughput and per-recipient pair rate.

Both are O(1) amortised per send so the sandbox itself never becomes the
bottleneck it is imitating.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


class SlidingWindowCounter:
    """Events in the last ``span`` seconds (a deque of timestamps, oldest first)."""

    def __init__(self, span: float = 1.0) -> None:
        self.span = span
        self._times: deque[float] = deque()

    def count(self, now: float) -> int:
        horizon = now - self.span
        times = self._times
        while times and times[0] <= horizon:
            times.popleft()
        return len(times)

    def add(self, now: float) -> None:
        self._times.append(now)

    def clear(self) -> None:
        self._times.clear()


@dataclass
class _Bucket:
    tokens: float
    updated: float


class PairRateLimiter:
    """A token bucket per recipient: ``burst`` messages at once, then one per ``refill_seconds``."""

    def __init__(self) -> None:
        self._buckets: dict[str, _Bucket] = {}

    def _refilled(self, recipient: str, now: float, burst: int, refill_seconds: float) -> _Bucket:
        bucket = self._buckets.get(recipient)
        if bucket is None:
            bucket = self._buckets[recipient] = _Bucket(float(burst), now)
        else:
            gained = (now - bucket.updated) / refill_seconds
            bucket.tokens = min(float(burst), bucket.tokens + gained)
            bucket.updated = now
        return bucket

    def allows(self, recipient: str, now: float, burst: int, refill_seconds: float) -> bool:
        return self._refilled(recipient, now, burst, refill_seconds).tokens >= 1.0

    def take(self, recipient: str, now: float, burst: int, refill_seconds: float) -> None:
        self._refilled(recipient, now, burst, refill_seconds).tokens -= 1.0

    def clear(self) -> None:
        self._buckets.clear()
