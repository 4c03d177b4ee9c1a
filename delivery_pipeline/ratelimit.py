"""A process-wide pacer: at most ``rate`` sends per second, evenly spaced.

Evenly spaced rather than bursty, because the platform counts messages per
second and a burst at the top of each second is what gets throttled. Sends
are paced slightly under the limit (``HEADROOM``): the platform counts
arrivals on its own clock, and network jitter turns sends spaced exactly at
the limit into the odd window with one too many (measured: 40 refusals per
4,500 sends at exactly 80/s, none at 97 %). A throttling answer (130429)
pushes every waiting sender back at once.
"""

from __future__ import annotations

import asyncio
import time

HEADROOM = 0.97


class RateLimiter:
    def __init__(self, rate: float, headroom: float = HEADROOM) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self._interval = 1.0 / (rate * headroom)
        self._next = 0.0
        self._lock = asyncio.Lock()

    @property
    def rate(self) -> float:
        """The pace actually kept, in sends per second."""
        return 1.0 / self._interval

    async def acquire(self) -> None:
        """Wait for the next send slot."""
        async with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self._interval
        delay = slot - now
        if delay > 0:
            await asyncio.sleep(delay)

    def back_off(self, seconds: float) -> None:
        """The platform said slow down: no slot for anybody for ``seconds``."""
        self._next = max(self._next, time.monotonic() + seconds)
