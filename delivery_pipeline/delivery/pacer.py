"""Pacing sends: one limit per business number, shared by every sender.

The platform counts a number's messages per second whoever sends them, and a
fleet never knows how many of its senders overlap at a given second (service
replicas, Dagster runs, an operator's sweep). So the limit lives in Postgres:
``SharedPacer`` takes send slots from the number's one timeline
(``send_pacer``, sql/007), a few consecutive slots per round trip, spaced for
the limit less a headroom, on the database's clock, and sends on each slot
by its own monotonic clock (mapped through the fastest recent answer,
``DatabaseClock``, so that slow answers do not crowd slots together).
However many senders there are, slots never overlap, so their sum never
exceeds the limit; a sender that dies loses at most the few slots it held
(at most ``BATCH_SECONDS`` of the timeline); a throttling answer pushes the
timeline forward for everybody.

Two local rules keep the count under the limit on the platform's clock, not
only on the timeline: a slot is never used early, and a slot more than
``tolerance`` late is given up (a late send would crowd the next second;
with slots spaced for ``limit × HEADROOM``, up to ``1/HEADROOM − 1`` seconds
of lateness still fits in the limit, and the tolerance keeps a margin of
that for the way to the platform and its own jitter). Lateness is judged
twice: when the sender wakes for its slot, and again as the request's bytes
are about to be written (``acquire`` returns that second check, for the
client to await there), because between the two the sender builds the
request and its event loop runs other work, and a process the machine
preempts in between would otherwise send a slot it woke up for on time tens
of milliseconds late.

``RateLimiter`` is an optional cap for one process (``DELIVERY_RATE_LIMIT``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import psycopg

from delivery_pipeline.store.db import session_kwargs, transaction_pooled
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.whatsapp.client import Ready

HEADROOM = 0.97
# A sender holds at most this much of the timeline ahead of now: what it loses
# if it dies, and how far a newcomer may have to wait behind each sender.
BATCH_SECONDS = 0.1
# A sender whose slots are all handed out reserves again when this many of them
# are still ahead: soon enough that its next send need not wait for the round
# trip, late enough that a reservation brings several slots.
LOW_WATER = 1
# How late a slot may still be used, as a share of what the headroom allows
# (1/HEADROOM − 1 seconds): the rest is left for the receiver's own jitter,
# which our lateness adds to. Chosen with the fleet benchmark (four sweeps and
# the service at 80 msg/s, docs/benchmarks.md): a larger share lets throttles
# through on a loaded machine, a smaller one forfeits slots and the rate.
LATE_SHARE = 0.4
WINDOW_SECONDS = 1.0
# How long an answer's reading of the database's clock is trusted to map slots
# (DatabaseClock): long enough to have a fast answer among a busy fleet's many,
# short enough that two clocks drifting apart (tens of ppm) move it < 1 ms.
CLOCK_SECONDS = 5.0
# uvloop's timers count whole milliseconds from a clock read when the loop's
# turn began, so a timer can fire up to about a millisecond before its time.
# Sleeping again for what is left (a fraction of a millisecond: a timer of
# zero) would take a sender through tens of timers and loop turns a slot
# (docs/benchmarks.md, "Pacer wait"). A wait aims this far past its moment
# instead: never early, one wake nearly always, and late by about as much for
# every slot, which keeps their spacing and spends a small part of the tolerance.
TIMER_SLACK = 0.001


async def until(moment: float) -> int:
    """Sleep until the monotonic clock reads ``moment`` or later; returns the
    timers it took (one, nearly always)."""
    timers = 0
    while (now := time.monotonic()) < moment:  # noqa: ASYNC110 - a clock, not an event
        timers += 1
        await asyncio.sleep(moment - now + TIMER_SLACK)
    return timers


class DatabaseClock:
    """The database's clock on this process's monotonic one, as tight as the
    fastest answer of the last ``CLOCK_SECONDS`` makes it.

    An answer carries the database's clock as read somewhere between our asking
    and our hearing back. Mapping it as read when heard makes a slot late,
    never early, by up to the answer's trip back: under load anything from a
    fraction of a millisecond to tens, different for every answer. Slots
    mapped through different answers then come closer together than the
    timeline spaced them (a fleet measured 81 slots in a sliding second of a
    timeline spaced for 77.6). The fastest recent answer bounds the offset
    most tightly, still from the late side, and maps every slot through the
    same offset, so a sender's slots keep the timeline's spacing; a slot heard
    of only after it was due shows as late, and ``tolerance`` decides.
    """

    def __init__(self, seconds: float = CLOCK_SECONDS) -> None:
        self.seconds = seconds
        # (heard at, offset), offsets decreasing: the first is the window's largest.
        self._offsets: deque[tuple[float, float]] = deque()

    def observe(self, database_now: float, heard: float) -> None:
        """The database's clock read ``database_now`` (epoch seconds) at the latest
        when we heard it, at ``heard`` (monotonic)."""
        offset = database_now - heard  # ≤ the true offset: the reading came first
        offsets = self._offsets
        while offsets and offsets[-1][1] <= offset:
            offsets.pop()
        offsets.append((heard, offset))
        while offsets[0][0] < heard - self.seconds:
            offsets.popleft()

    def local(self, database_time: float) -> float:
        """The monotonic time of a moment on the database's clock (after ``observe``)."""
        return database_time - self._offsets[0][1]


