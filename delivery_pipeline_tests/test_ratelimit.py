"""The pacer keeps its promise on actual send times (a clock, not a timing test:
what is asserted is an invariant of the recorded times, not a duration)."""

from __future__ import annotations

import asyncio
import time

import pytest

from delivery_pipeline.delivery.pacer import HEADROOM, RateLimiter

pytestmark = pytest.mark.engine


def test_no_sliding_second_holds_more_than_the_paced_rate():
    limiter = RateLimiter(200)
    stamps: list[float] = []

    async def sender(stall: bool) -> None:
        for _ in range(30):
            await limiter.acquire()
            stamps.append(limiter.last_sent)
            if stall:
                time.sleep(0.03)  # noqa: ASYNC251 - block the loop on purpose

    async def main() -> None:
        await asyncio.gather(*(sender(i == 0) for i in range(10)))

    asyncio.run(main())
    stamps.sort()
    cap = int(200 * HEADROOM)
    busiest = max(sum(1 for t in stamps[i:] if t - s < 1.0) for i, s in enumerate(stamps))
    assert len(stamps) == 300 and busiest <= cap


def test_back_off_delays_everybody():
    limiter = RateLimiter(1000)

    async def main() -> float:
        await limiter.acquire()
        limiter.back_off(0.2)
        start = time.monotonic()
        await limiter.acquire()
        return time.monotonic() - start

    assert asyncio.run(main()) >= 0.19
