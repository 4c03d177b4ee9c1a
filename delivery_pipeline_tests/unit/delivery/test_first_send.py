"""A process's documents go one at a time until one of its sends is accepted,
then together: the ones that waited do not follow each other one by one."""

from __future__ import annotations

import asyncio

import pytest

from delivery_pipeline.delivery.document import FirstSend

pytestmark = pytest.mark.unit


def test_the_documents_that_waited_go_together_once_a_send_is_accepted() -> None:
    async def main() -> list[str]:
        first_send = FirstSend()
        events: list[str] = []

        async def document(name: str, sends: bool) -> None:
            async with first_send.turn():
                events.append(f"{name} in")
                if sends:
                    await first_send.accepted()
                await asyncio.sleep(0.05)
                events.append(f"{name} out")

        await asyncio.gather(document("a", True), document("b", False), document("c", False))
        return events

    events = asyncio.run(main())
    # b and c entered while a was still inside: after its send was accepted.
    assert events[:3] == ["a in", "b in", "c in"]


def test_unproven_documents_go_one_at_a_time() -> None:
    async def main() -> list[str]:
        first_send = FirstSend()
        events: list[str] = []

        async def document(name: str) -> None:
            async with first_send.turn():
                events.append(f"{name} in")
                await asyncio.sleep(0.01)
                events.append(f"{name} out")

        await asyncio.gather(*(document(n) for n in "abc"))
        first_send.proven = False  # a refusal that paused sending
        await asyncio.gather(*(document(n) for n in "de"))
        return events

    events = asyncio.run(main())
    assert events == [f"{n} {w}" for n in "abcde" for w in ("in", "out")]


def test_after_a_quiet_spell_the_next_documents_go_one_at_a_time_again() -> None:
    """The token may have expired while nothing was sent: a process that has not
    had a send accepted lately proves it again with one document first."""

    async def main() -> list[str]:
        first_send = FirstSend(fresh_for=0.05)
        events: list[str] = []

        async def document(name: str, sends: bool = False) -> None:
            async with first_send.turn():
                events.append(f"{name} in")
                if sends:
                    await first_send.accepted()
                await asyncio.sleep(0.01)
                events.append(f"{name} out")

        await document("a", sends=True)
        await asyncio.gather(document("b"), document("c"))  # still fresh: together
        await asyncio.sleep(0.1)  # quiet
        await asyncio.gather(document("d"), document("e"))  # alone again
        return events

    events = asyncio.run(main())
    assert events[2:4] == ["b in", "c in"]
    assert events[6:] == ["d in", "d out", "e in", "e out"]
