"""Log lines an operator can read during a flood: a few per kind, then a count.

Anyone holding one signed body can replay it as fast as we answer. A line
per body is right on a normal day and fills the disk on that day, so each
kind of line gets ``burst`` lines per ``window`` seconds; the rest are
counted, and the next line of that kind says how many were left out.

Per process, on purpose: this bounds log *volume*, which is per process too
(each replica writes its own log), so N replicas write at most N times the
budget. Nothing here decides behaviour, so nothing needs sharing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class _Budget:
    window_start: float
    used: int = 0
    suppressed: int = 0


@dataclass
class RateLimitedLog:
    logger: logging.Logger
    burst: int = 10
    window: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _budgets: dict[str, _Budget] = field(default_factory=dict)

    def log(self, level: int, kind: str, message: str, *args: object) -> bool:
        """Log ``message % args`` unless ``kind`` used its budget; True if written."""
        now = self.clock()
        budget = self._budgets.get(kind)
        if budget is None or now - budget.window_start >= self.window:
            suppressed = budget.suppressed if budget else 0
            budget = self._budgets[kind] = _Budget(now)
            if suppressed:
                message += f" (and {suppressed} more like it in the last {self.window:.0f} s)"
        if budget.used >= self.burst:
            budget.suppressed += 1
            return False
        budget.used += 1
        self.logger.log(level, message, *args)
        return True
