"""``DatabaseClock``: the fleet's slots, taken on the database's clock, keep their
spacing on a sender's clock however slowly each answer came back.

Mapping each slot through its own answer (the database's "now" as if read when
heard) made every slot late by that answer's trip back; answers of different
speeds then crowded slots together, and a fleet paced for 77.6 sends a second
sent 81 in one.
"""

from __future__ import annotations

import random

from delivery_pipeline.delivery.pacer import CLOCK_SECONDS, HEADROOM, DatabaseClock

OFFSET = 1_700_000_000.0  # the database's epoch clock minus this process's monotonic one


def _busiest_second(times: list[float]) -> int:
    times = sorted(times)
    busiest, j = 0, 0
    for i, t in enumerate(times):
        while t - times[j] >= 1.0:
            j += 1
        busiest = max(busiest, i - j + 1)
    return busiest


def test_slots_keep_their_spacing_whatever_each_answer_took() -> None:
    rng = random.Random(7)
    spacing = 1.0 / (80 * HEADROOM)
    clock = DatabaseClock()
    mapped: list[float] = []
    naive: list[float] = []  # each slot through its own answer, as before
    due: list[float] = []
    slot = 1000.0  # monotonic
    for _ in range(400):
        # One reservation of three slots: read on the database at the first,
        # heard after a trip back of 0.2 to 40 ms.
        read = slot - 0.001
        heard = read + rng.uniform(0.0002, 0.04)
        clock.observe(read + OFFSET, heard)
        for i in range(3):
            mapped.append(clock.local(slot + i * spacing + OFFSET))
            naive.append(heard + (slot - read) + i * spacing)
            due.append(slot + i * spacing)
        slot += 3 * spacing
    late = [m - d for m, d in zip(mapped, due, strict=True)]
    assert min(late) >= 0  # never early
    assert max(late[30:]) <= 0.002  # once a fast answer is known, no later than it
    # Past the first answers (the fastest yet improves, and moves slots earlier):
    assert _busiest_second(mapped[30:]) <= _busiest_second(due) == int(80 * HEADROOM) + 1
    assert _busiest_second(naive) > _busiest_second(due)


def test_a_fast_answer_is_forgotten_after_a_while() -> None:
    clock = DatabaseClock()
    clock.observe(OFFSET + 10.0, 10.001)  # fast
    clock.observe(OFFSET + 10.5, 10.530)  # slow: the fast one still maps
    assert abs(clock.local(OFFSET + 11.0) - 11.001) < 1e-6
    clock.observe(OFFSET + 10.0 + CLOCK_SECONDS + 1, 10.0 + CLOCK_SECONDS + 1.010)
    # the fast answer is out of the window; the slow one of 10.5 too by now
    assert abs(clock.local(OFFSET + 20.0) - 20.010) < 1e-6
