"""The one retry delay: exponential in the attempts so far, capped, with jitter.

Delivery and generation both retry with it; the jitter (±25 %) keeps many
documents that failed together from coming back due in the same second.
"""

from __future__ import annotations

import random


def backoff_seconds(attempts: int, base: float, cap: float) -> float:
    """The delay before the next try, after ``attempts`` failed tries (1 = the first)."""
    exponential: float = base * 2 ** max(attempts - 1, 0)
    return min(exponential, cap) * random.uniform(0.75, 1.25)
