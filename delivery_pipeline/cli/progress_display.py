"""A sweep's live progress for the operator, drawn from the engine's events.

``SweepTally`` is the engine's observer (``delivery.progress``): it counts
claims, finished documents, messages and send errors by class as they
happen. ``shown`` draws it on stderr (stdout keeps the result): a live line
with rich on a terminal, a plain line every ``LINE_SECONDS`` when stderr is
not a terminal (logs, CI), a JSON object per line with ``--json``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TextIO

from delivery_pipeline.delivery.progress import FINISHED, Event, SweepEvent

Mode = Literal["live", "lines", "json"]

# Messages per second are counted over the last few seconds: the pace now,
# not the average since the start (which a slow first batch would drag).
RATE_WINDOW_SECONDS = 5.0
LINE_SECONDS = 2.0


class SweepTally:
    """The sweep's events, counted; the engine writes, a display thread reads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._started = clock()
        self._claimed = 0
        self._messages = 0
        self._finished: Counter[Event] = Counter()
        self._errors: Counter[str] = Counter()
        self._recent_sends: deque[float] = deque()

    def __call__(self, event: SweepEvent) -> None:
        now = self._clock()
        with self._lock:
            if event.kind == Event.CLAIMED:
                self._claimed += event.count
            elif event.kind in FINISHED:
                self._finished[event.kind] += 1
            elif event.kind in (Event.CHUNK_SENT, Event.KNOCK_SENT, Event.FILE_SENT):
                self._messages += 1
                self._recent_sends.append(now)
            elif event.kind == Event.SEND_FAILED:
                self._errors[event.detail or "?"] += 1

    def snapshot(self) -> dict[str, Any]:
        now = self._clock()
        with self._lock:
            while self._recent_sends and self._recent_sends[0] < now - RATE_WINDOW_SECONDS:
                self._recent_sends.popleft()
            elapsed = now - self._started
            window = min(RATE_WINDOW_SECONDS, elapsed)
            return {
                "elapsed_seconds": round(elapsed, 1),
                "claimed": self._claimed,
                "done": sum(self._finished.values()),
                "delivered": self._finished[Event.DELIVERED],
                "awaiting_reply": self._finished[Event.AWAITING_REPLY],
                "retry_scheduled": self._finished[Event.RETRY_SCHEDULED],
                "abandoned": self._finished[Event.ABANDONED],
                "messages_sent": self._messages,
                "messages_per_second": round(len(self._recent_sends) / window, 1) if window else 0,
                "errors": dict(self._errors.most_common()),
            }


def describe(snapshot: dict[str, Any]) -> str:
    """One line: ``claimed 120  done 80 (delivered 75, …)  160 messages  38.2/s  errors: …``."""
    outcomes = ", ".join(
        f"{name.replace('_', ' ')} {snapshot[name]}"
        for name in ("delivered", "awaiting_reply", "retry_scheduled", "abandoned")
        if snapshot[name]
    )
    text = f"claimed {snapshot['claimed']}  done {snapshot['done']}"
    text += f" ({outcomes})" if outcomes else ""
    text += f"  {snapshot['messages_sent']} messages  {snapshot['messages_per_second']}/s"
    if snapshot["errors"]:
        text += "  errors: " + ", ".join(f"{k} {v}" for k, v in snapshot["errors"].items())
    return text


@contextmanager
def shown(mode: Mode, stream: TextIO) -> Iterator[SweepTally]:
    """Count the sweep run inside the block and show it on ``stream`` meanwhile."""
    tally = SweepTally()
    if mode == "live":
        # Imported here: only a terminal needs it, and every sweep process a
        # fleet starts (lines or JSON) would pay for it at start-up.
        from rich.console import Console
        from rich.live import Live
        from rich.spinner import Spinner

        spinner = Spinner("dots")

        def render() -> Spinner:
            spinner.update(text=describe(tally.snapshot()))
            return spinner

        console = Console(file=stream)
        with Live(get_renderable=render, console=console, refresh_per_second=4):
            yield tally
        return
    stop = threading.Event()
    thread = threading.Thread(target=_print_lines, args=(tally, mode, stream, stop), daemon=True)
    thread.start()
    try:
        yield tally
    finally:
        stop.set()
        thread.join()


def _print_lines(tally: SweepTally, mode: Mode, stream: TextIO, stop: threading.Event) -> None:
    """A line every LINE_SECONDS while anything changed (a quiet sweep prints nothing)."""
    last: dict[str, Any] = {}
    while not stop.wait(LINE_SECONDS):
        snapshot = tally.snapshot()
        counts = {k: v for k, v in snapshot.items() if k not in ("elapsed_seconds",)}
        if counts == last:
            continue
        last = counts
        if mode == "json":
            line = json.dumps({"progress": snapshot})
        else:
            line = f"sweep {snapshot['elapsed_seconds']:.0f}s: {describe(snapshot)}"
        print(line, file=stream, flush=True)
