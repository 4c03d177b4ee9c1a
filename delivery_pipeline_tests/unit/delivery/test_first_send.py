"""A process's documents go one at a time until one of its sends is accepted,
then together: the ones that waited do not follow each other one by one."""

from __future__ import annotations

import asyncio

import pytest

from delivery_pipeline.delivery.document import FirstSend

pytestmark = pytest.mark.unit


async def _document(
    first_send: FirstSend, events: list[str], name: str, sends: bool = False, hold: float = 0.01
) -> None:
    """A document's turn: noted on entering and leaving, its send accepted if ``sends``."""
    async with first_send.turn():
        events.append(f"{name} in")
        if sends:
            await first_send.accepted()
        await asyncio.sleep(hold)
        events.append(f"{name} out")


def test_the_documents_that_waited_go_together_once_a_send_is_accepted() -> None:
    async def main() -> list[str]:
        first_send = FirstSend()
        events: list[str] = []
        await asyncio.gather(
            _document(first_send, events, "a", sends=True, hold=0.05),
            _document(first_send, events, "b", hold=0.05),
            _document(first_send, events, "c", hold=0.05),
        )
        return events

    events = asyncio.run(main())
    # b and c entered while a was still inside: after its send was accepted.
    assert events[:3] == ["a in", "b in", "c in"]


def test_unproven_documents_go_one_at_a_time() -> None:
    async def main() -> list[str]:
        first_send = FirstSend()
        events: list[str] = []
        await asyncio.gather(*(_document(first_send, events, n) for n in "abc"))
        first_send.proven = False  # a refusal that paused sending
        await asyncio.gather(*(_document(first_send, events, n) for n in "de"))
        return events

    events = asyncio.run(main())
    assert events == [f"{n} {w}" for n in "abcde" for w in ("in", "out")]


def test_after_a_quiet_spell_the_next_documents_go_one_at_a_time_again() -> None:
    """The token may have expired while nothing was sent: a process that has not
    had a send accepted lately proves it again with one document first."""

    async def main() -> list[str]:
        # Long enough that a loaded machine's scheduling cannot outlast it while b and c
        # start, short enough to wait out.
        first_send = FirstSend(fresh_for=0.5)
        events: list[str] = []
        await _document(first_send, events, "a", sends=True)
        # still fresh: together
        await asyncio.gather(*(_document(first_send, events, n) for n in "bc"))
        await asyncio.sleep(0.8)  # quiet
        # alone again
        await asyncio.gather(*(_document(first_send, events, n) for n in "de"))
        return events

    events = asyncio.run(main())
    assert events[2:4] == ["b in", "c in"]
    assert events[6:] == ["d in", "d out", "e in", "e out"]
