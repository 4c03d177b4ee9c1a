"""The pacers keep their promises on recorded times (invariants of the slots and
send times handed out, not durations; the one duration asserted is a lower
bound, which a loaded machine can only lengthen).

The number's shared timeline (``reserve_send_slots``, ``throttle_pacer``) is
exercised on the real SQL: by hypothesis, one operation after another, and by
a race of real processes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
import uvloop
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from delivery_pipeline.delivery.pacer import HEADROOM, RateLimiter, SharedPacer, until
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline_tests.support.properties import examples

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]
NUMBER = "100000000000001"


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
        await limiter.back_off(0.2)
        start = time.monotonic()
        await limiter.acquire()
        return time.monotonic() - start

    assert asyncio.run(main()) >= 0.19


def test_the_backlog_is_the_schedule_already_handed_out():
    """What a send asked for now waits at least: nothing when the limit is far,
    the slots handed out ahead of it when senders queue."""
    limiter = RateLimiter(100)

    async def main() -> tuple[float, float]:
        idle = limiter.backlog()
        await asyncio.gather(*(limiter.acquire() for _ in range(5)))
        return idle, limiter.backlog()

    idle, after_five = asyncio.run(main())
    assert idle == 0.0
    assert 0 < after_five <= 1 / (100 * HEADROOM)


# ── the number's shared timeline ────────────────────────────────────────


def _reserve(
    conn: psycopg.Connection, count: int, spacing: float, number: str = NUMBER
) -> list[dt.datetime]:
    row = conn.execute(
        QUERIES.reserve_send_slots.sql,
        {"phone_number_id": number, "count": count, "spacing": spacing},
    ).fetchone()
    step = dt.timedelta(seconds=spacing)
    return [row["first_slot"] + i * step for i in range(count)]


def _busiest_second(slots: list[dt.datetime]) -> int:
    slots = sorted(slots)
    busiest, j = 0, 0
    for i, slot in enumerate(slots):
        while (slot - slots[j]).total_seconds() >= 1.0:
            j += 1
        busiest = max(busiest, i - j + 1)
    return busiest


# One operation of one sender: take n slots, report a throttle, or let time pass.
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("reserve"), st.integers(1, 40)),
        st.tuples(st.just("throttle"), st.floats(0.0, 0.3)),
        st.tuples(st.just("wait"), st.floats(0.0, 0.03)),
    ),
    min_size=1,
    max_size=25,
)


@examples(40, HealthCheck.too_slow)
@given(limit=st.sampled_from([5, 80, 1000]), ops=_ops)
def test_slots_never_exceed_the_limit_in_any_second(db, limit, ops):
    db.execute("DELETE FROM send_pacer")
    db.execute(QUERIES.pacer_row.sql, {"phone_number_id": NUMBER})
    spacing = 1.0 / (limit * HEADROOM)
    slots: list[dt.datetime] = []
    for op, arg in ops:
        if op == "reserve":
            taken = _reserve(db, arg, spacing)
            # Never before the last slot handed out plus one spacing.
            assert not slots or taken[0] >= slots[-1] + dt.timedelta(seconds=spacing * 0.99)
            slots.extend(taken)
        elif op == "throttle":
            db.execute(QUERIES.throttle_pacer.sql, {"phone_number_id": NUMBER, "seconds": arg})
            until = db.execute("SELECT clock_timestamp() AS t").fetchone()["t"]
            taken = _reserve(db, 1, spacing)
            assert taken[0] >= until + dt.timedelta(seconds=arg) - dt.timedelta(milliseconds=50)
            slots.extend(taken)
        else:
            time.sleep(arg)
    assert _busiest_second(slots) <= limit


@examples(30, HealthCheck.too_slow)
@given(
    limits=st.tuples(st.sampled_from([5, 80, 1000]), st.sampled_from([5, 80, 1000])),
    ops=st.lists(st.tuples(st.integers(0, 1), _ops.map(lambda ops: ops[0])), max_size=40),
)
def test_each_number_keeps_its_own_limit_on_its_own_timeline(db, limits, ops):
    """Two business numbers (sql/migrations/027): each number's slots stay under its own
    limit whatever the other takes, and a throttle of one never moves the other."""
    numbers = (NUMBER, "200000000000001")
    db.execute("DELETE FROM send_pacer")
    for number in numbers:
        db.execute(QUERIES.pacer_row.sql, {"phone_number_id": number})
    spacing = [1.0 / (limit * HEADROOM) for limit in limits]
    slots: list[list[dt.datetime]] = [[], []]
    for which, (op, arg) in ops:
        number, other = numbers[which], numbers[1 - which]
        if op == "reserve":
            taken = _reserve(db, arg, spacing[which], number)
            assert not slots[which] or taken[0] >= slots[which][-1] + dt.timedelta(
                seconds=spacing[which] * 0.99
            )
            slots[which].extend(taken)
        elif op == "throttle":
            before = _next_slot(db, other)
            db.execute(QUERIES.throttle_pacer.sql, {"phone_number_id": number, "seconds": arg})
            assert _next_slot(db, other) == before, "a number's throttle is its own"
        else:
            time.sleep(arg)
    for which in (0, 1):
        assert _busiest_second(slots[which]) <= limits[which]


def _next_slot(db: psycopg.Connection, number: str) -> dt.datetime:
    row = db.execute(
        "SELECT next_slot FROM send_pacer WHERE phone_number_id = %s", (number,)
    ).fetchone()
    return row["next_slot"]


_RACER = """
import json, sys
import psycopg
from psycopg.rows import dict_row
from delivery_pipeline.store.queries import QUERIES
url, number, spacing, n = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
    out = []
    for i in range(n):
        count = 1 + i % 7
        row = conn.execute(
            QUERIES.reserve_send_slots.sql,
            {"phone_number_id": number, "count": count, "spacing": spacing},
        ).fetchone()
        out.append([row["first_slot"].timestamp(), count])
