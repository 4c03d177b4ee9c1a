"""What a person's own message changes: their window, the documents that waited for
it, and what a reply to a knock asks for (Send it, Later, Stop, Start)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from psycopg import AsyncConnection

from delivery_pipeline.delivery.reply import ANSWER_FRESH_SECONDS, ANSWERED, Ask, read_reply
from delivery_pipeline.delivery.sweep_target import SweepTarget
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.whatsapp.webhook_values import InboundMessage


async def note_inbound(conn: AsyncConnection[Any], person_id: int, sent_at: dt.datetime) -> None:
    """Open the person's window and put their documents waiting on a reply back in the queue.

    Two statements on purpose, in this order: a knock being recorded
    concurrently locks the person row (``await_reply``), so it either sees the
    new ``last_inbound_at`` or has committed its ``awaiting_reply_since``
    before the second statement looks for it.
    """
    await QUERIES.raise_last_inbound.one(conn, {"person_id": person_id, "sent_at": sent_at})
    await QUERIES.wake_awaiting_documents.all(conn, {"person_id": person_id})


async def answer_inbound(
    conn: AsyncConnection[Any],
    person_id: int,
    wamid: str,
    message: InboundMessage,
    sent_at: dt.datetime,
    *,
    later_seconds: float | None,
    quiet_hours: str | None,
    to_their_number: bool = True,
) -> SweepTarget | None:
    """Apply what the person's message asks (delivery/reply.py), inside its transaction.

    Every message to their own business number opens the window (the platform
    opens it for a button press too). Send it, Start and an ordinary reply then
    put the documents that waited for it back in the queue; Later snoozes them;
    Stop abandons them and stops knocks and briefs. Later and Stop owe the person
    an answer (``reply.acknowledgement``), once per reply. Returns the person as
    the target to sweep now when their documents are due or an answer is owed.

    ``to_their_number`` false: they wrote to another of our numbers, whose window
    with them is not the one their documents go out in; only what they say of
    their consent (Stop, Start) applies, which is theirs whichever number heard it.
    """
    reply = read_reply(message)
    if not to_their_number and reply.ask not in (Ask.STOP, Ask.START):
        return None
    if reply.ask is None:
        await note_inbound(conn, person_id, sent_at)
        return SweepTarget.person(person_id)
    knock_id = await QUERIES.knock_answered.one(
        conn, {"person_id": person_id, "context_id": reply.context_id}
    )
    if to_their_number:
        await QUERIES.raise_last_inbound.one(conn, {"person_id": person_id, "sent_at": sent_at})
    snoozed_until: dt.datetime | None = None
    documents = 0
    if reply.ask in (Ask.SEND, Ask.START):
        if reply.ask == Ask.START:
            await QUERIES.start_knocks.run(conn, {"person_id": person_id})
        if to_their_number:
            woken = await QUERIES.wake_awaiting_documents.all(conn, {"person_id": person_id})
            documents = len(woken)
    elif reply.ask == Ask.LATER:
        until = await QUERIES.snooze_documents.all(
            conn,
            {"person_id": person_id, "later_seconds": later_seconds, "quiet_hours": quiet_hours},
        )
        documents, snoozed_until = len(until), (until[0] if until else None)
    else:
        await QUERIES.stop_knocks.run(conn, {"person_id": person_id})
        documents = len(await QUERIES.abandon_stopped_documents.all(conn, {"person_id": person_id}))
    await QUERIES.record_knock_reply.run(
        conn,
        {
            "inbound_message_id": wamid,
            "person_id": person_id,
            "knock_id": knock_id,
            "action": reply.ask.value,
            "via": reply.via,
            "at": sent_at,
            "snoozed_until": snoozed_until,
            "documents": documents,
        },
    )
    if reply.ask in ANSWERED:
        await QUERIES.owe_acknowledgement.run(
            conn,
            {
                "inbound_message_id": wamid,
                "to_their_number": to_their_number,
                "fresh_seconds": ANSWER_FRESH_SECONDS,
            },
        )
        return SweepTarget.person(person_id)
    if to_their_number and reply.ask in (Ask.SEND, Ask.START):
        return SweepTarget.person(person_id)
    return None
