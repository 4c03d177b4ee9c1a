"""The platform's two rate limits: business-number throughput and per-recipient pair rate.

Both are O(1) amortised per send so the sandbox itself never becomes the
bottleneck it is imitating.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from dataclasses import dataclass

THROUGHPUT_DETAILS = "Cloud API message throughput has been reached."
PAIR_RATE_DETAILS = (
    "Message failed to send because there were too many messages sent from this phone "
    "number to the same phone number in a short period of time."
)


class SlidingWindowCounter:
    """Events in the ``span`` seconds up to a moment, each at the moment it happened.

    A message is counted at its arrival, not when the sandbox decides on it after
    its simulated latency: the platform counts what reaches it, and the sandbox's
    own lateness (its timers firing late on a busy event loop, then several at
    once) must not bunch up evenly spaced arrivals into a burst the sender never
    sent. So an event may be added after later ones (a latency spike held it
    longer): times are kept sorted, and ``forget_before`` drops what no window
    can reach any more.
    """

    def __init__(self, span: float = 1.0) -> None:
        self.span = span
        self._times: list[float] = []

    def count(self, at: float) -> int:
        """Events in ``(at - span, at]``."""
        times = self._times
        return bisect_right(times, at) - bisect_right(times, at - self.span)

    def add(self, at: float) -> None:
        times = self._times
        if not times or at >= times[-1]:
            times.append(at)
        else:
            insort(times, at)

    def forget_before(self, horizon: float) -> None:
        times = self._times
        if times and times[0] <= horizon:
            del times[: bisect_right(times, horizon)]

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