print(json.dumps(out))
"""


def test_racing_processes_never_share_a_slot(db, database_url):
    import json

    db.execute(QUERIES.pacer_row.sql, {"phone_number_id": NUMBER})
    spacing = 1.0 / (1000 * HEADROOM)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, database_url, NUMBER, str(spacing), "150"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    taken = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    slots = sorted(
        first + i * spacing for run in taken for first, count in run for i in range(count)
    )
    gaps = [b - a for a, b in zip(slots, slots[1:], strict=False)]
    assert len(slots) == 6 * sum(1 + i % 7 for i in range(150))
    assert min(gaps) >= spacing * 0.999, "two senders got overlapping slots"


_THROTTLER = """
import asyncio, sys
from delivery_pipeline.delivery.pacer import SharedPacer
async def main():
    pacer = SharedPacer(sys.argv[1], sys.argv[2], 1000)
    await pacer.acquire()
    await pacer.back_off(float(sys.argv[3]))
    await pacer.aclose()
asyncio.run(main())
"""


def test_a_throttle_seen_by_one_process_slows_every_sender(database_url):
    """Another process meets a 130429: our next slots come only after its pause."""
    with connect(database_url) as conn:
        conn.execute(QUERIES.pacer_row.sql, {"phone_number_id": NUMBER})

    async def main() -> None:
        pacer = SharedPacer(database_url, NUMBER, 1000)
        try:
            await pacer.acquire()  # warm: connection open
            throttler = await asyncio.create_subprocess_exec(
                sys.executable, "-c", _THROTTLER, database_url, NUMBER, "0.8", cwd=REPO
            )
            assert await throttler.wait() == 0
            # A slot we already held may still pass (at most one batch); the rest wait.
            for _ in range(pacer.max_batch + 1):
                await pacer.acquire()
        finally:
            await pacer.aclose()

    asyncio.run(main())
    with connect(database_url) as conn:
        row = conn.execute(
            "SELECT throttles, clock_timestamp() - throttled_at AS since FROM send_pacer "
            "WHERE phone_number_id = %s",
            (NUMBER,),
        ).fetchone()
    # On the database's clock: our last slot came no sooner than the pause's end.
    assert row["throttles"] == 1 and row["since"] >= dt.timedelta(seconds=0.8)


def test_a_slot_is_judged_again_as_the_request_is_written(database_url):
    """``acquire`` returns on time; what the send awaits right before its bytes
    leave judges the slot again. Awaited at once, it lets the send go; after the
    process stalled past the tolerance (as a preempted one does while building
    the request), it gives the slot up and waits for a later one; after a
    throttle it waits out the pause, whoever else held slots."""
    with connect(database_url) as conn:
        conn.execute(QUERIES.pacer_row.sql, {"phone_number_id": NUMBER})

    async def main() -> None:
        pacer = SharedPacer(database_url, NUMBER, 20)
        try:
            ready = await pacer.acquire()
            await ready()
            assert (pacer.late_at_write, pacer.forfeited) == (0, 0)

            ready = await pacer.acquire()
            # The whole process stalls, its loop included, as a preempted one does.
            time.sleep(pacer.tolerance + 0.03)  # noqa: ASYNC251
            await ready()
            assert pacer.late_at_write == 1
            assert pacer.forfeited >= 1

            ready = await pacer.acquire()
            await pacer.back_off(0.3)
            paused = time.monotonic()
            await ready()
            assert pacer.late_at_write == 2
            # A lower bound, which a loaded machine only lengthens.
            assert time.monotonic() - paused >= 0.25
        finally:
            await pacer.aclose()

    asyncio.run(main())


def test_waiting_for_a_moment_takes_one_timer_and_never_returns_early():
    """On uvloop, as a sweep runs: its timers count whole milliseconds and fire
    up to one early; waiting again for the rest went through timers of zero,
    tens of wakes a slot."""

    async def main() -> tuple[list[float], int]:
        early: list[float] = []
        timers = 0
        for i in range(40):
            moment = time.monotonic() + 0.0005 + (i % 7) * 0.0031
            timers += await until(moment)
            early.append(moment - time.monotonic())
        return early, timers

    early, timers = uvloop.run(main())
    assert max(early) <= 0
    assert timers <= 48, timers


def test_a_sender_waits_for_its_slots_with_about_one_timer_each(database_url):
    """Thirty slots at 40 msg/s, one sender: about thirty timers, not hundreds."""
    with connect(database_url) as conn:
        conn.execute(QUERIES.pacer_row.sql, {"phone_number_id": NUMBER})

    async def main() -> int:
        pacer = SharedPacer(database_url, NUMBER, 40)
        try:
            for _ in range(30):
                await (await pacer.acquire())()
        finally:
            await pacer.aclose()
        return pacer.timers

    assert uvloop.run(main()) <= 36


@pytest.mark.parametrize("limit", [5, 20, 80])
def test_senders_waiting_at_the_limit_take_slots_a_batch_per_round_trip(database_url, limit):
    """A second of slots wanted at once by twelve senders of one process: each
    reservation brings as many slots as the batch allows (at 80 msg/s, six or
    seven; below about 20 msg/s, one), and a sender whose slots are all handed
    out waits for them to pass instead of asking again at once. A slot a starved
    sender came to too late is given up and asked for again: counted as wanted."""
    wanted = max(4, int(limit * HEADROOM))

    async def main() -> tuple[int, int, int]:
        pacer = SharedPacer(database_url, NUMBER, limit)
        queue = list(range(wanted))

        async def sender() -> None:
            while queue:
                queue.pop()
                await pacer.acquire()

        try:
            await asyncio.gather(*(sender() for _ in range(12)))
        finally:
            await pacer.aclose()
        return pacer.reservations, pacer.forfeited, pacer.max_batch

    reservations, forfeited, batch = asyncio.run(main())
    per_round_trip = max(1, batch - 1)
    needed = wanted + forfeited
    assert reservations <= -(-needed // per_round_trip) + 2, (reservations, needed, batch)


@pytest.mark.solo
@pytest.mark.slow
def test_survivors_take_a_killed_senders_share_within_five_seconds(db, sandbox, settings):
    """Three sweep processes share an 80 msg/s number; one is SIGKILLed mid-run. Counted
    from the sandbox's accept times: in the two seconds ending five seconds after the
    kill, the two survivors send at the number's paced rate, not at their two thirds."""
    import json
    import signal

    from delivery_pipeline_tests.system.test_faults import CHUNK_LIMIT, seed

    sandbox.faults(latency_ms=50, pair_rate_enabled=False, throughput_limit=0)
    seed(db, sandbox, 300, chunks=3)
    env = {
        **os.environ,
        "DATABASE_URL": settings.database.database_url,
        "WHATSAPP_API_BASE_URL": sandbox.url,
        "WHATSAPP_THROUGHPUT_LIMIT": "80",
        "DELIVERY_CHUNK_LIMIT": str(CHUNK_LIMIT),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "delivery_pipeline.cli", "sweep", "--json"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    try:
        deadline = time.monotonic() + 60
        while sandbox.stats()["accepted"] < 200:
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
            time.sleep(0.05)
        killed_at = time.time()
        procs[0].send_signal(signal.SIGKILL)
        outputs = [p.communicate(timeout=120) for p in procs[1:]]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    assert all(json.loads(out)["chunks_sent"] > 0 for out, _ in outputs)
    accepted = [
        dt.datetime.fromisoformat(m["time"]).timestamp()
        for messages in sandbox.inboxes().values()
        for m in messages
    ]
    window = [t for t in accepted if killed_at + 3.0 <= t < killed_at + 5.0]
    paced = 80 * HEADROOM
    assert len(window) >= 0.8 * 2 * paced, f"{len(window)} accepted in 2 s"


def test_the_backlog_counts_the_senders_waiting_for_a_slot(database_url):
    """Eight senders queue at 20 msg/s: the backlog is their slots' worth of the
    timeline, and nothing once they are through."""

    async def main() -> tuple[float, float, float]:
        pacer = SharedPacer(database_url, NUMBER, 20)
        try:
            idle = pacer.backlog()
            senders = [asyncio.create_task(pacer.acquire()) for _ in range(8)]
            await asyncio.sleep(0)  # each is now waiting
            queued = pacer.backlog()
            await asyncio.gather(*senders)
            return idle, queued, pacer.backlog()
        finally:
            await pacer.aclose()

    idle, queued, after = asyncio.run(main())
    assert idle == 0.0 and after == 0.0
    assert queued == pytest.approx(8 / (20 * HEADROOM))