class Pacer(Protocol):
    @property
    def rate(self) -> float:
        """Sends a second at most, on the pace kept."""
        ...

    async def acquire(self) -> Ready: ...
    async def back_off(self, seconds: float) -> None: ...
    async def aclose(self) -> None: ...

    def backlog(self) -> float:
        """Seconds of slots the senders already waiting here will take before a
        slot asked for now: what a send asked for now waits at least."""
        ...


class SharedPacer:
    """The business number's limit, shared through Postgres by every sender."""

    def __init__(
        self,
        conninfo: str,
        phone_number_id: str,
        limit: float,
        *,
        headroom: float = HEADROOM,
        cap: float | None = None,
    ) -> None:
        if limit <= 0:
            raise ValueError("limit must be positive")
        self._conninfo = conninfo
        self._pooled = transaction_pooled()
        # prepared once per session; behind a transaction pooler there is no session to keep
        # it on (None: never prepared, as that connection's prepare_threshold says)
        self._prepare = None if self._pooled else True
        self._phone_number_id = phone_number_id
        self.spacing = 1.0 / (limit * headroom)
        self.tolerance = LATE_SHARE * (1.0 / headroom - 1.0)
        self.max_batch = max(1, int(limit * headroom * BATCH_SECONDS))
        self._cap = RateLimiter(cap) if cap else None
        self._free: deque[float] = deque()  # reserved, not handed out (monotonic times)
        self._held: deque[float] = deque()  # reserved and not yet past, handed out or not
        self._epoch = 0  # a throttle voids every slot handed out before it
        self._waiting = 0
        self._acquiring = 0
        self._asked: deque[float] = deque(maxlen=64)  # when slots were asked for, lately
        self._reserving = asyncio.Lock()
        self._clock = DatabaseClock()
        self._conn: psycopg.AsyncConnection[Any] | None = None
        # For tests and benchmarks: round trips to the timeline, slots given up
        # because this sender came to them too late, of those the ones found
        # late only as the request was about to be written, and the timers
        # the waits for slots took.
        self.reservations = 0
        self.forfeited = 0
        self.late_at_write = 0
        self.timers = 0

    @property
    def rate(self) -> float:
        """The fleet's pace on the timeline, in sends per second."""
        return 1.0 / self.spacing

    async def acquire(self) -> Ready:
        """Wait for this sender's next slot on the number's timeline. Returns what
        the send awaits right before its bytes are written: at once if the slot
        is still on time there, else after the next slot (the late one given up)."""
        slot = await self._slot()

        async def on_time() -> None:
            nonlocal slot
            while not self._on_time(*slot):
                self.forfeited += 1
                self.late_at_write += 1
                slot = await self._slot()

        return on_time

    def backlog(self) -> float:
        return self._acquiring * self.spacing

    def _on_time(self, slot: float, epoch: int) -> bool:
        return epoch == self._epoch and time.monotonic() - slot <= self.tolerance

    async def _slot(self) -> tuple[float, int]:
        """The next slot and the throttle epoch it belongs to, once it has come."""
        self._acquiring += 1
        try:
            return await self._acquire()
        finally:
            self._acquiring -= 1

    async def _acquire(self) -> tuple[float, int]:
        if self._cap is not None:
            await self._cap.acquire()
        self._asked.append(time.monotonic())
        while True:
            slot = self._take()
            if slot is None:
                self._waiting += 1
                try:
                    await self._reserve()
                finally:
                    self._waiting -= 1
                continue
            epoch = self._epoch
            timers = await until(slot)  # not `+= await`: the sum is read before the wait
            self.timers += timers
            if self._on_time(slot, epoch):
                return slot, epoch
            self.forfeited += 1

    async def back_off(self, seconds: float) -> None:
        """The platform said slow down: no slot for anybody, in any process, for ``seconds``."""
        self._epoch += 1
        self._free.clear()
        self._held.clear()
        async with self._session() as conn:
            await QUERIES.throttle_pacer.run(
                conn,
                {"phone_number_id": self._phone_number_id, "seconds": seconds},
                prepare=self._prepare,
            )

    async def aclose(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    def _take(self) -> float | None:
        now = time.monotonic()
        while self._free:
            slot = self._free.popleft()
            if now - slot <= self.tolerance:
                return slot
            self.forfeited += 1
        return None

    async def _reserve(self) -> None:
        async with self._reserving:
            if self._free:  # a reservation came back while we queued for the lock
                return
            self._forget_passed()
            keep = min(LOW_WATER, self.max_batch - 1)
            if len(self._held) > keep:
                # Every slot we hold is handed out: ask again once all but the
                # last have passed, for as many as the batch then allows, not one
                # slot each time one passes (a round trip per send at the limit).
                # The others waiting queue on the lock meanwhile and take what
                # this brings, rather than each sleeping its turn.
                # On the same timer as the sender of that slot, so one wake serves both.
                await until(self._held[-1 - keep])
                self._forget_passed()
            count = min(self.max_batch - len(self._held), max(1, self._waiting, self._expected()))
            async with self._session() as conn:
                reserved = await QUERIES.reserve_send_slots.one(
                    conn,
                    {
                        "phone_number_id": self._phone_number_id,
                        "count": count,
                        "spacing": self.spacing,
                    },
                    prepare=self._prepare,
                )
            assert reserved is not None
            self.reservations += 1
            first_slot = reserved.first_slot.timestamp()
            self._clock.observe(first_slot - reserved.first_slot_in, time.monotonic())
            first = self._clock.local(first_slot)
            slots = [first + i * self.spacing for i in range(count)]
            self._free.extend(slots)
            self._held.extend(slots)

    def _forget_passed(self) -> None:
        now = time.monotonic()
        while self._held and self._held[0] < now:
            self._held.popleft()

    def _expected(self) -> int:
        """Slots this sender will likely ask for over the next batch: when the number
        is far from its limit, few senders wait at once, and a round trip per send
        would cost as much as the send. Slots it does not use lapse unused."""
        if len(self._asked) < 2:
            return 1
        span = self._asked[-1] - self._asked[0]
        rate = (len(self._asked) - 1) / span if span > 0 else 0.0
        return int(rate * BATCH_SECONDS)

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        # Its own connection, committing without waiting for the disk: a
        # reservation lost in a database crash only lets the timeline restart
        # from now, and the row's lock is held for microseconds, not a flush.
        if self._conn is None:
            # Behind a transaction pooler: no startup options (PgBouncer refuses them),
            # and the reservation commits like everything else.
            pooled = self._pooled
            options: dict[str, Any] = {} if pooled else {"options": "-c synchronous_commit=off"}
            self._conn = await psycopg.AsyncConnection.connect(
                self._conninfo, autocommit=True, **session_kwargs(pooled), **options
            )
            await QUERIES.pacer_row.run(self._conn, {"phone_number_id": self._phone_number_id})
        try:
            yield self._conn
        except psycopg.OperationalError:
            await self.aclose()
            raise


class Pacers:
    """Each business number's pacer (each its own timeline and connection), made
    the first time the number sends: a number's sends never wait on another's."""

    def __init__(self, make: Callable[[str], Pacer]) -> None:
        self._make = make
        self._pacers: dict[str, Pacer] = {}

    def of(self, phone_number_id: str) -> Pacer:
        pacer = self._pacers.get(phone_number_id)
        if pacer is None:
            pacer = self._pacers[phone_number_id] = self._make(phone_number_id)
        return pacer

    async def aclose(self) -> None:
        pacers, self._pacers = list(self._pacers.values()), {}
        for pacer in pacers:
            await pacer.aclose()


class RateLimiter:
    """At most ``rate`` sends per second in this process, evenly spaced.

    Evenly spaced rather than bursty, because the platform counts messages per
    second and a burst at the top of each second is what gets throttled. Sends
    are spaced for slightly under the rate (``HEADROOM``), and no more than
    that many pass in any sliding second of *actual* send times, so senders
    that wake late together after the event loop stalled go out one interval
    apart instead of in a burst.
    """

    def __init__(self, rate: float, headroom: float = HEADROOM) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        paced = rate * headroom
        self._interval = 1.0 / paced
        self._sent: deque[float] = deque(maxlen=max(1, int(paced)))
        self._next = 0.0
        self._gate = asyncio.Lock()

    @property
    def rate(self) -> float:
        """The pace actually kept, in sends per second."""
        return 1.0 / self._interval

    def backlog(self) -> float:
        return max(0.0, self._next - time.monotonic())

    @property
    def last_sent(self) -> float | None:
        """The monotonic time of the last slot handed out (what the window counts)."""
        return self._sent[-1] if self._sent else None

    async def acquire(self) -> None:
        """Wait for the next send slot (first come, first served)."""
        async with self._gate:
            now = time.monotonic()
            # The next slot follows the schedule, not the (late) wake-up time,
            # so wake-up latency does not slow the pace down...
            slot = max(now, self._next)
            self._next = slot + self._interval
            # ...and the sliding window on actual times stops late wake-ups
            # from becoming a burst.
            if len(self._sent) == self._sent.maxlen:
                slot = max(slot, self._sent[0] + WINDOW_SECONDS)
            await until(slot)
            self._sent.append(time.monotonic())

    async def back_off(self, seconds: float) -> None:
        """The platform said slow down: no slot for anybody in this process for ``seconds``."""
        self._next = max(self._next, time.monotonic() + seconds)

    async def aclose(self) -> None:
        """Nothing to close: the cap lives in this process."""
